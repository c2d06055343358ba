//! The connection's state and its one loop: requests in arrival order, work as futures it owns.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema as acp_schema;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, SessionId, SessionNotification,
    SessionUpdate, SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error};
use cordis_agent_loop::{Agent, AgentEvent, TurnError};
use cordis_agent_presets::AgentPresets;
use cordis_approvals::ApproverService;
use cordis_history::History;
use cordis_llm::{Chunk, FinishReason};
use cordis_presenter::Presenters;
use cordis_session::{AssistantChunkData, SessionEvent, TurnEndReason};
use cordis_tools::ToolRegistry;
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, watch};

use super::approver::EditorApprover;
use super::session::{Booted, Composition, McpServer, Opening, internal, invalid_params};
use super::updates::{LiveViews, UpdateMapper};

/// How long a disconnect waits for running turns and boots to wind down before giving up.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(30);

/// A request the dispatch loop handed over (handlers only forward, so they never block it).
pub enum Job {
    /// `session/new`.
    New(NewSessionRequest, Responder<NewSessionResponse>),
    /// `session/load`.
    Load(LoadSessionRequest, Responder<LoadSessionResponse>),
    /// `session/prompt`.
    Prompt(PromptRequest, Responder<PromptResponse>),
    /// `session/cancel`.
    Cancel(CancelNotification),
    /// `session/set_mode`.
    SetMode(SetSessionModeRequest, Responder<SetSessionModeResponse>),
}

/// What a piece of work ended with.
enum Done {
    Created(Result<Live, Error>, Responder<NewSessionResponse>),
    Loaded(String, Result<Live, Error>, Responder<LoadSessionResponse>),
    Prompted(
        String,
        Result<PromptResponse, Error>,
        Responder<PromptResponse>,
    ),
    Switched(String, Result<(), Error>, Responder<SetSessionModeResponse>),
}

/// A session open on this connection.
struct Live {
    id: String,
    booted: Booted,
    /// Set while a prompt runs; sending on it cancels that prompt's turn.
    busy: Option<Busy>,
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

/// A new session id: time, process and a counter, so two agents sharing a sessions root never
/// pick the same one.
fn new_session_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("acp-{ms}-{}-{n}", std::process::id())
}

/// The session's cwd, which must be absolute (it becomes the workspace root).
fn absolute_cwd(cwd: &std::path::Path) -> Result<PathBuf, Error> {
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
fn check_extras(
    dirs: &[PathBuf],
    mcp_servers: &[acp_schema::McpServer],
) -> Result<Vec<McpServer>, Error> {
    if !dirs.is_empty() {
        return Err(invalid_params("additionalDirectories is not supported"));
    }
    mcp_servers
        .iter()
        .map(|server| match server {
            acp_schema::McpServer::Stdio(s) => Ok(McpServer {
                name: s.name.clone(),
                command: s.command.display().to_string(),
                args: s.args.clone(),
                env: s.env.iter().map(|v| (v.name.clone(), v.value.clone())).collect(),
            }),
            acp_schema::McpServer::Http(s) => Err(invalid_params(format!(
                "mcpServers \"{}\": only stdio servers are supported (mcpCapabilities.http is false)",
                s.name
            ))),
            acp_schema::McpServer::Sse(s) => Err(invalid_params(format!(
                "mcpServers \"{}\": only stdio servers are supported (mcpCapabilities.sse is false)",
                s.name
            ))),
            _ => Err(invalid_params(
                "mcpServers: only stdio servers are supported",
            )),
        })
        .collect()
}

/// The prompt as one user message: text blocks as they are, resource links as a marker line.
///
/// # Errors
/// Content the agent did not advertise (images, audio, embedded resources), or nothing to say.
pub fn prompt_text(blocks: &[ContentBlock]) -> Result<String, Error> {
    let mut text = String::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::ResourceLink(link) => text.push_str(&format!(
                "\n[resource_link name=\"{}\" uri=\"{}\"]\n",
                link.name, link.uri
            )),
            ContentBlock::Image(_) => {
                return Err(invalid_params(
                    "image content is not supported (promptCapabilities.image is false)",
                ));
            }
            ContentBlock::Audio(_) => {
                return Err(invalid_params(
                    "audio content is not supported (promptCapabilities.audio is false)",
                ));
            }
            _ => {
                return Err(invalid_params(
                    "embedded resources are not supported (promptCapabilities.embeddedContext is false)",
                ));
            }
        }
    }
    if text.trim().is_empty() {
        return Err(invalid_params("the prompt is empty"));
    }
    Ok(text)
}

/// Why a turn ended, as a prompt's answer.
fn stop_reason(
    ended: Result<TurnEndReason, TurnError>,
    events: &[SessionEvent],
) -> Result<PromptResponse, Error> {
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
    Ok(PromptResponse::new(reason))
}

/// The server of one connection.
pub struct Server<'c> {
    composition: &'c Composition<'c>,
    connection: ConnectionTo<Client>,
    sessions: BTreeMap<String, Live>,
    /// Ids being loaded (reserved before the async resume, so a second load is refused).
    loading: std::collections::BTreeSet<String>,
    work: FuturesUnordered<LocalBoxFuture<'c, Done>>,
}

