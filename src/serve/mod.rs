//! `cordis serve`: a local web view of a composition and its sessions. One page app, shipped
//! inside the binary (plain ES modules: no network at run time, no Node at build time), served
//! on 127.0.0.1 only, behind [`guard`]: the API answers only requests that carry the token of
//! the URL `cordis serve` printed, name its own loopback address, come from its own origin,
//! and post JSON.
//!
//! # What it shows
//! - the composition: every entry (id, plugin, status, load time, why it failed or what it
//!   waits for, the line it came from), the assembled request (sections, tools in canonical
//!   order) and its digest — what `cordis check` reports, from the same [`BootReport`];
//! - with `--watch`, each reload (added, removed, restarted, failed; or why an edit was
//!   rejected while the last good composition kept running), live over server-sent events;
//! - the sessions of the file's `sessions` entry (the sessions index) and each one's transcript
//!   ([`crate::session::transcript`], paged), followed live whichever process writes them
//!   ([`crate::session::follow`]);
//! - the agent plane ([`agents`]): sessions started or continued in the page, prompts,
//!   cancels, the approvals the page answers and the MCP servers' forms it fills in;
//! - a line diff of two texts (two request headers: why did the prompt cache break), and a
//!   `stress` / `permute` report opened in the page.
//!
//! Nothing it answers holds a configuration value: entries are shown by id, plugin and status,
//! so an API key a config reads from the environment never leaves the process.
//!
//! [`BootReport`]: cordis_host::loader::BootReport

pub mod agents;
pub mod diff;
pub mod guard;
pub mod live;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cordis_host::reload::LiveConfig;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{RwLock, broadcast};

pub use guard::Guard;

/// The page, its script and its style, as shipped.
const INDEX_HTML: &str = include_str!("web/index.html");
const APP_JS: &str = include_str!("web/app.js");
const STYLE_CSS: &str = include_str!("web/style.css");
const FAVICON_SVG: &str = include_str!("web/favicon.svg");

/// How many reloads the page can look back on.
const KEPT_RELOADS: usize = 50;
/// The most user and assistant messages one page of a session's transcript holds (older pages
/// on demand).
const TRANSCRIPT_PAGE: usize = 50;
/// The most sessions listed.
const LISTED_SESSIONS: usize = 200;

/// What the handlers share.
pub struct Served {
    /// The composition (a reload takes it for writing).
    pub live: RwLock<LiveConfig>,
    /// The config file, as given.
    pub file: String,
    /// The latest reloads, oldest first.
    reloads: Mutex<VecDeque<Value>>,
    /// Each reload and agent event as it happens, to the pages listening.
    events: broadcast::Sender<Outgoing>,
    /// The sessions started in the page, and the approvals it answers.
    pub agents: agents::WebAgents,
    /// Follows the sessions root: any process's session written is told to the pages.
    following: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(task) = self.following.take() {
            task.abort();
        }
    }
}

/// One event for the pages listening: its SSE name and JSON data, and, for what only a page
/// showing one session may be sent (the answer streaming, a running command's output), that
/// session.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The SSE event name.
    pub kind: &'static str,
    /// Its JSON data.
    pub data: String,
    /// Only for the pages showing this session (`None`: for every page).
    pub only: Option<String>,
}

impl Outgoing {
    /// An event for every page.
    pub fn all(kind: &'static str, data: String) -> Outgoing {
        Outgoing {
            kind,
            data,
            only: None,
        }
    }
}

/// Tells the pages (`session`, `{ids}`) of each session any process writes, once a tick; a
/// root that cannot be watched is logged and the page reloads on its own events only.
fn follow_sessions(
    root: &cordis_runtime::Context,
    events: broadcast::Sender<Outgoing>,
) -> Option<tokio::task::JoinHandle<()>> {
    let store = root.get::<cordis_session::SessionStore>()?;
    let dir = store.root()?.to_owned();
    let follower = match crate::session::follow::Follower::start(&dir) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(
                "cannot follow {}: {e}; the page shows other processes' sessions on reload",
                dir.display()
            );
            return None;
        }
    };
    Some(tokio::spawn(async move {
        loop {
            let ids = follower.changed().await;
            let _ = events.send(Outgoing::all("session", json!({ "ids": ids }).to_string()));
        }
    }))
}

