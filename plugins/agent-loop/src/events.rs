//! Live signals: runtime events mirroring what the loop does (`agent/*`).

use cordis_runtime::Event;
use cordis_session::SessionEvent;

/// Every event the agent logged, as it is logged.
#[derive(Debug, Clone)]
pub struct AgentEvent {
    /// The agent id.
    pub agent: String,
    /// The logged event.
    pub event: SessionEvent,
}

impl Event for AgentEvent {
    const NAME: &'static str = "agent/event";
    type Output = ();
}

/// A turn failed (exactly once per failed turn), or flushing after it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    /// The agent id.
    pub agent: String,
    /// The turn (0 when it failed before `turn/start`).
    pub turn: u64,
    /// The step (the step about to open for assembly failures).
    pub step: u64,
    /// The error message.
    pub message: String,
}

impl Event for AgentError {
    const NAME: &'static str = "agent/error";
    type Output = ();
}

/// The agent went busy or back to idle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentState {
    /// The agent id.
    pub agent: String,
    /// True while a turn runs.
    pub busy: bool,
}

impl Event for AgentState {
    const NAME: &'static str = "agent/state";
    type Output = ();
}
