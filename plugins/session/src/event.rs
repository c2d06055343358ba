//! The event model: the header line, the event envelope and the typed data of each kind.

use cordis_conversation::{AssistantToolCall, CallConfig, Chunk, Usage};
use cordis_schema::{ToolSchema, canonicalize};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::project::ProjectionError;

/// The session format version this crate reads and writes.
pub const SESSION_VERSION: u32 = 0;

/// The first line of a session file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// Always `session`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The format version ([`SESSION_VERSION`]).
    pub version: u32,
    /// The session id.
    pub id: String,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at: u64,
    /// The working directory the session belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// The agent preset the session was created with (its creation value: a later switch is an
    /// `agent-preset/selected` event, so read [`resolve_session_preset`], not this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_preset: Option<String>,
}

/// One logged event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionEvent {
    /// The event kind (`turn/start`, see [`kinds`]).
    #[serde(rename = "type")]
    pub kind: String,
    /// Its index in the log, contiguous from 0.
    pub seq: u64,
    /// Append time, milliseconds since the Unix epoch.
    pub time: u64,
    /// The kind's payload.
    pub data: serde_json::Value,
    /// Events this one was derived from (chunks of a message, the call of a result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_event_seqs: Option<Vec<u64>>,
}

impl SessionEvent {
    /// True when this event is of `T`'s kind.
    pub fn is<T: EventData>(&self) -> bool {
        self.kind == T::KIND
    }

    /// The payload as `T`, instead of reading JSON keys.
    ///
    /// # Examples
    ///
    /// ```
    /// use cordis_session::{Session, TurnStartData};
    ///
    /// let s = Session::in_memory("s");
    /// s.append(&TurnStartData { turn: 1 }, None).unwrap();
    /// let first = &s.events()[0];
    /// assert_eq!(first.data_as::<TurnStartData>().unwrap().turn, 1);
    /// ```
    ///
    /// # Errors
    /// A [`ProjectionError`] when the event is of another kind or its payload does not fit.
    pub fn data_as<T: EventData>(&self) -> Result<T, ProjectionError> {
        let error = |message: String| ProjectionError {
            kind: self.kind.clone(),
            seq: self.seq,
            message,
        };
        if !self.is::<T>() {
            return Err(error(format!("expected a {} event", T::KIND)));
        }
        T::deserialize(&self.data).map_err(|e| error(e.to_string()))
    }
}

/// Event kinds.
pub mod kinds {
    /// A turn began.
    pub const TURN_START: &str = "turn/start";
    /// The user's input of the turn.
    pub const USER_MESSAGE: &str = "user/message";
    /// A step (one model call and its tools) began: the reconstruction boundary.
    pub const STEP_START: &str = "step/start";
    /// The full request header snapshot (`initial`, `resume`, `change`).
    pub const REQUEST_HEADER: &str = "request/header";
    /// One streamed chunk.
    pub const ASSISTANT_CHUNK: &str = "assistant/chunk";
    /// The assembled assistant message.
    pub const ASSISTANT_MESSAGE: &str = "assistant/message";
    /// A tool call about to be dispatched.
    pub const TOOL_CALL: &str = "tool/call";
    /// A tool call's result.
    pub const TOOL_RESULT: &str = "tool/result";
    /// How an approvals policy decided a call that was not simply allowed (before its result).
    pub const TOOL_APPROVAL: &str = "tool/approval";
    /// A `run_code` sub-call started (derives no model message).
    pub const TOOL_CODE_DISPATCH_START: &str = "tool/code-dispatch-start";
    /// A `run_code` sub-call settled (derives no model message).
    pub const TOOL_CODE_DISPATCH: &str = "tool/code-dispatch";
    /// A step ended.
    pub const STEP_END: &str = "step/end";
    /// A turn ended, with its reason.
    pub const TURN_END: &str = "turn/end";
    /// The session switched to another agent preset (derives no model message).
    pub const AGENT_PRESET_SELECTED: &str = "agent-preset/selected";
    /// The session chose a permission mode (derives no model message).
    pub const PERMISSIONS_MODE: &str = "permissions/mode";
    /// The session revoked a grant (derives no model message).
    pub const PERMISSIONS_REVOKE: &str = "permissions/revoke";
}

/// A typed event payload: written with [`crate::Session::append`], read back with
/// [`SessionEvent::data_as`].
pub trait EventData: Serialize + DeserializeOwned {
    /// The event kind it is logged as.
    const KIND: &'static str;
}

