//! `ask` answered by the editor: `session/request_permission` with "Allow once" and "Reject".

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionId, ToolCallUpdate, ToolCallUpdateFields,
};
use cordis_approvals::{Answer, ApprovalRequest, Approver};
use cordis_presenter::Presenters;
use futures_util::future::BoxFuture;

/// The option that allows the call once.
pub const ALLOW_ONCE: &str = "allow-once";
/// The option that rejects it.
pub const REJECT_ONCE: &str = "reject-once";

/// Asks the client of one session about each call whose policy is `ask`.
pub struct EditorApprover {
    /// The connection to the editor.
    pub connection: ConnectionTo<Client>,
    /// The session the calls belong to.
    pub session_id: String,
    /// How calls are described (the session composition's presenters), if it has any.
    pub presenters: Option<Arc<Presenters>>,
}

impl Approver for EditorApprover {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        let call = &request.call;
        let fields = match &self.presenters {
            Some(p) => {
                let shown = p.present_call(&call.name, &call.arguments);
                ToolCallUpdateFields::new()
                    .title(shown.title)
                    .raw_input(shown.input)
            }
            None => ToolCallUpdateFields::new()
                .title(call.name.clone())
                .raw_input(call.arguments.clone()),
        };
        let question = RequestPermissionRequest::new(
            SessionId::new(self.session_id.as_str()),
            ToolCallUpdate::new(call.call_id.clone(), fields),
            vec![
                PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
                PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        // Sent now, in the order the tools ask; the answer is awaited by the turn (never by
        // the dispatch loop, which must stay free to deliver it).
        let sent = self.connection.send_request(question);
        Box::pin(async move {
            match sent.block_task().await {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected(chosen)
                        if &*chosen.option_id.0 == ALLOW_ONCE =>
                    {
                        Answer::Allow
                    }
                    RequestPermissionOutcome::Selected(_) => {
                        Answer::Deny(Some("the user rejected it in the editor".to_owned()))
                    }
                    RequestPermissionOutcome::Cancelled => {
                        Answer::Deny(Some("the prompt was cancelled".to_owned()))
                    }
                    _ => Answer::Deny(Some("the editor gave an unknown answer".to_owned())),
                },
                Err(e) => Answer::Deny(Some(format!("the editor did not answer: {e}"))),
            }
        })
    }
}
