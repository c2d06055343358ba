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
//! `roots` (answered with the workspace root as a `file://` URI, see [`file_uri`]) and form
//! `elicitation` (answered through the [`Elicitation`] service front ends provide, declined
//! with a traced reason without one), and `sampling` unless the entry turns it off (answered
//! through the composition's model after the user allowed it, see the `sampling` module).
//!
//! # Authorization
//! An HTTP entry whose server answers `401` uses OAuth ([`auth`]): the entry's bearer token
//! from the user's grants store, renewed as needed; without a usable grant the entry is
//! pending with "run `cordis mcp login SERVER`" and waits for the stored grant to change.
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
mod catalog;
mod config;
mod depth;
mod directory;
mod elicit;
mod error;
mod http;
mod naming;
mod output;
mod progress;
mod result;
mod roots;
mod sampling;
mod stdio;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cordis_runtime::{BoxError, Claim, Context, Deferred, EffectHandle, Inject, Plugin, ScopeId};
use cordis_tools::{ToolCallContext, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    GetPromptRequestParams, Implementation, PaginatedRequestParams, PingRequest,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, RootsCapabilities,
    ServerResult, Tool,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, RunningService,
    ServiceError,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use catalog::{
    Catalog, MAX_CATALOG_ITEMS, MAX_ITEM_BYTES, MAX_PROMPT_ARGUMENTS, McpPromptsChanged,
    PromptArgumentInfo, PromptInfo, PromptMessages, ResourceContent, ResourceInfo,
    ResourceTemplateInfo,
};
pub use config::{
    DEFAULT_MAX_CALL_MS, MAX_SERVER_NAME, McpConfig, Reconnect, ToolFilter, TransportKind,
};
pub use depth::{MAX_MESSAGE_DEPTH, MAX_SCHEMA_DEPTH};
pub use directory::{McpServer, server_names, servers};
pub use elicit::{
    Elicitation, ElicitationAnswer, ElicitationRequest, ElicitationUrl, Elicitor, FormChoice,
    FormField, MAX_ELICITATION_MESSAGE, MAX_FORM_CHOICES, MAX_FORM_PROPERTIES, McpPageDone,
    TRACE_ELICITATION, check_answer, check_value, fields,
};
pub use error::McpError;
pub use naming::{MAX_PUBLIC_NAME, public_name};
pub use progress::{MAX_PROGRESS_MESSAGE, McpProgress};
pub use roots::file_uri;
pub use sampling::{
    MAX_SAMPLING_ANSWER, MAX_SAMPLING_BYTES, MAX_SAMPLING_MESSAGES, MAX_SAMPLING_TOKENS,
    TRACE_SAMPLING,
};
pub use stdio::{MAX_STDERR_TAIL_BYTES, MAX_STDERR_TAIL_LINES};

/// The host variables a stdio server inherits; everything else (API keys, tokens) is dropped
/// unless the entry's `env` sets it. Enough to find programs, a home, a locale and a terminal.
pub const PASSED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR",
    "TZ",
];

/// The trace kind of a re-sync after `notifications/tools/list_changed`.
pub const TRACE_SYNC: &str = "mcp-sync";

/// The trace kind of a prompts or resources re-list after its `list_changed` notification.
pub const TRACE_CATALOG: &str = "mcp-catalog";

/// The most pages one list follows (a server whose cursors never end is refused).
const MAX_PAGES: usize = 1_000;

/// How long a stdio server that failed to start may take to close its stderr after its
/// process group was killed (only a grandchild that left the group and kept the pipe open
/// takes this long; its stderr is then quoted as far as it was read).
const STDERR_WAIT: Duration = Duration::from_secs(2);

/// The most times a connect lists a changing list again before it keeps the last answer (the
/// supervisor follows later changes).
pub const MAX_CONFIRM_LISTS: usize = 4;

/// The raw name of the tool each server with resources gets: it reads one by URI.
pub const READ_RESOURCE: &str = "read_resource";

/// The `_meta` key marking the resource reader among a server's tools.
const READER_MARK: &str = "io.cordis/resource-reader";

/// The longest URI `resources/read` is sent.
pub const MAX_URI_BYTES: usize = 8 << 10;

/// The most text of one `read_resource` call passed to the model (the rest is cut, saying so).
pub const MAX_RESOURCE_TEXT: usize = 256 << 10;

/// The most messages a `prompts/get` answer, or contents a `resources/read` answer, may hold.
pub const MAX_ANSWER_ITEMS: usize = 1_000;

/// The `mcp` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpPlugin;

impl Plugin for McpPlugin {
    type Config = McpConfig;

    fn name(&self) -> &str {
        "mcp"
    }

    fn inject(&self) -> &[Inject] {
        ToolRegistry::INJECT
    }

    fn claims(&self, config: &McpConfig) -> Vec<Claim> {
        vec![server_claim(&config.server, None)]
    }

    /// Its tools are whatever the server lists.
    fn open_claims(&self, _config: &McpConfig) -> Option<Vec<&'static str>> {
        Some(vec!["tool"])
    }

    /// What it would start anew ([`Plugin::starts`]), and what a changed entry would let the
    /// server do or be told ([`McpConfig::widened_by`]).
    fn widens(&self, old: Option<&McpConfig>, new: Option<&McpConfig>) -> Vec<String> {
        let Some(new) = new else {
            return Vec::new();
        };
        let mut out = cordis_runtime::started_anew(old.map(|o| self.starts(o)), self.starts(new));
        if let Some(old) = old {
            out.extend(old.widened_by(new));
        }
        out
    }

    /// The server process it runs (with its directory and the variables it sets), or the
    /// endpoint it connects to.
    fn starts(&self, config: &McpConfig) -> Vec<String> {
        match config.transport {
            TransportKind::Stdio => {
                let command = config.command.as_deref().unwrap_or_default();
                let mut line = format!(
                    "runs the command {}",
                    cordis_runtime::shell_line(
                        std::iter::once(command).chain(config.args.iter().map(String::as_str))
                    )
                );
                if let Some(cwd) = &config.cwd {
                    line.push_str(&format!(" in {}", cwd.display()));
                }
                if !config.env.is_empty() {
                    let names: Vec<&str> = config.env.keys().map(String::as_str).collect();
                    line.push_str(&format!(" (setting {})", names.join(", ")));
                }
                vec![line]
            }
            TransportKind::Http => vec![format!(
                "connects to {}",
                config.url.as_deref().unwrap_or_default()
            )],
        }
    }

    async fn apply(&self, ctx: Context, config: &McpConfig) -> Result<(), BoxError> {
        config.check()?;
        // Two entries with one server name both report the conflict (their tools, having the
        // same public names, are contested in the registry too), whichever started first.
        let _ = ctx.claim(server_claim(&config.server, ctx.parent_id()));
        let registry = ctx.require::<ToolRegistry>()?;
        let auth = authorizer(config);
        // A server that needed a login waits for the stored grant to change, without being
        // asked again.
        if let Some(auth) = &auth
            && let Some(reason) = auth.still_waiting().await
        {
            return Err(Deferred::new(reason, auth::LOGIN_POLL).into());
        }
        let bridge = Arc::new(Bridge {
            auth,
            config: config.clone(),
            ctx: ctx.clone(),
            registry,
            link: Arc::new(Link {
                server: config.server.clone(),
                peer: Mutex::new(None),
                process: Mutex::new(Process::default()),
                suspect: tokio::sync::Notify::new(),
                calls: Arc::default(),
                catalog: Mutex::new(Catalog::default()),
                has_resources: AtomicBool::new(false),
                call_timeout: config.call_timeout(),
                asking: tokio::sync::watch::Sender::new(0),
                max_result_text: config.max_result_text,
                ctx: ctx.clone(),
                prompt_claims: Mutex::new(Vec::new()),
            }),
            current: Mutex::new(Generation::default()),
        });
        directory::enlist(&ctx, &bridge.link);
        // The catalog is part of what a report digests (`cordis check`, `stress`, `permute`).
        let offering = bridge.link.clone();
        let _ = ctx.on_waterfall::<cordis_runtime::Offered, _, _>(
            cordis_runtime::Position::Back,
            move |mut offered, next| {
                let catalog = serde_json::to_string(&*lock(&offering.catalog)).unwrap_or_default();
                offered.insert(format!("mcp/{}", offering.server), catalog);
                next.run(offered)
            },
        );
        let link = bridge.link.clone();
        // Synchronous, so the process group is gone when dispose returns, whatever the server
        // does with a closed stdin or SIGTERM.
        let _ = ctx.effect("mcp server process", move || link.dispose());
        match bridge.start().await {
            Ok(connection) => {
                let _ = ctx.spawn(bridge.supervise(connection));
                Ok(())
            }
            Err(error) if bridge.auth.as_ref().is_some_and(|a| a.blocked().is_some()) => {
                let reason = bridge.auth.as_ref().and_then(|a| a.blocked());
                tracing::warn!(server = %config.server, %error, "mcp server needs authorization; the entry is pending");
                Err(Deferred::new(reason.unwrap_or_default(), auth::LOGIN_POLL).into())
            }
            Err(error) if config.fail_on_startup_error => {
                Err(McpError::startup(&config.server, &error).into())
            }
            Err(error) => Err(retry_or_give_up(config, ctx.deferrals(), &error)),
        }
    }
}

