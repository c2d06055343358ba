//! The runtimes the host builds for one command, and how they end.
//!
//! Dropping a tokio runtime waits for every blocking task it started. A foreign call that never
//! returns (a plugin's `create` stuck in a loop, a read of a FIFO) would then keep the process
//! alive after its entry has long been reported as timed out. So every runtime the host or the
//! CLI builds ends through [`end`]: a bounded wait, after which what is still blocked is
//! abandoned to process exit.

use std::time::Duration;

use tokio::runtime::Runtime;

/// How long [`end`] waits for blocked tasks before abandoning them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// A current-thread runtime with time and I/O enabled, for one command or one boot.
pub fn current_thread() -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Shuts `rt` down, waiting at most [`SHUTDOWN_GRACE`] for its blocking tasks.
pub fn end(rt: Runtime) {
    rt.shutdown_timeout(SHUTDOWN_GRACE);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocking_task_that_never_returns_does_not_hold_the_shutdown() {
        let rt = current_thread().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        rt.block_on(async {
            // Parks until the channel closes, which happens only when the test ends.
            tokio::task::spawn_blocking(move || {
                let _ = rx.recv();
            });
        });
        end(rt);
        // Reaching this line is the assertion: a plain drop of `rt` would wait for the task.
        drop(tx);
    }
}
