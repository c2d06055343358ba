//! The connection's state and its one loop: requests in arrival order, work as futures it owns.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_agent_loop::{Agent, AgentEvent, TurnError};
use cordis_agent_presets::AgentPresets;
use cordis_approvals::ApproverService;
use cordis_history::History;
use cordis_llm::{Chunk, FinishReason, Llm};
use cordis_presenter::Presenters;
use cordis_session::{AssistantChunkData, SessionEvent, TurnEndReason};
use cordis_tools::ToolRegistry;
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::FuturesUnordered;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::approver::EditorApprover;
use super::files::{EditorFiles, EditorFs};
use super::protocol::{
    CancelNotification, CloseSessionRequest, DEFAULT_THOUGHT, InitializeRequest,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    MODE_OPTION, MODEL_OPTION, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, SessionConfigOption, SessionConfigSelectOption, SessionInfo, SessionModeState,
    SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModelRequest, StopReason,
    THOUGHT_OPTION,
};
use super::rpc::{Connection, Incoming, Reply, RpcError};
use super::session::{
    Booted, Composition, McpServer, McpTransport, Opening, internal, invalid_params,
};
use super::terminals::EditorTerminals;
use super::updates::{LiveViews, UpdateMapper};
use cordis_workspace::FileRouteService;

/// How long a disconnect waits for running turns and boots to wind down before giving up.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(30);

/// A request that needs the server's state, its params read.
enum Job {
    Initialize(InitializeRequest, Reply),
    New(NewSessionRequest, Reply),
    /// `session/load` (with `true`: replay the log) and `session/resume` (`false`).
    Load(LoadSessionRequest, bool, Reply),
    Close(CloseSessionRequest, Reply),
    List(ListSessionsRequest, Reply),
    Prompt(PromptRequest, Reply),
    Cancel(CancelNotification),
    /// `session/set_mode`, or `session/set_config_option` of the mode (`true`: answer with the
    /// options).
    SetMode(SetSessionModeRequest, bool, Reply),
    SetConfig(SetSessionConfigOptionRequest, Reply),
    /// `session/set_model` (answered `{}`).
    SetModel(SetSessionModelRequest, Reply),
}

/// What a piece of work ended with, and where its answer goes.
enum Done {
    Created(Result<Live, RpcError>, Reply),
    Loaded(String, Result<Live, RpcError>, Reply),
    Closed(Reply),
    /// The `initialize` answer is ready.
    Initialized(super::protocol::InitializeResponse, Reply),
    /// A listing ended.
    Listed(Result<ListSessionsResponse, RpcError>, Reply),
    /// A prompt ended: the session, its opening, the answer.
    Prompted(String, u64, Result<PromptResponse, RpcError>, Reply),
    /// A mode switch ended: the session, its opening, the mode asked for, whether to answer
    /// with the options, the outcome.
    Switched(String, u64, String, bool, Result<(), RpcError>, Reply),
}

/// A request's params as `T`; `-32602` naming what does not fit.
fn params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| invalid_params(format!("Invalid params: {e}")))
}

/// A session open on this connection.
struct Live {
    id: String,
    /// Which opening of the id this is (a session closed and opened again is another): work
    /// of an earlier opening that finishes late must not touch this one.
    opening: u64,
    booted: Booted,
    /// Set while a prompt runs; sending on it cancels that prompt's turn.
    busy: Option<Busy>,
    /// The file changed since the session's composition was loaded (`--watch`): it reloads
    /// when idle, before its next prompt.
    stale: bool,
    /// The slash commands last announced to the editor (`None` before the first
    /// announcement, which follows the session's opening answer).
    commands: Arc<Mutex<Option<Vec<super::protocol::AvailableCommand>>>>,
}

/// A session's one piece of running work.
enum Busy {
    /// A prompt; sending on it cancels the prompt's turn.
    Prompt(watch::Sender<bool>),
    /// A `session/set_mode` (the preset mounts, then the agent re-joins).
    Switching,
}

impl Live {
    fn agent(&self) -> &Agent {
        &self.booted.agent
    }
}

/// A new session id (see [`crate::cli::sessions::unique_session_id`]).
fn new_session_id() -> String {
    crate::cli::sessions::unique_session_id("acp")
}

/// The session's cwd, which must be absolute (it becomes the workspace root).
fn absolute_cwd(cwd: &std::path::Path) -> Result<PathBuf, RpcError> {
    if cwd.is_absolute() {
        Ok(cwd.to_owned())
    } else {
        Err(invalid_params(format!(
            "cwd must be an absolute path, got \"{}\"",
            cwd.display()
        )))
    }
}

/// What `session/new` and `session/load` accept beyond the cwd: no additional directories,
/// stdio MCP servers.
fn check_extras(dirs: &[PathBuf], mcp_servers: &[Value]) -> Result<Vec<McpServer>, RpcError> {
    if !dirs.is_empty() {
        return Err(invalid_params("additionalDirectories is not supported"));
    }
    mcp_servers.iter().map(mcp_server).collect()
}

/// One `mcpServers` entry: stdio (`{name, command, args, env: [{name, value}]}`, with no
/// `type` or `type: "stdio"`) and streamable HTTP (`{type: "http", name, url, headers:
/// [{name, value}]}`) are accepted; SSE (a deprecated transport) is refused.
fn mcp_server(server: &Value) -> Result<McpServer, RpcError> {
    #[derive(serde::Deserialize)]
    struct Stdio {
        name: String,
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: Vec<Variable>,
    }
    #[derive(serde::Deserialize)]
    struct Http {
        name: String,
        url: String,
        #[serde(default)]
        headers: Vec<Variable>,
    }
    #[derive(serde::Deserialize)]
    struct Variable {
        name: String,
        value: String,
    }
    let name = server["name"].as_str().unwrap_or("?");
    let bad = |e: serde_json::Error| invalid_params(format!("mcpServers \"{name}\": {e}"));
    let pairs = |vars: Vec<Variable>| vars.into_iter().map(|v| (v.name, v.value)).collect();
    match server.get("type").and_then(Value::as_str) {
        None | Some("stdio") => {
            let s: Stdio = serde_json::from_value(server.clone()).map_err(bad)?;
            Ok(McpServer {
                name: s.name,
                transport: McpTransport::Stdio {
                    command: s.command,
                    args: s.args,
                    env: pairs(s.env),
                },
            })
        }
        Some("http") => {
            let h: Http = serde_json::from_value(server.clone()).map_err(bad)?;
            Ok(McpServer {
                name: h.name,
                transport: McpTransport::Http {
                    url: h.url,
                    headers: pairs(h.headers),
                },
            })
        }
        Some("sse") => Err(invalid_params(format!(
            "mcpServers \"{name}\": SSE servers are not supported (mcpCapabilities.sse is false); use the server's streamable HTTP endpoint"
        ))),
        Some(other) => Err(invalid_params(format!(
            "mcpServers \"{name}\": unknown transport \"{other}\"; stdio and http are supported"
        ))),
    }
}

