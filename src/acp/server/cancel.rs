//! `session/cancel`: the notification that ends a session's running prompt.

use super::{Busy, Server};
use crate::acp::protocol::CancelNotification;

impl Server<'_> {
    /// `session/cancel`: asks the session's running prompt, if any, to cancel its turn.
    pub(super) fn cancel(&self, note: &CancelNotification) {
        let id = note.session_id.clone();
        // Unknown sessions and idle ones: nothing to cancel.
        if let Some(Busy::Prompt(cancel)) = self.sessions.get(&id).and_then(|l| l.busy.as_ref()) {
            let _ = cancel.send(true);
        }
    }
}