impl<'c> Server<'c> {
    /// A server for `connection` whose sessions boot `composition`.
    pub fn new(composition: &'c Composition<'c>, connection: ConnectionTo<Client>) -> Self {
        Server {
            composition,
            connection,
            sessions: BTreeMap::new(),
            loading: Default::default(),
            work: FuturesUnordered::new(),
        }
    }

    /// Serves until the client closes its side, then disposes every session (running turns end
    /// as `disposed` in their logs) and returns.
    ///
    /// # Errors
    /// None today; the result is the crate's shape for a connection's main function.
    pub async fn run(mut self, mut jobs: mpsc::UnboundedReceiver<Job>) -> Result<(), Error> {
        let connection = self.connection.clone();
        let closed = connection.incoming_closed();
        tokio::pin!(closed);
        loop {
            tokio::select! {
                biased;
                job = jobs.recv() => match job {
                    Some(job) => self.accept(job),
                    None => break,
                },
                Some(done) = self.work.next(), if !self.work.is_empty() => self.finish(done),
                () = &mut closed => break,
            }
        }
        // Anything still queued arrived with (or after) the close: it starts nothing.
        jobs.close();
        while let Ok(job) = jobs.try_recv() {
            drop(job);
        }
        self.teardown().await;
        Ok(())
    }

