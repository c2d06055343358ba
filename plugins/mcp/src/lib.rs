//! The `mcp` plugin: one entry connects one MCP server and registers its tools.
//!
//! # What an entry does
//! 1. Checks its config and claims its `server` name (unique among live `mcp` entries under the
//!    same parent scope: two top-level entries, or two entries of one ACP session).
//! 2. Starts the server (stdio: a child process in its own process group, with a scrubbed
//!    environment, see [`PASSED_ENV`]), runs the MCP handshake, lists every page of
//!    `tools/list`, and registers the whole set with `register_scheduled` from the entry's own
//!    context, as `mcp__<server>__<tool>` ([`public_name`]). Registration is all-or-nothing: a
//!    conflict disposes what was registered of that set.
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
//! The raw name goes on the wire. A JSON-RPC error and an `isError: true` result are both a
//! failed call carrying the server's text. A call that outlives `callTimeoutMs` fails with the
//! registry's timeout, and dropping a call (timeout or cancellation) sends
//! `notifications/cancelled` to the server. A successful result is
//! `{"content": [...blocks], "structuredContent": …}` (the latter when the server sent one);
//! image and audio blocks become a text block naming what was dropped.

mod config;
mod depth;
mod error;
mod http;
mod naming;
mod stdio;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use cordis_runtime::{BoxError, Claim, Context, Deferred, EffectHandle, Inject, Plugin, ScopeId};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ClientRequest,
    Implementation, PaginatedRequestParams, PingRequest, ProtocolVersion, Tool,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use config::{MAX_SERVER_NAME, McpConfig, Reconnect, TransportKind};
pub use depth::{MAX_MESSAGE_DEPTH, MAX_SCHEMA_DEPTH};
pub use error::McpError;
pub use naming::{MAX_PUBLIC_NAME, public_name};

/// The host variables a stdio server inherits; everything else (API keys, tokens) is dropped
/// unless the entry's `env` sets it. Enough to find programs, a home, a locale and a terminal.
pub const PASSED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR",
    "TZ",
];

/// The trace kind of a re-sync after `notifications/tools/list_changed`.
pub const TRACE_SYNC: &str = "mcp-sync";

/// The most `tools/list` pages one sync follows (a server whose cursors never end is refused).
const MAX_PAGES: usize = 1_000;

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
        let bridge = Arc::new(Bridge {
            config: config.clone(),
            ctx: ctx.clone(),
            registry,
            link: Arc::new(Link {
                server: config.server.clone(),
                peer: Mutex::new(None),
                process: Mutex::new(Process::default()),
                suspect: tokio::sync::Notify::new(),
            }),
            current: Mutex::new(Generation::default()),
        });
        let link = bridge.link.clone();
        // Synchronous, so the process group is gone when dispose returns, whatever the server
        // does with a closed stdin or SIGTERM.
        let _ = ctx.effect("mcp server process", move || link.dispose());
        match bridge.start().await {
            Ok(connection) => {
                let _ = ctx.spawn(bridge.supervise(connection));
                Ok(())
            }
            Err(error) if config.fail_on_startup_error => {
                Err(McpError::startup(&config.server, &error).into())
            }
            Err(error) => Err(retry_or_give_up(config, ctx.deferrals(), &error)),
        }
    }
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
}

impl Link {
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