/// The OAuth tokens of an entry that uses OAuth (none without a place to keep grants: the
/// server's `401` is then an error like any other).
fn authorizer(config: &McpConfig) -> Option<Arc<auth::Authorizer>> {
    if !config.uses_oauth() {
        return None;
    }
    let store = match config.oauth.store(&|name| std::env::var(name).ok()) {
        Ok(store) => store,
        Err(e) => {
            tracing::warn!(server = %config.server, error = %e, "OAuth is unavailable");
            return None;
        }
    };
    let client = auth::http_client().ok()?;
    let login_command = config
        .oauth
        .login_command
        .clone()
        .unwrap_or_else(|| format!("cordis mcp login {} [FILE]", config.server));
    let credentials = match (
        config.oauth.grant,
        &config.oauth.client_id,
        &config.oauth.client_secret,
    ) {
        (auth::GrantKind::ClientCredentials, Some(id), Some(secret)) => Some(auth::Credentials {
            id: id.clone(),
            secret: secret.clone(),
            scopes: config.oauth.scopes.clone(),
        }),
        _ => None,
    };
    Some(Arc::new(auth::Authorizer::new(
        &config.server,
        config.url.as_deref().unwrap_or_default(),
        login_command,
        credentials,
        store,
        client,
    )))
}

/// What a failed first connection makes of the entry when `failOnStartupError` is false:
/// pending with the reason and a retry after the policy's backoff, or failed once `failed`
/// earlier attempts in a row exhausted the budget (or reconnecting is disabled).
fn retry_or_give_up(config: &McpConfig, failed: u32, error: &McpError) -> BoxError {
    let policy = &config.reconnect;
    if !policy.enabled {
        return McpError::startup_without_retry(&config.server, error).into();
    }
    if failed >= policy.max_attempts {
        let gave_up = McpError::gave_up(&config.server, failed + 1, error);
        // Said at warn level like the retries before it: in `cordis run` the entry fails
        // after the boot, where no report shows it.
        tracing::warn!(server = %config.server, error = %gave_up, "mcp server unavailable; the entry failed");
        return gave_up.into();
    }
    let retry = failed + 1;
    let delay = policy.delay(retry);
    tracing::warn!(server = %config.server, %error, retry, "mcp server unavailable; the entry is pending and retries");
    Deferred::new(
        format!(
            "{error}; retry {retry} of {} in {} ms",
            policy.max_attempts,
            delay.as_millis()
        ),
        delay,
    )
    .into()
}

/// The claim of server name `server` among the entries under one parent scope (an ACP
/// session's servers live under the session's scope, so two sessions may reuse a name).
pub fn server_claim(server: &str, parent: Option<ScopeId>) -> Claim {
    Claim::new(SERVER_CLAIM, server).in_space(parent.map(|p| p.0))
}

/// The kind of claim an `mcp` entry makes on its `server` name.
pub const SERVER_CLAIM: &str = "mcp server";

/// The kind of claim an `mcp` entry makes on the command name of each prompt its server lists.
pub const PROMPT_CLAIM: &str = "prompt command";

/// The claim of the command `/mcp__<server>__<prompt>` ([`prompt_command`]) among the entries
/// under one parent scope: `a`'s prompt `b__c` and `a__b`'s prompt `c` claim one name, and both
/// entries report the conflict instead of one command silently hiding the other.
pub fn prompt_command_claim(server: &str, prompt: &str, parent: Option<ScopeId>) -> Claim {
    Claim::new(PROMPT_CLAIM, prompt_command(server, prompt)).in_space(parent.map(|p| p.0))
}

/// The command name of prompt `prompt` of `server`, without the slash: `mcp__<server>__<prompt>`
/// (the tools' naming).
pub fn prompt_command(server: &str, prompt: &str) -> String {
    format!("mcp__{server}__{prompt}")
}

/// The longest tool description taken from a server: it goes into every model request.
pub const MAX_DESCRIPTION_BYTES: usize = 16 << 10;

/// The largest tool parameters schema taken from a server, as compact JSON.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;

/// Refuses a tool whose description or schema is too large to send with every request (the
/// tool is left out with a warning, like a schema the registry refuses).
fn within_size(description: &str, parameters: &Value) -> Result<(), String> {
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(format!(
            "its description is {} bytes, over the {MAX_DESCRIPTION_BYTES}-byte limit",
            description.len()
        ));
    }
    let schema = serde_json::to_vec(parameters).map_or(usize::MAX, |b| b.len());
    if schema > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its input schema is {schema} bytes, over the {MAX_SCHEMA_BYTES}-byte limit"
        ));
    }
    Ok(())
}

/// The server process, and whether the entry is gone (then a process started meanwhile by a
/// reconnect still running on another thread is killed as soon as it is recorded).
#[derive(Debug, Default)]
struct Process {
    /// The group's id (its leader's pid).
    pgid: Option<u32>,
    disposed: bool,
}

/// What the tool handlers share: the live peer and the process to kill.
struct Link {
    server: String,
    peer: Mutex<Option<Peer<RoleClient>>>,
    /// The stdio server's process group while it may be running.
    process: Mutex<Process>,
    /// Signalled when a call failed in the transport: the supervisor pings the server and
    /// reconnects if it does not answer (an HTTP server that went away closes nothing).
    suspect: tokio::sync::Notify,
    /// Running calls by progress token (see [`progress`]).
    calls: Arc<progress::Calls>,
    /// The server's prompts and resources, canonically ordered.
    catalog: Mutex<Catalog>,
    /// Whether the connected server declared `resources` (then it gets `read_resource`).
    has_resources: AtomicBool,
    /// Bounds the wait for an answer without progress.
    call_timeout: Duration,
    /// How many elicitations of this server wait for the user (waits are paused meanwhile).
    asking: tokio::sync::watch::Sender<usize>,
    /// The most bytes of one result's text for the model and the log (`maxResultText`).
    max_result_text: usize,
    /// The entry's context: its prompt commands are claimed here.
    ctx: Context,
    /// The claims on the prompt commands of the current prompt list.
    prompt_claims: Mutex<Vec<EffectHandle>>,
}

impl Link {
    /// Claims the command name of each listed prompt ([`prompt_command_claim`]) in place of the
    /// previous list's: two entries whose prompts make one command name both report the
    /// conflict, and neither offers that command ([`McpServer::prompts`]).
    fn claim_prompt_commands(&self) {
        let names: Vec<String> = lock(&self.catalog)
            .prompts
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let parent = self.ctx.parent_id();
        let fresh: Vec<EffectHandle> = names
            .iter()
            .map(|name| {
                self.ctx
                    .claim(prompt_command_claim(&self.server, name, parent))
            })
            .collect();
        let old = std::mem::replace(&mut *lock(&self.prompt_claims), fresh);
        for handle in old {
            handle.dispose();
        }
    }

