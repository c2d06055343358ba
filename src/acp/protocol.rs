//! The Agent Client Protocol v1 messages `cordis acp` speaks, as serde types.
//!
//! Written here rather than taken from the `agent-client-protocol` crates: those turn on
//! `serde_json`'s `preserve_order` for the whole build, which changes the key order of every
//! `serde_json::Value` the workspace prints or logs (the Code Mode SDK, session logs,
//! transcripts). Only what the agent side sends and reads is here; field names and shapes
//! follow the protocol's JSON Schema (`tests/fixtures/acp/schema.v1.json`, which the tests
//! validate every update against). Incoming messages ignore fields they do not know.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version this agent speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// `initialize` params (what the agent reads of them).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    /// The newest version the client speaks.
    pub protocol_version: u16,
    /// What the client does (only `_meta.terminal_output` is read).
    #[serde(default)]
    pub client_capabilities: Value,
}

impl InitializeRequest {
    /// The client renders terminal cards from `_meta` (Zed's terminal extension).
    pub fn terminal_output(&self) -> bool {
        self.client_capabilities["_meta"]["terminal_output"] == Value::Bool(true)
    }
}

/// `initialize` result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The version both speak: the client's, negotiated down to ours.
    pub protocol_version: u16,
    /// What the agent does.
    pub agent_capabilities: AgentCapabilities,
    /// No authentication methods.
    pub auth_methods: Vec<Value>,
    /// Name and version.
    pub agent_info: Implementation,
}

/// The agent's capabilities.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// `session/load` works.
    pub load_session: bool,
    /// Prompt content beyond text and resource links.
    pub prompt_capabilities: PromptCapabilities,
    /// MCP transports beyond stdio.
    pub mcp_capabilities: McpCapabilities,
    /// Session methods beyond new, load and prompt.
    pub session_capabilities: SessionCapabilities,
}

/// Session methods beyond new, load and prompt; each present (`{}`) when it works.
#[derive(Debug, Clone, Serialize)]
pub struct SessionCapabilities {
    /// `session/list`: the sessions of the config file's sessions root.
    pub list: Supported,
    /// `session/resume`: open a session without replaying it.
    pub resume: Supported,
    /// `session/close`: end a session's work and free what it holds.
    pub close: Supported,
    /// `session/fork`: a new session whose history is another's (through its last complete
    /// turn).
    pub fork: Supported,
    /// `session/delete`: a listed session's log and index entry removed.
    pub delete: Supported,
    /// `additionalDirectories` on `session/new`, `session/load` and `session/resume`.
    #[serde(rename = "additionalDirectories")]
    pub additional_directories: Supported,
}

/// `session/delete` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteSessionRequest {
    /// The session to delete.
    pub session_id: String,
}

/// A capability that has no options: `{}`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Supported {}

/// `session/close` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloseSessionRequest {
    /// The session to close.
    pub session_id: String,
}

/// `session/list` params.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsRequest {
    /// Only the sessions of this working directory (absolute).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Where the previous page ended.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `session/list` result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsResponse {
    /// The sessions, most recently written first.
    pub sessions: Vec<SessionInfo>,
    /// The next page's cursor, when there may be one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One session of a listing.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// Its id.
    pub session_id: String,
    /// Its working directory.
    pub cwd: String,
    /// Its first prompt, on one line and cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// When its log was last written (ISO 8601, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// Prompt content beyond text and resource links.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    /// Image blocks.
    pub image: bool,
    /// Audio blocks.
    pub audio: bool,
    /// Embedded resources.
    pub embedded_context: bool,
}

/// MCP transports beyond stdio.
#[derive(Debug, Clone, Serialize)]
pub struct McpCapabilities {
    /// Streamable HTTP servers.
    pub http: bool,
    /// SSE servers.
    pub sse: bool,
}

/// A name and a version.
#[derive(Debug, Clone, Serialize)]
pub struct Implementation {
    /// The name.
    pub name: String,
    /// The version.
    pub version: String,
}

/// `session/new` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// The session's working directory (absolute).
    pub cwd: PathBuf,
    /// MCP servers the session should have.
    pub mcp_servers: Vec<Value>,
    /// More workspace roots (absolute; accepted, but the tools stay confined to `cwd`).
    #[serde(default)]
    pub additional_directories: Vec<PathBuf>,
}

/// `session/new` result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// The new session's id.
    pub session_id: String,
    /// Its modes, when the agent has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
    /// Its configuration options (the mode as a select), when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_options: Option<Vec<SessionConfigOption>>,
}

/// One configuration option of a session: a select (the only kind this agent offers).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionConfigOption {
    /// Its id (`mode`).
    pub id: String,
    /// Its label.
    pub name: String,
    /// What it is for (`mode`, `model`, `thought_level`).
    pub category: String,
    /// Always `select`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The value in force.
    pub current_value: String,
    /// The values to choose from.
    pub options: Vec<SessionConfigSelectOption>,
}

