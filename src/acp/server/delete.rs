//! `session/delete`: a persisted session's log and index entry removed.

use super::{Done, Server, respond_error};
use crate::acp::protocol::DeleteSessionRequest;
use crate::acp::rpc::Reply;
use crate::acp::session::invalid_params;

impl<'c> Server<'c> {
    /// `session/delete`: refused for a session open (or opening) on this connection, which
    /// `session/close` ends first; else deleted under its writer lock (a session open in another
    /// process is refused, naming it), answered `{}`.
    pub(super) fn delete_session(&mut self, req: DeleteSessionRequest, reply: Reply) {
        let id = req.session_id;
        if self.sessions.contains_key(&id) || self.loading.contains(&id) {
            return respond_error(
                reply,
                invalid_params(format!(
                    "session {id} is open on this connection; close it (session/close) before deleting it"
                )),
            );
        }
        if !self.deleting.insert(id.clone()) {
            return respond_error(
                reply,
                invalid_params(format!("session {id} is being deleted")),
            );
        }
        let composition = self.composition;
        self.work.push(Box::pin(async move {
            let deleted = composition.delete(&id).await;
            Done::Deleted(id, deleted, reply)
        }));
    }
}