    /// Whether the command of prompt `name` is contested (another entry's prompt makes the
    /// same command name).
    fn prompt_contested(&self, name: &str) -> bool {
        self.ctx.is_contested(&prompt_command_claim(
            &self.server,
            name,
            self.ctx.parent_id(),
        ))
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        lock(&self.peer).clone()
    }

    /// Drops the peer and kills the process group, if any.
    fn kill(&self) {
        *lock(&self.peer) = None;
        kill_group(lock(&self.process).pgid.take());
    }

    /// [`Self::kill`], and any process recorded later too (the entry's dispose effect).
    fn dispose(&self) {
        lock(&self.process).disposed = true;
        self.kill();
    }

    /// Records a started server; kills it at once if the entry is already disposed.
    fn started(&self, pgid: Option<u32>) -> bool {
        let mut process = lock(&self.process);
        if process.disposed {
            drop(process);
            kill_group(pgid);
            return false;
        }
        process.pgid = pgid;
        true
    }

    /// The live peer, or the message saying there is none.
    fn connected(&self) -> Result<Peer<RoleClient>, String> {
        self.peer().ok_or_else(|| {
            format!(
                "mcp({}): the server is not connected (it is starting or reconnecting); try again later",
                self.server
            )
        })
    }

    /// The text of a failed request; a transport failure also makes the supervisor check the
    /// server.
    fn request_error(&self, e: ServiceError) -> String {
        match e {
            ServiceError::McpError(data) => data.message.to_string(),
            ServiceError::TransportSend(e) => {
                self.suspect.notify_one();
                let cause = innermost(&e);
                format!(
                    "mcp({}): the server cannot be reached ({cause}); checking whether it is still up",
                    self.server
                )
            }
            ServiceError::TransportClosed => {
                self.suspect.notify_one();
                format!(
                    "mcp({}): the connection to the server closed; reconnecting",
                    self.server
                )
            }
            ServiceError::Timeout { timeout } => format!(
                "mcp({}): no answer and no progress within {} ms (callTimeoutMs); the request was cancelled on the server",
                self.server,
                timeout.as_millis()
            ),
            other => format!("mcp({}): {other}", self.server),
        }
    }

    /// Sends `request` and waits for its answer: up to `callTimeoutMs` without a result or
    /// progress, each progress notification starting the wait again. A caller that stops
    /// waiting cancels it on the server. `call`, when given, names the call progress is
    /// reported for.
    async fn request(
        &self,
        peer: &Peer<RoleClient>,
        request: ClientRequest,
        call: Option<progress::Waiting>,
    ) -> Result<ServerResult, String> {
        let (tick, mut ticks) = mpsc::channel(1);
        let handle = {
            // Held until the request is recorded: see the `progress` module.
            let mut calls = self.calls.lock().await;
            let handle = peer
                .send_request_with_option(request, PeerRequestOptions::no_options())
                .await
                .map_err(|e| self.request_error(e))?;
            calls.insert(
                handle.progress_token.clone(),
                progress::Pending { tick, call },
            );
            handle
        };
        // Dropped before the answer (the wait ran out, the registry's ceiling, an aborted
        // turn): the server is told the request is cancelled.
        let mut guard = progress::CancelOnDrop {
            peer: peer.clone(),
            id: handle.id.clone(),
            token: handle.progress_token.clone(),
            calls: self.calls.clone(),
            armed: true,
        };
        let mut asking = self.asking.subscribe();
        let answer = handle.await_response();
        tokio::pin!(answer);
        let idle = tokio::time::sleep(self.call_timeout);
        tokio::pin!(idle);
        loop {
            tokio::select! {
                biased;
                answer = &mut answer => {
                    guard.armed = false;
                    return answer.map_err(|e| self.request_error(e));
                }
                Some(()) = ticks.recv() => {
                    idle.as_mut().reset(tokio::time::Instant::now() + self.call_timeout);
                }
                // An elicitation began or ended: the wait starts again when none is left.
                Ok(()) = asking.changed() => {
                    idle.as_mut().reset(tokio::time::Instant::now() + self.call_timeout);
                }
                () = &mut idle, if *asking.borrow() == 0 => {
                    return Err(self.request_error(ServiceError::Timeout { timeout: self.call_timeout }));
                }
            }
        }
    }

    /// Calls `raw` with `args`: the server's error text on failure, `{content, structuredContent?}`
    /// on success.
    async fn call(
        &self,
        raw: &str,
        args: Value,
        cx: ToolCallContext,
        output: Option<&output::OutputSchema>,
    ) -> Result<ToolOutput, String> {
        let peer = self.connected()?;
        let arguments = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let params: CallToolRequestParams =
            serde_json::from_value(json!({"name": raw, "arguments": arguments}))
                .map_err(|e| format!("mcp({}): cannot build the call: {e}", self.server))?;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let waiting = progress::Waiting {
            call_id: cx.call_id,
            scope: cx.scope,
            tool: raw.to_owned(),
            last: None,
        };
        let mut result = match self.request(&peer, request, Some(waiting)).await? {
            ServerResult::CallToolResult(result) => result,
            ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_) => {
                return Err(format!(
                    "Tool \"{raw}\" requires task-based execution or client input, which this bridge does not support"
                ));
            }
            // An empty `{}` result parses as the empty result: a call with no content.
            ServerResult::EmptyResult(_) => rmcp::model::CallToolResult::default(),
            _ => {
                return Err(format!(
                    "mcp({}): tools/call was answered with another kind of result",
                    self.server
                ));
            }
        };
        let mut images = 0;
        // Each block of rmcp's copy is dropped once converted: a large answer is not held twice.
        let content: Vec<Value> = std::mem::take(&mut result.content)
            .into_iter()
            .map(|block| media(block_value(block), &mut images))
            .collect();
        if result.is_error == Some(true) {
            let text: Vec<&str> = content
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            let text = if text.is_empty() {
                Value::Array(content.clone()).to_string()
            } else {
                text.join("\n")
            };
            return Err(result::bound_error(text, self.max_result_text));
        }
        if let Some(schema) = output {
            let Some(structured) = &result.structured_content else {
                return Err(format!(
                    "mcp({}): tool \"{raw}\" declares an outputSchema but its result has no structuredContent",
                    self.server
                ));
            };
            schema.check(structured).map_err(|why| {
                format!(
                    "mcp({}): the structuredContent of tool \"{raw}\" does not match its outputSchema: {why}",
                    self.server
                )
            })?;
        }
        let mut out = json!({ "content": content });
        if let Some(structured) = result.structured_content {
            out["structuredContent"] = structured;
        }
        if result::bound(&mut out, self.max_result_text) {
            tracing::debug!(server = %self.server, tool = raw, limit = self.max_result_text, "mcp tool result cut to maxResultText");
        }
        Ok(ToolOutput::new(out))
    }
}

impl Link {
    /// `prompts/get` of a listed prompt.
    async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<PromptMessages, McpError> {
        let error = |reason: String| McpError::Request {
            server: self.server.clone(),
            method: "prompts/get",
            reason,
        };
        let prompt = lock(&self.catalog)
            .prompts
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .ok_or_else(|| error(format!("the server lists no prompt {name:?}")))?;
        if let Some(missing) = prompt
            .arguments
            .iter()
            .find(|a| a.required && !arguments.contains_key(&a.name))
        {
            return Err(error(format!(
                "prompt {name:?} needs argument {:?}",
                missing.name
            )));
        }
        let peer = self.connected().map_err(error)?;
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = Some(
            arguments
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        );
        let request = ClientRequest::GetPromptRequest(rmcp::model::GetPromptRequest::new(params));
        let ServerResult::GetPromptResult(result) =
            self.request(&peer, request, None).await.map_err(error)?
        else {
            return Err(error(
                "the server answered with another kind of result".into(),
            ));
        };
        if result.messages.len() > MAX_ANSWER_ITEMS {
            return Err(error(format!(
                "{} messages, over the {MAX_ANSWER_ITEMS}-message limit",
                result.messages.len()
            )));
        }
        Ok(PromptMessages {
            description: result.description,
            messages: to_values(&result.messages),
        })
    }