macro_rules! data {
    ($(#[$m:meta])* $name:ident = $kind:expr; { $($(#[$fm:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name { $($(#[$fm])* pub $field: $ty),* }
        impl EventData for $name { const KIND: &'static str = $kind; }
    };
}

data!(/// `turn/start`.
    TurnStartData = kinds::TURN_START; { /// The turn number (1-based).
    turn: u64 });
data!(/// `user/message`.
    UserMessageData = kinds::USER_MESSAGE; { /// The turn.
    turn: u64, /// The text.
    content: String });
data!(/// `step/start`.
    StepStartData = kinds::STEP_START; { /// The turn.
    turn: u64, /// The step (1-based).
    step: u64 });
data!(/// `step/end`.
    StepEndData = kinds::STEP_END; { /// The turn.
    turn: u64, /// The step.
    step: u64 });
data!(/// `assistant/chunk`.
    AssistantChunkData = kinds::ASSISTANT_CHUNK; { /// The turn.
    turn: u64, /// The step.
    step: u64, /// The chunk as streamed.
    chunk: Chunk });
data!(/// `assistant/message`.
    AssistantMessageData = kinds::ASSISTANT_MESSAGE; { /// The turn.
    turn: u64, /// The step.
    step: u64, /// The text.
    content: String, /// Tool calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<AssistantToolCall>, /// Usage, if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Usage> });
data!(/// `tool/call`.
    ToolCallData = kinds::TOOL_CALL; { /// The turn.
    turn: u64, /// The step.
    step: u64, /// The call id.
    call_id: String, /// The tool name.
    name: String, /// The raw JSON arguments text.
    arguments: String });
data!(/// `tool/result`.
    ToolResultData = kinds::TOOL_RESULT; { /// The turn.
    turn: u64, /// The step.
    step: u64, /// The call id.
    call_id: String, /// The tool name.
    name: String, /// The content (the error message for failures).
    content: serde_json::Value, /// True for failures.
    is_error: bool, /// The failure code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<String> });
data!(/// `tool/approval`: an approval decision on a call whose policy is not `allow`.
    ToolApprovalData = kinds::TOOL_APPROVAL; { /// The turn.
    turn: u64, /// The step.
    step: u64, /// The call id.
    call_id: String, /// The tool name.
    name: String, /// The tool's policy (`ask` or `deny`).
    policy: String, /// Whether the call ran.
    allowed: bool, /// Who decided (`policy`, `mode`, `rule`, `grant`, `approver`,
    /// `approver-always`, `no-approver`).
    by: String, /// Why it was denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>, /// The grants an "always" answer made (held for the rest of the session).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    grants: Vec<GrantData> });

/// A grant as the log records it: a tool, and for a command tool the command pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantData {
    /// The tool.
    pub tool: String,
    /// The command pattern (`git status`), for a command tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The pattern matches the whole command, not its beginning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
}

data!(/// `permissions/mode`: the session runs with this permission mode from here on.
    PermissionsModeData = kinds::PERMISSIONS_MODE; { /// `ask`, `auto` or `never-ask`.
    mode: String });
data!(/// `permissions/revoke`: a grant the session no longer holds.
    GrantRevokedData = kinds::PERMISSIONS_REVOKE; { /// The grant.
    grant: GrantData });
data!(/// `tool/code-dispatch-start`: a `run_code` sub-call started.
    ToolCodeDispatchStartData = kinds::TOOL_CODE_DISPATCH_START; { /// The turn.
    turn: u64, /// The step.
    step: u64, /// The `run_code` call id.
    parent_call_id: String, /// `<parent>:code:<n>`, n in submission order.
    sub_call_id: String, /// The tool name.
    name: String, /// The arguments the program passed.
    arguments: serde_json::Value });
data!(/// `tool/code-dispatch`: a `run_code` sub-call settled (after its post-execute).
    ToolCodeDispatchData = kinds::TOOL_CODE_DISPATCH; { /// The turn.
    turn: u64, /// The step.
    step: u64, /// The `run_code` call id.
    parent_call_id: String, /// `<parent>:code:<n>`, n in submission order.
    sub_call_id: String, /// The tool name.
    name: String, /// The arguments the program passed.
    arguments: serde_json::Value, /// True for a failed sub-call.
    is_error: bool, /// The content (the error message for failures).
    content: serde_json::Value });
data!(/// `turn/end`.
    TurnEndData = kinds::TURN_END; { /// The turn.
    turn: u64, /// Why it ended.
    reason: TurnEndReason });
data!(/// `agent-preset/selected`: the session runs this preset from here on.
    AgentPresetSelectedData = kinds::AGENT_PRESET_SELECTED; { /// The preset id.
    agent_preset: String });
data!(/// `request/header`.
    RequestHeaderData = kinds::REQUEST_HEADER; { /// The full snapshot.
    header: RequestHeader, /// Why it was logged.
    reason: HeaderReason });

/// The preset a session runs: the last `agent-preset/selected` event of `events`, else the
/// header's creation value; `None` when neither names one (the caller's default applies).
///
/// The preset decides the model-visible tools, so it is read from the log, never from a cache:
/// a cold reader resolves a switched session exactly as the live one ran.
///
/// A malformed `agent-preset/selected` event is skipped (an older valid one or the header
/// decides): the answer only picks a presentation, and a damaged line must not hide the log.
///
/// # Examples
///
/// ```
/// use cordis_session::{AgentPresetSelectedData, Session, resolve_session_preset};
///
/// let s = Session::in_memory("s");
/// assert_eq!(resolve_session_preset(s.header(), &s.events()), None);
/// s.append(&AgentPresetSelectedData { agent_preset: "minimal".into() }, None).unwrap();
/// assert_eq!(resolve_session_preset(s.header(), &s.events()).as_deref(), Some("minimal"));
/// ```
pub fn resolve_session_preset(header: &SessionHeader, events: &[SessionEvent]) -> Option<String> {
    events
        .iter()
        .rev()
        .filter(|e| e.is::<AgentPresetSelectedData>())
        .find_map(|e| e.data_as::<AgentPresetSelectedData>().ok())
        .map(|d| d.agent_preset)
        .or_else(|| header.agent_preset.clone())
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TurnEndReason {
    /// The model answered without tool calls.
    Completed,
    /// Cancelled by the caller.
    Aborted {
        /// Why, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A failure closed the turn.
    Error {
        /// The step that failed (the step about to open for assembly failures).
        step: u64,
        /// The error message.
        message: String,
    },
    /// The agent was disposed mid-turn.
    Disposed,
    /// The step limit was reached.
    MaxSteps {
        /// The limit.
        steps: u64,
    },
    /// Synthesized by crash repair: the process died mid-turn.
    Interrupted,
}

/// Why a `request/header` was logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeaderReason {
    /// The first request of a loop instance on a log without a header.
    Initial,
    /// The first request of a loop instance on a log that already has one.
    Resume,
    /// The header differs from the last one logged (a pure tool reordering included).
    Change,
}

/// Everything a request carries besides messages: `{config, system?, tools?}`.
///
/// Empty system text and an empty tool list are absent fields, as in the reference's
/// `canonicalHeader`; equality compares tools in order, so a pure reordering is a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestHeader {
    /// The call config.
    pub config: CallConfig,
    /// The rendered system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The model-facing tools, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSchema>>,
}

impl RequestHeader {
    /// The canonical header: empty fields absent, tool parameter keys sorted.
    pub fn new(config: CallConfig, system: String, tools: Vec<ToolSchema>) -> Self {
        RequestHeader {
            config,
            system: (!system.is_empty()).then_some(system),
            tools: (!tools.is_empty()).then(|| {
                let mut tools = tools;
                for t in &mut tools {
                    // Shared schemas are canonical already; a copy only for one that is not.
                    if !cordis_schema::is_canonical(&t.parameters) {
                        canonicalize(std::sync::Arc::make_mut(&mut t.parameters));
                    }
                }
                tools
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_as_reads_its_own_kind_and_names_the_event_otherwise() {
        let event = SessionEvent {
            kind: kinds::TURN_START.into(),
            seq: 4,
            time: 0,
            data: serde_json::json!({"turn": 2}),
            source_event_seqs: None,
        };
        assert_eq!(event.data_as::<TurnStartData>().unwrap().turn, 2);
        assert!(event.is::<TurnStartData>() && !event.is::<TurnEndData>());
        let err = event.data_as::<StepStartData>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "turn/start at seq 4: expected a step/start event"
        );
        let bad = SessionEvent {
            data: serde_json::json!({"turn": "two"}),
            ..event
        };
        let err = bad.data_as::<TurnStartData>().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("turn/start at seq 4: invalid type"),
            "{err}"
        );
    }
}
