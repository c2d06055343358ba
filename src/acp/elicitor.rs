//! An MCP server's questions (`elicitation/create`) asked through the editor: forms when it
//! advertises `clientCapabilities.elicitation.form`, pages to open (URL mode) when it
//! advertises `elicitation.url`; the same request, tied to the session, its message prefixed by
//! the server's name. The `mcp` plugin checks a form's answer before the server sees it; an
//! editor that fails to answer, or does not show that kind, declines.

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
    /// The editor shows forms.
    pub forms: bool,
    /// The editor shows pages to open.
    pub pages: bool,
}

impl Elicitor for EditorElicitor {
    fn elicit(&self, request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer> {
        let message = format!("{} asks: {}", request.server, request.message);
        let params = match &request.url {
            Some(page) if self.pages => json!({
                "sessionId": self.session_id,
                "mode": "url",
                "message": message,
                "url": page.url,
                "elicitationId": page.id,
            }),
            None if self.forms => json!({
                "sessionId": self.session_id,
                "mode": "form",
                "message": message,
                "requestedSchema": request.schema,
            }),
            _ => {
                let kind = if request.url.is_some() {
                    "pages to open (it does not advertise elicitation.url)"
                } else {
                    "forms (it does not advertise elicitation.form)"
                };
                let why = format!("the editor shows no {kind}");
                return Box::pin(async { ElicitationAnswer::NotAsked(why) });
            }
        };
        let answer = self.connection.request("elicitation/create", params);
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
