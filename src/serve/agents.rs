//! The page's agent plane: sessions started (or resumed) from the page on the served
//! composition, prompts, cancels, and the approvals the page answers — a third approver beside
//! the terminal and the editor, deciding through the same approvals service (so "always"
//! grants are logged and a resumed session holds them, whichever front end resumes it). MCP
//! servers' forms (`elicitation/create`) wait in the same list and are filled in the page.
//!
//! Each page session is one agent of the composition's `agent-loop`, its id the session id,
//! logging to the composition's sessions store: `cordis run --resume ID`, `cordis history ID`
//! and an editor's `session/load` read what the page did.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_agent_loop::{Agent, AgentEvent, AgentLoop, AgentOptions, AgentState};
use cordis_agent_presets::AgentPresets;
use cordis_approvals::{Answer, ApprovalRequest, Approver, ApproverService};
use cordis_mcp::{ElicitationAnswer, ElicitationRequest, Elicitor};
use cordis_presenter::Presenters;
use cordis_runtime::{Context, EffectHandle, lock};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{broadcast, oneshot};

use super::Outgoing;
use super::live::Tails;

/// The most questions (approvals and forms) waiting at once (further ones are denied, or
/// declined, saying why).
pub const MAX_WAITING_APPROVALS: usize = 64;

/// The longest prompt the page may send.
pub const MAX_PROMPT_BYTES: usize = 256 << 10;

/// How long a stopping server waits for cancelled turns to end.
const SETTLE: Duration = Duration::from_secs(5);

/// Why a page request about sessions cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    /// No agent can be made: the composition lacks the services.
    #[error("{0}")]
    Unavailable(String),
    /// No live session with that id in this server.
    #[error(
        "session {0} is not open in this page: open it first (POST /api/sessions with \"resume\")"
    )]
    NotOpen(String),
    /// A turn is running.
    #[error("session {0} is answering; cancel it or wait")]
    Busy(String),
    /// The request is malformed.
    #[error("{0}")]
    Invalid(String),
}

