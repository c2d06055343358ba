//! The `mcp` plugin: one entry connects one MCP server and registers its tools.
//!
//! # What an entry does
//! 1. Checks its config and claims its `server` name (unique among live `mcp` entries under the
//!    same parent scope: two top-level entries, or two entries of one ACP session).
//! 2. Starts the server (stdio: a child process in its own process group, with a scrubbed
//!    environment, see [`PASSED_ENV`]), runs the MCP handshake, lists every page of
//!    `tools/list`, and registers the whole set with `register_scheduled` from the entry's own
//!    context, as `mcp__<server>__<tool>` ([`public_name`]). Registration is all-or-nothing: a
//!    conflict disposes what was registered of that set. Each list the server says may change
//!    (`listChanged`) is then listed again until an answer confirms the one taken (at most
//!    [`MAX_CONFIRM_LISTS`] times), so a server whose list changes right after a client
//!    connects boots with its final list under every seed, not whichever list the wall clock
//!    let the boot see. A stdio server that fails to start has the last lines of its stderr in
//!    the reason ([`MAX_STDERR_TAIL_LINES`], [`MAX_STDERR_TAIL_BYTES`]).
//! 3. Only then is the entry active. With `failOnStartupError: false` (the default) a server that
//!    is down makes the entry *pending with the reason* ([`cordis_runtime::Deferred`]): the
//!    runtime applies it again after the reconnect policy's backoff, and after `maxAttempts`
//!    (or at once when reconnecting is disabled) the entry fails. With `true` the first failure
//!    fails the entry.
//! 4. A task owned by the entry re-syncs on `notifications/tools/list_changed` (a failing fetch
//!    keeps the previous set; a set that cannot be registered is rolled back and the previous one
//!    restored) and reconnects after a crash (exponential backoff; a connection that stayed up
//!    `maxDelayMs` resets the budget; after `maxAttempts` the tools are unregistered).
//! 5. Disposing the entry aborts that task, unregisters the tools, and kills the server's
//!    process group at once (a server that ignores shutdown is not left behind).
//!
//! # Calls
//! The raw name goes on the wire, with a `progressToken`. A JSON-RPC error and an
//! `isError: true` result are both a failed call carrying the server's text. A call that goes
//! `callTimeoutMs` without a result or a `notifications/progress` fails; each progress report
//! starts that wait again, and it pauses while the server asks the user (elicitation), up to
//! `maxCallMs` (the registry's timeout, `TOOL_TIMEOUT`). Either
//! way, and when the caller drops the call, the server gets `notifications/cancelled`.
//! Progress is emitted as [`McpProgress`] (`mcp/progress`) for front ends. A successful result
//! is `{"content": [...blocks], "structuredContent": …}` (the latter when the server sent one);
//! image and audio blocks stay (at most [`MAX_RESULT_MEDIA`], each at most
//! [`MAX_MEDIA_CHARS`]: the model adapter sends them to a model that takes them and names them
//! to others); those past the bounds become a text block naming what was dropped. The text
//! of a result (and of a failed call) reaches the model and the session log cut to
//! `maxResultText` (default [`cordis_tools::MAX_RESULT_TEXT`], 64 KiB): its head and tail
//! around the marker saying how much was cut, as a command's output is (the `result` module).
//! An answer over `maxMessageBytes` is never held: its request fails at once naming the limit.
//!
//! # What the client declares
//! `roots` (answered with the workspace root as a `file://` URI, see [`file_uri`]),
//! `elicitation` in the modes the session's front end shows ([`ElicitationModes`], provided
//! before the composition boots; answered through the [`Elicitation`] service front ends
//! provide, declined with a traced reason without one), and `sampling` unless the entry
//! turns it off (answered through the composition's model after the user allowed it, see the
//! `sampling` module).
//!
//! # Authorization
//! An HTTP entry whose server answers `401` uses OAuth ([`auth`]): the entry's bearer token
//! from the user's grants store, renewed as needed; without a usable grant the entry is
//! pending with "run `cordis mcp login SERVER`" and waits for the stored grant to change.
//!
//! # Server instructions
//! A server's `instructions` become a section of the system prompt, one per entry, by entry
//! id whatever order the servers connect in, cut to [`MAX_INSTRUCTIONS_BYTES`] with a note
//! (see the `instructions` module); being in the prompt, they are in the digest. A tool the
//! server says can only be called as a task (`execution.taskSupport: "required"`) is left out
//! with a warning naming it and its server.
//!
//! # Effects and the tool filter
//! Without `trustAnnotations` every MCP tool is `unknown` (it asks). With it, the server's
//! hints set the class (see `effect_of`): `readOnlyHint` → `read`; `destructiveHint: false` in
//! an open world → `network`; anything else → `unknown`. `tools: {allow, deny}` picks the
//! server's tools by raw name ([`ToolFilter`]).
//!
//! # Prompts and resources
//! A server that declares them has its prompts, resources and resource templates listed at
//! connect and again on their `list_changed`, canonically ordered and bounded ([`Catalog`], [`MAX_CATALOG_ITEMS`]),
//! offered to front ends through [`servers`] ([`McpServer`]: `prompts()`, `get_prompt`,
//! `resources()`, `read_resource`); the model reads one through the server's own read-only
//! tool `mcp__<server>__read_resource` ([`READ_RESOURCE`]). A prompt's command name
//! (`mcp__<server>__<prompt>`, [`prompt_command`]) is a claim like a tool name: two entries
//! whose prompts make one name (`a`'s `b__c`, `a__b`'s `c`) both report the conflict, and
//! neither offers the command.

