//! `session/cancel` and `$/cancel_request`: the notifications that end a session's running
//! prompt.

use serde_json::Value;

use super::{Busy, Server};
use crate::acp::protocol::CancelNotification;

impl Server<'_> {
    /// `session/cancel`: asks the session's running prompt, if any, to cancel its turn.
    pub(super) fn cancel(&self, note: &CancelNotification) {
        let id = note.session_id.clone();
        // Unknown sessions and idle ones: nothing to cancel.
        if let Some(Busy::Prompt(cancel, _)) = self.sessions.get(&id).and_then(|l| l.busy.as_ref())
        {
            let _ = cancel.send(true);
        }
    }

    /// `$/cancel_request`: a `session/prompt` still running whose request has `request` as its
    /// id is cancelled as `session/cancel` would (it answers `cancelled`). Other requests run
    /// to their answer: each is short or, like a boot, cannot stop half way.
    pub(super) fn cancel_request(&self, request: &Value) {
        let running = self.sessions.values().find_map(|live| match &live.busy {
            Some(Busy::Prompt(cancel, id)) if id == request => Some(cancel),
            _ => None,
        });
        if let Some(cancel) = running {
            let _ = cancel.send(true);
        }
    }
}
