//! Tool definitions, calls and results.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use cordis_code_runtime::Concurrency;
use cordis_schema::{ScopeKey, ToolSchema};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::arguments::ArgumentSchema;
use crate::error::RegisterError;

/// What a handler learns about the call besides its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallContext {
    /// The call id the model (or loop) gave.
    pub call_id: String,
    /// The scope the call was dispatched for; `None` for a global call.
    pub scope: Option<ScopeKey>,
    /// What the approval stage cleared the call for: a call that ran without a question is
    /// [`Clearance::ReadOnly`], and a tool that can confine itself (a command's sandbox) must.
    pub clearance: Clearance,
}

/// What an approved call may do beyond what its arguments show.
///
/// A person who approves a call sees its arguments (a command line, a diff), not every file a
/// program may write behind an option nobody parsed (`git diff --output=FILE`). So a call that
/// ran without a question (an allow rule, a grant, the permission mode) is cleared read-only, and
/// a tool whose writes are not all in its arguments must then run so that it cannot write:
/// `bash` runs in a read-only sandbox, a WebAssembly guest gets a read-only workspace. Tools
/// whose arguments are the whole write (`write_file`, `edit_file`: the diff a person would be
/// shown, logged) write what they say; tools that cannot confine themselves (MCP servers,
/// dylibs) are never confined by the workspace, so no mode runs them without a question unless
/// a rule names them. Only a person's yes, or a rule that says in so many words that it may
/// write, clears a call fully.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Clearance {
    /// Approved as a person saw it, or by a rule that says it may write: it may do what its
    /// tool does. Also every call of a registry without an approval stage.
    #[default]
    Full,
    /// Ran without a question: a tool that can confine itself writes nothing.
    ReadOnly,
}

impl Clearance {
    /// The word logs and messages use: `full` or `read-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Clearance::Full => "full",
            Clearance::ReadOnly => "read-only",
        }
    }
}

/// A successful tool output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The content returned to the model.
    pub content: serde_json::Value,
}

impl ToolOutput {
    /// An output with `content`.
    pub fn new(content: impl Into<serde_json::Value>) -> Self {
        ToolOutput {
            content: content.into(),
        }
    }
}

/// A tool's async handler: arguments and call context in, output or an error message out.
pub type ToolHandler = Arc<
    dyn Fn(serde_json::Value, ToolCallContext) -> BoxFuture<'static, Result<ToolOutput, String>>
        + Send
        + Sync,
>;

/// What a tool's calls can change: the one statement of it, declared by the tool's owner and
/// read from the registry by approvals, presenters and Code Mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// Reads (files, state) and changes nothing.
    Read,
    /// Changes only the session's own state (a plan, a todo list).
    State,
    /// Acts only through other tool calls, each of which passes the pipeline itself.
    Dispatch,
    /// Changes files.
    Edit,
    /// Runs commands.
    Execute,
    /// Reaches the network.
    Network,
    /// Not declared: the tool may do anything (third-party tools that say nothing).
    Unknown,
}

impl Effect {
    /// Every effect, in declaration order.
    pub const ALL: [Effect; 7] = [
        Effect::Read,
        Effect::State,
        Effect::Dispatch,
        Effect::Edit,
        Effect::Execute,
        Effect::Network,
        Effect::Unknown,
    ];

    /// True when calls change nothing outside the session (read, state, dispatch): such calls
    /// never ask.
    pub fn is_harmless(self) -> bool {
        matches!(self, Effect::Read | Effect::State | Effect::Dispatch)
    }

    /// The word configuration and logs use (`read`, `edit`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::State => "state",
            Effect::Dispatch => "dispatch",
            Effect::Edit => "edit",
            Effect::Execute => "execute",
            Effect::Network => "network",
            Effect::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool: its schema, its handler, an optional timeout, its concurrency class, its effect
/// class and an optional output schema.
#[derive(Clone)]
pub struct ToolDefinition {
    /// The model-facing schema.
    pub schema: ToolSchema,
    /// Runs a call.
    pub handler: ToolHandler,
    /// Fails a call that runs longer.
    pub timeout: Option<Duration>,
    /// Whether calls may overlap: read-only calls may run together, mutating ones run alone in
    /// submission order (in the native loop and inside `run_code` alike). Default: mutating.
    pub concurrency: Concurrency,
    /// The JSON Schema of a successful output's content, if the tool declares one (the Code Mode
    /// SDK types a call's result with it; `unknown` without).
    pub output_schema: Option<serde_json::Value>,
    /// What its calls can change. Default: [`Effect::Unknown`].
    pub effect: Effect,
    /// True when its effects cannot leave the workspace (the file tools' `RESOLVE_BENEATH`, a
    /// command's sandbox without network): the `auto` permission mode runs such calls without
    /// asking. Default: false.
    pub confined: bool,
}

impl fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("schema", &self.schema)
            .field("timeout", &self.timeout)
            .field("concurrency", &self.concurrency)
            .field("output_schema", &self.output_schema)
            .field("effect", &self.effect)
            .field("confined", &self.confined)
            .finish_non_exhaustive()
    }
}

