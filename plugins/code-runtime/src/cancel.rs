//! Cancellation of a run by its caller.

use std::future::Future;

use crate::BoxFuture;

/// A signal that aborts a run when its future completes.
///
/// Built from any future so that callers keep their own cancellation type (a watch channel, a
/// token's `cancelled()`, a timer).
pub struct Cancel(Option<BoxFuture<'static, ()>>);

impl Cancel {
    /// A signal that never fires.
    pub fn never() -> Self {
        Self(None)
    }

    /// A signal that fires when `signal` completes.
    pub fn on(signal: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(Some(Box::pin(signal)))
    }

    /// Waits for the signal; pending forever for [`Cancel::never`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future before the signal fires leaves the signal armed, and a
    /// later call waits for the same signal.
    pub async fn fired(&mut self) {
        match &mut self.0 {
            Some(signal) => signal.await,
            None => std::future::pending().await,
        }
    }
}

impl Default for Cancel {
    fn default() -> Self {
        Self::never()
    }
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Cancel(armed)"
        } else {
            "Cancel(never)"
        })
    }
}