impl AgentsError {
    /// The HTTP status for it.
    pub fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            AgentsError::Unavailable(_) => StatusCode::CONFLICT,
            AgentsError::NotOpen(_) => StatusCode::NOT_FOUND,
            AgentsError::Busy(_) => StatusCode::CONFLICT,
            AgentsError::Invalid(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// A question waiting for the page.
struct Waiting {
    question: Value,
    reply: Reply,
}

/// Where a waiting question's answer goes.
enum Reply {
    /// An approval question.
    Approval(oneshot::Sender<Answer>),
    /// An MCP server's form, with its schema (an answer is checked against it first); a
    /// page to open (URL mode) has none.
    Form {
        schema: Option<Value>,
        reply: oneshot::Sender<ElicitationAnswer>,
    },
}

/// An answer, of the kind its question asked.
enum Decided {
    Approval(Answer),
    Form(ElicitationAnswer),
}

impl Reply {
    /// The asker stopped waiting (its turn was cancelled).
    fn is_closed(&self) -> bool {
        match self {
            Reply::Approval(reply) => reply.is_closed(),
            Reply::Form { reply, .. } => reply.is_closed(),
        }
    }
}

impl Inner {
    /// Adds question `id` to the waiting list and tells the pages (`event`); `false` when
    /// [`MAX_WAITING_APPROVALS`] already wait.
    fn wait(&self, id: u64, event: &'static str, question: Value, reply: Reply) -> bool {
        {
            let mut waiting = lock(&self.waiting);
            waiting.retain(|_, w| !w.reply.is_closed());
            if waiting.len() >= MAX_WAITING_APPROVALS {
                return false;
            }
            waiting.insert(
                id,
                Waiting {
                    question: question.clone(),
                    reply,
                },
            );
        }
        send(&self.events, event, question);
        true
    }

    /// The page session whose agent runs in scope `scope` (a live event's origin), if any.
    fn page_session(&self, scope: Option<cordis_tools::ScopeKey>) -> Option<String> {
        let session = self
            .root
            .get::<AgentLoop>()
            .and_then(|loops| loops.agent_by_scope(scope?))
            .map(|a| a.id().to_owned())?;
        lock(&self.agents).contains_key(&session).then_some(session)
    }

    /// Question `id` no longer waits (dropped unanswered): the pages forget it too.
    fn withdraw(&self, id: u64) {
        if lock(&self.waiting).remove(&id).is_some() {
            send(&self.events, "answered", json!({"id": id}));
        }
    }
}

/// What the approver and the handlers share.
struct Inner {
    root: Context,
    /// Live page sessions by id.
    agents: Mutex<BTreeMap<String, Agent>>,
    waiting: Mutex<BTreeMap<u64, Waiting>>,
    next: AtomicU64,
    /// To the pages listening (`agent`, `state`, `approval`, `answered` events; `delta` and
    /// `output` to the pages showing their session).
    events: broadcast::Sender<Outgoing>,
    /// The page sessions' running commands' output.
    tails: Arc<Tails>,
    /// The turns running, owned here (aborted after a settle on shutdown).
    turns: Mutex<tokio::task::JoinSet<()>>,
}

/// The page's sessions and approvals.
pub struct WebAgents {
    inner: Arc<Inner>,
    /// The approver and the event listeners, undone when the server stops.
    handles: Vec<EffectHandle>,
    /// Sends the running commands' output to the pages.
    forwarding: Option<tokio::task::JoinHandle<()>>,
}

fn send(events: &broadcast::Sender<Outgoing>, kind: &'static str, data: Value) {
    let _ = events.send(Outgoing::all(kind, data.to_string()));
}

/// Tells the pages showing `session` (only them) `kind` with `data`.
fn send_to(events: &broadcast::Sender<Outgoing>, session: &str, kind: &'static str, data: Value) {
    let _ = events.send(Outgoing {
        kind,
        data: data.to_string(),
        only: Some(session.to_owned()),
    });
}

/// What the pages are told of a page session's logged event: `assistant/chunk` text as a
/// `delta` (to the pages showing it: the answer grows as it streams; other chunks need no
/// redraw), anything else as an `agent` event (a redraw). A result ends its call's live output.
fn tell_event(inner: &Inner, e: &AgentEvent) {
    use cordis_session::EventView;
    match e.event.view() {
        EventView::AssistantChunk(chunk) => {
            let (text, thought) = match chunk.chunk {
                cordis_llm::Chunk::Text { delta } => (delta, false),
                cordis_llm::Chunk::Reasoning { delta } => (delta, true),
                _ => return,
            };
            send_to(
                &inner.events,
                &e.agent,
                "delta",
                json!({"session": e.agent, "seq": e.event.seq, "turn": chunk.turn,
                       "step": chunk.step, "text": text, "thought": thought}),
            );
            return;
        }
        EventView::ToolResult(result) => inner.tails.end(&result.call_id),
        _ => {}
    }
    send(
        &inner.events,
        "agent",
        json!({"session": e.agent, "seq": e.event.seq, "type": e.event.kind}),
    );
}

/// Answers approvals through the page.
struct PageApprover(Arc<Inner>);

impl Approver for PageApprover {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        let inner = self.0.clone();
        let session = request.scope.and_then(|key| {
            inner
                .root
                .get::<AgentLoop>()
                .and_then(|loops| loops.agent_by_scope(key))
                .map(|a| a.id().to_owned())
        });
        let card = inner
            .root
            .get::<Presenters>()
            .map(|p| p.present_approval(&request.call.name, &request.call.arguments));
        let id = inner.next.fetch_add(1, Ordering::Relaxed) + 1;
        let question = json!({
            "id": id,
            "kind": "approval",
            "session": session,
            "tool": request.call.name,
            "view": card,
            "grants": request.grants,
            "always": cordis_approvals::Always::of(&request.grants)
                .map(|a| format!("Always {} (this session){}", a.describe(str::to_owned), a.suffix())),
        });
        let (reply, answer) = oneshot::channel();
        if !inner.wait(id, "approval", question, Reply::Approval(reply)) {
            return Box::pin(async {
                Answer::Deny(Some(format!(
                    "{MAX_WAITING_APPROVALS} questions already wait for the page"
                )))
            });
        }
        Box::pin(async move {
            let answer = answer
                .await
                .unwrap_or(Answer::Deny(Some("the question was withdrawn".to_owned())));
            inner.withdraw(id);
            answer
        })
    }
}

/// Shows MCP servers' forms in the page.
struct PageElicitor(Arc<Inner>);

impl Elicitor for PageElicitor {
    fn elicit(&self, request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer> {
        let inner = self.0.clone();
        let id = inner.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (question, schema) = match &request.url {
            // A page to open: shown whole, opened by the person's own click.
            Some(page) => (
                json!({"id": id, "kind": "page", "server": request.server,
                       "message": request.message, "url": page.url}),
                None,
            ),
            None => {
                let fields = match cordis_mcp::fields(&request.schema) {
                    Ok(fields) => fields,
                    Err(why) => return Box::pin(async { ElicitationAnswer::NotAsked(why) }),
                };
                let question = json!({
                    "id": id,
                    "kind": "form",
                    "server": request.server,
                    "message": request.message,
                    "fields": fields
                        .iter()
                        .map(|f| {
                            json!({"name": f.name, "property": f.property, "required": f.required,
                                   "choices": f.choices(), "multi": f.is_multi()})
                        })
                        .collect::<Vec<_>>(),
                });
                (question, Some(request.schema))
            }
        };
        let (reply, answer) = oneshot::channel();
        if !inner.wait(id, "form", question, Reply::Form { schema, reply }) {
            return Box::pin(async {
                ElicitationAnswer::NotAsked(format!(
                    "{MAX_WAITING_APPROVALS} questions already wait for the page"
                ))
            });
        }
        Box::pin(async move {
            let answer = answer.await.unwrap_or_else(|_| {
                ElicitationAnswer::NotAsked("the page stopped waiting".to_owned())
            });
            inner.withdraw(id);
            answer
        })
    }
}

impl WebAgents {
    /// The agent plane of the composition at `root`, its events sent on `events`. Provides the
    /// page's approver unless the composition has one of its own.
    pub fn new(root: Context, events: broadcast::Sender<Outgoing>) -> WebAgents {
        let tails = Arc::new(Tails::default());
        let forwarding = tokio::runtime::Handle::try_current()
            .ok()
            .map(|rt| rt.spawn(super::live::forward(tails.clone(), events.clone())));
        let inner = Arc::new(Inner {
            root: root.clone(),
            agents: Mutex::new(BTreeMap::new()),
            waiting: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
            events,
            tails,
            turns: Mutex::new(tokio::task::JoinSet::new()),
        });
        let mut handles = Vec::new();
        match root.provide(ApproverService(Arc::new(PageApprover(inner.clone())))) {
            Ok(handle) => handles.push(handle),
            Err(e) => tracing::warn!("the page cannot answer approvals: {e}"),
        }
        match root.provide(cordis_mcp::Elicitation(Arc::new(PageElicitor(
            inner.clone(),
        )))) {
            Ok(handle) => handles.push(handle),
            Err(e) => tracing::warn!("the page cannot fill in MCP servers' forms: {e}"),
        }
        let listening = inner.clone();
        handles.push(root.on::<AgentEvent>(move |e| {
            if lock(&listening.agents).contains_key(&e.agent) {
                tell_event(&listening, e);
            }
        }));
        // A page session's running command's output (bounded: see `live`).
        let listening = inner.clone();
        handles.push(root.on::<cordis_tool_shell::CommandOutput>(move |e| {
            if let Some(session) = listening.page_session(e.scope) {
                listening.tails.push(&session, &e.call_id, &e.text);
            }
        }));
        // An MCP server's progress on a page session's running call (not logged either).
        let listening = inner.clone();
        handles.push(root.on::<cordis_mcp::McpProgress>(move |e| {
            if let Some(session) = listening.page_session(e.scope) {
                let progress = super::live::Progress {
                    progress: e.progress,
                    total: e.total,
                    message: e.message.clone(),
                };
                listening.tails.progress(&session, &e.call_id, progress);
            }
        }));
        let listening = inner.clone();
        handles.push(root.on::<AgentState>(move |e| {
            if lock(&listening.agents).contains_key(&e.agent) {
                send(
                    &listening.events,
                    "state",
                    json!({"session": e.agent, "busy": e.busy}),
                );
            }
        }));
        WebAgents {
            inner,
            handles,
            forwarding,
        }
    }

