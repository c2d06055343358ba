//! `session/load` and `session/resume`: a persisted session booted again in its cwd; a load
//! replays its log first (see [`super::replay`]).

use super::attach::attach;
use super::session_params::checked_place;
use super::{Done, Live, Server, respond_error};
use crate::acp::protocol::{LoadSessionRequest, LoadSessionResponse};
use crate::acp::rpc::{Reply, RpcError};
use crate::acp::session::{Opening, invalid_params};

impl<'c> Server<'c> {
    /// `session/load` (`replay`: send the log first) or `session/resume`: checks the cwd and
    /// MCP servers and that the id is not open here, reserves it, then boots and attaches.
    pub(super) fn load_session(&mut self, req: LoadSessionRequest, replay: bool, reply: Reply) {
        let id = req.session_id.clone();
        let (cwd, mcp, dirs) =
            match checked_place(&req.cwd, &req.additional_directories, &req.mcp_servers) {
                Ok(checked) => checked,
                Err(e) => return respond_error(reply, e),
            };
        if self.sessions.contains_key(&id) || self.loading.contains(&id) {
            return respond_error(
                reply,
                invalid_params(format!("session {id} is already open on this connection")),
            );
        }
        if self.deleting.contains(&id) {
            return respond_error(
                reply,
                invalid_params(format!("session {id} is being deleted")),
            );
        }
        self.loading.insert(id.clone());
        let composition = self.composition;
        let connection = self.connection.clone();
        let editor = self.editor;
        let front = editor.front(dirs);
        self.work.push(Box::pin(async move {
            let live = match composition
                .boot(&cwd, &Opening::Load(id.clone()), &mcp, &front)
                .await
            {
                Ok(b) => attach(b, id.clone(), cwd, &connection, replay, editor).await,
                Err(e) => Err(e),
            };
            Done::Loaded(id, live, reply)
        }));
    }

    /// A load or resume of `id` booted (or failed): its reservation ends; the session joins
    /// the connection, answers, and announces its commands.
    pub(super) fn loaded(&mut self, id: String, result: Result<Live, RpcError>, reply: Reply) {
        self.loading.remove(&id);
        match result {
            Ok(live) => {
                let (modes, config_options) = self.join(id.clone(), live);
                reply.send(Ok(LoadSessionResponse {
                    modes,
                    config_options,
                }));
                self.announce_commands(&id);
            }
            Err(e) => respond_error(reply, e),
        }
    }
}
