//! Long calls: each request carries a `progressToken` (rmcp puts one on every request); each
//! `notifications/progress` for it starts the request's `callTimeoutMs` wait again, and the wait
//! is paused while the server is asking the user something (an elicitation: people take longer
//! than servers). The registry's timeout, set to `maxCallMs`, is the ceiling nothing lifts.
//! Progress of a tool call is emitted as [`McpProgress`] for front ends to show.
//!
//! # Why a lock is held while the request is sent
//! rmcp chooses the token while sending; a fast server can report progress before the caller
//! learns it. The calls table is held from before the send until the call is recorded, and the
//! notification handler (a task of its own in rmcp) waits for it, so no first report is lost.

use std::collections::HashMap;

use cordis_tools::ScopeKey;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientNotification, ProgressToken, RequestId,
};
use rmcp::service::{Peer, RoleClient};

/// The longest progress message passed on, in bytes (a server's text shown in a footer).
pub const MAX_PROGRESS_MESSAGE: usize = 1024;

/// `mcp/progress`: a server reported progress on a running call. Not logged; the call's result
/// is what the model reads. Only increasing `progress` values are passed on (the protocol
/// requires them to increase; rmcp delivers notifications on tasks of their own, so an older
/// one can arrive after a newer one and is dropped).
#[derive(Debug, Clone, PartialEq)]
pub struct McpProgress {
    /// The call the registry is running.
    pub call_id: String,
    /// The scope the call was dispatched for.
    pub scope: Option<ScopeKey>,
    /// The entry's `server`.
    pub server: String,
    /// The server's (raw) tool name.
    pub tool: String,
    /// The progress so far.
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// The server's message, cut to [`MAX_PROGRESS_MESSAGE`] bytes.
    pub message: Option<String>,
}

impl cordis_runtime::Event for McpProgress {
    const NAME: &'static str = "mcp/progress";
    type Output = ();
}

/// A running call, by its progress token.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) call_id: String,
    pub(crate) scope: Option<ScopeKey>,
    pub(crate) tool: String,
    /// The last progress passed on.
    pub(crate) last: Option<f64>,
}

/// A request waiting for its answer.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Told of each progress report: the wait starts again.
    pub(crate) tick: tokio::sync::mpsc::Sender<()>,
    /// The tool call progress is reported for, if it is one.
    pub(crate) call: Option<Waiting>,
}

/// The running requests of one connection, by progress token.
pub(crate) type Calls = tokio::sync::Mutex<HashMap<ProgressToken, Pending>>;

/// The event for `waiting` at `progress`, if it moves forward; records it as the last one.
pub(crate) fn advance(
    waiting: &mut Waiting,
    server: &str,
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
) -> Option<McpProgress> {
    if !progress.is_finite() || waiting.last.is_some_and(|last| progress <= last) {
        return None;
    }
    waiting.last = Some(progress);
    Some(McpProgress {
        call_id: waiting.call_id.clone(),
        scope: waiting.scope,
        server: server.to_owned(),
        tool: waiting.tool.clone(),
        progress,
        total: total.filter(|t| t.is_finite()),
        message: message.map(|m| cut(m, MAX_PROGRESS_MESSAGE)),
    })
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Cancellations being sent (by [`CancelOnDrop`]'s tasks), for [`cancels_sent`].
static SENDING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Waits (at most `bound`) until every `notifications/cancelled` of a dropped request has
/// been handed to its transport: a process about to exit (`cordis call` after Ctrl-C or a
/// timeout) calls it before disposing its entries, which kills their servers. True when none
/// is left.
pub async fn cancels_sent(bound: std::time::Duration) -> bool {
    use std::sync::atomic::Ordering;
    let waited = tokio::time::timeout(bound, async {
        while SENDING.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    waited.is_ok()
}

/// Sends `notifications/cancelled` for a request whose caller stopped waiting (the registry's
/// ceiling, an aborted turn), and forgets the call; disarmed once the answer came.
pub(crate) struct CancelOnDrop {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) id: RequestId,
    pub(crate) token: ProgressToken,
    pub(crate) calls: std::sync::Arc<Calls>,
    pub(crate) armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let (calls, token) = (self.calls.clone(), self.token.clone());
        let cancel = self.armed.then(|| {
            ClientNotification::CancelledNotification(CancelledNotification::new(
                CancelledNotificationParam::new(
                    Some(self.id.clone()),
                    Some("the caller stopped waiting".to_owned()),
                ),
            ))
        });
        let peer = self.peer.clone();
        // Drop cannot await: a short task sends and forgets. Without a runtime (the process
        // is exiting) the server goes with its process group anyway.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let counted = cancel.is_some();
            if counted {
                SENDING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            runtime.spawn(async move {
                calls.lock().await.remove(&token);
                if let Some(cancel) = cancel {
                    let _ = peer.send_notification(cancel).await;
                }
                if counted {
                    SENDING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> Waiting {
        Waiting {
            call_id: "c1".into(),
            scope: None,
            tool: "slow".into(),
            last: None,
        }
    }

    #[test]
    fn only_increasing_finite_progress_is_passed_on_and_messages_are_cut() {
        let mut w = waiting();
        let first = advance(&mut w, "fx", 1.0, Some(4.0), Some("é".repeat(600))).unwrap();
        assert_eq!(first.call_id, "c1");
        assert_eq!(first.total, Some(4.0));
        // 1,200 bytes of two-byte characters cut at 1,024, on a boundary.
        assert_eq!(first.message.unwrap().len(), MAX_PROGRESS_MESSAGE);
        assert!(
            advance(&mut w, "fx", 1.0, None, None).is_none(),
            "not forward"
        );
        assert!(advance(&mut w, "fx", 0.5, None, None).is_none(), "backward");
        assert!(advance(&mut w, "fx", f64::NAN, None, None).is_none());
        let next = advance(&mut w, "fx", 2.0, Some(f64::INFINITY), None).unwrap();
        assert_eq!((next.progress, next.total), (2.0, None));
    }
}
