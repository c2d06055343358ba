//! `session/new`: a session booted in the client's cwd, with a fresh id.

use super::attach::attach;
use super::session_params::checked_place;
use super::{Done, Live, Server, respond_error};
use crate::acp::protocol::{NewSessionRequest, NewSessionResponse};
use crate::acp::rpc::{Reply, RpcError};
use crate::acp::session::Opening;

/// A new session id (the session core's one maker).
fn new_session_id() -> String {
    crate::session::id::new_id()
}

impl<'c> Server<'c> {
    /// `session/new`: checks the cwd and MCP servers, then boots and attaches the session.
    pub(super) fn new_session(&mut self, req: NewSessionRequest, reply: Reply) {
        let (cwd, mcp, dirs) =
            match checked_place(&req.cwd, &req.additional_directories, &req.mcp_servers) {
                Ok(checked) => checked,
                Err(e) => return respond_error(reply, e),
            };
        let composition = self.composition;
        let connection = self.connection.clone();
        let editor = self.editor;
        let front = editor.front(dirs);
        self.work.push(Box::pin(async move {
            let id = new_session_id();
            let live = match composition
                .boot(&cwd, &Opening::New(id.clone()), &mcp, &front)
                .await
            {
                Ok(b) => attach(b, id, cwd, &connection, false, editor).await,
                Err(e) => Err(e),
            };
            Done::Created(live, reply)
        }));
    }

    /// A `session/new` booted (or failed): the session joins the connection, answers, and
    /// announces its commands.
    pub(super) fn created(&mut self, result: Result<Live, RpcError>, reply: Reply) {
        match result {
            Ok(live) => {
                let id = live.id.clone();
                let (modes, config_options) = self.join(id.clone(), live);
                reply.send(Ok(NewSessionResponse {
                    session_id: id.clone(),
                    modes,
                    config_options,
                }));
                self.announce_commands(&id);
            }
            Err(e) => respond_error(reply, e),
        }
    }
}