    /// `resources/read` of `uri`.
    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContent>, McpError> {
        let error = |reason: String| McpError::Request {
            server: self.server.clone(),
            method: "resources/read",
            reason,
        };
        if uri.len() > MAX_URI_BYTES {
            return Err(error(format!(
                "the URI is {} bytes, over the {MAX_URI_BYTES}-byte limit",
                uri.len()
            )));
        }
        let peer = self.connected().map_err(error)?;
        let request = ClientRequest::ReadResourceRequest(rmcp::model::ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        let ServerResult::ReadResourceResult(result) =
            self.request(&peer, request, None).await.map_err(error)?
        else {
            return Err(error(
                "the server answered with another kind of result".into(),
            ));
        };
        if result.contents.len() > MAX_ANSWER_ITEMS {
            return Err(error(format!(
                "{} contents, over the {MAX_ANSWER_ITEMS}-content limit",
                result.contents.len()
            )));
        }
        Ok(to_values(&result.contents)
            .iter()
            .map(|c| {
                let field = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
                ResourceContent {
                    uri: field("uri").unwrap_or_default(),
                    mime_type: field("mimeType"),
                    text: field("text"),
                    blob: field("blob"),
                }
            })
            .collect())
    }

    /// The `read_resource` tool: text contents as text blocks (at most
    /// [`MAX_RESOURCE_TEXT`] bytes in all, the cut said), binary ones described.
    async fn read_for_model(&self, args: &Value) -> Result<ToolOutput, String> {
        let Some(uri) = args.get("uri").and_then(Value::as_str) else {
            return Err("read_resource needs `uri` (a string)".to_owned());
        };
        let contents = self.read_resource(uri).await.map_err(|e| e.to_string())?;
        let mut budget = MAX_RESOURCE_TEXT;
        let blocks: Vec<Value> = contents
            .into_iter()
            .map(|c| {
                let mime = c.mime_type.as_deref().unwrap_or("unknown type");
                let text = match (c.text, c.blob) {
                    (Some(text), _) if text.len() <= budget => {
                        budget -= text.len();
                        text
                    }
                    (Some(text), _) => {
                        let total = text.len();
                        let kept = progress::cut(text, budget);
                        budget -= kept.len();
                        format!(
                            "{kept}\n[cut: {} of {total} bytes of {} shown; the limit of one read is {MAX_RESOURCE_TEXT} bytes]",
                            kept.len(),
                            c.uri
                        )
                    }
                    (None, Some(blob)) => format!(
                        "[binary resource {}: {mime}, about {} bytes; binary contents are not passed to the model]",
                        c.uri,
                        blob.len() / 4 * 3
                    ),
                    (None, None) => format!("[resource {}: no contents]", c.uri),
                };
                json!({"type": "text", "text": text})
            })
            .collect();
        Ok(ToolOutput::new(json!({ "content": blocks })))
    }
}

/// Each item as JSON (what the catalog reads, whatever rmcp's types hold).
fn to_values<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .map(|i| serde_json::to_value(i).unwrap_or(Value::Null))
        .collect()
}

/// The tool a server with resources gets, as if it had listed it (marked in `_meta`).
fn reader_tool(server: &str) -> Tool {
    let value = json!({
        "name": READ_RESOURCE,
        "description": format!("Reads a resource of the MCP server \"{server}\" by its URI (resources/read). Text comes back as text; binary contents are described, not passed on."),
        "inputSchema": {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI"}},
            "required": ["uri"]
        },
        "annotations": {"readOnlyHint": true},
        "_meta": {READER_MARK: true}
    });
    // A fixed, valid tool: the conversion cannot fail; a default tool would only be refused
    // by the registry.
    serde_json::from_value(value).unwrap_or_else(|_| Tool::default())
}

/// Whether `tool` is the resource reader [`reader_tool`] made.
fn is_reader(tool: &Tool) -> bool {
    tool.name == READ_RESOURCE
        && tool
            .meta
            .as_ref()
            .is_some_and(|m| m.get(READER_MARK) == Some(&Value::Bool(true)))
}

/// A content block as JSON, its text moved rather than copied (a large text is then held once,
/// not twice, until it is cut).
fn block_value(mut block: rmcp::model::ContentBlock) -> Value {
    let text = match &mut block {
        rmcp::model::ContentBlock::Text(t) => Some(std::mem::take(&mut t.text)),
        _ => None,
    };
    let mut value = serde_json::to_value(&block).unwrap_or(Value::Null);
    if let Some(text) = text {
        value["text"] = Value::String(text);
    }
    value
}