impl Served {
    /// The state of a server of `live`, booted from `file`.
    pub fn new(live: LiveConfig, file: String) -> Self {
        let events = broadcast::channel(256).0;
        let agents = agents::WebAgents::new(live.root().clone(), events.clone());
        let following = follow_sessions(live.root(), events.clone());
        Served {
            live: RwLock::new(live),
            file,
            reloads: Mutex::new(VecDeque::new()),
            events,
            agents,
            following,
        }
    }

    /// Records a reload's outcome and tells the pages listening.
    pub fn record(&self, record: Value) {
        let text = record.to_string();
        {
            let mut reloads = cordis_runtime::lock(&self.reloads);
            reloads.push_back(record);
            while reloads.len() > KEPT_RELOADS {
                reloads.pop_front();
            }
        }
        let _ = self.events.send(Outgoing::all("reload", text));
    }

    /// The reload of the file with `source` (`--watch`): applied, or rejected with its errors
    /// (the running composition untouched); recorded either way. Returns the line to print.
    pub async fn reload(
        &self,
        source: &str,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> String {
        let mut live = self.live.write().await;
        match live.reload(source, env).await {
            Ok(summary) => {
                let digest = live.report().await.digest;
                let line = cordis_host::reload::summary_line(&summary);
                self.record(json!({
                    "outcome": "applied",
                    "number": summary.number,
                    "added": summary.added,
                    "removed": summary.removed,
                    "restarted": summary.restarted,
                    "failed": summary.failed,
                    "digest": digest,
                    "summary": line,
                }));
                line
            }
            Err(errors) => {
                let problems: Vec<String> =
                    errors.diagnostics().iter().map(|d| d.to_string()).collect();
                self.record(json!({"outcome": "rejected", "errors": problems}));
                format!(
                    "the edit does not load ({} problem(s)); the last good composition keeps running",
                    problems.len()
                )
            }
        }
    }
}

/// The app: the page and the API, behind `guard`.
pub fn router(served: Arc<Served>, guard: Guard) -> Router {
    let guard = Arc::new(guard);
    Router::new()
        .route(
            "/",
            get(|| async { page(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/app.js",
            get(|| async { page(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/style.css",
            get(|| async { page(STYLE_CSS, "text/css; charset=utf-8") }),
        )
        .route(
            "/favicon.svg",
            get(|| async { page(FAVICON_SVG, "image/svg+xml") }),
        )
        .route("/api/composition", get(composition))
        .route("/api/events", get(events))
        .route("/api/sessions", get(sessions))
        .route("/api/sessions/{id}", get(history))
        .route("/api/sessions/{id}/fork", post(fork_session))
        .route("/api/diff", post(diff_texts))
        .route("/api/agents", get(agents_overview))
        .route("/api/agents/sessions", post(open_session))
        .route("/api/agents/sessions/{id}/prompt", post(prompt))
        .route("/api/agents/sessions/{id}/cancel", post(cancel))
        .route("/api/approvals/{n}", post(answer))
        .route("/api/forms/{n}", post(answer_form))
        .with_state(served)
        .layer(axum::middleware::from_fn_with_state(guard, guard::guard))
}

fn page(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            // Nothing from elsewhere, ever: the page is whole as shipped.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'",
            ),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// `GET /api/composition`: the boot report (entries with their lines, the assembled request,
/// the digest) and the reloads so far.
async fn composition(State(served): State<Arc<Served>>) -> Response {
    let live = served.live.read().await;
    let report = live.report().await;
    // The exact bytes the digest covers: the page checks the digest against them itself.
    let graph = graph(live.plan());
    let mcp = mcp_servers(live.plan(), live.root());
    let request = match cordis_host::assembly::header_bytes(live.root()).await {
        cordis_host::assembly::HeaderBytes::Header(bytes) => {
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        _ => None,
    };
    drop(live);
    let mut body = report.to_json();
    body["request"] = json!(request);
    if let Some(entries) = body["entries"].as_array_mut() {
        for (shown, entry) in entries.iter_mut().zip(&report.entries) {
            shown["line"] = json!(entry.pos.line);
            if let Some(links) = graph.get(&entry.id) {
                shown["parent"] = json!(links.parent);
                shown["provides"] = json!(links.provides);
                shown["needs"] = json!(links.needs);
            }
        }
    }
    // Joined with the entries' statuses by the page.
    body["mcp"] = json!(mcp);
    body["file"] = json!(served.file);
    body["reloads"] = json!(
        cordis_runtime::lock(&served.reloads)
            .iter()
            .collect::<Vec<_>>()
    );
    axum::Json(body).into_response()
}

/// The `mcp` entries of `plan`: entry id, server name and transport (never the command, URL
/// or headers: they may hold credentials), with what the live server offers (tools
/// registered, prompts, resources).
fn mcp_servers(plan: &cordis_host::plan::LoadPlan, root: &cordis_runtime::Context) -> Vec<Value> {
    use cordis_host::plan::Step;
    let tools: Vec<String> = root
        .get::<cordis_tools::ToolRegistry>()
        .map(|r| r.schemas(None).into_iter().map(|s| s.name).collect())
        .unwrap_or_default();
    let live = cordis_mcp::servers(root);
    plan.entries
        .iter()
        .filter_map(|e| match &e.step {
            Step::Plugin { prepared, .. } => prepared
                .config
                .downcast_ref::<cordis_mcp::McpConfig>()
                .map(|c| (e, c)),
            _ => None,
        })
        .map(|(e, config)| {
            let prefix = format!("mcp__{}__", config.server);
            let server = live.iter().find(|s| s.name() == config.server);
            json!({
                "entry": e.id,
                "server": config.server,
                "transport": match config.transport {
                    cordis_mcp::TransportKind::Stdio => "stdio",
                    cordis_mcp::TransportKind::Http => "http",
                },
                "tools": tools.iter().filter(|t| t.starts_with(&prefix)).count(),
                "prompts": server.map(|s| s.prompts().len()),
                "resources": server.map(|s| s.resources().len()),
            })
        })
        .collect()
}

/// An entry's place in the composition: its group, the services it provides, and the
/// services it injects with the entries that provide them.
struct Links {
    parent: Option<String>,
    provides: Vec<String>,
    needs: Vec<Value>,
}

/// The dependency graph of `plan` by entry id: who provides what each entry injects (a
/// service no entry provides is listed with no provider; two providers are both named).
/// Service names only: no configuration value.
fn graph(plan: &cordis_host::plan::LoadPlan) -> std::collections::BTreeMap<String, Links> {
    use cordis_host::plan::Step;
    let mut providers: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for e in &plan.entries {
        if let Step::Plugin { prepared, .. } = &e.step {
            for service in prepared.plugin.provides_erased(&*prepared.config) {
                providers.entry(service).or_default().push(e.id.clone());
            }
        }
    }
    plan.entries
        .iter()
        .map(|e| {
            let parent = e.parent.map(|i| plan.entries[i].id.clone());
            let (provides, needs) = match &e.step {
                Step::Plugin {
                    prepared, inject, ..
                } => {
                    let mut provides = prepared.plugin.provides_erased(&*prepared.config);
                    provides.sort();
                    let mut wanted: Vec<(String, bool)> = prepared
                        .plugin
                        .inject()
                        .iter()
                        .map(|i| (i.name.to_string(), i.required))
                        .chain(inject.iter().map(|n| (n.clone(), true)))
                        .collect();
                    wanted.sort();
                    wanted.dedup_by(|a, b| a.0 == b.0);
                    let needs = wanted
                        .into_iter()
                        .map(|(service, required)| {
                            let from: Vec<&String> = providers
                                .get(&service)
                                .map(|p| p.iter().filter(|id| **id != e.id).collect())
                                .unwrap_or_default();
                            json!({"service": service, "required": required, "from": from})
                        })
                        .collect();
                    (provides, needs)
                }
                _ => (Vec::new(), Vec::new()),
            };
            (
                e.id.clone(),
                Links {
                    parent,
                    provides,
                    needs,
                },
            )
        })
        .collect()
}

/// `GET /api/events` query: the session the page shows (its answer's text and its running
/// commands' output are sent to this page only then).
#[derive(Deserialize)]
struct EventsQuery {
    #[serde(default)]
    session: Option<String>,
}

/// `GET /api/events`: each reload (`reload`), the sessions any process wrote (`session`), the
/// page sessions' events (`agent`, `state`), approval questions and forms (`approval`, `form`,
/// `answered`), and for the session `?session=` names, its answer as it streams (`delta`) and
/// its running commands' output (`output`: [`agents`]), as they happen (server-sent events).
async fn events(
    State(served): State<Arc<Served>>,
    axum::extract::Query(query): axum::extract::Query<EventsQuery>,
) -> impl IntoResponse {
    let rx = served.events.subscribe();
    let shows = query.session;
    let stream = futures_util::stream::unfold((rx, shows), |(mut rx, shows)| async move {
        loop {
            match rx.recv().await {
                Ok(out) if out.only.is_some() && out.only != shows => {}
                Ok(out) => {
                    return Some((
                        Ok::<_, std::convert::Infallible>(
                            Event::default().event(out.kind).data(out.data),
                        ),
                        (rx, shows),
                    ));
                }
                // A page that fell behind misses the oldest; it reloads the list anyway.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// `GET /api/sessions`: the sessions of the file's `sessions` entry, newest first.
async fn sessions(State(served): State<Arc<Served>>) -> Response {
    let store = served
        .live
        .read()
        .await
        .root()
        .get::<cordis_session::SessionStore>();
    let Some(store) = store else {
        return axum::Json(
            json!({"sessions": [], "note": "the composition has no `sessions` entry"}),
        )
        .into_response();
    };
    match store
        .list(cordis_session::ListQuery::first(LISTED_SESSIONS))
        .await
    {
        Ok(page) => axum::Json(json!({
            "sessions": page.sessions.iter().map(|s| json!({
                "id": s.id,
                "cwd": s.cwd,
                "title": s.title,
                "modified": crate::session::id::iso8601(s.modified),
                "turns": s.turns,
                "preset": s.preset,
                "model": s.model,
            })).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /api/sessions/{id}` query: page back from `before` (a seq), `max` messages a page.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TranscriptQuery {
    #[serde(default)]
    before: Option<u64>,
    #[serde(default)]
    max: Option<usize>,
}

/// `GET /api/sessions/{id}`: one page of the session's transcript (the newest by default;
/// `before` pages back; `streaming` when it ends mid-answer, its last item the answer so far),
/// with the newest page the whole session's `usage` (tokens, cached
/// tokens, context, cost: [`crate::session::usage::UsageSummary`]), and who holds it: `live`
/// when the page runs it, else `heldBy` (the pid of the process that runs it, whose terminal
/// or editor answers its questions).
async fn history(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    axum::extract::Query(query): axum::extract::Query<TranscriptQuery>,
) -> Response {
    let root = served.live.read().await.root().clone();
    let max = query
        .max
        .unwrap_or(TRANSCRIPT_PAGE)
        .clamp(1, TRANSCRIPT_PAGE);
    let page = match cordis_history::History::of(&root)
        .history(&id, query.before, Some(max))
        .await
    {
        Ok(page) => page,
        Err(e) => return (StatusCode::NOT_FOUND, e.to_string()).into_response(),
    };
    let presenters = root.get::<cordis_presenter::Presenters>();
    // The log ends mid-answer: the transcript's last item is what of it streamed so far.
    let streaming = page
        .events
        .last()
        .is_some_and(|e| e.event.kind == cordis_session::kinds::ASSISTANT_CHUNK);
    let transcript = crate::session::transcript::TranscriptPage::of(&page, presenters.as_deref());
    let live = served.agents.is_open(&id);
    let held_by = match root.get::<cordis_session::SessionStore>() {
        Some(store) if !live => store.path_of(&id).and_then(|p| cordis_session::holder(&p)),
        _ => None,
    };
    let mut body = serde_json::to_value(&transcript).unwrap_or_default();
    body["live"] = Value::Bool(live);
    body["streaming"] = Value::Bool(streaming);
    // The whole session's usage (the page's usage panel), with the newest page only.
    if query.before.is_none()
        && let Some(usage) = crate::session::usage::UsageSummary::of_stored(&root, &id).await
    {
        body["usage"] = json!(usage);
    }
    if let Some(pid) = held_by.filter(|&pid| pid != std::process::id()) {
        body["heldBy"] = json!(pid);
    }
    axum::Json(body).into_response()
}

/// `GET /api/agents`: the page's live sessions, the presets a new one may join, the slash
/// commands a prompt may be, and the approval questions waiting.
async fn agents_overview(State(served): State<Arc<Served>>) -> Response {
    axum::Json(served.agents.overview().await).into_response()
}

fn refused(e: &agents::AgentsError) -> Response {
    (e.status(), axum::Json(json!({"error": e.to_string()}))).into_response()
}

/// `POST /api/agents/sessions` body: a session to resume, or a preset for a new one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenRequest {
    #[serde(default)]
    resume: Option<String>,
    #[serde(default)]
    preset: Option<String>,
    #[serde(default)]
    model: Option<String>,
}

/// `POST /api/agents/sessions`: opens a session in the page; `{id}`.
async fn open_session(
    State(served): State<Arc<Served>>,
    axum::Json(request): axum::Json<OpenRequest>,
) -> Response {
    match served
        .agents
        .open(request.resume, request.preset, request.model)
        .await
    {
        Ok(id) => axum::Json(json!({"id": id})).into_response(),
        Err(e) => refused(&e),
    }
}

/// `POST /api/sessions/{id}/fork` body: the seq to fork through (none: the session's end).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkRequest {
    #[serde(default)]
    seq: Option<u64>,
}

/// `POST /api/sessions/{id}/fork`: forks the session (through its last complete turn at or
/// before `seq`) into a new session opened in the page; `{id, parent}`.
async fn fork_session(
    State(served): State<Arc<Served>>,
    Path(parent): Path<String>,
    axum::Json(request): axum::Json<ForkRequest>,
) -> Response {
    match served.agents.fork(&parent, request.seq).await {
        Ok(id) => axum::Json(json!({"id": id, "parent": parent})).into_response(),
        Err(e) => refused(&e),
    }
}

/// `POST /api/agents/sessions/{id}/prompt` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptRequest {
    text: String,
}

/// `POST /api/agents/sessions/{id}/prompt`: starts a turn (202; its events follow on
/// `/api/events`), or answers a slash command (200, `{answer}`).
async fn prompt(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    axum::Json(request): axum::Json<PromptRequest>,
) -> Response {
    match served.agents.prompt(&id, request.text).await {
        Ok(None) => (StatusCode::ACCEPTED, axum::Json(json!({"started": true}))).into_response(),
        // A slash command: its answer, no turn.
        Ok(Some(answer)) => axum::Json(json!({"started": false, "answer": answer})).into_response(),
        Err(e) => refused(&e),
    }
}

/// `POST /api/agents/sessions/{id}/cancel`: cancels the running turn.
async fn cancel(State(served): State<Arc<Served>>, Path(id): Path<String>) -> Response {
    match served.agents.cancel(&id) {
        Ok(was_running) => axum::Json(json!({"cancelled": was_running})).into_response(),
        Err(e) => refused(&e),
    }
}

/// `POST /api/approvals/{n}` body: `allow`, `always` or `deny` (with a reason for the model).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerRequest {
    answer: String,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /api/approvals/{n}`: answers a waiting question (410 when it no longer waits).
async fn answer(
    State(served): State<Arc<Served>>,
    Path(n): Path<u64>,
    axum::Json(request): axum::Json<AnswerRequest>,
) -> Response {
    match served.agents.answer(n, &request.answer, request.reason) {
        Ok(true) => axum::Json(json!({"answered": true})).into_response(),
        Ok(false) => (
            StatusCode::GONE,
            axum::Json(
                json!({"error": "the question no longer waits (answered, or its turn ended)"}),
            ),
        )
            .into_response(),
        Err(e) => refused(&e),
    }
}

/// `POST /api/forms/{n}` body: `accept` with the values, `decline` or `cancel`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FormAnswer {
    action: String,
    #[serde(default)]
    content: Option<serde_json::Map<String, Value>>,
}

/// `POST /api/forms/{n}`: answers an MCP server's waiting form (400 with the reason when the
/// values do not fit it, and it keeps waiting; 410 when it no longer waits).
async fn answer_form(
    State(served): State<Arc<Served>>,
    Path(n): Path<u64>,
    axum::Json(request): axum::Json<FormAnswer>,
) -> Response {
    match served
        .agents
        .answer_form(n, &request.action, request.content)
    {
        Ok(true) => axum::Json(json!({"answered": true})).into_response(),
        Ok(false) => (
            StatusCode::GONE,
            axum::Json(json!({"error": "the form no longer waits (answered, or its call ended)"})),
        )
            .into_response(),
        Err(e) => refused(&e),
    }
}

/// `POST /api/diff` body.
#[derive(Deserialize)]
struct DiffRequest {
    a: String,
    b: String,
}

/// `POST /api/diff`: the line diff of two texts.
async fn diff_texts(axum::Json(request): axum::Json<DiffRequest>) -> Response {
    match diff::lines(&request.a, &request.b) {
        Ok(lines) => axum::Json(json!({"lines": lines})).into_response(),
        Err(why) => (StatusCode::PAYLOAD_TOO_LARGE, why).into_response(),
    }
}

/// A token of 128 random bits, as hex.
///
/// # Errors
/// The system's random source cannot be read.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