    /// Calls `raw` with `args`: the server's error text on failure, `{content, structuredContent?}`
    /// on success.
    async fn call(&self, raw: &str, args: Value) -> Result<ToolOutput, String> {
        let Some(peer) = self.peer() else {
            return Err(format!(
                "mcp({}): the server is not connected (it is starting or reconnecting); try again later",
                self.server
            ));
        };
        let arguments = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let params: CallToolRequestParams =
            serde_json::from_value(json!({"name": raw, "arguments": arguments}))
                .map_err(|e| format!("mcp({}): cannot build the call: {e}", self.server))?;
        let response = peer.call_tool_once(params).await.map_err(|e| match e {
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
            other => format!("mcp({}): {other}", self.server),
        })?;
        let result = match response {
            CallToolResponse::Complete(result) => result,
            _ => {
                return Err(format!(
                    "Tool \"{raw}\" requires task-based execution or client input, which this bridge does not support"
                ));
            }
        };
        let content: Vec<Value> = result
            .content
            .iter()
            .map(|block| media_as_text(serde_json::to_value(block).unwrap_or(Value::Null)))
            .collect();
        if result.is_error == Some(true) {
            let text: Vec<&str> = content
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            return Err(if text.is_empty() {
                Value::Array(content.clone()).to_string()
            } else {
                text.join("\n")
            });
        }
        let mut out = json!({ "content": content });
        if let Some(structured) = result.structured_content {
            out["structuredContent"] = structured;
        }
        Ok(ToolOutput::new(out))
    }
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

/// An image or audio block becomes a text block saying so: there is no attachment store to put
/// it in, and base64 in the model's context would cost tokens and say nothing.
fn media_as_text(block: Value) -> Value {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind != "image" && kind != "audio" {
        return block;
    }
    let mime = block
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("unknown type");
    json!({
        "type": "text",
        "text": format!("[{kind} unavailable: {mime}; no attachment store is mounted, so the server's {kind} was not passed on]")
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Receives the server's notifications.
struct Handler {
    changes: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changes.send(());
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        // The initialize-handshake protocol: list_changed arrives as a plain notification
        // (newer versions deliver it only on a listen subscription).
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("cordis", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// One live connection.
struct Connection {
    service: RunningService<RoleClient, Handler>,
    changes: mpsc::UnboundedReceiver<()>,
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
        *lock(&self.link.peer) = Some(peer);
        if let Err(error) = self.install(tools).await {
            *lock(&self.link.peer) = None;
            return Err(error);
        }
        Ok(connection)
    }

    async fn connect(&self) -> Result<Connection, McpError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let handler = Handler { changes: tx };
        let limit = self.config.call_timeout();
        let handshake = match self.config.transport {
            TransportKind::Stdio => {
                let transport = self.spawn_stdio()?;
                tokio::time::timeout(limit, handler.serve(transport)).await
            }
            TransportKind::Http => {
                let transport = self.http_transport()?;
                tokio::time::timeout(limit, handler.serve(transport)).await
            }
        };
        let service = match handshake {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => {
                return Err(self.connect_error(format!("handshake failed: {}", innermost(&e))));
            }
            Err(_) => {
                return Err(self.connect_error(format!(
                    "no handshake within {} ms",
                    self.config.call_timeout_ms
                )));
            }
        };
        Ok(Connection {
            service,
            changes: rx,
        })
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
    fn spawn_stdio(&self) -> Result<stdio::ChildTransport, McpError> {
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
        if let Some(stderr) = stderr {
            let server = self.server().to_owned();
            let _ = self.ctx.spawn(stdio::log_stderr(stderr, server));
        }
        Ok(transport)
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
    /// the new set is disposed whole and the previous one registered again.
    async fn install(&self, tools: Vec<Tool>) -> Result<(), McpError> {
        let mut named: Vec<(String, Tool)> = Vec::with_capacity(tools.len());
        let mut raw_seen = BTreeSet::new();
        for tool in tools {
            if !raw_seen.insert(tool.name.to_string()) {
                return Err(McpError::ListedTwice {
                    server: self.server().to_owned(),
                    tool: tool.name.to_string(),
                });
            }
            named.push((public_name(self.server(), &tool.name), tool));
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
            !current.handles.is_empty() && sorted(&current.tools) == sorted(&named)
        };
        if same {
            return Ok(());
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
                Ok(())
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
        let raw: Arc<str> = tool.name.as_ref().into();
        let def = ToolDefinition::new(schema, move |args, _cx| {
            let (link, raw) = (link.clone(), raw.clone());
            async move { link.call(&raw, args).await }
        })
        .with_timeout(self.config.call_timeout())
        .with_effect(if self.config.trust_annotations {
            effect_of(tool)
        } else {
            cordis_tools::Effect::Unknown
        });
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
                        Some(()) = changes.recv() => {
                            // Several notifications in a row need one sync.
                            while changes.try_recv().is_ok() {}
                            self.resync(&peer).await;
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
                self.link.kill();
                return;
            }
            attempt += 1;
            tokio::time::sleep(policy.delay(attempt)).await;
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

    /// Lists and installs again; traces `mcp-sync` with the outcome (`<server>: applied`,
    /// `kept (…)` or `rolled back (…)`), so tests and logs can tell a sync happened.
    async fn resync(&self, peer: &Peer<RoleClient>) {
        let outcome = match tokio::time::timeout(self.config.call_timeout(), self.list(peer)).await
        {
            Ok(Ok(tools)) => match self.install(tools).await {
                Ok(()) => "applied".to_owned(),
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

/// The effect class a trusted server's annotations declare: `readOnlyHint` reads,
/// `openWorldHint` reaches the network; otherwise undeclared (a call may do anything, so it
/// asks).
fn effect_of(tool: &Tool) -> cordis_tools::Effect {
    let hints = tool.annotations.as_ref();
    if hints.and_then(|a| a.read_only_hint) == Some(true) {
        cordis_tools::Effect::Read
    } else if hints.and_then(|a| a.open_world_hint) == Some(true) {
        cordis_tools::Effect::Network
    } else {
        cordis_tools::Effect::Unknown
    }
}
