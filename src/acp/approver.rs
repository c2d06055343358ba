//! `ask` answered by the editor: `session/request_permission` with "Allow once", "Always
//! allow …" (when the call can be granted for the rest of the session: the approvals service's
//! grants, logged with the decision), "Reject" and "Always reject …" (the same patterns, held as
//! the session's refusals: denied without asking from then on). A change to a file is asked with
//! its diff as the tool worked it out against the file as it is (`oldText` the current text of a
//! file a write replaces; none for a new file), replacing the card the call was announced with.
//!
//! The question marks the call `pending` (it does not run until answered), as its announcement
//! did; an allowed call is updated to `in_progress` by the approvals stage's decision, before
//! it runs (see [`super::updates::UpdateMapper::decided`]).

use std::sync::Arc;

use cordis_approvals::{Answer, ApprovalRequest, Approver, Grant};
use cordis_presenter::Presenters;
use futures_util::future::BoxFuture;

use super::protocol::{
    PermissionOption, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ToolCallContent, ToolCallStatus, ToolCallUpdate,
};
use super::rpc::Connection;

/// The option that allows the call once.
pub const ALLOW_ONCE: &str = "allow-once";
/// The option that allows it and grants what the question names for the rest of the session.
pub const ALLOW_ALWAYS: &str = "allow-always";
/// The option that rejects it.
pub const REJECT_ONCE: &str = "reject-once";
/// The option that rejects it and refuses what the question names for the rest of the session.
pub const REJECT_ALWAYS: &str = "reject-always";

/// Asks the client of one session about each call whose policy is `ask`.
pub struct EditorApprover {
    /// The connection to the editor.
    pub connection: Connection,
    /// The session the calls belong to.
    pub session_id: String,
    /// How calls are described (the session composition's presenters), if it has any.
    pub presenters: Option<Arc<Presenters>>,
    /// The session's workspace root (diff paths are sent absolute against it).
    pub cwd: std::path::PathBuf,
}

impl Approver for EditorApprover {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        let call = &request.call;
        let (title, input, content) = match &self.presenters {
            Some(p) => {
                let shown = p.present_approval(&call.name, &call.arguments);
                // A change is asked with the diff its tool worked out against the file as it
                // is (a write over a file: its current text), replacing the call's card,
                // which came from the arguments alone; with what the card leaves out.
                let content = super::updates::diff_content(&self.cwd, &shown.card).map(|diff| {
                    let mut content = vec![diff];
                    content.extend(shown.text.map(ToolCallContent::text));
                    content
                });
                (shown.title, shown.input, content)
            }
            None => (call.name.clone(), call.arguments.clone(), None),
        };
        let question = RequestPermissionRequest {
            session_id: self.session_id.clone(),
            tool_call: ToolCallUpdate {
                tool_call_id: call.call_id.clone(),
                title: Some(title),
                // Not running until answered.
                status: Some(ToolCallStatus::Pending),
                content,
                raw_input: Some(input),
                meta: None,
            },
            options: options(&request.grants),
        };
        // Sent now, in the order the tools ask; the turn awaits the answer, which the reader
        // thread delivers whatever the server is doing.
        let answer = self
            .connection
            .request("session/request_permission", question);
        let grantable = !request.grants.is_empty();
        Box::pin(async move {
            let response = answer.await.and_then(|v| {
                serde_json::from_value::<RequestPermissionResponse>(v).map_err(|e| {
                    super::rpc::RpcError::invalid_params(format!("a malformed answer: {e}"))
                })
            });
            match response {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected { option_id } if option_id == ALLOW_ONCE => {
                        Answer::Allow
                    }
                    // Only offered when the call can be granted (see `options`).
                    RequestPermissionOutcome::Selected { option_id }
                        if option_id == ALLOW_ALWAYS && grantable =>
                    {
                        Answer::AllowAlways
                    }
                    RequestPermissionOutcome::Selected { option_id }
                        if option_id == REJECT_ALWAYS && grantable =>
                    {
                        Answer::RejectAlways(Some("the user rejected it in the editor".to_owned()))
                    }
                    RequestPermissionOutcome::Selected { .. } => {
                        Answer::Deny(Some("the user rejected it in the editor".to_owned()))
                    }
                    RequestPermissionOutcome::Cancelled => {
                        Answer::Deny(Some("the prompt was cancelled".to_owned()))
                    }
                },
                Err(e) => Answer::Deny(Some(format!("the editor did not answer: {e}"))),
            }
        })
    }
}

/// The choices of one question: "Always allow" only when the call can be granted, named by what
/// it grants (the tool, or the command patterns of a command), never wider.
fn options(grants: &[Grant]) -> Vec<PermissionOption> {
    let mut options = vec![PermissionOption {
        option_id: ALLOW_ONCE.to_owned(),
        name: "Allow once".to_owned(),
        kind: "allow_once".to_owned(),
    }];
    let mut always = None;
    if let Some(grants) = cordis_approvals::Always::of(grants) {
        let what = grants.describe(str::to_owned);
        options.push(PermissionOption {
            option_id: ALLOW_ALWAYS.to_owned(),
            name: format!("Always allow {what} in this session{}", grants.suffix()),
            kind: "allow_always".to_owned(),
        });
        always = Some(what);
    }
    options.push(PermissionOption {
        option_id: REJECT_ONCE.to_owned(),
        name: "Reject".to_owned(),
        kind: "reject_once".to_owned(),
    });
    if let Some(what) = always {
        options.push(PermissionOption {
            option_id: REJECT_ALWAYS.to_owned(),
            name: format!("Always reject {what} in this session"),
            kind: "reject_always".to_owned(),
        });
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(options: &[PermissionOption]) -> Vec<(&str, &str)> {
        options
            .iter()
            .map(|o| (o.option_id.as_str(), o.name.as_str()))
            .collect()
    }

    #[test]
    fn always_is_offered_only_for_what_can_be_granted_and_named_by_it() {
        assert_eq!(
            ids(&options(&[])),
            [("allow-once", "Allow once"), ("reject-once", "Reject")]
        );
        let tool = Grant {
            tool: "write_file".into(),
            command: None,
            exact: false,
        };
        assert_eq!(
            ids(&options(&[tool])),
            [
                ("allow-once", "Allow once"),
                ("allow-always", "Always allow write_file in this session"),
                ("reject-once", "Reject"),
                ("reject-always", "Always reject write_file in this session"),
            ]
        );
    }
}
