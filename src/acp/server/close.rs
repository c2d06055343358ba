//! `session/close`: a session leaves the connection and its composition is disposed.

use super::{Busy, Done, Live, Server, respond_error};
use crate::acp::protocol::CloseSessionRequest;
use crate::acp::rpc::Reply;
use crate::acp::session::invalid_params;

impl<'c> Server<'c> {
    /// `session/close`: refused while the session opens or switches modes; else its turn is
    /// ended and the session closed, answered when its log is flushed.
    pub(super) fn close_session(&mut self, req: CloseSessionRequest, reply: Reply) {
        let id = req.session_id;
        if self.loading.contains(&id) {
            return respond_error(
                reply,
                invalid_params(format!(
                    "session {id} is still opening; close it when it has answered"
                )),
            );
        }
        if matches!(
            self.sessions.get(&id).map(|l| &l.busy),
            Some(Some(Busy::Switching))
        ) {
            return respond_error(
                reply,
                invalid_params(format!(
                    "session {id} is switching modes; close it when the switch has answered"
                )),
            );
        }
        let Some(live) = self.sessions.remove(&id) else {
            return respond_error(reply, invalid_params(format!("unknown session {id}")));
        };
        // As `session/cancel` would, then free it: a running turn ends `disposed`
        // (logged), and the composition with its MCP servers and tasks unwinds.
        live.agent().dispose();
        self.work.push(Box::pin(async move {
            close(live).await;
            Done::Closed(reply)
        }));
    }
}

/// Flushes a session's log and disposes its composition.
pub(super) async fn close(live: Live) {
    if let Err(e) = live.agent().session().flush().await {
        tracing::warn!(session = %live.id, "flushing the session log failed: {e}");
    }
    live.booted.root().dispose();
}
