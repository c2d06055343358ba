//! `ask` answered by the editor: `session/request_permission` with "Allow once" and "Reject".

use std::sync::Arc;

use cordis_approvals::{Answer, ApprovalRequest, Approver};
use cordis_presenter::Presenters;
use futures_util::future::BoxFuture;

use super::protocol::{
    PermissionOption, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ToolCallUpdate,
};
use super::rpc::Connection;

/// The option that allows the call once.
pub const ALLOW_ONCE: &str = "allow-once";
/// The option that rejects it.
pub const REJECT_ONCE: &str = "reject-once";

/// Asks the client of one session about each call whose policy is `ask`.
pub struct EditorApprover {
    /// The connection to the editor.
    pub connection: Connection,
    /// The session the calls belong to.
    pub session_id: String,
    /// How calls are described (the session composition's presenters), if it has any.
    pub presenters: Option<Arc<Presenters>>,
}

impl Approver for EditorApprover {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        let call = &request.call;
        let (title, input) = match &self.presenters {
            Some(p) => {
                let shown = p.present_approval(&call.name, &call.arguments);
                (shown.title, shown.input)
            }
            None => (call.name.clone(), call.arguments.clone()),
        };
        let question = RequestPermissionRequest {
            session_id: self.session_id.clone(),
            tool_call: ToolCallUpdate {
                tool_call_id: call.call_id.clone(),
                title: Some(title),
                status: None,
                content: None,
                raw_input: Some(input),
                meta: None,
            },
            options: vec![
                PermissionOption {
                    option_id: ALLOW_ONCE.to_owned(),
                    name: "Allow once".to_owned(),
                    kind: "allow_once".to_owned(),
                },
                PermissionOption {
                    option_id: REJECT_ONCE.to_owned(),
                    name: "Reject".to_owned(),
                    kind: "reject_once".to_owned(),
                },
            ],
        };
        // Sent now, in the order the tools ask; the turn awaits the answer, which the reader
        // thread delivers whatever the server is doing.
        let answer = self
            .connection
            .request("session/request_permission", question);
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
