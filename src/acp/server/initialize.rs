//! `initialize`: what the client does, and the agent's capabilities in answer.
//! (`authenticate` is answered as it is read: see [`super::jobs`].)

use serde_json::json;

use super::{Done, Server};
use crate::acp::files::EditorFs;
use crate::acp::protocol::InitializeRequest;
use crate::acp::rpc::Reply;

/// What the client said it does, at `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Editor {
    /// It renders terminal cards from `_meta` (Zed's extension).
    pub(super) terminal_meta: bool,
    /// It reads and writes files.
    pub(super) fs: EditorFs,
    /// It runs commands in its terminals.
    pub(super) terminals: bool,
    /// It shows forms (`elicitation.form`): MCP servers' questions go to it.
    pub(super) forms: bool,
    /// It shows pages to open (`elicitation.url`): MCP servers' URL-mode questions go to it.
    pub(super) pages: bool,
}

impl Editor {
    /// What it brings to a session with the additional directories `roots`.
    pub(super) fn front(&self, roots: Vec<std::path::PathBuf>) -> crate::acp::session::FrontEnd {
        crate::acp::session::FrontEnd {
            roots,
            elicitation: cordis_mcp::ElicitationModes {
                forms: self.forms,
                pages: self.pages,
            },
        }
    }

    /// What `req`'s client capabilities say.
    fn of(req: &InitializeRequest) -> Self {
        Editor {
            terminal_meta: req.terminal_output(),
            fs: EditorFs::of(&req.client_capabilities),
            terminals: req.client_capabilities["terminal"] == json!(true),
            forms: req.client_capabilities["elicitation"]["form"].is_object(),
            pages: req.client_capabilities["elicitation"]["url"].is_object(),
        }
    }
}

impl<'c> Server<'c> {
    /// `initialize`: remembers what the client does; answers once the composition says
    /// whether its model takes images.
    pub(super) fn initialize(&mut self, req: InitializeRequest, reply: Reply) {
        self.editor = Editor::of(&req);
        let composition = self.composition;
        self.work.push(Box::pin(async move {
            let images = composition.accepts_images().await;
            Done::Initialized(crate::acp::initialize_response(&req, images), reply)
        }));
    }
}
