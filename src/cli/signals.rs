//! The signals `cordis run` handles itself: Ctrl-C (SIGINT) cancels the running turn, and a
//! second one, or one between turns, ends the run; SIGTERM and SIGHUP end it cleanly (the turn
//! cancelled, the session saved, what the agent started killed).

use tokio::signal::unix::{Signal, SignalKind, signal};

/// A signal the run acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Ctrl-C.
    Interrupt,
    /// Esc while a turn runs (read by the terminal, not a signal): cancels the turn only.
    Escape,
    /// SIGTERM or SIGHUP: end the run.
    Terminate,
}

/// The run's signal handlers (installed for as long as this lives).
pub(crate) struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    /// Installs the handlers.
    ///
    /// # Errors
    /// The handlers cannot be installed.
    pub(crate) fn install() -> std::io::Result<Self> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrives meanwhile is kept for the next call.
    pub(crate) async fn next(&mut self) -> Stop {
        tokio::select! {
            _ = self.interrupt.recv() => Stop::Interrupt,
            _ = self.terminate.recv() => Stop::Terminate,
            _ = self.hangup.recv() => Stop::Terminate,
        }
    }
}
