//! The connection's state and its one loop: requests in arrival order, work as futures it owns.
//!
//! `Server::accept` only dispatches: each request kind has its handler in its own module
//! (`initialize`, `session/new`, `session/load` and `session/resume`, `session/list`,
//! `session/close`, `session/prompt`, `session/cancel`, `session/set_mode`, the model and
//! config options). A handler checks what can be checked at once and queues the rest as a
//! future; what the future ends with is settled by `Server::finish`. Answers to the agent's
//! own requests (permissions, files, terminals, forms) never come here: the reader completes
//! them directly (see [`super::rpc`]).

mod attach;
mod cancel;
mod close;
mod commands;
mod config;
mod delete;
mod fork;
mod initialize;
mod jobs;
mod list;
mod load;
mod mode;
mod new_session;
mod prompt;
mod prompt_content;
mod replay;
mod session_params;
mod watch;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_agent_loop::Agent;
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::FuturesUnordered;
use serde_json::json;
use tokio::sync::{mpsc, watch as channel};

use super::protocol::{
    AvailableCommand, InitializeResponse, ListSessionsResponse, PromptResponse,
    SessionConfigOption, SessionModeState, SessionNotification, SessionUpdate,
};
use super::rpc::{Connection, Incoming, Reply, RpcError};
use super::session::{Booted, Composition};
use close::close;
use config::options_of;
use initialize::Editor;
use jobs::{Job, job_of};
use mode::switched_elsewhere;

pub(crate) use fork::forked;
pub use prompt_content::{MAX_IMAGE_BASE64, MAX_PROMPT_IMAGES, check_images, prompt_text};

/// How long a disconnect waits for running turns and boots to wind down before giving up.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(30);

/// What a piece of work ended with, and where its answer goes.
enum Done {
    Created(Result<Live, RpcError>, Reply),
    Loaded(String, Result<Live, RpcError>, Reply),
    Closed(Reply),
    /// A `session/delete` of the session ended.
    Deleted(String, Result<(), RpcError>, Reply),
    /// The `initialize` answer is ready.
    Initialized(InitializeResponse, Reply),
    /// A listing ended.
    Listed(Result<ListSessionsResponse, RpcError>, Reply),
    /// A prompt ended: the session, its opening, the answer.
    Prompted(String, u64, Result<PromptResponse, RpcError>, Reply),
    /// A mode switch ended: the session, its opening, the mode asked for, whether to answer
    /// with the options, the outcome.
    Switched(String, u64, String, bool, Result<(), RpcError>, Reply),
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
    commands: Arc<Mutex<Option<Vec<AvailableCommand>>>>,
}

/// A session's one piece of running work.
enum Busy {
    /// A prompt (and the id of its request, which `$/cancel_request` names); sending on it
    /// cancels the prompt's turn.
    Prompt(channel::Sender<bool>, serde_json::Value),
    /// A `session/set_mode` (the preset mounts, then the agent re-joins).
    Switching,
}

impl Live {
    fn agent(&self) -> &Agent {
        &self.booted.agent
    }
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
    /// Ids being deleted (a load or another delete of one is refused meanwhile).
    deleting: std::collections::BTreeSet<String>,
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
            deleting: Default::default(),
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

    /// Starts a request with its kind's handler. Each checks what can be checked at once (in
    /// arrival order, so a cancel always finds the prompt sent before it), then queues the
    /// async part.
    fn accept(&mut self, job: Job) {
        match job {
            Job::Initialize(req, reply) => self.initialize(req, reply),
            Job::New(req, reply) => self.new_session(req, reply),
            Job::Load(req, replay, reply) => self.load_session(req, replay, reply),
            Job::Close(req, reply) => self.close_session(req, reply),
            Job::Delete(req, reply) => self.delete_session(req, reply),
            Job::Fork(req, reply) => self.fork_session(req, reply),
            Job::List(req, reply) => self.list_sessions(req, reply),
            Job::Prompt(req, reply) => self.prompt(req, reply),
            Job::Cancel(note) => self.cancel(&note),
            Job::CancelRequest(id) => self.cancel_request(&id),
            Job::SetModel(req, reply) => self.set_model(req, reply),
            Job::SetConfig(req, reply) => self.set_config_option(req, reply),
            Job::SetMode(req, options, reply) => self.set_mode(req, options, reply),
        }
    }

    /// Settles finished work: a session joins the connection, a prompt answers.
    fn finish(&mut self, done: Done) {
        match done {
            Done::Created(result, reply) => self.created(result, reply),
            Done::Loaded(id, result, reply) => self.loaded(id, result, reply),
            Done::Prompted(id, opening, result, reply) => {
                self.prompted(&id, opening, result, reply);
            }
            Done::Closed(reply) => reply.send(Ok(json!({}))),
            Done::Deleted(id, result, reply) => {
                self.deleting.remove(&id);
                reply.send(result.map(|()| json!({})));
            }
            Done::Listed(result, reply) => reply.send(result),
            Done::Initialized(answer, reply) => reply.send(Ok(answer)),
            Done::Switched(id, opening, mode, options, result, reply) => {
                self.switched(&id, opening, mode, options, result, reply);
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

    /// Tells the client which slash commands session `id` accepts (after its opening's answer).
    fn announce_commands(&self, id: &str) {
        let Some(live) = self.sessions.get(id) else {
            return;
        };
        // Under the lock, so a change announced meanwhile by the listener (see `attach`) is
        // never overtaken by an older list.
        let mut last = cordis_runtime::lock(&live.commands);
        let commands = commands::available_commands(live.booted.root());
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
                    Done::Deleted(_, result, reply) => reply.send(result.map(|()| json!({}))),
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

/// A line for the person running `cordis acp` (stderr: stdout is the protocol's).
fn note(text: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "cordis: {text}");
    let _ = err.flush();
}

/// Answers `reply` with the error `e`.
fn respond_error(reply: Reply, e: RpcError) {
    reply.send::<()>(Err(e));
}