    /// Starts a request: checks what can be checked at once (in arrival order, so a cancel
    /// always finds the prompt sent before it), then queues the async part.
    fn accept(&mut self, job: Job) {
        match job {
            Job::New(req, responder) => {
                let (cwd, mcp) = match absolute_cwd(&req.cwd).and_then(|cwd| {
                    check_extras(&req.additional_directories, &req.mcp_servers).map(|m| (cwd, m))
                }) {
                    Ok(checked) => checked,
                    Err(e) => return respond_error(responder, e),
                };
                let composition = self.composition;
                let connection = self.connection.clone();
                self.work.push(Box::pin(async move {
                    let id = new_session_id();
                    let live = match composition
                        .boot(&cwd, &Opening::New(id.clone()), &mcp)
                        .await
                    {
                        Ok(b) => attach(b, id, cwd, &connection, false).await,
                        Err(e) => Err(e),
                    };
                    Done::Created(live, responder)
                }));
            }
            Job::Load(req, responder) => {
                let id = req.session_id.0.to_string();
                let (cwd, mcp) = match absolute_cwd(&req.cwd).and_then(|cwd| {
                    check_extras(&req.additional_directories, &req.mcp_servers).map(|m| (cwd, m))
                }) {
                    Ok(checked) => checked,
                    Err(e) => return respond_error(responder, e),
                };
                if self.sessions.contains_key(&id) || self.loading.contains(&id) {
                    return respond_error(
                        responder,
                        invalid_params(format!("session {id} is already open on this connection")),
                    );
                }
                self.loading.insert(id.clone());
                let composition = self.composition;
                let connection = self.connection.clone();
                self.work.push(Box::pin(async move {
                    let live = match composition
                        .boot(&cwd, &Opening::Load(id.clone()), &mcp)
                        .await
                    {
                        Ok(b) => attach(b, id.clone(), cwd, &connection, true).await,
                        Err(e) => Err(e),
                    };
                    Done::Loaded(id, live, responder)
                }));
            }
            Job::Prompt(req, responder) => {
                let id = req.session_id.0.to_string();
                let Some(live) = self.sessions.get_mut(&id) else {
                    return respond_error(
                        responder,
                        invalid_params(format!("unknown session {id}")),
                    );
                };
                match live.busy {
                    Some(Busy::Prompt(_)) => {
                        return respond_error(
                            responder,
                            invalid_params(format!(
                                "a prompt is already in flight in session {id}"
                            )),
                        );
                    }
                    Some(Busy::Switching) => {
                        return respond_error(
                            responder,
                            invalid_params(format!(
                                "session {id} is switching modes; prompt when set_mode has answered"
                            )),
                        );
                    }
                    None => {}
                }
                let text = match prompt_text(&req.prompt) {
                    Ok(t) => t,
                    Err(e) => return respond_error(responder, e),
                };
                let (cancel, mut cancelled) = watch::channel(false);
                live.busy = Some(Busy::Prompt(cancel));
                let agent = live.agent().clone();
                self.work.push(Box::pin(async move {
                    let from = agent.session().len();
                    let ended = {
                        let turn = agent.run_turn(text);
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
                    Done::Prompted(id, result, responder)
                }));
            }
            Job::Cancel(note) => {
                let id = note.session_id.0.to_string();
                // Unknown sessions and idle ones: nothing to cancel.
                if let Some(Busy::Prompt(cancel)) =
                    self.sessions.get(&id).and_then(|l| l.busy.as_ref())
                {
                    let _ = cancel.send(true);
                }
            }
            Job::SetMode(req, responder) => {
                let id = req.session_id.0.to_string();
                let mode = req.mode_id.0.to_string();
                let Some(live) = self.sessions.get_mut(&id) else {
                    return respond_error(
                        responder,
                        invalid_params(format!("unknown session {id}")),
                    );
                };
                let Some(roster) = live.booted.root().get::<AgentPresets>() else {
                    return respond_error(
                        responder,
                        invalid_params(
                            "this agent has no modes (its config has no `agent-presets` entry)",
                        ),
                    );
                };
                if live.busy.is_some() {
                    return respond_error(
                        responder,
                        invalid_params(format!(
                            "session {id} is busy; switch modes between prompts"
                        )),
                    );
                }
                live.busy = Some(Busy::Switching);
                let agent = live.agent().clone();
                self.work.push(Box::pin(async move {
                    // The roster refuses a session that already has a turn (its history was
                    // written under the old preset) and an unknown or broken preset.
                    let switched = roster
                        .switch(&agent, &mode)
                        .await
                        .map(drop)
                        .map_err(|e| invalid_params(e.to_string()));
                    Done::Switched(id, switched, responder)
                }));
            }
        }
    }

    /// Settles finished work: a session joins the connection, a prompt answers.
    fn finish(&mut self, done: Done) {
        match done {
            Done::Created(Ok(live), responder) => {
                let id = live.id.clone();
                let modes = live.booted.modes.clone();
                self.sessions.insert(id.clone(), live);
                let _ = responder.respond(NewSessionResponse::new(SessionId::new(id)).modes(modes));
            }
            Done::Created(Err(e), responder) => respond_error(responder, e),
            Done::Loaded(id, result, responder) => {
                self.loading.remove(&id);
                match result {
                    Ok(live) => {
                        let modes = live.booted.modes.clone();
                        self.sessions.insert(id, live);
                        let _ = responder.respond(LoadSessionResponse::new().modes(modes));
                    }
                    Err(e) => respond_error(responder, e),
                }
            }
            Done::Prompted(id, result, responder) => {
                if let Some(live) = self.sessions.get_mut(&id) {
                    live.busy = None;
                }
                let _ = responder.respond_with_result(result);
            }
            Done::Switched(id, result, responder) => {
                if let Some(live) = self.sessions.get_mut(&id) {
                    live.busy = None;
                }
                let _ =
                    responder.respond_with_result(result.map(|()| SetSessionModeResponse::new()));
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
                    Done::Prompted(id, result, responder) => {
                        if let Some(live) = self.sessions.get_mut(&id) {
                            live.busy = None;
                        }
                        let _ = responder.respond_with_result(result);
                    }
                    Done::Switched(_, result, responder) => {
                        let _ = responder
                            .respond_with_result(result.map(|()| SetSessionModeResponse::new()));
                    }
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

/// Flushes a session's log and disposes its composition.
async fn close(live: Live) {
    if let Err(e) = live.agent().session().flush().await {
        tracing::warn!(session = %live.id, "flushing the session log failed: {e}");
    }
    live.booted.root().dispose();
}

fn respond_error<T: agent_client_protocol::JsonRpcResponse>(responder: Responder<T>, e: Error) {
    let _ = responder.respond_with_error(e);
}

/// Wires a booted session to the connection: with `replay` (a load), sends the whole log
/// through the mapper first, read with the `history` service; then streams every later event of
/// its agent the same way, and answers `ask` by asking the editor. A failed replay disposes the
/// composition.
async fn attach(
    booted: Booted,
    id: String,
    cwd: PathBuf,
    connection: &ConnectionTo<Client>,
    replay: bool,
) -> Result<Live, Error> {
    let root = booted.root().clone();
    let presenters: Option<Arc<Presenters>> = root.get::<Presenters>();
    let mut mapper = UpdateMapper::new(cwd);
    let send = {
        let connection = connection.clone();
        let id = id.clone();
        move |update: SessionUpdate| {
            let _ = connection.send_notification(SessionNotification::new(
                SessionId::new(id.as_str()),
                update,
            ));
        }
    };
    if replay {
        let history = root
            .get::<History>()
            .map_or_else(|| History::new(root.clone()), |h| (*h).clone());
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
    let mapper = Mutex::new(mapper);
    let agent_id = booted.agent.id().to_owned();
    let views = LiveViews {
        scope: booted.agent.scope_key(),
        tools: root.get::<ToolRegistry>(),
        presenters: presenters.clone(),
    };
    // Called synchronously as each event is logged, so every update of a turn is queued
    // before the turn's answer (one outgoing queue keeps them in order).
    let _ = root.on::<AgentEvent>(move |e| {
        if e.agent != agent_id {
            return;
        }
        let updates = cordis_runtime::lock(&mapper).map_live(&e.event, &views);
        for update in updates {
            // The editor shows what it sent; the echo is for replays only.
            if !matches!(update, SessionUpdate::UserMessageChunk(_)) {
                send(update);
            }
        }
    });
    let approver = EditorApprover {
        connection: connection.clone(),
        session_id: id.clone(),
        presenters,
    };
    if let Err(e) = root.provide(ApproverService(Arc::new(approver))) {
        tracing::warn!(session = %id, "cannot provide the editor approver: {e}");
    }
    Ok(Live {
        id,
        booted,
        busy: None,
    })
}
