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

/// Something the user should know that is not a turn's failure (an automatic compaction
/// that failed, so the turn went on uncompacted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentNotice {
    /// The agent id.
    pub agent: String,
    /// What happened, for a person.
    pub message: String,
}

impl Event for AgentNotice {
    const NAME: &'static str = "agent/notice";
    type Output = ();
}

/// A moment of the agent loop that hooks act on (`agent/hook`, a waterfall): the loop runs it
/// at each moment of [`Moment`] and logs the [`HookPoint::runs`] listeners leave, in order, right
/// where the moment is in the log. A listener may block what the moment would do or add context
/// for the model; without listeners the loop skips it.
///
/// # Determinism
/// Listeners run in canonical order (their entries' places in the plan); what they leave is
/// logged before the loop goes on, so a replay explains every decision.
pub struct AgentHook;

impl cordis_runtime::Waterfall for AgentHook {
    const NAME: &'static str = "agent/hook";
    type Value = HookPoint;
}

/// The value flowing through [`AgentHook`].
#[derive(Debug, Clone)]
pub struct HookPoint {
    /// The agent id.
    pub agent: String,
    /// The agent's registry scope (tool calls run in it).
    pub scope: cordis_system_prompt::ScopeKey,
    /// The session id.
    pub session_id: String,
    /// The turn (0 outside one).
    pub turn: u64,
    /// What is happening.
    pub moment: Moment,
    /// Set by a listener: stop what the moment would do (submit the prompt, end the turn), with
    /// the reason (told to the model for `Stop`, to the user for a prompt).
    pub block: Option<String>,
    /// Context for the model, in order (added to the turn's user message).
    pub context: Vec<String>,
    /// The hook runs to log, in order.
    pub runs: Vec<cordis_session::HookRunData>,
}

/// A moment of the agent loop ([`AgentHook`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Moment {
    /// The first turn of this loop instance on the session: `startup` (a new session) or
    /// `resume`. Its context joins that turn's user message.
    SessionStart {
        /// `startup` or `resume`.
        source: String,
    },
    /// The user's prompt, before the turn logs it; a block ends the turn before it starts.
    UserPromptSubmit {
        /// The prompt's text.
        prompt: String,
    },
    /// The model answered without tool calls; a block makes it go on with the reason.
    Stop {
        /// True when this turn already went on because of a stop hook.
        stop_hook_active: bool,
        /// The model's last answer.
        last_message: String,
    },
    /// A compaction is about to ask for its summary.
    PreCompact {
        /// `manual` or `auto`.
        trigger: String,
        /// The focus the user gave (`/compact FOCUS`).
        focus: Option<String>,
    },
    /// The agent is being disposed (its session ends); runs are not logged (the log may be
    /// closed already).
    SessionEnd {
        /// Why (`dispose`).
        reason: String,
    },
    /// Call `call_id`'s result is about to be logged: the runs of tool hooks on it.
    ToolResult {
        /// The call id.
        call_id: String,
    },
}