    /// The page's live sessions and whether each is answering, and what a new one may choose.
    pub async fn overview(&self) -> Value {
        let live: Vec<Value> = {
            let mut agents = lock(&self.inner.agents);
            agents.retain(|_, a| a.context().is_some());
            agents
                .iter()
                .map(|(id, a)| json!({"id": id, "busy": a.is_busy()}))
                .collect()
        };
        let presets = match self.inner.root.get::<AgentPresets>() {
            Some(roster) => roster
                .list_async()
                .await
                .into_iter()
                .filter(|p| p.broken.is_none())
                .map(|p| json!({"id": p.id, "name": p.name}))
                .collect(),
            None => Vec::new(),
        };
        let waiting: Vec<Value> = {
            let mut waiting = lock(&self.inner.waiting);
            waiting.retain(|_, w| !w.reply.is_closed());
            waiting.values().map(|w| w.question.clone()).collect()
        };
        let models = self
            .inner
            .root
            .get::<AgentLoop>()
            .map(|l| l.llm().models())
            .unwrap_or_default();
        let commands: Vec<Value> = crate::session::commands::editor_commands()
            .map(|c| json!({"name": c.name(), "usage": c.usage, "what": c.what}))
            .collect();
        json!({
            "available": self.inner.root.get::<AgentLoop>().is_some(),
            "commands": commands,
            "models": models,
            "live": live,
            "presets": presets,
            "approvals": waiting,
        })
    }