impl ToolDefinition {
    /// A definition from a schema and an async function.
    pub fn new<F, Fut>(schema: ToolSchema, handler: F) -> Self
    where
        F: Fn(serde_json::Value, ToolCallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, String>> + Send + 'static,
    {
        ToolDefinition {
            schema,
            handler: Arc::new(move |args, cx| Box::pin(handler(args, cx))),
            timeout: None,
            concurrency: Concurrency::Mutating,
            output_schema: None,
            effect: Effect::Unknown,
            confined: false,
        }
    }

    /// Marks the tool read-only ([`Effect::Read`]): its calls change nothing and may overlap
    /// with other read-only calls.
    pub fn read_only(mut self) -> Self {
        self.concurrency = Concurrency::ReadOnly;
        self.effect = Effect::Read;
        self
    }

    /// Declares what the tool's calls can change ([`Effect::Read`] also makes it read-only).
    pub fn with_effect(mut self, effect: Effect) -> Self {
        if effect == Effect::Read {
            return self.read_only();
        }
        self.effect = effect;
        self
    }

    /// Declares that the tool's effects cannot leave the workspace.
    pub fn confined(mut self) -> Self {
        self.confined = true;
        self
    }

    /// Declares the JSON Schema of the tool's output content.
    pub fn with_output_schema(mut self, schema: serde_json::Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The tool name.
    pub fn name(&self) -> &str {
        &self.schema.name
    }

    /// Checks everything registration checks except duplicates: the name, the parameters
    /// schema (an object schema that compiles), and the timeout. Lets a plugin check a whole
    /// list before registering any of it.
    ///
    /// # Errors
    /// A [`RegisterError`] for a name [`check_tool_name`] refuses, a parameters value that is not
    /// a valid `"type": "object"` JSON Schema, or a zero timeout.
    pub fn validate(&self) -> Result<(), RegisterError> {
        self.compile().map(drop)
    }

    /// [`Self::validate`], keeping the compiled schema (registration compiles it only here).
    pub(crate) fn compile(&self) -> Result<ArgumentSchema, RegisterError> {
        let name = self.name();
        check_tool_name(name)?;
        let is_object_schema = self
            .schema
            .parameters
            .as_object()
            .is_some_and(|o| o.get("type").and_then(|t| t.as_str()) == Some("object"));
        if !is_object_schema {
            return Err(RegisterError::InvalidParameters {
                name: name.to_owned(),
            });
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(RegisterError::ZeroTimeout {
                name: name.to_owned(),
            });
        }
        ArgumentSchema::compile_shared(name, &self.schema.parameters)
    }
}

/// The longest tool name, in bytes.
pub const MAX_TOOL_NAME: usize = 128;

/// The one tool-name rule, for built-in, declared and dylib tools alike: 1 to
/// [`MAX_TOOL_NAME`] bytes without whitespace or control characters, and not a reserved name
/// (`run_code`, `<unlisted-tools>`).
///
/// # Errors
/// The [`RegisterError`] naming the broken rule.
pub fn check_tool_name(name: &str) -> Result<(), RegisterError> {
    if name.is_empty() {
        return Err(RegisterError::EmptyName);
    }
    if name.len() > MAX_TOOL_NAME || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(RegisterError::InvalidName {
            name: name.to_owned(),
        });
    }
    if name == crate::RUN_CODE {
        return Err(RegisterError::ReservedRunCode);
    }
    if name == cordis_system_prompt::TOOL_ORDER_REST {
        return Err(RegisterError::ReservedRest);
    }
    Ok(())
}

/// One tool call to execute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// Parsed arguments (or the raw string when unparsable).
    pub arguments: serde_json::Value,
}

/// Error codes of a failed call's result.
pub mod codes {
    /// No visible tool of that name (unknown, or restricted away for this scope).
    pub const UNKNOWN_TOOL: &str = "UNKNOWN_TOOL";
    /// The arguments are not a JSON object matching the tool's parameters schema.
    pub const INVALID_ARGUMENTS: &str = "INVALID_ARGUMENTS";
    /// Denied by `tools/pre-execute` or a guard.
    pub const DENIED: &str = "DENIED";
    /// The handler returned an error.
    pub const TOOL_ERROR: &str = "TOOL_ERROR";
    /// The handler panicked.
    pub const TOOL_PANICKED: &str = "TOOL_PANICKED";
    /// The handler did not finish within its timeout.
    pub const TOOL_TIMEOUT: &str = "TOOL_TIMEOUT";
    /// A pipeline listener panicked.
    pub const INTERNAL: &str = "INTERNAL";
}

/// The result of one call; failures are results with `is_error`, never a bare `Err`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// Output content, or the error message as a JSON string.
    pub content: serde_json::Value,
    /// True for failures.
    pub is_error: bool,
    /// One of [`codes`] for failures.
    pub code: Option<String>,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(call: &ToolCall, content: serde_json::Value) -> Self {
        ToolResult {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            content,
            is_error: false,
            code: None,
        }
    }

    /// A failed result with `code` and `message`.
    pub fn error(call: &ToolCall, code: &str, message: impl Into<String>) -> Self {
        ToolResult {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            content: serde_json::Value::String(message.into()),
            is_error: true,
            code: Some(code.to_owned()),
        }
    }
}