/// The prompt as one user message: text blocks as they are, resource links as a marker line,
/// embedded text resources as their text between marker lines naming the URI.
///
/// # Errors
/// Content the agent did not advertise (images, audio, binary resources), or nothing to say.
pub fn prompt_text(blocks: &[Value]) -> Result<String, RpcError> {
    let mut text = String::new();
    for block in blocks {
        let field = |name: &str| block.get(name).and_then(Value::as_str);
        match field("type") {
            Some("text") => text.push_str(
                field("text").ok_or_else(|| invalid_params("a text block without text"))?,
            ),
            Some("resource_link") => {
                let (Some(name), Some(uri)) = (field("name"), field("uri")) else {
                    return Err(invalid_params("a resource_link block needs name and uri"));
                };
                text.push_str(&format!(
                    "\n[resource_link name=\"{name}\" uri=\"{uri}\"]\n"
                ));
            }
            // The model gets images beside the text (from the blocks as logged); see `images`.
            Some("image") => {}
            Some("audio") => {
                return Err(invalid_params(
                    "audio content is not supported (promptCapabilities.audio is false)",
                ));
            }
            Some("resource") => {
                let resource = block.get("resource");
                let part = |name: &str| resource.and_then(|r| r.get(name)).and_then(Value::as_str);
                let Some(uri) = part("uri") else {
                    return Err(invalid_params("an embedded resource needs a uri"));
                };
                let Some(body) = part("text") else {
                    return Err(invalid_params(format!(
                        "the embedded resource {uri} is binary (blob); only text resources can be read by the model"
                    )));
                };
                text.push_str(&format!("\n[resource uri=\"{uri}\"]\n{body}"));
                if !body.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str("[/resource]\n");
            }
            other => {
                return Err(invalid_params(format!(
                    "unknown content block type {}",
                    other.map_or_else(|| "(none)".to_owned(), |t| format!("\"{t}\""))
                )));
            }
        }
    }
    if text.trim().is_empty() && !blocks.iter().any(|b| b["type"] == "image") {
        return Err(invalid_params("the prompt is empty"));
    }
    Ok(text)
}

/// The most images one prompt carries.
pub const MAX_PROMPT_IMAGES: usize = 8;
/// The largest image a prompt carries, as base64 (6 MiB of image).
pub const MAX_IMAGE_BASE64: usize = 8 * 1024 * 1024;
/// The image types models take.
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Checks a prompt's image blocks: each with a supported `mimeType` and base64 `data` within
/// [`MAX_IMAGE_BASE64`], at most [`MAX_PROMPT_IMAGES`], and a model that takes them
/// (`accepts`). Returns how many there are.
///
/// # Errors
/// `-32602` naming what is wrong and how to fix it.
pub fn check_images(blocks: &[Value], accepts: bool) -> Result<usize, RpcError> {
    let images: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "image").collect();
    if images.is_empty() {
        return Ok(0);
    }
    if !accepts {
        return Err(invalid_params(
            "this agent's model does not take images (promptCapabilities.image is false; the `llm` entry sets `imageInput: true` for a model that does)",
        ));
    }
    if images.len() > MAX_PROMPT_IMAGES {
        return Err(invalid_params(format!(
            "the prompt has {} images; at most {MAX_PROMPT_IMAGES} go with one prompt",
            images.len()
        )));
    }
    for (i, image) in images.iter().enumerate() {
        let mime = image["mimeType"].as_str().unwrap_or_default();
        if !IMAGE_TYPES.contains(&mime) {
            return Err(invalid_params(format!(
                "image {}: mimeType \"{mime}\" is not one of {}",
                i + 1,
                IMAGE_TYPES.join(", ")
            )));
        }
        let Some(data) = image["data"].as_str() else {
            return Err(invalid_params(format!("image {}: no base64 `data`", i + 1)));
        };
        if data.len() > MAX_IMAGE_BASE64 {
            return Err(invalid_params(format!(
                "image {}: {} bytes of base64, over the limit of {MAX_IMAGE_BASE64}",
                i + 1,
                data.len()
            )));
        }
        if !data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        {
            return Err(invalid_params(format!(
                "image {}: `data` is not base64",
                i + 1
            )));
        }
    }
    Ok(images.len())
}

/// Why a turn ended, as a prompt's answer.
fn stop_reason(
    ended: Result<TurnEndReason, TurnError>,
    events: &[SessionEvent],
) -> Result<PromptResponse, RpcError> {
    let reason = match ended {
        Ok(TurnEndReason::Completed) => {
            // The model's last finish of the turn says whether it ran out of tokens.
            let last_finish = events.iter().rev().find_map(|e| {
                e.data_as::<AssistantChunkData>()
                    .ok()
                    .and_then(|c| match c.chunk {
                        Chunk::Finish { reason } => Some(reason),
                        _ => None,
                    })
            });
            if last_finish == Some(FinishReason::Length) {
                StopReason::MaxTokens
            } else {
                StopReason::EndTurn
            }
        }
        Ok(TurnEndReason::MaxSteps { .. }) => StopReason::MaxTurnRequests,
        Ok(
            TurnEndReason::Aborted { .. } | TurnEndReason::Disposed | TurnEndReason::Interrupted,
        ) => StopReason::Cancelled,
        Ok(TurnEndReason::Error { message, .. }) => {
            return Err(internal(format!("turn failed: {message}")));
        }
        Err(TurnError::Disposed(_)) => StopReason::Cancelled,
        Err(e @ TurnError::Busy(_)) => return Err(invalid_params(e.to_string())),
    };
    Ok(PromptResponse {
        stop_reason: reason,
    })
}