    /// Opens a session in the page: `resume` an existing one, or a new one (joined to `preset`
    /// where the composition has presets, on `model` among the `llm` entry's); its id.
    ///
    /// # Errors
    /// No `agent-loop`, a preset without presets, a model not offered, or a session that
    /// cannot be opened.
    pub async fn open(
        &self,
        resume: Option<String>,
        preset: Option<String>,
        model: Option<String>,
    ) -> Result<String, AgentsError> {
        let root = &self.inner.root;
        let Some(loops) = root.get::<AgentLoop>() else {
            return Err(AgentsError::Unavailable(
                "the composition provides no `agent-loop` service: add `llm`, `sessions` and `agent-loop` entries (see the bundled cordis.yml)".into(),
            ));
        };
        let id = match resume {
            Some(id) if id.is_empty() || id.len() > 200 || id.contains(['/', '\\', '\0']) => {
                return Err(AgentsError::Invalid(format!("{id:?} is not a session id")));
            }
            Some(id) => id,
            None => crate::session::id::new_id(),
        };
        if let Some(agent) = lock(&self.inner.agents).get(&id)
            && agent.context().is_some()
        {
            return Ok(id);
        }
        let offered = loops.llm().models();
        let model = match model {
            Some(model) if offered.contains(&model) => model,
            Some(model) => {
                return Err(AgentsError::Invalid(format!(
                    "unknown model {model:?}; this composition offers {} (the `llm` entry's `model` and `models`)",
                    offered
                        .iter()
                        .map(|m| format!("{m:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            None => offered
                .first()
                .cloned()
                .unwrap_or_else(|| "default".to_owned()),
        };
        let mut options = AgentOptions::new(id.clone(), model);
        options.session_id = Some(id.clone());
        options.cwd = crate::session::open::project_dir();
        let made = crate::session::open::join_agent(root, options, preset.as_deref())
            .await
            .map_err(|e| e.to_string());
        let agent = made.map_err(AgentsError::Unavailable)?;
        lock(&self.inner.agents).insert(id.clone(), agent);
        Ok(id)
    }

    /// Forks session `parent` through seq `at` (`None`: its end; a turn open there is left
    /// out) into a new session of the served directory, and opens it in the page; its id.
    ///
    /// # Errors
    /// No `agent-loop`, an unknown parent, `at` past its log or before its first complete
    /// turn, or a fork that cannot be written or opened.
    pub async fn fork(&self, parent: &str, at: Option<u64>) -> Result<String, AgentsError> {
        let Some(loops) = self.inner.root.get::<AgentLoop>() else {
            return Err(AgentsError::Unavailable(
                "the composition provides no `agent-loop` service: add `llm`, `sessions` and `agent-loop` entries (see the bundled cordis.yml)".into(),
            ));
        };
        let id = crate::session::id::new_id();
        let cwd = crate::session::open::project_dir();
        // Held until the agent has opened the same (shared) session.
        let _forked = loops
            .sessions()
            .fork(parent, at, &id, cwd)
            .await
            .map_err(|e| match e {
                cordis_session::ForkError::Session(e) => AgentsError::Unavailable(e.to_string()),
                refused => AgentsError::Invalid(refused.to_string()),
            })?;
        self.open(Some(id), None, None).await
    }

    /// Session `id` is open in the page (this process runs its turns).
    pub fn is_open(&self, id: &str) -> bool {
        self.agent(id).is_ok()
    }

    fn agent(&self, id: &str) -> Result<Agent, AgentsError> {
        lock(&self.inner.agents)
            .get(id)
            .filter(|a| a.context().is_some())
            .cloned()
            .ok_or_else(|| AgentsError::NotOpen(id.to_owned()))
    }

    /// Starts a turn of session `id` on `text`; it runs on while the page does other things.
    ///
    /// # Errors
    /// Not open here, busy, or an empty or too long prompt.
    pub async fn prompt(&self, id: &str, text: String) -> Result<Option<String>, AgentsError> {
        if text.trim().is_empty() {
            return Err(AgentsError::Invalid("the prompt is empty".into()));
        }
        if text.len() > MAX_PROMPT_BYTES {
            return Err(AgentsError::Invalid(format!(
                "the prompt is longer than {MAX_PROMPT_BYTES} bytes"
            )));
        }
        let agent = self.agent(id)?;
        // A skill or an MCP server's prompt: its rendering is the message.
        let text = if crate::session::prompts::names_prompt(&self.inner.root, &text) {
            match crate::session::prompts::expand(&self.inner.root, &text).await {
                Some(Ok(expanded)) => expanded,
                Some(Err(why)) => return Ok(Some(why)),
                None => text,
            }
        } else {
            text
        };
        // A slash command is answered here, through the session core, and starts no turn.
        if let Some(answer) = crate::session::commands::answer(
            &text,
            &agent,
            &self.inner.root,
            crate::session::commands::Front::Page,
        ) {
            let focus = match answer {
                crate::session::commands::Answer::Now(text) => return Ok(Some(text)),
                crate::session::commands::Answer::Compact(focus) => focus,
            };
            if agent.is_busy() {
                return Err(AgentsError::Busy(id.to_owned()));
            }
            // Owned by the turns set, not by this request: a page that goes away mid-summary
            // does not leave the agent half-compacted (`Agent::compact` is not cancel safe).
            let (tx, rx) = tokio::sync::oneshot::channel();
            lock(&self.inner.turns).spawn(async move {
                let _ = tx.send(crate::session::commands::compact_text(&agent, &focus).await);
            });
            return Ok(Some(rx.await.unwrap_or_else(|_| {
                "the compaction ended without an answer (the server is shutting down)".to_owned()
            })));
        }
        if agent.is_busy() {
            return Err(AgentsError::Busy(id.to_owned()));
        }
        let session = id.to_owned();
        let mut turns = lock(&self.inner.turns);
        // Finished turns are reaped here, so the set holds only running ones.
        while turns.try_join_next().is_some() {}
        turns.spawn(async move {
            if let Err(e) = agent.run_turn(text).await {
                tracing::warn!(%session, "the page's turn did not start: {e}");
            }
        });
        Ok(None)
    }

    /// Cancels session `id`'s running turn; whether one was running.
    ///
    /// # Errors
    /// Not open here.
    pub fn cancel(&self, id: &str) -> Result<bool, AgentsError> {
        let agent = self.agent(id)?;
        let busy = agent.is_busy();
        agent.cancel(Some("cancelled in the web view".to_owned()));
        Ok(busy)
    }

    /// Answers approval question `n`: `allow`, `always` or `deny` (with `reason` told to the
    /// model); false when it is no longer waiting.
    ///
    /// # Errors
    /// An unknown answer.
    pub fn answer(
        &self,
        n: u64,
        answer: &str,
        reason: Option<String>,
    ) -> Result<bool, AgentsError> {
        let answer = match answer {
            "allow" => Answer::Allow,
            "always" => Answer::AllowAlways,
            "deny" => Answer::Deny(Some(match reason.filter(|r| !r.trim().is_empty()) {
                Some(reason) => format!("the user said no: {}", reason.trim()),
                None => "the user said no".to_owned(),
            })),
            other => {
                return Err(AgentsError::Invalid(format!(
                    "unknown answer {other:?}: use allow, always or deny"
                )));
            }
        };
        self.settle(n, |reply| match reply {
            Reply::Approval(_) => Ok(Decided::Approval(answer)),
            Reply::Form { .. } => Err(AgentsError::Invalid(format!(
                "question {n} is a form: answer it with POST /api/forms/{n}"
            ))),
        })
    }

    /// Answers form `n`: `accept` with `content` (checked against the form first: what does
    /// not fit is refused and the form keeps waiting), `decline` or `cancel`; false when it no
    /// longer waits.
    ///
    /// # Errors
    /// An unknown action, an approval question, or content that does not fit the form.
    pub fn answer_form(
        &self,
        n: u64,
        action: &str,
        content: Option<serde_json::Map<String, Value>>,
    ) -> Result<bool, AgentsError> {
        self.settle(n, |reply| match reply {
            Reply::Approval(_) => Err(AgentsError::Invalid(format!(
                "question {n} is an approval: answer it with POST /api/approvals/{n}"
            ))),
            Reply::Form { schema, .. } => Ok(Decided::Form(match (action, schema) {
                ("accept", Some(schema)) => ElicitationAnswer::Accept(
                    cordis_mcp::check_answer(schema, content.unwrap_or_default())
                        .map_err(AgentsError::Invalid)?,
                ),
                // A page: nothing comes back through the client.
                ("accept", None) => ElicitationAnswer::Accept(serde_json::Map::new()),
                ("decline", _) => ElicitationAnswer::Decline,
                ("cancel", _) => ElicitationAnswer::Cancel,
                (other, _) => {
                    return Err(AgentsError::Invalid(format!(
                        "unknown action {other:?}: use accept, decline or cancel"
                    )));
                }
            })),
        })
    }

    /// Answers waiting question `n` with what `decide` makes of it (refusing leaves it
    /// waiting); false when it no longer waits.
    fn settle(
        &self,
        n: u64,
        decide: impl FnOnce(&Reply) -> Result<Decided, AgentsError>,
    ) -> Result<bool, AgentsError> {
        let mut waiting = lock(&self.inner.waiting);
        let Some(question) = waiting.get(&n) else {
            return Ok(false);
        };
        let decided = decide(&question.reply)?;
        let Some(question) = waiting.remove(&n) else {
            return Ok(false);
        };
        drop(waiting);
        send(&self.inner.events, "answered", json!({"id": n}));
        Ok(match (question.reply, decided) {
            (Reply::Approval(reply), Decided::Approval(answer)) => reply.send(answer).is_ok(),
            (Reply::Form { reply, .. }, Decided::Form(answer)) => reply.send(answer).is_ok(),
            // `decide` answers each question in its own kind.
            _ => false,
        })
    }

    /// Cancels every running turn and waits (a while) for them to end, so their logs close.
    pub async fn shutdown(&self) {
        let agents: Vec<Agent> = lock(&self.inner.agents).values().cloned().collect();
        for agent in &agents {
            agent.cancel(Some("cordis serve stopped".to_owned()));
        }
        let mut turns = std::mem::take(&mut *lock(&self.inner.turns));
        let _ = tokio::time::timeout(SETTLE, async { while turns.join_next().await.is_some() {} })
            .await;
        turns.abort_all();
    }
}

impl Drop for WebAgents {
    fn drop(&mut self) {
        for handle in self.handles.drain(..) {
            handle.dispose();
        }
        if let Some(task) = self.forwarding.take() {
            task.abort();
        }
        lock(&self.inner.turns).abort_all();
    }
}
