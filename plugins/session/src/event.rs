//! The event model: the header line, the event envelope, the typed data of each kind and
//! [`EventView`], the one typed view of an event that surfaces match on.

use cordis_conversation::{AssistantToolCall, CallConfig, Chunk, Usage};
use cordis_schema::{ToolSchema, canonicalize};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

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
    /// For a fork: how many of the parent's events it copied (its events from this seq on are
    /// its own; its first request logs `request/header {reason: fork}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<u64>,
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

/// An event's payload does not fit its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at seq {seq}: {message}")]
pub struct ProjectionError {
    /// The event kind.
    pub kind: String,
    /// Its seq.
    pub seq: u64,
    /// What is wrong.
    pub message: String,
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

/// Declares the kind constants and [`kinds::ALL`], so a kind cannot be added without joining
/// the list the view's tests walk.
macro_rules! kinds {
    ($($(#[$m:meta])* $name:ident = $kind:literal;)*) => {
        /// Event kinds.
        pub mod kinds {
            $($(#[$m])* pub const $name: &str = $kind;)*
            /// Every kind above, in declaration order.
            pub const ALL: &[&str] = &[$($name),*];
        }
    };
}

kinds! {
    /// A turn began.
    TURN_START = "turn/start";
    /// The user's input of the turn.
    USER_MESSAGE = "user/message";
    /// A step (one model call and its tools) began: the reconstruction boundary.
    STEP_START = "step/start";
    /// The full request header snapshot (`initial`, `resume`, `change`).
    REQUEST_HEADER = "request/header";
    /// One streamed chunk.
    ASSISTANT_CHUNK = "assistant/chunk";
    /// The assembled assistant message.
    ASSISTANT_MESSAGE = "assistant/message";
    /// A tool call about to be dispatched.
    TOOL_CALL = "tool/call";
    /// A tool call's result.
    TOOL_RESULT = "tool/result";
    /// How an approvals policy decided a call that was not simply allowed (before its result).
    TOOL_APPROVAL = "tool/approval";
    /// A `run_code` sub-call started (derives no model message).
    TOOL_CODE_DISPATCH_START = "tool/code-dispatch-start";
    /// A `run_code` sub-call settled (derives no model message).
    TOOL_CODE_DISPATCH = "tool/code-dispatch";
    /// A step ended.
    STEP_END = "step/end";
    /// A turn ended, with its reason.
    TURN_END = "turn/end";
    /// The session switched to another agent preset (derives no model message).
    AGENT_PRESET_SELECTED = "agent-preset/selected";
    /// The session chose a permission mode (derives no model message).
    PERMISSIONS_MODE = "permissions/mode";
    /// The session revoked a grant (derives no model message).
    PERMISSIONS_REVOKE = "permissions/revoke";
    /// The conversation before it was replaced by a summary (the messages restart from it).
    COMPACTION = "compaction";
    /// A hook command ran on an agent event, and what it decided (derives no model message).
    HOOK_RUN = "hook/run";
}

/// Declares [`EventView`] and [`SessionEvent::view`] from one table of `Variant(Payload)`: the
/// payload type names its kind ([`EventData::KIND`]), so this table is the whole kind → variant
/// mapping.
macro_rules! event_view {
    ($($(#[$m:meta])* $variant:ident($data:ty),)*) => {
        /// One event as the typed payload of its kind: what a surface matches on, instead of
        /// trying [`SessionEvent::data_as`] kind by kind.
        ///
        /// The enum is exhaustive on purpose: a new kind is a new variant, and every surface
        /// that matches without `_` has to decide whether it shows it.
        #[derive(Debug, Clone, PartialEq)]
        pub enum EventView<'a> {
            $($(#[$m])* $variant($data),)*
            /// A kind this build does not define: a newer writer's event, or a retired one
            /// (`request/header-delta`). Surfaces skip it.
            Unknown {
                /// The event's kind, as logged.
                kind: &'a str,
            },
            /// A known kind whose payload does not fit its type. Surfaces skip it; the error
            /// names the kind, the seq and what is wrong, for whoever checks the log.
            Malformed(ProjectionError),
        }

        impl EventView<'_> {
            /// Every kind the view has a variant for, in the table's order.
            pub const KINDS: &'static [&'static str] = &[$(<$data as EventData>::KIND),*];

            /// The kind of the event this is the view of.
            pub fn kind(&self) -> &str {
                match self {
                    $(EventView::$variant(_) => <$data as EventData>::KIND,)*
                    EventView::Unknown { kind } => kind,
                    EventView::Malformed(error) => &error.kind,
                }
            }
        }

        impl SessionEvent {
            /// The event as [`EventView`]: the payload of its kind, typed.
            ///
            /// Never fails and never panics: a kind without a variant is
            /// [`EventView::Unknown`], a payload that does not fit its kind
            /// [`EventView::Malformed`].
            ///
            /// # Examples
            ///
            /// ```
            /// use cordis_session::{EventView, Session, TurnStartData};
            ///
            /// let s = Session::in_memory("s");
            /// s.append(&TurnStartData { turn: 1 }, None).unwrap();
            /// match s.events()[0].view() {
            ///     EventView::TurnStart(start) => assert_eq!(start.turn, 1),
            ///     other => panic!("{other:?}"),
            /// }
            /// ```
            pub fn view(&self) -> EventView<'_> {
                $(if self.kind == <$data as EventData>::KIND {
                    return match self.data_as::<$data>() {
                        Ok(data) => EventView::$variant(data),
                        Err(error) => EventView::Malformed(error),
                    };
                })*
                EventView::Unknown { kind: &self.kind }
            }
        }
    };
}

event_view! {
    /// `turn/start`.
    TurnStart(TurnStartData),
    /// `user/message`.
    UserMessage(UserMessageData),
    /// `step/start`.
    StepStart(StepStartData),
    /// `request/header`.
    RequestHeader(RequestHeaderData),
    /// `assistant/chunk`.
    AssistantChunk(AssistantChunkData),
    /// `assistant/message`.
    AssistantMessage(AssistantMessageData),
    /// `tool/call`.
    ToolCall(ToolCallData),
    /// `tool/result`.
    ToolResult(ToolResultData),
    /// `tool/approval`.
    ToolApproval(ToolApprovalData),
    /// `tool/code-dispatch-start`.
    ToolCodeDispatchStart(ToolCodeDispatchStartData),
    /// `tool/code-dispatch`.
    ToolCodeDispatch(ToolCodeDispatchData),
    /// `step/end`.
    StepEnd(StepEndData),
    /// `turn/end`.
    TurnEnd(TurnEndData),
    /// `agent-preset/selected`.
    AgentPresetSelected(AgentPresetSelectedData),
    /// `permissions/mode`.
    PermissionsMode(PermissionsModeData),
    /// `permissions/revoke`.
    PermissionsRevoke(GrantRevokedData),
    /// `compaction`.
    Compaction(CompactionData),
    /// `hook/run`.
    HookRun(HookRunData),
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
    turn: u64, /// The text the model is sent.
    content: String, /// The prompt's content blocks as the client sent them (ACP), when they were
    /// more than text: replaying the session shows the user what they sent, and `content` is
    /// what those blocks became for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prompt: Option<Vec<serde_json::Value>> });
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
    usage: Option<Usage>, /// The reasoning streamed before it, when the model sent any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reasoning: Option<String> });
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
    /// `approver-always`, `refusal`, `no-approver`).
    by: String, /// Why it was denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>, /// The grants an "always" answer made (held for the rest of the session).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    grants: Vec<GrantData>, /// The refusals a "reject always" answer made (what they name is denied
    /// without asking for the rest of the session).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    refusals: Vec<GrantData> });

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
data!(/// `compaction`: the messages before it are replaced by one user message carrying
    /// `summary` (see [`crate::compaction_message`]); the next request logs
    /// `request/header {reason: compaction}`.
    CompactionData = kinds::COMPACTION; { /// The summary the model wrote.
    summary: String, /// Why it ran.
    trigger: CompactionTrigger, /// The focus the user asked the summary to keep (`/compact FOCUS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    focus: Option<String>, /// The seq of the last event it replaces (the log before it).
    through_seq: u64, /// How many messages it replaces.
    messages: u64, /// How many old tool results were cut before the summary was asked for.
    #[serde(default, skip_serializing_if = "is_zero")]
    dropped_tool_results: u64, /// The input tokens of the last request before it, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u64>, /// What the summary request cost, when the model reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Usage> });

data!(/// `hook/run`: one hook command ran on an agent event (`PreToolUse`, `Stop`, …) and what
    /// it decided. It derives no model message: context a hook adds reaches the model inside the
    /// `tool/result` or `user/message` it belongs to, so the request bytes follow from the log.
    HookRunData = kinds::HOOK_RUN; { /// The turn (0 outside one).
    turn: u64, /// The hook event, as configured (`PreToolUse`).
    event: String, /// The configuring entry and the hook's place: `hooks#2.1` (entry, matcher group, hook).
    hook: String, /// The command it ran.
    command: String, /// The tool call it ran on (tool events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    call_id: Option<String>, /// The tool name (tool events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>, /// The exit status (absent when it did not run or was killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>, /// What it decided: `continue`, `allow`, `deny`, `ask`, `block`, `error`,
    /// `timeout` or `untrusted` (not run: the workspace is not trusted).
    decision: String, /// Why (a block's reason, an error's message), as told to the model or the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>, /// The tool input it substituted (`updatedInput`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_input: Option<serde_json::Value>, /// Context it added for the model (`additionalContext`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    context: Option<String> });

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompactionTrigger {
    /// The user asked (`/compact`).
    Manual,
    /// The last request's input tokens reached the threshold of the context window.
    Auto,
}

data!(/// `request/header`.
    RequestHeaderData = kinds::REQUEST_HEADER; { /// The full snapshot.
    header: RequestHeader, /// Why it was logged.
    reason: HeaderReason, /// For a `change`: the prompt sources that changed (section names such as
    /// `instructions:AGENTS.md` or `skills:catalog`, then `tools` and `config`); for a
    /// `tool-load`: the tools appended; absent in older logs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    changed: Vec<String> });

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
    /// A session budget (`budget.maxTokens`, `budget.maxCostUsd` of the agent loop) is spent.
    Budget {
        /// Which budget, and what was spent against it.
        message: String,
    },
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
    /// The first request after a `compaction` (the messages restarted from its summary).
    Compaction,
    /// The first request of a forked session (its messages are its parent's up to the fork).
    Fork,
    /// Tools a `tool_search` call loaded were appended after the previous header's tools;
    /// its config, system prompt and tools are otherwise the previous header's, so the cached
    /// prefix (system prompt and the tools before) survives.
    ToolLoad,
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

    fn event(seq: u64, kind: &str, data: serde_json::Value) -> SessionEvent {
        SessionEvent {
            kind: kind.into(),
            seq,
            time: 0,
            data,
            source_event_seqs: None,
        }
    }

    fn sample<D: EventData>(data: D) -> (&'static str, serde_json::Value) {
        (D::KIND, serde_json::to_value(data).unwrap())
    }

    /// One well-formed payload of every kind.
    fn samples() -> Vec<(&'static str, serde_json::Value)> {
        let call = |name: &str| ToolCallData {
            turn: 1,
            step: 1,
            call_id: "c".into(),
            name: name.into(),
            arguments: "{}".into(),
        };
        let grant = GrantData {
            tool: "bash".into(),
            command: Some("git status".into()),
            exact: false,
        };
        vec![
            sample(TurnStartData { turn: 1 }),
            sample(UserMessageData {
                turn: 1,
                content: "hi".into(),
                prompt: Some(vec![
                    serde_json::json!({"type": "resource_link", "name": "a", "uri": "file:///a"}),
                ]),
            }),
            sample(StepStartData { turn: 1, step: 1 }),
            sample(RequestHeaderData {
                header: RequestHeader::new(CallConfig::default(), "sys".into(), Vec::new()),
                reason: HeaderReason::Initial,
                changed: Vec::new(),
            }),
            sample(AssistantChunkData {
                turn: 1,
                step: 1,
                chunk: Chunk::Text { delta: "h".into() },
            }),
            sample(AssistantMessageData {
                turn: 1,
                step: 1,
                content: "h".into(),
                tool_calls: Vec::new(),
                usage: None,
                reasoning: None,
            }),
            sample(call("x")),
            sample(ToolResultData {
                turn: 1,
                step: 1,
                call_id: "c".into(),
                name: "x".into(),
                content: serde_json::json!("ok"),
                is_error: false,
                code: None,
            }),
            sample(ToolApprovalData {
                turn: 1,
                step: 1,
                call_id: "c".into(),
                name: "bash".into(),
                policy: "ask".into(),
                allowed: true,
                by: "approver".into(),
                reason: None,
                grants: vec![grant.clone()],
                refusals: vec![grant.clone()],
            }),
            sample(ToolCodeDispatchStartData {
                turn: 1,
                step: 1,
                parent_call_id: "c".into(),
                sub_call_id: "c:code:0".into(),
                name: "x".into(),
                arguments: serde_json::json!({}),
            }),
            sample(ToolCodeDispatchData {
                turn: 1,
                step: 1,
                parent_call_id: "c".into(),
                sub_call_id: "c:code:0".into(),
                name: "x".into(),
                arguments: serde_json::json!({}),
                is_error: false,
                content: serde_json::json!(1),
            }),
            sample(StepEndData { turn: 1, step: 1 }),
            sample(TurnEndData {
                turn: 1,
                reason: TurnEndReason::Completed,
            }),
            sample(AgentPresetSelectedData {
                agent_preset: "code".into(),
            }),
            sample(PermissionsModeData { mode: "ask".into() }),
            sample(GrantRevokedData { grant }),
            sample(CompactionData {
                summary: "s".into(),
                trigger: CompactionTrigger::Manual,
                focus: Some("tests".into()),
                through_seq: 3,
                messages: 2,
                dropped_tool_results: 1,
                input_tokens: Some(9),
                usage: None,
            }),
            sample(HookRunData {
                turn: 1,
                event: "PreToolUse".into(),
                hook: "hooks#0.0".into(),
                command: "./check.sh".into(),
                call_id: Some("c".into()),
                tool: Some("bash".into()),
                exit_code: Some(2),
                decision: "block".into(),
                reason: Some("no".into()),
                updated_input: None,
                context: None,
            }),
        ]
    }

    #[test]
    fn every_kind_views_as_its_own_variant() {
        let samples = samples();
        let sampled: Vec<&str> = samples.iter().map(|(kind, _)| *kind).collect();
        // A kind added to `kinds` without a variant (or a sample here) fails one of these.
        assert_eq!(sampled, kinds::ALL, "one sample per kind, in `kinds` order");
        assert_eq!(EventView::KINDS, kinds::ALL, "one variant per kind");
        for (seq, (kind, data)) in (0..).zip(samples) {
            let e = event(seq, kind, data.clone());
            let view = e.view();
            assert!(
                !matches!(view, EventView::Unknown { .. } | EventView::Malformed(_)),
                "{kind}: {view:?}"
            );
            assert_eq!(view.kind(), kind);
            // The variant holds exactly the logged payload.
            let payload = match view {
                EventView::TurnStart(d) => serde_json::to_value(d),
                EventView::UserMessage(d) => serde_json::to_value(d),
                EventView::StepStart(d) => serde_json::to_value(d),
                EventView::RequestHeader(d) => serde_json::to_value(d),
                EventView::AssistantChunk(d) => serde_json::to_value(d),
                EventView::AssistantMessage(d) => serde_json::to_value(d),
                EventView::ToolCall(d) => serde_json::to_value(d),
                EventView::ToolResult(d) => serde_json::to_value(d),
                EventView::ToolApproval(d) => serde_json::to_value(d),
                EventView::ToolCodeDispatchStart(d) => serde_json::to_value(d),
                EventView::ToolCodeDispatch(d) => serde_json::to_value(d),
                EventView::StepEnd(d) => serde_json::to_value(d),
                EventView::TurnEnd(d) => serde_json::to_value(d),
                EventView::AgentPresetSelected(d) => serde_json::to_value(d),
                EventView::PermissionsMode(d) => serde_json::to_value(d),
                EventView::PermissionsRevoke(d) => serde_json::to_value(d),
                EventView::Compaction(d) => serde_json::to_value(d),
                EventView::HookRun(d) => serde_json::to_value(d),
                EventView::Unknown { .. } | EventView::Malformed(_) => unreachable!(),
            };
            assert_eq!(payload.unwrap(), data, "{kind}");
        }
    }

    #[test]
    fn a_malformed_payload_or_an_unknown_kind_views_as_the_fallback() {
        for (seq, kind) in (0..).zip(kinds::ALL) {
            let e = event(seq, kind, serde_json::json!({"turn": "two"}));
            let view = e.view();
            let EventView::Malformed(error) = &view else {
                panic!("{kind}: {view:?}");
            };
            assert_eq!((error.kind.as_str(), error.seq), (*kind, seq));
            assert_eq!(view.kind(), *kind);
        }
        let e = event(3, "request/header-delta", serde_json::json!({}));
        assert_eq!(
            e.view(),
            EventView::Unknown {
                kind: "request/header-delta"
            }
        );
        assert_eq!(e.view().kind(), "request/header-delta");
    }

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