pub mod auth;
mod bridge;
mod catalog;
mod claims;
mod config;
mod depth;
mod directory;
mod elicit;
mod error;
mod handler;
mod http;
mod instructions;
mod link;
mod naming;
mod output;
mod plugin;
mod progress;
mod result;
mod roots;
mod sampling;
mod stdio;

use std::sync::{Mutex, MutexGuard};

pub use bridge::{
    MAX_CONFIRM_LISTS, MAX_DESCRIPTION_BYTES, MAX_SCHEMA_BYTES, PASSED_ENV, TRACE_CATALOG,
    TRACE_SYNC,
};
pub use catalog::{
    Catalog, MAX_CATALOG_ITEMS, MAX_ITEM_BYTES, MAX_PROMPT_ARGUMENTS, McpPromptsChanged,
    PromptArgumentInfo, PromptInfo, PromptMessages, ResourceContent, ResourceInfo,
    ResourceTemplateInfo,
};
pub use claims::{PROMPT_CLAIM, SERVER_CLAIM, prompt_command_claim, server_claim};
pub use config::{
    DEFAULT_MAX_CALL_MS, MAX_SERVER_NAME, McpConfig, Reconnect, ToolFilter, TransportKind,
};
pub use depth::{MAX_MESSAGE_DEPTH, MAX_SCHEMA_DEPTH};
pub use directory::{McpServer, server_names, servers};
pub use elicit::{
    Elicitation, ElicitationAnswer, ElicitationModes, ElicitationRequest, ElicitationUrl, Elicitor,
    FormChoice, FormField, MAX_ELICITATION_MESSAGE, MAX_FORM_CHOICES, MAX_FORM_PROPERTIES,
    McpPageDone, TRACE_ELICITATION, check_answer, check_value, fields,
};
pub use error::McpError;
pub use instructions::{INSTRUCTIONS_ORDER, MAX_INSTRUCTIONS_BYTES};
pub use link::{
    MAX_ANSWER_ITEMS, MAX_MEDIA_CHARS, MAX_RESOURCE_TEXT, MAX_RESULT_MEDIA, MAX_URI_BYTES,
    READ_RESOURCE,
};
pub use naming::{MAX_PUBLIC_NAME, prompt_command, public_name};
pub use plugin::McpPlugin;
pub use progress::{MAX_PROGRESS_MESSAGE, McpProgress, cancels_sent};
pub use roots::file_uri;
pub use sampling::{
    MAX_SAMPLING_ANSWER, MAX_SAMPLING_BYTES, MAX_SAMPLING_MESSAGES, MAX_SAMPLING_TOKENS,
    TRACE_SAMPLING,
};
pub use stdio::{MAX_STDERR_TAIL_BYTES, MAX_STDERR_TAIL_LINES};

/// Locks `m`, going on with its data when a panicking thread poisoned it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