/// SIGKILL to the process group `pgid`.
fn kill_group(pgid: Option<u32>) {
    if let Some(pid) = pgid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        // ESRCH (already gone) is the usual outcome after a clean exit.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// The most images and audio clips one result passes on (the rest are named in a text block).
pub const MAX_RESULT_MEDIA: usize = 8;

/// The largest image or audio clip passed on, in base64 characters (about 3 MiB).
pub const MAX_MEDIA_CHARS: usize = 4 << 20;

/// A content block as the call's result holds it: an image or audio clip (of the allowed size
/// and count; `taken` counts them) as it came (the model adapter sends it to models that take
/// it and names it to others); one past the bounds named in a text block.
fn media(block: Value, taken: &mut usize) -> Value {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind != "image" && kind != "audio" {
        return block;
    }
    let fits = block
        .get("data")
        .and_then(Value::as_str)
        .is_some_and(|d| d.len() <= MAX_MEDIA_CHARS)
        && block.get("mimeType").and_then(Value::as_str).is_some();
    if fits && *taken < MAX_RESULT_MEDIA {
        *taken += 1;
        return block;
    }
    let mime = block
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("unknown type");
    // Base64 is four characters for three bytes.
    let bytes = block
        .get("data")
        .and_then(Value::as_str)
        .map_or(0, |d| d.len() / 4 * 3);
    json!({
        "type": "text",
        "text": format!("[the server returned {kind} ({mime}, about {bytes} bytes) that is not shown: over the images, audio or bytes one result passes on]")
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends one elicitation's pause of the waits, however the answer ends (even dropped).
struct Resume<'a>(&'a tokio::sync::watch::Sender<usize>);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// What changed on the server, by its `list_changed` notification (in the order a burst of
/// them is handled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Change {
    Tools,
    Prompts,
    Resources,
}

/// Receives the server's notifications and answers its requests.
struct Handler {
    changes: mpsc::UnboundedSender<Change>,
    link: Arc<Link>,
    /// The entry's context: the workspace root is looked up here, progress emitted here.
    ctx: Context,
    /// Whether sampling is declared and answered (the entry's `sampling`).
    sampling: bool,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changes.send(Change::Tools);
        std::future::ready(())
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changes.send(Change::Prompts);
        std::future::ready(())
    }

    fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // A page the user was asked to open is done with (URL elicitation); rmcp does not know
        // the method yet.
        if notification.method == "notifications/elicitation/complete"
            && let Some(id) = notification
                .params
                .as_ref()
                .and_then(|p| p.get("elicitationId"))
                .and_then(Value::as_str)
        {
            self.ctx.emit(McpPageDone {
                server: self.link.server.clone(),
                id: progress::cut(id.to_owned(), 256),
            });
        }
        std::future::ready(())
    }

    fn on_resource_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changes.send(Change::Resources);
        std::future::ready(())
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let event = {
            let mut calls = self.link.calls.lock().await;
            let Some(pending) = calls.get_mut(&params.progress_token) else {
                return;
            };
            // The request's wait starts again (a full channel already says so).
            let _ = pending.tick.try_send(());
            let Some(waiting) = pending.call.as_mut() else {
                return;
            };
            progress::advance(
                waiting,
                &self.link.server,
                params.progress,
                params.total,
                params.message,
            )
        };
        if let Some(event) = event
            && self.ctx.listener_count::<McpProgress>() > 0
        {
            self.ctx.emit(event);
        }
    }

    /// Form mode through the front end's [`Elicitation`] service; declined (and traced) when
    /// there is none. See the `elicit` module.
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        // The server's requests wait on the user, not on it: their waits pause meanwhile.
        self.link.asking.send_modify(|n| *n += 1);
        let _resume = Resume(&self.link.asking);
        let (result, outcome) = elicit::answer(&self.ctx, &self.link.server, request).await;
        tracing::info!(server = %self.link.server, %outcome, "mcp elicitation");
        self.ctx.trace(
            TRACE_ELICITATION,
            format!("{}: {outcome}", self.link.server),
        );
        Ok(result)
    }

    // Sampling is deprecated by SEP-2577 like roots; servers (and the conformance suite)
    // still ask for it over the initialize-handshake protocol.
    #[allow(deprecated)]
    /// Through the composition's model after the user allowed it; see the `sampling` module.
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        if !self.sampling {
            return Err(rmcp::ErrorData::method_not_found::<
                rmcp::model::CreateMessageRequestMethod,
            >());
        }
        let params = serde_json::to_value(&params)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        // The user's answer is the server's wait, not the server's: its waits pause meanwhile.
        self.link.asking.send_modify(|n| *n += 1);
        let _resume = Resume(&self.link.asking);
        let answered = sampling::answer(&self.ctx, &self.link.server, params).await;
        let outcome = match &answered {
            Ok(result) => format!(
                "answered by {} ({} bytes)",
                result["model"].as_str().unwrap_or_default(),
                result["content"]["text"].as_str().map_or(0, str::len)
            ),
            Err((_, why)) => format!("refused: {why}"),
        };
        tracing::info!(server = %self.link.server, %outcome, "mcp sampling");
        self.ctx
            .trace(TRACE_SAMPLING, format!("{}: {outcome}", self.link.server));
        match answered {
            Ok(result) => serde_json::from_value(result)
                .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None)),
            Err((code, message)) => Err(rmcp::ErrorData::new(
                rmcp::model::ErrorCode(code),
                message,
                None,
            )),
        }
    }

    // Roots are deprecated by SEP-2577 for the stateless protocol; this client speaks the
    // initialize-handshake protocol, where servers (and the conformance suite) still use them.
    #[allow(deprecated)]
    /// The workspace root, when a `workspace` service is up (read at each request, so a
    /// server asking again sees the current one); no roots otherwise.
    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ListRootsResult, rmcp::ErrorData>> + Send + '_
    {
        let roots = self
            .ctx
            .get::<cordis_workspace::Workspace>()
            .map(|ws| vec![roots::root(ws.root())])
            .unwrap_or_default();
        std::future::ready(Ok(rmcp::model::ListRootsResult::new(roots)))
    }

    #[allow(deprecated)]
    fn get_info(&self) -> ClientConfig {
        // The initialize-handshake protocol: list_changed arrives as a plain notification
        // (newer versions deliver it only on a listen subscription). Declared is what is
        // implemented: roots (never changing while connected, so no `listChanged`) and form
        // elicitation (declined when no front end answers), sampling unless the entry turns it
        // off (refused without an approver or a model); not URL elicitation.
        let mut capabilities = ClientCapabilities::default();
        let mut roots = RootsCapabilities::default();
        roots.list_changed = Some(false);
        capabilities.roots = Some(roots);
        let mut elicitation = rmcp::model::ElicitationCapability::default();
        elicitation.form = Some(rmcp::model::FormElicitationCapability::default());
        elicitation.url = Some(rmcp::model::UrlElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
        if self.sampling {
            capabilities.sampling = Some(rmcp::model::SamplingCapability::default());
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("cordis", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// One live connection.
struct Connection {
    service: RunningService<RoleClient, Handler>,
    changes: mpsc::UnboundedReceiver<Change>,
}

/// The registered tool set: what the server listed (in its order) and the effects.
#[derive(Default)]
struct Generation {
    tools: Vec<(String, Tool)>,
    handles: Vec<EffectHandle>,
}

struct Bridge {
    config: McpConfig,
    ctx: Context,
    registry: Arc<ToolRegistry>,
    link: Arc<Link>,
    current: Mutex<Generation>,
    /// The entry's OAuth tokens, when it uses OAuth.
    auth: Option<Arc<auth::Authorizer>>,
}

impl Bridge {
    fn server(&self) -> &str {
        &self.config.server
    }

    /// Connect, list, register: the unit of startup and of every reconnect. A failure leaves
    /// no process behind.
    async fn start(&self) -> Result<Connection, McpError> {
        let started = self.try_start().await;
        if started.is_err() {
            self.link.kill();
        }
        started
    }

    async fn try_start(&self) -> Result<Connection, McpError> {
        let connection = self.connect().await?;
        let peer = connection.service.peer().clone();
        let tools = match tokio::time::timeout(self.config.call_timeout(), self.list(&peer)).await {
            Ok(listed) => listed?,
            Err(_) => {
                return Err(McpError::List {
                    server: self.server().to_owned(),
                    reason: format!("no answer within {} ms", self.config.call_timeout_ms),
                });
            }
        };
        let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
        let offers =
            |f: fn(&rmcp::model::ServerCapabilities) -> bool| capabilities.as_ref().is_some_and(f);
        self.link
            .has_resources
            .store(offers(|c| c.resources.is_some()), Ordering::SeqCst);
        *lock(&self.link.peer) = Some(peer.clone());
        if let Err(error) = self.install(tools).await {
            *lock(&self.link.peer) = None;
            return Err(error);
        }
        // Optional features: a server whose prompts or resources cannot be listed still
        // serves its tools (the failure is logged and traced).
        self.telling_prompt_changes(async {
            *lock(&self.link.catalog) = Catalog::default();
            if offers(|c| c.prompts.is_some()) {
                self.relist(&peer, Change::Prompts).await;
            }
            if offers(|c| c.resources.is_some()) {
                self.relist(&peer, Change::Resources).await;
            }
        })
        .await;
        self.confirm_lists(&peer, capabilities.as_ref()).await?;
        Ok(connection)
    }

    /// Lists again each list the server says may change (`listChanged`), until an answer
    /// confirms the one taken (at most [`MAX_CONFIRM_LISTS`] times): a server whose list
    /// changes right after a client connects (its first answer is already stale) boots with
    /// its final list, whatever the wall clock did with its `list_changed` notification. A
    /// change made before the server answers the confirming list is part of the boot; one made
    /// later is a re-sync of the running entry (`mcp-sync`).
    async fn confirm_lists(
        &self,
        peer: &Peer<RoleClient>,
        capabilities: Option<&rmcp::model::ServerCapabilities>,
    ) -> Result<(), McpError> {
        let changes = |kind: Option<bool>| kind == Some(true);
        let tools = capabilities
            .and_then(|c| c.tools.as_ref())
            .is_some_and(|t| changes(t.list_changed));
        let prompts = capabilities
            .and_then(|c| c.prompts.as_ref())
            .is_some_and(|p| changes(p.list_changed));
        let resources = capabilities
            .and_then(|c| c.resources.as_ref())
            .is_some_and(|r| changes(r.list_changed));
        for _ in 0..MAX_CONFIRM_LISTS {
            let mut changed = false;
            if tools {
                let listed = match tokio::time::timeout(self.config.call_timeout(), self.list(peer))
                    .await
                {
                    Ok(listed) => listed?,
                    Err(_) => {
                        return Err(McpError::List {
                            server: self.server().to_owned(),
                            reason: format!("no answer within {} ms", self.config.call_timeout_ms),
                        });
                    }
                };
                changed |= self.install(listed).await?;
            }
            let before = {
                let catalog = lock(&self.link.catalog);
                (catalog.prompts.clone(), catalog.resources.clone())
            };
            self.telling_prompt_changes(async {
                if prompts {
                    self.relist(peer, Change::Prompts).await;
                }
                if resources {
                    self.relist(peer, Change::Resources).await;
                }
            })
            .await;
            {
                let catalog = lock(&self.link.catalog);
                changed |= (&catalog.prompts, &catalog.resources) != (&before.0, &before.1);
            }
            if !changed {
                return Ok(());
            }
        }
        tracing::warn!(server = %self.server(), "mcp server's lists kept changing while it connected; keeping the last answers");
        Ok(())
    }

    async fn connect(&self) -> Result<Connection, McpError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let handler = Handler {
            changes: tx,
            link: self.link.clone(),
            ctx: self.ctx.clone(),
            sampling: self.config.sampling,
        };
        let limit = self.config.call_timeout();
        let mut stderr = None;
        let handshake = match self.config.transport {
            TransportKind::Stdio => {
                let (transport, tail) = self.spawn_stdio()?;
                stderr = Some(tail);
                tokio::time::timeout(limit, handler.serve(transport)).await
            }
            TransportKind::Http => {
                let transport = self.http_transport()?;
                tokio::time::timeout(limit, handler.serve(transport)).await
            }
        };
        let failure = match handshake {
            Ok(Ok(service)) => {
                return Ok(Connection {
                    service,
                    changes: rx,
                });
            }
            // A stdio server that went away during the handshake: a write to its closed stdin
            // or the end of its stdout, whichever the operating system noticed first; one
            // reason either way (its stderr says why).
            Ok(Err(
                rmcp::service::ClientInitializeError::ConnectionClosed(_)
                | rmcp::service::ClientInitializeError::TransportError { .. },
            )) if stderr.is_some() => {
                "handshake failed: the server closed the connection".to_owned()
            }
            Ok(Err(e)) => format!("handshake failed: {}", innermost(&e)),
            Err(_) => format!("no handshake within {} ms", self.config.call_timeout_ms),
        };
        Err(self.connect_error(self.with_stderr(failure, stderr).await))
    }

    /// `failure` and, for a stdio server, the last lines it wrote to stderr (where a server
    /// says why it would not start): its process group is killed first, so its stderr ends.
    async fn with_stderr(&self, failure: String, stderr: Option<stdio::StderrTail>) -> String {
        let Some(tail) = stderr else {
            return failure;
        };
        self.link.kill();
        tail.ended(STDERR_WAIT).await;
        match tail.text() {
            Some(said) => format!("{failure}; the server's stderr ended with: {said}"),
            None => format!("{failure} (the server wrote nothing to stderr)"),
        }
    }

    fn connect_error(&self, reason: String) -> McpError {
        McpError::Connect {
            server: self.server().to_owned(),
            reason,
        }
    }

    /// Starts the server process: its own process group, the scrubbed environment, stderr to
    /// the debug log, and process scoping (it cannot read the host's memory or
    /// `/proc/PID/environ`, nor `ptrace` it).
    fn spawn_stdio(&self) -> Result<(stdio::ChildTransport, stdio::StderrTail), McpError> {
        let program = self.config.command.clone().unwrap_or_default();
        let mut command = tokio::process::Command::new(&program);
        command.args(&self.config.args).env_clear();
        for name in PASSED_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(&self.config.env);
        if let Some(cwd) = &self.config.cwd {
            command.current_dir(cwd);
        }
        let armed = cordis_sandbox::arm(
            &mut command,
            &cordis_sandbox::Confinement::ScopeOnly,
            cordis_sandbox::Reap::No,
        )
        .map_err(|e| self.connect_error(e.to_string()))?;
        let mut wrap = CommandWrap::from(command);
        wrap.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let (transport, stderr, copy) =
            stdio::spawn(wrap, self.server(), self.config.max_message_bytes)
                .map_err(|e| self.connect_error(format!("cannot start {program:?}: {e}")))?;
        drop(armed);
        // Recorded before anything can fail, so dispose kills it from here on.
        if !self.link.started(transport.id()) {
            return Err(self.connect_error("the entry was disposed".to_owned()));
        }
        let _ = self.ctx.spawn(copy);
        let tail = stdio::StderrTail::default();
        match stderr {
            Some(stderr) => {
                let server = self.server().to_owned();
                let _ = self
                    .ctx
                    .spawn(stdio::log_stderr(stderr, server, tail.clone()));
            }
            None => tail.end(),
        }
        Ok((transport, tail))
    }

    fn http_transport(&self) -> Result<StreamableHttpClientTransport<http::HttpClient>, McpError> {
        let url = self.config.url.clone().unwrap_or_default();
        let mut transport = StreamableHttpClientTransportConfig::with_uri(url);
        transport.custom_headers = self.config.header_map()?.into_iter().collect();
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| self.connect_error(format!("cannot build the HTTP client: {e}")))?;
        Ok(StreamableHttpClientTransport::with_client(
            http::HttpClient {
                client,
                max_message: self.config.max_message_bytes,
                auth: self.auth.clone(),
            },
            transport,
        ))
    }

    /// Every page of `tools/list`.
    async fn list(&self, peer: &Peer<RoleClient>) -> Result<Vec<Tool>, McpError> {
        let list_error = |reason: String| McpError::List {
            server: self.server().to_owned(),
            reason,
        };
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let params = cursor
                .clone()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = peer
                .list_tools(params)
                .await
                .map_err(|e| list_error(e.to_string()))?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(list_error(format!("the server repeated cursor {next:?}")));
                }
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
        Err(list_error(format!("more than {MAX_PAGES} pages")))
    }

    /// Registers `tools` as the current generation, replacing the previous one; on a conflict
    /// the new set is disposed whole and the previous one registered again. True when the set
    /// changed.
    ///
    /// The entry's `tools` filter applies first (a tool listed twice is refused even when
    /// filtered out: the list is invalid). A server offering resources also gets
    /// [`READ_RESOURCE`], unless it lists a tool of that name itself (the server's own wins) or
    /// the filter leaves it out.
    async fn install(&self, tools: Vec<Tool>) -> Result<bool, McpError> {
        let mut named: Vec<(String, Tool)> = Vec::with_capacity(tools.len() + 1);
        let mut raw_seen = BTreeSet::new();
        for tool in tools {
            if !raw_seen.insert(tool.name.to_string()) {
                return Err(McpError::ListedTwice {
                    server: self.server().to_owned(),
                    tool: tool.name.to_string(),
                });
            }
            if self.config.tools.admits(&tool.name) {
                named.push((public_name(self.server(), &tool.name), tool));
            }
        }
        if self.link.has_resources.load(Ordering::SeqCst)
            && !raw_seen.contains(READ_RESOURCE)
            && self.config.tools.admits(READ_RESOURCE)
        {
            named.push((
                public_name(self.server(), READ_RESOURCE),
                reader_tool(self.server()),
            ));
        }
        // Registered in the server's order: what the model sees is the registry's canonical
        // order, and the determinism tests prove it against this order nobody controls. Only
        // the comparison with the current set ignores the order.
        let sorted = |tools: &[(String, Tool)]| {
            let mut v: Vec<(String, Tool)> = tools.to_vec();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        let same = {
            let current = lock(&self.current);
            // Registered (or nothing to register: an empty list is the same as an empty one).
            (!current.handles.is_empty() || named.is_empty())
                && sorted(&current.tools) == sorted(&named)
        };
        if same {
            return Ok(false);
        }
        let previous = std::mem::take(&mut *lock(&self.current));
        for handle in &previous.handles {
            handle.dispose();
        }
        match self.register_all(&named).await {
            Ok(handles) => {
                *lock(&self.current) = Generation {
                    tools: named,
                    handles,
                };
                Ok(true)
            }
            Err(error) => {
                if !previous.tools.is_empty() {
                    match self.register_all(&previous.tools).await {
                        Ok(handles) => {
                            *lock(&self.current) = Generation {
                                tools: previous.tools,
                                handles,
                            };
                        }
                        Err(again) => {
                            tracing::warn!(server = %self.server(), error = %again, "the previous tool list could not be restored");
                        }
                    }
                }
                Err(error)
            }
        }
    }

    /// Registers every valid tool or none. A tool whose schema the registry refuses is left
    /// out with a warning (one broken third-party tool should not take the others with it); a
    /// registration that fails (a name another entry owns) disposes the whole set.
    async fn register_all(&self, tools: &[(String, Tool)]) -> Result<Vec<EffectHandle>, McpError> {
        let mut handles = Vec::with_capacity(tools.len());
        for (public, tool) in tools {
            let def = match self.definition(public, tool) {
                Ok(def) => def,
                Err(reason) => {
                    tracing::warn!(server = %self.server(), tool = %tool.name, %reason, "mcp tool left out");
                    continue;
                }
            };
            match self.registry.register_scheduled(&self.ctx, def).await {
                Ok(handle) => handles.push(handle),
                Err(error) => {
                    for handle in &handles {
                        handle.dispose();
                    }
                    return Err(McpError::Register {
                        server: self.server().to_owned(),
                        tool: public.clone(),
                        reason: error.to_string(),
                    });
                }
            }
        }
        Ok(handles)
    }

    fn definition(&self, public: &str, tool: &Tool) -> Result<ToolDefinition, String> {
        let mut parameters = Value::Object((*tool.input_schema).clone());
        if parameters.get("type").is_none() {
            parameters["type"] = json!("object");
        }
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_owned();
        if let Some(why) = serde_json::to_value(tool)
            .ok()
            .as_ref()
            .and_then(depth::too_deep)
        {
            return Err(why);
        }
        within_size(&description, &parameters)?;
        let schema = ToolSchema {
            name: public.to_owned(),
            description,
            parameters: parameters.into(),
        };
        let link = self.link.clone();
        // The registry's timeout is the ceiling; the wait without progress is rmcp's.
        let def = if is_reader(tool) {
            ToolDefinition::new(schema, move |args, _cx| {
                let link = link.clone();
                async move { link.read_for_model(&args).await }
            })
            .with_timeout(self.config.max_call())
            .with_effect(cordis_tools::Effect::Read)
            .read_only()
        } else {
            let raw: Arc<str> = tool.name.as_ref().into();
            let output = tool.output_schema.as_ref().and_then(|schema| {
                output::OutputSchema::compile(&Value::Object((**schema).clone()))
                    .map_err(|reason| {
                        tracing::warn!(server = %self.server(), tool = %tool.name, %reason, "mcp tool's outputSchema does not compile; its results are not checked");
                    })
                    .ok()
                    .map(Arc::new)
            });
            ToolDefinition::new(schema, move |args, cx| {
                let (link, raw, output) = (link.clone(), raw.clone(), output.clone());
                async move { link.call(&raw, args, cx, output.as_deref()).await }
            })
            .with_timeout(self.config.max_call())
            .with_effect(if self.config.trust_annotations {
                effect_of(tool)
            } else {
                cordis_tools::Effect::Unknown
            })
        };
        def.validate().map_err(|e| e.to_string())?;
        Ok(def)
    }

    /// Owns the connection: re-syncs on `list_changed`, reconnects after a crash, gives up
    /// (unregistering the tools) after the budget.
    async fn supervise(self: Arc<Self>, connection: Connection) {
        let mut connection = Some(connection);
        let policy = self.config.reconnect.clone();
        let mut attempt: u32 = 0;
        loop {
            if let Some(Connection {
                service,
                mut changes,
            }) = connection.take()
            {
                let up_since = Instant::now();
                let peer = service.peer().clone();
                let mut closed = Box::pin(service.waiting());
                loop {
                    tokio::select! {
                        biased;
                        _ = &mut closed => break,
                        Some(first) = changes.recv() => {
                            // Several notifications in a row need one sync of each list.
                            let mut changed = BTreeSet::from([first]);
                            while let Ok(next) = changes.try_recv() {
                                changed.insert(next);
                            }
                            for change in changed {
                                match change {
                                    Change::Tools => self.resync(&peer).await,
                                    catalog => {
                                        self.telling_prompt_changes(self.relist(&peer, catalog))
                                            .await;
                                    }
                                }
                            }
                        }
                        () = self.link.suspect.notified() => {
                            if !self.answers(&peer).await {
                                tracing::warn!(server = %self.server(), "mcp server does not answer a ping; reconnecting");
                                break;
                            }
                        }
                    }
                }
                // Its stdout closed; whatever is left of the process group goes too.
                self.link.kill();
                tracing::warn!(server = %self.server(), "mcp server connection closed");
                if up_since.elapsed().as_millis() >= u128::from(policy.max_delay_ms) {
                    attempt = 0;
                }
            }
            if !policy.enabled || attempt >= policy.max_attempts {
                tracing::warn!(server = %self.server(), attempts = attempt, "mcp server gave up reconnecting; its tools are unregistered");
                let gone = std::mem::take(&mut *lock(&self.current));
                for handle in &gone.handles {
                    handle.dispose();
                }
                // Nothing of a server given up on is offered any more.
                self.telling_prompt_changes(async {
                    *lock(&self.link.catalog) = Catalog::default();
                })
                .await;
                self.link.kill();
                return;
            }
            attempt += 1;
            tokio::time::sleep(policy.delay(attempt)).await;
            // A server that needs a login is not asked again until a login changed the grant
            // (waiting spends no attempt).
            if let Some(auth) = &self.auth {
                while auth.still_waiting().await.is_some() {
                    tokio::time::sleep(auth::LOGIN_POLL).await;
                }
            }
            match self.start().await {
                Ok(c) => connection = Some(c),
                Err(error) => {
                    tracing::warn!(server = %self.server(), attempt, %error, "mcp reconnect failed");
                }
            }
        }
    }

    /// Whether the server answers a ping within the call timeout.
    async fn answers(&self, peer: &Peer<RoleClient>) -> bool {
        let ping = ClientRequest::PingRequest(PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        matches!(
            tokio::time::timeout(self.config.call_timeout(), peer.send_request(ping)).await,
            Ok(Ok(_))
        )
    }

    /// Runs `work`, which may change the catalog, and tells front ends when the prompt list is
    /// not what it was ([`McpPromptsChanged`]: their commands change).
    async fn telling_prompt_changes<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        let before = lock(&self.link.catalog).prompts.clone();
        let out = work.await;
        if lock(&self.link.catalog).prompts != before {
            self.link.claim_prompt_commands();
            self.ctx.emit(McpPromptsChanged {
                server: self.server().to_owned(),
            });
        }
        out
    }

    /// Lists prompts, or resources and templates, again and replaces them in the catalog; a
    /// failure keeps the previous lists. Traces `mcp-catalog` with `<server>: prompts
    /// applied` / `resources kept (…)`.
    async fn relist(&self, peer: &Peer<RoleClient>, what: Change) {
        let server = self.server();
        let limit = self.config.call_timeout();
        let timed_out = |what: &'static str| McpError::Catalog {
            server: server.to_owned(),
            what,
            reason: format!("no answer within {} ms", limit.as_millis()),
        };
        let outcome: Result<(), McpError> = match what {
            Change::Prompts => {
                let listed = tokio::time::timeout(
                    limit,
                    catalog::list_all(
                        server,
                        "prompts",
                        |cursor| async move {
                            let page = peer
                                .list_prompts(cursor.map(|c| {
                                    PaginatedRequestParams::default().with_cursor(Some(c))
                                }))
                                .await
                                .map_err(|e| e.to_string())?;
                            Ok((to_values(&page.prompts), page.next_cursor))
                        },
                        catalog::prompt,
                        |p| &p.name,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err(timed_out("prompts")));
                listed.map(|prompts| lock(&self.link.catalog).prompts = prompts)
            }
            // Tools re-sync through `resync`.
            Change::Tools => return,
            Change::Resources => {
                let resources = tokio::time::timeout(
                    limit,
                    catalog::list_all(
                        server,
                        "resources",
                        |cursor| async move {
                            let page = peer
                                .list_resources(cursor.map(|c| {
                                    PaginatedRequestParams::default().with_cursor(Some(c))
                                }))
                                .await
                                .map_err(|e| e.to_string())?;
                            Ok((to_values(&page.resources), page.next_cursor))
                        },
                        catalog::resource,
                        |r| &r.uri,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err(timed_out("resources")));
                let templates = tokio::time::timeout(
                    limit,
                    catalog::list_all(
                        server,
                        "resources/templates",
                        |cursor| async move {
                            let page = peer
                                .list_resource_templates(cursor.map(|c| {
                                    PaginatedRequestParams::default().with_cursor(Some(c))
                                }))
                                .await
                                .map_err(|e| e.to_string())?;
                            Ok((to_values(&page.resource_templates), page.next_cursor))
                        },
                        catalog::template,
                        |t| &t.uri_template,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err(timed_out("resources/templates")));
                // Each list is replaced on its own: many servers offer resources but no
                // templates (and answer that method with an error).
                let mut catalog = lock(&self.link.catalog);
                let listed = resources.map(|r| catalog.resources = r);
                match templates {
                    Ok(t) => catalog.templates = t,
                    Err(error) => {
                        tracing::debug!(server, %error, "mcp resource templates could not be listed; keeping the previous list");
                    }
                }
                listed
            }
        };
        let noun = if what == Change::Prompts {
            "prompts"
        } else {
            "resources"
        };
        let detail = match outcome {
            Ok(()) => format!("{server}: {noun} applied"),
            Err(error) => {
                tracing::warn!(server, %error, "mcp {noun} could not be listed; keeping the previous list");
                format!("{server}: {noun} kept ({error})")
            }
        };
        self.ctx.trace(TRACE_CATALOG, detail);
    }

    /// Lists and installs again; traces `mcp-sync` with the outcome (`<server>: applied`,
    /// `kept (…)` or `rolled back (…)`), so tests and logs can tell a sync happened.
    async fn resync(&self, peer: &Peer<RoleClient>) {
        let outcome = match tokio::time::timeout(self.config.call_timeout(), self.list(peer)).await
        {
            Ok(Ok(tools)) => match self.install(tools).await {
                Ok(_) => "applied".to_owned(),
                Err(error @ McpError::Register { .. }) => {
                    tracing::warn!(server = %self.server(), %error, "re-sync rolled back; keeping the previous tools");
                    format!("rolled back ({error})")
                }
                Err(error) => {
                    tracing::warn!(server = %self.server(), %error, "re-sync refused; keeping the previous tools");
                    format!("kept ({error})")
                }
            },
            Ok(Err(error)) => {
                tracing::warn!(server = %self.server(), %error, "re-sync failed; keeping the previous tools");
                format!("kept ({error})")
            }
            Err(_) => {
                tracing::warn!(server = %self.server(), "re-sync timed out; keeping the previous tools");
                "kept (tools/list timed out)".to_owned()
            }
        };
        self.ctx
            .trace(TRACE_SYNC, format!("{}: {outcome}", self.server()));
    }
}

/// The innermost cause of `e`: rmcp's transport errors name its generic types in their own
/// text ("Transport [rmcp::transport::worker::WorkerTransport<…>] error"), while the root
/// cause ("Connection refused", "connection closed") is what a person can act on.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    // Some of rmcp's errors keep their cause only in their text, after the type names.
    match text.rfind("] error: ") {
        Some(at) => text[at + "] error: ".len()..].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_says_what_it_starts() {
        let mut stdio = McpConfig::stdio("srv", "npx", vec!["-y".into(), "a b".into()]);
        stdio.cwd = Some("/srv".into());
        stdio.env.insert("TOKEN".into(), "secret".into());
        assert_eq!(
            McpPlugin.starts(&stdio),
            ["runs the command npx -y 'a b' in /srv (setting TOKEN)"]
        );
        let http: McpConfig = serde_json::from_value(serde_json::json!({
            "transport": "http", "server": "web", "url": "https://example.test/mcp"
        }))
        .unwrap();
        assert_eq!(
            McpPlugin.starts(&http),
            ["connects to https://example.test/mcp"]
        );
    }

    #[test]
    fn passed_env_is_short_and_has_no_secrets() {
        assert!(PASSED_ENV.contains(&"PATH") && PASSED_ENV.contains(&"HOME"));
        assert!(
            PASSED_ENV
                .iter()
                .all(|n| !n.contains("KEY") && !n.contains("TOKEN"))
        );
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// Regression (issue 24, low 13): a 16 MB description went into every request.
    #[test]
    fn a_tool_too_large_to_send_with_every_request_is_refused_with_its_size() {
        let schema = json!({"type": "object"});
        assert!(within_size("short", &schema).is_ok());
        assert_eq!(
            within_size(&"d".repeat(MAX_DESCRIPTION_BYTES + 1), &schema).unwrap_err(),
            "its description is 16385 bytes, over the 16384-byte limit"
        );
        let big = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        assert!(
            within_size("ok", &big)
                .unwrap_err()
                .ends_with("over the 65536-byte limit")
        );
    }
}

/// The effect class a trusted server's annotations declare. The protocol's defaults count
/// where a hint is absent (`readOnlyHint: false`, `destructiveHint: true`,
/// `openWorldHint: true`):
/// - `readOnlyHint: true` → `read` (runs without asking; `destructiveHint` means nothing then);
/// - `destructiveHint: false` with `openWorldHint` true or absent → `network`;
/// - anything else (destructive, a hint absent, or a closed-world change) → `unknown`, what
///   every MCP tool is without `trustAnnotations`.
fn effect_of(tool: &Tool) -> cordis_tools::Effect {
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint) == Some(true);
    let destructive = hints.and_then(|a| a.destructive_hint).unwrap_or(true);
    let open_world = hints.and_then(|a| a.open_world_hint).unwrap_or(true);
    if read_only {
        cordis_tools::Effect::Read
    } else if !destructive && open_world {
        cordis_tools::Effect::Network
    } else {
        cordis_tools::Effect::Unknown
    }
}

#[cfg(test)]
mod annotation_tests {
    use super::*;

    fn annotated(hints: Value) -> Tool {
        serde_json::from_value(
            json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": hints}),
        )
        .unwrap()
    }

    #[test]
    fn hints_map_to_effect_classes_with_the_protocols_defaults() {
        use cordis_tools::Effect::{Network, Read, Unknown};
        let cases = [
            (json!({"readOnlyHint": true}), Read),
            (json!({"readOnlyHint": true, "destructiveHint": true}), Read),
            (json!({}), Unknown),
            (json!({"openWorldHint": true}), Unknown),
            (
                json!({"destructiveHint": true, "openWorldHint": true}),
                Unknown,
            ),
            (json!({"destructiveHint": false}), Network),
            (
                json!({"destructiveHint": false, "openWorldHint": true}),
                Network,
            ),
            (
                json!({"destructiveHint": false, "openWorldHint": false}),
                Unknown,
            ),
            (
                json!({"readOnlyHint": false, "destructiveHint": false}),
                Network,
            ),
        ];
        for (hints, effect) in cases {
            assert_eq!(effect_of(&annotated(hints.clone())), effect, "{hints}");
        }
        let bare: Tool =
            serde_json::from_value(json!({"name": "t", "inputSchema": {"type": "object"}}))
                .unwrap();
        assert_eq!(effect_of(&bare), Unknown);
    }

    #[test]
    fn the_reader_is_marked_and_a_server_tool_of_its_name_is_not() {
        assert!(is_reader(&reader_tool("fx")));
        let theirs: Tool = serde_json::from_value(
            json!({"name": READ_RESOURCE, "inputSchema": {"type": "object"}}),
        )
        .unwrap();
        assert!(!is_reader(&theirs));
    }
}