/// One value of a select.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionConfigSelectOption {
    /// The value.
    pub value: String,
    /// Its label.
    pub name: String,
}

/// `session/set_config_option` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionConfigOptionRequest {
    /// The session.
    pub session_id: String,
    /// The option.
    pub config_id: String,
    /// The value (a select's value id).
    pub value: Value,
}

/// `session/set_config_option` result: every option with its value now.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionConfigOptionResponse {
    /// The options.
    pub config_options: Vec<SessionConfigOption>,
}

impl SessionModeState {
    /// The modes as the `mode` select of `configOptions` (the protocol's successor of `modes`).
    pub fn as_config_options(&self) -> Vec<SessionConfigOption> {
        vec![SessionConfigOption {
            id: MODE_OPTION.to_owned(),
            name: "Mode".to_owned(),
            category: "mode".to_owned(),
            kind: "select".to_owned(),
            current_value: self.current_mode_id.clone(),
            options: self
                .available_modes
                .iter()
                .map(|m| SessionConfigSelectOption {
                    value: m.id.clone(),
                    name: m.name.clone(),
                })
                .collect(),
        }]
    }
}

/// The id of the mode select in `configOptions`.
pub const MODE_OPTION: &str = "mode";
/// The id of the model select in `configOptions`.
pub const MODEL_OPTION: &str = "model";
/// The id of the thought-level select in `configOptions`.
pub const THOUGHT_OPTION: &str = "thought_level";
/// The thought level that sends no reasoning effort (the model's own default).
pub const DEFAULT_THOUGHT: &str = "default";

/// `session/set_model` params (the protocol's older model switch; `configOptions` replaced it).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModelRequest {
    /// The session.
    pub session_id: String,
    /// The model.
    pub model_id: String,
}

/// `session/load` and `session/resume` params (the same fields).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionRequest {
    /// The session to open.
    pub session_id: String,
    /// Its working directory (must be the one it was created in).
    pub cwd: PathBuf,
    /// MCP servers the session should have (`session/resume` may leave them out).
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
    /// More workspace roots (absolute; accepted, but the tools stay confined to `cwd`).
    #[serde(default)]
    pub additional_directories: Vec<PathBuf>,
}

/// `session/load` and `session/resume` result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionResponse {
    /// Its modes, when the agent has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
    /// Its configuration options, when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_options: Option<Vec<SessionConfigOption>>,
}

/// The modes of a session and the current one.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModeState {
    /// The current mode.
    pub current_mode_id: String,
    /// Every mode.
    pub available_modes: Vec<SessionMode>,
}

/// One mode.
#[derive(Debug, Clone, Serialize)]
pub struct SessionMode {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `session/set_mode` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModeRequest {
    /// The session.
    pub session_id: String,
    /// The mode to run.
    pub mode_id: String,
}

/// `session/prompt` params; the blocks stay JSON until [`crate::acp::server::prompt_text`]
/// reads them (an unsupported kind is refused with a message, not a parse error).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// The content blocks.
    pub prompt: Vec<Value>,
}

/// `session/prompt` result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// Why the turn ended.
    pub stop_reason: StopReason,
}

/// Why a prompt's turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered.
    EndTurn,
    /// The model ran out of output tokens.
    MaxTokens,
    /// The step limit (`maxSteps`).
    MaxTurnRequests,
    /// Cancelled (by `session/cancel`, or the client going away).
    Cancelled,
}

/// `session/cancel` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose prompt to cancel.
    pub session_id: String,
}

/// `session/update` params.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotification {
    /// The session.
    pub session_id: String,
    /// What happened.
    pub update: SessionUpdate,
}

/// A session's cumulative cost (ACP `Cost`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    /// The amount.
    pub amount: f64,
    /// ISO 4217 currency code: always `USD` (prices are US dollars).
    pub currency: String,
}

impl Cost {
    /// `amount` US dollars.
    pub fn usd(amount: f64) -> Self {
        Cost {
            amount,
            currency: "USD".to_owned(),
        }
    }
}

/// One update of a session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    /// The user's message (replays only).
    UserMessageChunk {
        /// The text.
        content: ContentBlock,
    },
    /// A piece of the agent's answer.
    AgentMessageChunk {
        /// The text.
        content: ContentBlock,
    },
    /// A piece of the model's reasoning.
    AgentThoughtChunk {
        /// The text.
        content: ContentBlock,
    },
    /// How full the model's context window is after the latest answer, and what the session
    /// cost so far.
    UsageUpdate {
        /// Tokens in context: the latest request's input and its answer's output.
        used: u64,
        /// The window.
        size: u64,
        /// The session's cumulative cost, when the `llm` entry's `prices` price its models.
        #[serde(skip_serializing_if = "Option::is_none")]
        cost: Option<Cost>,
    },
    /// The slash commands the session accepts (sent after new, load and resume).
    #[serde(rename_all = "camelCase")]
    AvailableCommandsUpdate {
        /// The commands.
        available_commands: Vec<AvailableCommand>,
    },
    /// The session's title (from its first prompt).
    SessionInfoUpdate {
        /// The title.
        title: String,
    },
    /// A tool call started.
    ToolCall(ToolCall),
    /// A tool call ended.
    ToolCallUpdate(ToolCallUpdate),
    /// The agent's plan.
    Plan {
        /// The entries, in order.
        entries: Vec<PlanEntry>,
    },
}