/// The server of one connection.
pub struct Server<'c> {
    composition: &'c Composition<'c>,
    connection: Connection,
    sessions: BTreeMap<String, Live>,
    /// What the client said it does (at `initialize`).
    editor: Editor,
    /// Openings so far (each session joining the connection gets the next).
    openings: u64,
    /// Ids being loaded (reserved before the async resume, so a second load is refused).
    loading: std::collections::BTreeSet<String>,
    work: FuturesUnordered<LocalBoxFuture<'c, Done>>,
    /// The config file's watcher (`cordis acp --watch`).
    watcher: Option<cordis_host::watch::ConfigWatcher>,
}

impl<'c> Server<'c> {
    /// A server for `connection` whose sessions boot `composition`.
    pub fn new(composition: &'c Composition<'c>, connection: Connection) -> Self {
        Server {
            composition,
            connection,
            sessions: BTreeMap::new(),
            editor: Editor::default(),
            openings: 0,
            loading: Default::default(),
            work: FuturesUnordered::new(),
            watcher: None,
        }
    }

    /// Reloads sessions when the config file changes (`cordis acp --watch`): each valid edit is
    /// what new sessions boot, and open sessions reload it between prompts.
    #[must_use]
    pub fn watching(mut self, watcher: cordis_host::watch::ConfigWatcher) -> Self {
        self.watcher = Some(watcher);
        self
    }

    /// The file changed: a valid edit becomes the composition's text and every open session is
    /// marked to reload; an invalid one is reported and changes nothing.
    async fn file_changed(&mut self) {
        let file = self.composition.file.clone();
        let source = match tokio::fs::read_to_string(&file).await {
            Ok(s) => s,
            Err(e) => {
                note(&format!(
                    "cannot read {file}: {e}; sessions keep the last good configuration"
                ));
                return;
            }
        };
        if source == self.composition.source() {
            return;
        }
        match self.composition.adopt(source).await {
            Ok(()) => {
                note(&format!(
                    "{file} changed: new sessions boot it; {} open session(s) reload it between prompts",
                    self.sessions.len()
                ));
                for live in self.sessions.values_mut() {
                    live.stale = true;
                }
            }
            Err(errors) => {
                let lines: Vec<String> =
                    errors.diagnostics().iter().map(|d| d.to_string()).collect();
                let widens = errors
                    .diagnostics()
                    .iter()
                    .all(|d| matches!(d.problem, cordis_host::diagnostic::Problem::Widens { .. }));
                let why = if widens {
                    "would let more run without a question; new and open sessions keep the last configuration"
                } else {
                    "does not load; sessions keep the last good configuration"
                };
                note(&format!("{file} changed but {why}:\n{}", lines.join("\n")));
            }
        }
    }

