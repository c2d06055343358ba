//! What the tool handlers share with the supervisor: the live peer, the server's process
//! group, and the requests sent to the server (each waiting up to `callTimeoutMs` without
//! progress, cancelled on the server when the caller stops waiting).
//!
//! The requests themselves are in the submodules: `tools/call` (`call`), `prompts/get` and
//! the prompt command claims (`prompts`), `resources/read` and the reader tool (`resources`).

mod call;
mod prompts;
mod resources;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_runtime::{Context, EffectHandle};
use rmcp::model::{ClientRequest, ServerResult};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use tokio::sync::mpsc;

pub use call::{MAX_MEDIA_CHARS, MAX_RESULT_MEDIA};
pub use resources::{MAX_ANSWER_ITEMS, MAX_RESOURCE_TEXT, MAX_URI_BYTES, READ_RESOURCE};
pub(crate) use resources::{is_reader, reader_tool};

use crate::catalog::Catalog;
use crate::config::McpConfig;
use crate::error::{innermost, refusal};
use crate::{lock, progress};

/// The server process, and whether the entry is gone (then a process started meanwhile by a
/// reconnect still running on another thread is killed as soon as it is recorded).
#[derive(Debug, Default)]
struct Process {
    /// The group's id (its leader's pid).
    pgid: Option<u32>,
    /// The process is a sandbox's reaper: it is stopped through it (see
    /// [`cordis_sandbox::stop`]), which kills everything the server started.
    reaped: bool,
    /// The sandboxed server's private temp dir, removed once it is stopped.
    temp: Option<std::path::PathBuf>,
    disposed: bool,
}

/// What the tool handlers share: the live peer and the process to kill.
pub(crate) struct Link {
    pub(crate) server: String,
    pub(crate) peer: Mutex<Option<Peer<RoleClient>>>,
    /// The stdio server's process group while it may be running.
    process: Mutex<Process>,
    /// Signalled when a call failed in the transport: the supervisor pings the server and
    /// reconnects if it does not answer (an HTTP server that went away closes nothing).
    pub(crate) suspect: tokio::sync::Notify,
    /// Running calls by progress token (see [`crate::progress`]).
    pub(crate) calls: Arc<progress::Calls>,
    /// The server's prompts and resources, canonically ordered.
    pub(crate) catalog: Mutex<Catalog>,
    /// Whether the connected server declared `resources` (then it gets `read_resource`).
    pub(crate) has_resources: AtomicBool,
    /// Bounds the wait for an answer without progress.
    call_timeout: Duration,
    /// How many elicitations of this server wait for the user (waits are paused meanwhile).
    pub(crate) asking: tokio::sync::watch::Sender<usize>,
    /// The most bytes of one result's text for the model and the log (`maxResultText`).
    max_result_text: usize,
    /// The entry's context: its prompt commands are claimed here.
    ctx: Context,
    /// The claims on the prompt commands of the current prompt list.
    prompt_claims: Mutex<Vec<EffectHandle>>,
    /// The server's `instructions` as the prompt shows them (see [`crate::instructions`]):
    /// the last connection's, kept while it reconnects.
    pub(crate) instructions: Mutex<Option<String>>,
}

impl Link {
    /// The link of a new entry: not connected, no process, an empty catalog.
    pub(crate) fn new(config: &McpConfig, ctx: &Context) -> Self {
        Self {
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
            instructions: Mutex::new(None),
        }
    }

    pub(crate) fn peer(&self) -> Option<Peer<RoleClient>> {
        lock(&self.peer).clone()
    }

    /// Drops the peer and kills the process group, if any.
    pub(crate) fn kill(&self) {
        *lock(&self.peer) = None;
        let (pgid, reaped, temp) = {
            let mut process = lock(&self.process);
            (process.pgid.take(), process.reaped, process.temp.take())
        };
        stop(pgid, reaped, temp);
    }

    /// [`Self::kill`], and any process recorded later too (the entry's dispose effect).
    pub(crate) fn dispose(&self) {
        lock(&self.process).disposed = true;
        self.kill();
    }

    /// Records a started server; kills it at once if the entry is already disposed.
    /// `reaped` says it runs under a sandbox's reaper, `temp` is its private temp dir.
    pub(crate) fn started(
        &self,
        pgid: Option<u32>,
        reaped: bool,
        temp: Option<std::path::PathBuf>,
    ) -> bool {
        let mut process = lock(&self.process);
        if process.disposed {
            drop(process);
            stop(pgid, reaped, temp);
            return false;
        }
        process.pgid = pgid;
        process.reaped = reaped;
        process.temp = temp;
        true
    }

    /// The live peer, or the message saying there is none.
    pub(crate) fn connected(&self) -> Result<Peer<RoleClient>, String> {
        self.peer().ok_or_else(|| {
            format!(
                "mcp({}): the server is not connected (it is starting or reconnecting); try again later",
                self.server
            )
        })
    }

    /// The text of a failed request; a transport failure also makes the supervisor check the
    /// server.
    pub(crate) fn request_error(&self, e: ServiceError) -> String {
        if let Some(refused) = refusal(&self.server, &e) {
            // Still checked: a server needing a login waits for one (see `auth`).
            self.suspect.notify_one();
            return format!("mcp({}): {refused}", self.server);
        }
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
    pub(crate) async fn request(
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
}

/// Stops a server: through its reaper (`SIGTERM`: it kills the server's whole tree, then
/// exits), else `SIGKILL` to its process group; then removes its temp dir.
fn stop(pgid: Option<u32>, reaped: bool, temp: Option<std::path::PathBuf>) {
    match pgid {
        Some(pid) if reaped => cordis_sandbox::stop(pid),
        _ => kill_group(pgid),
    }
    if let Some(temp) = temp {
        // Off the caller's thread when there is a runtime (dispose is synchronous).
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || {
                    let _ = std::fs::remove_dir_all(temp);
                });
            }
            Err(_) => {
                let _ = std::fs::remove_dir_all(temp);
            }
        }
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