/// A slash command a client may offer (typed as `/name input` in a prompt).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AvailableCommand {
    /// The name, without the slash.
    pub name: String,
    /// What it does.
    pub description: String,
    /// What may follow the name, when anything may.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<CommandInput>,
}

/// A command's free-text input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandInput {
    /// What to type (`[MODE | revoke N]`).
    pub hint: String,
}

/// A content block the agent sends: its own text, or a block of the user's prompt replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A block of a prompt, as the client sent it (checked by [`crate::acp::server::prompt_text`]
    /// when it arrived, logged with the user's message), replayed by `session/load`.
    #[serde(untagged)]
    Sent(serde_json::Value),
    /// A block of an MCP tool's result, mapped to the protocol's fields (see
    /// [`crate::session::mcp_content::acp_blocks`]).
    #[serde(untagged)]
    Mcp(serde_json::Value),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

/// A tool call as announced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Its id (the model's call id).
    pub tool_call_id: String,
    /// One line for people.
    pub title: String,
    /// What kind of action (omitted for `other`, the protocol's default).
    #[serde(skip_serializing_if = "ToolKind::is_other")]
    pub kind: ToolKind,
    /// Always `in_progress` when announced.
    pub status: ToolCallStatus,
    /// The card.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolCallContent>,
    /// Files it touches.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<ToolCallLocation>,
    /// The arguments.
    pub raw_input: Value,
    /// Extension data (Zed's `terminal_info`).
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// What changed about a tool call: its status and card (`session/update`), or its title and
/// input (the call a permission question is about).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The call.
    pub tool_call_id: String,
    /// A new title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A new status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// A new card (replaces the call's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
    /// The arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// Extension data (Zed's `terminal_output` and `terminal_exit`).
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// The protocol's tool kinds we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads.
    Read,
    /// Edits files.
    Edit,
    /// Runs a command.
    Execute,
    /// Searches.
    Search,
    /// Anything else.
    Other,
}

impl ToolKind {
    fn is_other(&self) -> bool {
        *self == ToolKind::Other
    }
}

/// A tool call's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Not running yet: awaiting the user's approval.
    Pending,
    /// Running.
    InProgress,
    /// Succeeded.
    Completed,
    /// Failed (or was denied).
    Failed,
}

/// A piece of a tool call's card.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent {
    /// A content block.
    Content {
        /// The block.
        content: ContentBlock,
    },
    /// A file change.
    Diff {
        /// The file (absolute).
        path: PathBuf,
        /// The replaced text; absent for a new file.
        #[serde(rename = "oldText", skip_serializing_if = "Option::is_none")]
        old_text: Option<String>,
        /// The new text.
        #[serde(rename = "newText")]
        new_text: String,
    },
    /// A terminal the client shows (Zed's `_meta` terminal extension).
    Terminal {
        /// Its id (the call id).
        #[serde(rename = "terminalId")]
        terminal_id: String,
    },
}

impl ToolCallContent {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolCallContent::Content {
            content: ContentBlock::text(text),
        }
    }
}

/// A file (and line) a tool call touches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallLocation {
    /// The file (absolute).
    pub path: PathBuf,
    /// A 1-based line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// A plan entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEntry {
    /// What to do.
    pub content: String,
    /// Always `medium` (the plan tool has no priorities).
    pub priority: PlanEntryPriority,
    /// Its state.
    pub status: PlanEntryStatus,
}

/// A plan entry's priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryPriority {
    /// The only one used.
    Medium,
}

/// A plan entry's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryStatus {
    /// Not started.
    Pending,
    /// Being done.
    InProgress,
    /// Done.
    Completed,
}

/// `session/request_permission` params.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionRequest {
    /// The session.
    pub session_id: String,
    /// The call it is about.
    pub tool_call: ToolCallUpdate,
    /// The choices.
    pub options: Vec<PermissionOption>,
}

/// One choice of a permission question.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// Its id (what the answer names).
    pub option_id: String,
    /// Its label.
    pub name: String,
    /// `allow_once` or `reject_once`.
    pub kind: String,
}

/// `session/request_permission` result.
#[derive(Debug, Clone, Deserialize)]
pub struct RequestPermissionResponse {
    /// The answer.
    pub outcome: RequestPermissionOutcome,
}

/// A permission answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RequestPermissionOutcome {
    /// The prompt was cancelled before the user answered.
    Cancelled,
    /// The user chose an option.
    #[serde(rename_all = "camelCase")]
    Selected {
        /// Which.
        option_id: String,
    },
}