    /// Reloads every stale session that is idle (see [`Live::stale`]).
    async fn refresh_stale(&mut self) {
        let ids: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, live)| live.stale && live.busy.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Some(live) = self.sessions.get_mut(&id) else {
                continue;
            };
            live.stale = false;
            match self.composition.refresh(&mut live.booted, &id).await {
                Ok(summary) => note(&format!("session {id}: {summary}")),
                Err(e) => note(&format!(
                    "session {id}: the reload failed ({}); it keeps running",
                    e.message
                )),
            }
        }
    }

    /// Serves until the client closes its side, then disposes every session (running turns end
    /// as `disposed` in their logs) and returns.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping it skips the teardown. No session is disposed and the caller
    /// holds no handle to their compositions, which stay live with their tasks and effects. A
    /// prompt's turn dropped part way stays open in its log (the next open closes it as
    /// `interrupted`), a boot in progress leaves its composition undisposed, and requests in
    /// flight are never answered. `cordis acp` runs it to completion (`block_on`).
    pub async fn run(mut self, mut incoming: mpsc::UnboundedReceiver<Incoming>) {
        loop {
            tokio::select! {
                // Messages first, in arrival order: a cancel always finds the prompt before it.
                biased;
                message = incoming.recv() => match message {
                    Some(message) => {
                        if let Some(job) = job_of(message) {
                            self.accept(job);
                        }
                    }
                    // The client closed its side.
                    None => break,
                },
                Some(done) = self.work.next(), if !self.work.is_empty() => self.finish(done),
                Some(changed) = async {
                    match self.watcher.as_mut() {
                        Some(w) => w.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    use cordis_host::watch::WatchNote;
                    match changed {
                        WatchNote::Changed => self.file_changed().await,
                        WatchNote::Interrupted(why) => note(&format!("watching interrupted: {why}")),
                        WatchNote::Resumed => note("watching again"),
                    }
                }
            }
            self.refresh_stale().await;
        }
        self.teardown().await;
    }

    /// Starts a request: checks what can be checked at once (in arrival order, so a cancel
    /// always finds the prompt sent before it), then queues the async part.
    fn accept(&mut self, job: Job) {
        match job {
            Job::Initialize(req, reply) => {
                self.editor = Editor {
                    terminal_meta: req.terminal_output(),
                    fs: EditorFs::of(&req.client_capabilities),
                    terminals: req.client_capabilities["terminal"] == json!(true),
                    forms: req.client_capabilities["elicitation"]["form"].is_object(),
                    pages: req.client_capabilities["elicitation"]["url"].is_object(),
                };
                let composition = self.composition;
                self.work.push(Box::pin(async move {
                    let images = composition.accepts_images().await;
                    Done::Initialized(super::initialize_response(&req, images), reply)
                }));
            }
            Job::New(req, reply) => {
                let (cwd, mcp) = match absolute_cwd(&req.cwd).and_then(|cwd| {
                    check_extras(&req.additional_directories, &req.mcp_servers).map(|m| (cwd, m))
                }) {
                    Ok(checked) => checked,
                    Err(e) => return respond_error(reply, e),
                };
                let composition = self.composition;
                let connection = self.connection.clone();
                let editor = self.editor;
                self.work.push(Box::pin(async move {
                    let id = new_session_id();
                    let live = match composition
                        .boot(&cwd, &Opening::New(id.clone()), &mcp)
                        .await
                    {
                        Ok(b) => attach(b, id, cwd, &connection, false, editor).await,
                        Err(e) => Err(e),
                    };
                    Done::Created(live, reply)
                }));
            }
            Job::Load(req, replay, reply) => {
                let id = req.session_id.clone();
                let (cwd, mcp) = match absolute_cwd(&req.cwd).and_then(|cwd| {
                    check_extras(&req.additional_directories, &req.mcp_servers).map(|m| (cwd, m))
                }) {
                    Ok(checked) => checked,
                    Err(e) => return respond_error(reply, e),
                };
                if self.sessions.contains_key(&id) || self.loading.contains(&id) {
                    return respond_error(
                        reply,
                        invalid_params(format!("session {id} is already open on this connection")),
                    );
                }
                self.loading.insert(id.clone());
                let composition = self.composition;
                let connection = self.connection.clone();
                let editor = self.editor;
                self.work.push(Box::pin(async move {
                    let live = match composition
                        .boot(&cwd, &Opening::Load(id.clone()), &mcp)
                        .await
                    {
                        Ok(b) => attach(b, id.clone(), cwd, &connection, replay, editor).await,
                        Err(e) => Err(e),
                    };
                    Done::Loaded(id, live, reply)
                }));
            }
            Job::Close(req, reply) => {
                let id = req.session_id;
                if self.loading.contains(&id) {
                    return respond_error(
                        reply,
                        invalid_params(format!(
                            "session {id} is still opening; close it when it has answered"
                        )),
                    );
                }
                if matches!(
                    self.sessions.get(&id).map(|l| &l.busy),
                    Some(Some(Busy::Switching))
                ) {
                    return respond_error(
                        reply,
                        invalid_params(format!(
                            "session {id} is switching modes; close it when the switch has answered"
                        )),
                    );
                }
                let Some(live) = self.sessions.remove(&id) else {
                    return respond_error(reply, invalid_params(format!("unknown session {id}")));
                };
                // As `session/cancel` would, then free it: a running turn ends `disposed`
                // (logged), and the composition with its MCP servers and tasks unwinds.
                live.agent().dispose();
                self.work.push(Box::pin(async move {
                    close(live).await;
                    Done::Closed(reply)
                }));
            }
            Job::List(req, reply) => {
                let cwd = match req.cwd.as_deref().map(absolute_cwd).transpose() {
                    Ok(cwd) => cwd,
                    Err(e) => return respond_error(reply, e),
                };
                let composition = self.composition;
                self.work.push(Box::pin(async move {
                    Done::Listed(list(composition, cwd, req.cursor).await, reply)
                }));
            }
            Job::Prompt(req, reply) => {
                let id = req.session_id.clone();
                let Some(live) = self.sessions.get_mut(&id) else {
                    return respond_error(reply, invalid_params(format!("unknown session {id}")));
                };
                match live.busy {
                    Some(Busy::Prompt(_)) => {
                        return respond_error(
                            reply,
                            invalid_params(format!(
                                "a prompt is already in flight in session {id}"
                            )),
                        );
                    }
                    Some(Busy::Switching) => {
                        return respond_error(
                            reply,
                            invalid_params(format!(
                                "session {id} is switching modes; prompt when set_mode has answered"
                            )),
                        );
                    }
                    None => {}
                }
                let text = match prompt_text(&req.prompt) {
                    Ok(t) => t,
                    Err(e) => return respond_error(reply, e),
                };
                let accepts = live
                    .booted
                    .root()
                    .get::<Llm>()
                    .is_some_and(|llm| llm.accepts_images());
                if let Err(e) = check_images(&req.prompt, accepts) {
                    return respond_error(reply, e);
                }
                // A slash command is cordis's, never the model's: answered here, not logged
                // (what it changes, a permission mode or a revoked grant, is).
                let one_text = matches!(req.prompt.as_slice(),
                    [only] if only.get("type").and_then(Value::as_str) == Some("text"));
                // A prompt of one of the session's MCP servers is run, not answered here.
                let root = live.booted.root().clone();
                let runs_prompt = one_text && crate::cli::prompts::names_prompt(&root, &text);
                if one_text
                    && !runs_prompt
                    && let Some(answer) = command_answer(&text, live)
                {
                    self.connection.notify(
                        "session/update",
                        SessionNotification {
                            session_id: id,
                            update: SessionUpdate::AgentMessageChunk {
                                content: super::protocol::ContentBlock::text(answer),
                            },
                        },
                    );
                    return reply.send(Ok(PromptResponse {
                        stop_reason: StopReason::EndTurn,
                    }));
                }
                // `//…` is a message starting with `/`.
                let text = match crate::cli::commands::parse(&text) {
                    crate::cli::commands::Line::Message(m) if one_text => m.to_owned(),
                    _ => text,
                };
                // A prompt of more than text is logged as sent, so `session/load` replays it.
                let sent = req
                    .prompt
                    .iter()
                    .any(|b| b.get("type").and_then(Value::as_str) != Some("text"))
                    .then(|| req.prompt.clone());
                let (cancel, mut cancelled) = watch::channel(false);
                live.busy = Some(Busy::Prompt(cancel));
                let agent = live.agent().clone();
                let opening = live.opening;
                let connection = self.connection.clone();
                self.work.push(Box::pin(async move {
                    let text = match runs_prompt {
                        true => match crate::cli::prompts::expand(&root, &text).await {
                            Some(Ok(rendered)) => rendered,
                            Some(Err(why)) => {
                                // Told like a command's answer; nothing reaches the model.
                                connection.notify(
                                    "session/update",
                                    SessionNotification {
                                        session_id: id.clone(),
                                        update: SessionUpdate::AgentMessageChunk {
                                            content: super::protocol::ContentBlock::text(why),
                                        },
                                    },
                                );
                                let done = Ok(PromptResponse {
                                    stop_reason: StopReason::EndTurn,
                                });
                                return Done::Prompted(id, opening, done, reply);
                            }
                            None => text,
                        },
                        false => text,
                    };
                    let from = agent.session().len();
                    let ended = {
                        let turn = agent.run_prompt(text, sent);
                        tokio::pin!(turn);
                        let mut asked = false;
                        loop {
                            tokio::select! {
                                // The turn first: its first poll marks the agent busy, so a
                                // cancel that came before the turn started still reaches it.
                                biased;
                                ended = &mut turn => break ended,
                                changed = cancelled.changed(), if !asked => {
                                    asked = true;
                                    if changed.is_ok() {
                                        agent.cancel(Some("cancelled by the client".to_owned()));
                                    }
                                }
                            }
                        }
                    };
                    let result = agent.session().with_events(|events| {
                        stop_reason(ended, events.get(from..).unwrap_or_default())
                    });
                    Done::Prompted(id, opening, result, reply)
                }));
            }
            Job::Cancel(note) => {
                let id = note.session_id.clone();
                // Unknown sessions and idle ones: nothing to cancel.
                if let Some(Busy::Prompt(cancel)) =
                    self.sessions.get(&id).and_then(|l| l.busy.as_ref())
                {
                    let _ = cancel.send(true);
                }
            }
            Job::SetModel(req, reply) => {
                let result = self.set_call_option(&req.session_id, MODEL_OPTION, &req.model_id);
                reply.send(result.map(|_| json!({})));
            }
            Job::SetConfig(req, reply) => {
                if !self.sessions.contains_key(&req.session_id) {
                    return respond_error(
                        reply,
                        invalid_params(format!("unknown session {}", req.session_id)),
                    );
                }
                let Some(value) = req.value.as_str() else {
                    return respond_error(
                        reply,
                        invalid_params(format!(
                            "the value of \"{}\" is one of its options' values (a string), not {}",
                            req.config_id, req.value
                        )),
                    );
                };
                let offered = |id: &str| {
                    self.sessions
                        .get(&req.session_id)
                        .is_some_and(|live| options_of(live).iter().any(|o| o.id == id))
                };
                if (req.config_id == MODEL_OPTION || req.config_id == THOUGHT_OPTION)
                    && offered(&req.config_id)
                {
                    let result = self.set_call_option(&req.session_id, &req.config_id, value);
                    return reply.send(
                        result.map(|config_options| SetSessionConfigOptionResponse {
                            config_options,
                        }),
                    );
                }
                if req.config_id != MODE_OPTION {
                    let known = self
                        .sessions
                        .get(&req.session_id)
                        .map(|live| {
                            options_of(live)
                                .iter()
                                .map(|o| format!("\"{}\"", o.id))
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default();
                    return respond_error(
                        reply,
                        invalid_params(format!(
                            "unknown config option \"{}\"; this session has {}",
                            req.config_id,
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known
                            }
                        )),
                    );
                }
                let mode = value;
                let mode = SetSessionModeRequest {
                    session_id: req.session_id,
                    mode_id: mode.to_owned(),
                };
                self.accept(Job::SetMode(mode, true, reply));
            }
            Job::SetMode(req, options, reply) => {
                let id = req.session_id.clone();
                let mode = req.mode_id.clone();
                let Some(live) = self.sessions.get_mut(&id) else {
                    return respond_error(reply, invalid_params(format!("unknown session {id}")));
                };
                let Some(roster) = live.booted.root().get::<AgentPresets>() else {
                    return respond_error(
                        reply,
                        invalid_params(
                            "this agent has no modes (its config has no `agent-presets` entry)",
                        ),
                    );
                };
                if live.busy.is_some() {
                    return respond_error(
                        reply,
                        invalid_params(format!(
                            "session {id} is busy; switch modes between prompts"
                        )),
                    );
                }
                live.busy = Some(Busy::Switching);
                let agent = live.agent().clone();
                let opening = live.opening;
                self.work.push(Box::pin(async move {
                    // The roster refuses a session that already has a turn (its history was
                    // written under the old preset) and an unknown or broken preset.
                    let switched = roster
                        .switch(&agent, &mode)
                        .await
                        .map(drop)
                        .map_err(|e| invalid_params(e.to_string()));
                    Done::Switched(id, opening, mode, options, switched, reply)
                }));
            }
        }
    }

    /// A booted session joins the connection as the next opening; returns its modes and
    /// config options for the answer.
    fn join(
        &mut self,
        id: String,
        mut live: Live,
    ) -> (Option<SessionModeState>, Option<Vec<SessionConfigOption>>) {
        self.openings += 1;
        live.opening = self.openings;
        let modes = live.booted.modes.clone();
        let options = Some(options_of(&live)).filter(|o| !o.is_empty());
        self.sessions.insert(id, live);
        (modes, options)
    }

    /// Switches the model or the thought level of an idle session (from its next request
    /// on); returns the options as they are then.
    fn set_call_option(
        &self,
        id: &str,
        option: &str,
        value: &str,
    ) -> Result<Vec<SessionConfigOption>, RpcError> {
        let live = self
            .sessions
            .get(id)
            .ok_or_else(|| invalid_params(format!("unknown session {id}")))?;
        if live.busy.is_some() {
            return Err(invalid_params(format!(
                "session {id} is busy; switch between prompts"
            )));
        }
        let llm = live
            .booted
            .root()
            .get::<Llm>()
            .ok_or_else(|| invalid_params("this agent has no `llm` entry"))?;
        let mut config = live.agent().call_config();
        if option == MODEL_OPTION {
            let models = llm.models();
            if !models.iter().any(|m| m == value) {
                return Err(invalid_params(format!(
                    "unknown model \"{value}\"; this agent offers {} (the `llm` entry's `model` and `models`)",
                    quoted(&models)
                )));
            }
            config.model = value.to_owned();
        } else {
            let levels = llm.thought_levels();
            config.reasoning_effort = if value == DEFAULT_THOUGHT {
                None
            } else if levels.iter().any(|l| l == value) {
                Some(value.to_owned())
            } else {
                return Err(invalid_params(format!(
                    "unknown thought level \"{value}\"; this agent offers \"{DEFAULT_THOUGHT}\"{}",
                    if levels.is_empty() {
                        " only (the `llm` entry sets `thoughtLevels`)".to_owned()
                    } else {
                        format!(", {}", quoted(levels))
                    }
                )));
            };
        }
        live.agent()
            .set_call_config(config)
            .map_err(|e| invalid_params(e.to_string()))?;
        Ok(options_of(live))
    }

    /// Tells the client which slash commands session `id` accepts (after its opening's answer).
    fn announce_commands(&self, id: &str) {
        let Some(live) = self.sessions.get(id) else {
            return;
        };
        // Under the lock, so a change announced meanwhile by the listener (see `attach`) is
        // never overtaken by an older list.
        let mut last = cordis_runtime::lock(&live.commands);
        let commands = available_commands(live.booted.root());
        *last = Some(commands.clone());
        self.connection.notify(
            "session/update",
            SessionNotification {
                session_id: id.to_owned(),
                update: SessionUpdate::AvailableCommandsUpdate {
                    available_commands: commands,
                },
            },
        );
    }

    /// Settles finished work: a session joins the connection, a prompt answers.
    fn finish(&mut self, done: Done) {
        match done {
            Done::Created(Ok(live), reply) => {
                let id = live.id.clone();
                let (modes, config_options) = self.join(id.clone(), live);
                reply.send(Ok(NewSessionResponse {
                    session_id: id.clone(),
                    modes,
                    config_options,
                }));
                self.announce_commands(&id);
            }
            Done::Created(Err(e), reply) => respond_error(reply, e),
            Done::Loaded(id, result, reply) => {
                self.loading.remove(&id);
                match result {
                    Ok(live) => {
                        let (modes, config_options) = self.join(id.clone(), live);
                        reply.send(Ok(LoadSessionResponse {
                            modes,
                            config_options,
                        }));
                        self.announce_commands(&id);
                    }
                    Err(e) => respond_error(reply, e),
                }
            }
            Done::Prompted(id, opening, result, reply) => {
                if let Some(live) = self.sessions.get_mut(&id)
                    && live.opening == opening
                {
                    live.busy = None;
                }
                reply.send(result);
            }
            Done::Closed(reply) => reply.send(Ok(json!({}))),
            Done::Listed(result, reply) => reply.send(result),
            Done::Initialized(answer, reply) => reply.send(Ok(answer)),
            Done::Switched(id, opening, mode, options, result, reply) => {
                let Some(live) = self
                    .sessions
                    .get_mut(&id)
                    .filter(|live| live.opening == opening)
                else {
                    // Closed while it switched: nothing of this opening is left to show.
                    return reply.send(result.map(|()| switched_elsewhere(options)));
                };
                live.busy = None;
                if result.is_ok()
                    && let Some(modes) = &mut live.booted.modes
                {
                    modes.current_mode_id = mode;
                }
                let answer = match result {
                    Ok(()) if options => serde_json::to_value(SetSessionConfigOptionResponse {
                        config_options: options_of(live),
                    })
                    .map_err(|e| internal(e.to_string())),
                    Ok(()) => Ok(json!({})),
                    Err(e) => Err(e),
                };
                reply.send(answer);
            }
        }
    }

    /// Ends every session: running turns end as `disposed` (logged and flushed), boots in
    /// progress finish and are disposed at once, then every composition is disposed.
    async fn teardown(mut self) {
        for live in self.sessions.values() {
            live.agent().dispose();
        }
        let drained = tokio::time::timeout(TEARDOWN_LIMIT, async {
            while let Some(done) = self.work.next().await {
                match done {
                    Done::Created(Ok(live), _) | Done::Loaded(_, Ok(live), _) => {
                        live.agent().dispose();
                        close(live).await;
                    }
                    Done::Prompted(_, _, result, reply) => reply.send(result),
                    Done::Switched(_, _, _, options, result, reply) => {
                        reply.send(result.map(|()| switched_elsewhere(options)));
                    }
                    Done::Closed(reply) => reply.send(Ok(json!({}))),
                    Done::Listed(result, reply) => reply.send(result),
                    Done::Initialized(answer, reply) => reply.send(Ok(answer)),
                    Done::Created(Err(_), _) | Done::Loaded(_, Err(_), _) => {}
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                "cordis acp: work still running {} s after the client disconnected; disposing anyway",
                TEARDOWN_LIMIT.as_secs()
            );
        }
        let sessions = std::mem::take(&mut self.sessions);
        drop(self);
        for live in sessions.into_values() {
            close(live).await;
        }
    }
}

/// `names` as `"a", "b"`.
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A session's configuration options: the mode (its presets), the model when the `llm` entry
/// offers several, the thought level when it offers any; each with its value now.
fn options_of(live: &Live) -> Vec<SessionConfigOption> {
    let mut options = live
        .booted
        .modes
        .as_ref()
        .map(SessionModeState::as_config_options)
        .unwrap_or_default();
    let Some(llm) = live.booted.root().get::<Llm>() else {
        return options;
    };
    let config = live.agent().call_config();
    let select = |id: &str, name: &str, category: &str, current: String, values: Vec<String>| {
        SessionConfigOption {
            id: id.to_owned(),
            name: name.to_owned(),
            category: category.to_owned(),
            kind: "select".to_owned(),
            current_value: current,
            options: values
                .into_iter()
                .map(|v| SessionConfigSelectOption {
                    name: v.clone(),
                    value: v,
                })
                .collect(),
        }
    };
    let models = llm.models();
    if models.len() > 1 {
        options.push(select(MODEL_OPTION, "Model", "model", config.model, models));
    }
    if !llm.thought_levels().is_empty() {
        let mut levels = vec![DEFAULT_THOUGHT.to_owned()];
        levels.extend(llm.thought_levels().iter().cloned());
        let current = config
            .reasoning_effort
            .unwrap_or_else(|| DEFAULT_THOUGHT.to_owned());
        options.push(select(
            THOUGHT_OPTION,
            "Thought level",
            "thought_level",
            current,
            levels,
        ));
    }
    options
}

/// The slash commands an editor session accepts: the terminal's, where they mean something in
/// an editor, then the prompts of the MCP servers of its composition (`scope`).
fn available_commands(scope: &cordis_runtime::Context) -> Vec<super::protocol::AvailableCommand> {
    let prompts = crate::cli::prompts::prompt_commands(scope)
        .into_iter()
        .map(|p| super::protocol::AvailableCommand {
            name: p.name,
            description: p.what,
            input: p.input.map(|hint| super::protocol::CommandInput { hint }),
        });
    crate::cli::commands::editor_commands()
        .map(|c| super::protocol::AvailableCommand {
            name: c.name().to_owned(),
            description: c.what.to_owned(),
            input: c.input().map(|hint| super::protocol::CommandInput {
                hint: hint.to_owned(),
            }),
        })
        .chain(prompts)
        .collect()
}

/// The answer to a prompt that is a slash command, or `None` for a message to the model.
fn command_answer(text: &str, live: &Live) -> Option<String> {
    use crate::cli::commands::{Line, editor_commands, parse};
    let answer = match parse(text) {
        Line::Message(_) => return None,
        Line::Help => {
            let mut lines = vec!["Commands (a prompt starting with // is a message):".to_owned()];
            lines.extend(editor_commands().map(|c| format!("- `{}`: {}", c.usage, c.what)));
            lines.join("\n")
        }
        Line::Usage => crate::cli::commands::usage_text(live.agent()),
        Line::Permissions(rest) => {
            match crate::cli::commands::permissions(live.agent(), live.booted.root(), rest) {
                Ok(lines) => lines.join("\n"),
                Err(why) => why,
            }
        }
        Line::Preset(_) => {
            "Switch presets with the editor's mode picker (`session/set_mode`).".to_owned()
        }
        Line::Clear => "Start a new session from the editor.".to_owned(),
        Line::Resume(_) => {
            "Open a past session from the editor's history (`session/list`, `session/load`)."
                .to_owned()
        }
        Line::Quit => "Close the session in the editor.".to_owned(),
        Line::Unknown(word) => format!(
            "Unknown command {word}; /help lists the commands (// sends a message that starts with /)."
        ),
    };
    Some(answer)
}

/// How many sessions one `session/list` page holds.
const LIST_PAGE: usize = 50;

/// A page of the sessions of `cwd` (all, without one), from `cursor`. Sessions whose header
/// records no working directory (`cordis run` in a composition without a workspace) are left
/// out: a listing entry must have one, and `session/load` could not open them.
async fn list(
    composition: &Composition<'_>,
    cwd: Option<PathBuf>,
    cursor: Option<String>,
) -> Result<ListSessionsResponse, RpcError> {
    let here = match &cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir()
            .map_err(|e| internal(format!("cannot read the current directory: {e}")))?,
    };
    let mut query = cordis_session::ListQuery::first(LIST_PAGE);
    query.cwd = cwd.map(|c| c.display().to_string());
    query.cursor = cursor;
    let page = composition.list(&here, query).await?;
    Ok(ListSessionsResponse {
        sessions: page
            .sessions
            .into_iter()
            .filter_map(|s| {
                Some(SessionInfo {
                    session_id: s.id,
                    cwd: s.cwd?,
                    title: s.title,
                    updated_at: Some(crate::cli::sessions::iso8601(s.modified)),
                })
            })
            .collect(),
        next_cursor: page.next_cursor,
    })
}

/// A line for the person running `cordis acp` (stderr: stdout is the protocol's).
fn note(text: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "cordis: {text}");
    let _ = err.flush();
}

/// Flushes a session's log and disposes its composition.
async fn close(live: Live) {
    if let Err(e) = live.agent().session().flush().await {
        tracing::warn!(session = %live.id, "flushing the session log failed: {e}");
    }
    live.booted.root().dispose();
}

/// The answer to a mode switch whose session is gone: `{}` for `session/set_mode`, no options
/// for `session/set_config_option` (whose answer must carry them).
fn switched_elsewhere(options: bool) -> Value {
    if options {
        json!({"configOptions": []})
    } else {
        json!({})
    }
}

fn respond_error(reply: Reply, e: RpcError) {
    reply.send::<()>(Err(e));
}

/// A request whose params were read, waiting for its reply handle.
type Pending = Box<dyn FnOnce(Reply) -> Job>;

/// Reads a message's params; answers what needs no session state (`initialize`,
/// `authenticate`, unknown methods, bad params) at once.
fn job_of(message: Incoming) -> Option<Job> {
    match message {
        Incoming::Request {
            method,
            params: raw,
            reply,
        } => {
            let job =
                match method.as_str() {
                    "initialize" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::Initialize(r, reply)) }),
                    "authenticate" => {
                        // No authentication methods are advertised; accept whatever is asked.
                        reply.send(Ok(json!({})));
                        return None;
                    }
                    "session/new" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::New(r, reply)) }),
                    "session/load" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::Load(r, true, reply)) }),
                    "session/resume" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::Load(r, false, reply)) }),
                    "session/list" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::List(r, reply)) }),
                    "session/close" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::Close(r, reply)) }),
                    "session/prompt" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::Prompt(r, reply)) }),
                    "session/set_mode" => params(raw).map(|r| -> Pending {
                        Box::new(move |reply| Job::SetMode(r, false, reply))
                    }),
                    "session/set_model" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::SetModel(r, reply)) }),
                    "session/set_config_option" => params(raw)
                        .map(|r| -> Pending { Box::new(move |reply| Job::SetConfig(r, reply)) }),
                    other => Err(RpcError::method_not_found(other)),
                };
            match job {
                Ok(job) => Some(job(reply)),
                Err(e) => {
                    respond_error(reply, e);
                    None
                }
            }
        }
        Incoming::Notification {
            method,
            params: raw,
        } => match method.as_str() {
            "session/cancel" => match params::<CancelNotification>(raw) {
                Ok(note) => Some(Job::Cancel(note)),
                Err(e) => {
                    tracing::debug!("cordis acp: a session/cancel without a session: {e}");
                    None
                }
            },
            // Other notifications (`$/cancel_request`, extensions) ask nothing of this agent.
            _ => None,
        },
    }
}

