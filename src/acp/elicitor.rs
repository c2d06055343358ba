//! An MCP server's questions (`elicitation/create`, form mode) asked through the editor, when
//! it advertises `clientCapabilities.elicitation.form`: the same request, tied to the session,
//! its message prefixed by the server's name. The `mcp` plugin checks the answer against the
//! form before the server sees it; an editor that fails to answer declines.

use cordis_mcp::{ElicitationAnswer, ElicitationRequest, Elicitor};
use futures_util::future::BoxFuture;
use serde_json::json;

use super::rpc::Connection;

/// The editor of one session as the MCP servers' [`Elicitor`].
pub struct EditorElicitor {
    /// The connection to the editor.
    pub connection: Connection,
    /// The session the servers belong to.
    pub session_id: String,
}

impl Elicitor for EditorElicitor {
    fn elicit(&self, request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer> {
        let answer = self.connection.request(
            "elicitation/create",
            json!({
                "sessionId": self.session_id,
                "mode": "form",
                "message": format!("{} asks: {}", request.server, request.message),
                "requestedSchema": request.schema,
            }),
        );
        Box::pin(async move {
            match answer.await {
                Ok(answer) => match answer["action"].as_str() {
                    Some("accept") => ElicitationAnswer::Accept(
                        answer["content"].as_object().cloned().unwrap_or_default(),
                    ),
                    Some("cancel") => ElicitationAnswer::Cancel,
                    _ => ElicitationAnswer::Decline,
                },
                Err(e) => ElicitationAnswer::NotAsked(format!("the editor did not answer: {e}")),
            }
        })
    }
}