/// What the client said it does, at `initialize`.
#[derive(Debug, Clone, Copy, Default)]
struct Editor {
    /// It renders terminal cards from `_meta` (Zed's extension).
    terminal_meta: bool,
    /// It reads and writes files.
    fs: EditorFs,
    /// It runs commands in its terminals.
    terminals: bool,
    /// It shows forms (`elicitation.form`): MCP servers' questions go to it.
    forms: bool,
    /// It shows pages to open (`elicitation.url`): MCP servers' URL-mode questions go to it.
    pages: bool,
}

/// Wires a booted session to the connection: with `replay` (a load), sends the whole log
/// through the mapper first, read with the `history` service; then streams every later event of
/// its agent the same way, and answers `ask` by asking the editor. A failed replay disposes the
/// composition.
async fn attach(
    booted: Booted,
    id: String,
    cwd: PathBuf,
    connection: &Connection,
    replay: bool,
    editor: Editor,
) -> Result<Live, RpcError> {
    let Editor {
        terminal_meta: terminal_output,
        fs,
        terminals,
        forms,
        pages,
    } = editor;
    let root = booted.root().clone();
    let presenters: Option<Arc<Presenters>> = root.get::<Presenters>();
    let window = root.get::<Llm>().and_then(|llm| llm.context_window());
    let mut mapper = UpdateMapper::new(cwd.clone())
        .with_terminal_meta(terminal_output)
        .with_context_window(window)
        .titled(
            !replay
                && booted.agent.session().with_events(|events| {
                    events
                        .iter()
                        .any(|e| e.kind == cordis_session::kinds::USER_MESSAGE)
                }),
        );
    let send = {
        let connection = connection.clone();
        let id = id.clone();
        move |update: SessionUpdate| {
            connection.notify(
                "session/update",
                SessionNotification {
                    session_id: id.clone(),
                    update,
                },
            );
        }
    };
    if replay {
        let history = History::of(&root);
        // One page holding the whole log, so every result is on the page of its call.
        match history.history(&id, None, Some(usize::MAX)).await {
            Ok(page) => {
                for entry in &page.events {
                    for update in mapper.map(&entry.event, entry.view.as_ref()) {
                        send(update);
                    }
                }
            }
            Err(e) => {
                root.dispose();
                return Err(internal(format!("cannot replay session {id}: {e}")));
            }
        }
    }
    let mapper = Arc::new(Mutex::new(mapper));
    let agent_id = booted.agent.id().to_owned();
    // With an editor that shows forms or pages, MCP servers' questions go to it (else they
    // are declined, with the reason traced).
    if forms || pages {
        let elicitor = super::elicitor::EditorElicitor {
            connection: connection.clone(),
            session_id: id.clone(),
            forms,
            pages,
        };
        if let Err(e) = root.provide(cordis_mcp::Elicitation(Arc::new(elicitor))) {
            tracing::warn!(session = %id, "cannot ask the editor for MCP servers: {e}");
        }
    }
    // A page the editor showed is done with: the editor is told, by the server's id.
    if pages {
        let connection = connection.clone();
        let _ = root.on::<cordis_mcp::McpPageDone>(move |e| {
            connection.notify("elicitation/complete", json!({"elicitationId": e.id}));
        });
    }
    // With an editor that runs commands, a full-access `bash` runs them there.
    if terminals {
        let host = EditorTerminals {
            connection: connection.clone(),
            session_id: id.clone(),
        };
        if let Err(e) = root.provide(cordis_tool_shell::CommandHostService(Arc::new(host))) {
            tracing::warn!(session = %id, "cannot run commands in the editor's terminal: {e}");
        }
    }
    // With an editor that reads or writes files, the file tools go through it.
    let changing_since = Arc::new(Mutex::new(None));
    if fs.any() {
        let files = EditorFiles {
            connection: connection.clone(),
            session_id: id.clone(),
            fs,
            changing_since: changing_since.clone(),
        };
        if let Err(e) = root.provide(FileRouteService(Arc::new(files))) {
            tracing::warn!(session = %id, "cannot route the file tools through the editor: {e}");
        }
    }
    let views = LiveViews {
        scope: booted.agent.scope_key(),
        tools: root.get::<ToolRegistry>(),
        presenters: presenters.clone(),
    };
    // Called synchronously as each event is logged, so every update of a turn is queued
    // before the turn's answer (one outgoing queue keeps them in order).
    // An MCP server's progress on a running call (not logged; the result follows).
    let progress_mapper = mapper.clone();
    let progress_send = send.clone();
    let _ = root.on::<cordis_mcp::McpProgress>(move |e| {
        let update = cordis_runtime::lock(&progress_mapper).mcp_progress(
            &e.call_id,
            e.progress,
            e.total,
            e.message.as_deref(),
        );
        if let Some(update) = update {
            progress_send(update);
        }
    });
    // An MCP server's prompts changed (its list, a reconnect): the commands are announced
    // again when they differ from the last announcement. (The listener holds the root; the
    // root's disposal drops it.)
    let commands = Arc::new(Mutex::new(None));
    let announced = commands.clone();
    let commands_send = send.clone();
    let scope = root.clone();
    let _ = root.on::<cordis_mcp::McpPromptsChanged>(move |_| {
        let mut last = cordis_runtime::lock(&announced);
        let now = available_commands(&scope);
        if last.as_ref().is_some_and(|last| *last != now) {
            *last = Some(now.clone());
            commands_send(SessionUpdate::AvailableCommandsUpdate {
                available_commands: now,
            });
        }
    });
    // A running command's output, as it arrives (not logged; the result follows).
    let live_mapper = mapper.clone();
    let live_send = send.clone();
    let _ = root.on::<cordis_tool_shell::CommandOutput>(move |e| {
        let update = cordis_runtime::lock(&live_mapper).live_output(&e.call_id, &e.text);
        if let Some(update) = update {
            live_send(update);
        }
    });
    let _ = root.on::<AgentEvent>(move |e| {
        if e.agent != agent_id {
            return;
        }
        if fs.read
            && let cordis_session::EventView::ToolCall(call) = e.event.view()
        {
            // A call that may change files behind the editor's back (not the file tools,
            // which write through it): from now on, a file changed on disk is read from disk
            // (see `files`).
            let harmless = views
                .tools
                .as_ref()
                .and_then(|t| t.effect(&call.name, Some(views.scope)))
                .is_some_and(|(effect, _)| effect.is_harmless());
            let through_editor = fs.write
                && [cordis_tool_fs::WRITE_FILE, cordis_tool_fs::EDIT_FILE]
                    .contains(&call.name.as_str());
            if !harmless && !through_editor {
                *cordis_runtime::lock(&changing_since) = Some(std::time::SystemTime::now());
            }
        }
        let updates = cordis_runtime::lock(&mapper).map_live(&e.event, &views);
        for update in updates {
            // The editor shows what it sent; the echo is for replays only.
            if !matches!(update, SessionUpdate::UserMessageChunk { .. }) {
                send(update);
            }
        }
    });
    let approver = EditorApprover {
        connection: connection.clone(),
        session_id: id.clone(),
        presenters,
        cwd,
    };
    if let Err(e) = root.provide(ApproverService(Arc::new(approver))) {
        tracing::warn!(session = %id, "cannot provide the editor approver: {e}");
    }
    Ok(Live {
        id,
        opening: 0,
        booted,
        busy: None,
        stale: false,
        commands,
    })
}
