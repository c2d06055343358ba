//! The QuickJS backend: a fresh engine on a dedicated thread per run.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use cordis_code_runtime::{
    BoxFuture, CodeRunFailure, CodeRunOutcome, CodeRunRequest, CodeRuntime, CodeRuntimeError,
    FailureKind, RunOver,
};

use crate::dispatch::{Dispatch, Settled};
use crate::engine::{EngineEvent, EngineInput, EngineOutcome, HostMsg};

/// Stack of a run's engine thread: room for the engine's own limit plus the host frames under it.
const ENGINE_THREAD_STACK: usize = 8 << 20;

/// The JavaScript runtime on QuickJS-ng (through `rquickjs`).
///
/// Each run gets a new engine (no state survives between runs) on its own thread, so a hot loop
/// never occupies an async worker. Sub-calls are dispatched from the run's own future on the
/// caller's executor; the engine thread only waits for their results.
///
/// The program is the body of an async function. It sees `tools` (one function per binding,
/// `tools.name(args)` or `tools["my-tool"](args)`, each returning a promise of the tool's JSON
/// result), `console` (`log`, `info`, `warn`, `error`, `debug`, captured) and `ToolCallError`
/// (the rejection of a failed sub-call, with `toolName` and `message`); and the language's
/// built-ins, without timers, modules or any I/O.
///
/// Sub-calls still running when a run settles get [`Limits::sub_call_grace`](cordis_code_runtime::Limits) on
/// Tokio's timer, so a run must be awaited inside a Tokio runtime with time enabled.
#[derive(Debug, Default, Clone)]
pub struct QuickJs {
    live: Arc<AtomicUsize>,
}

impl QuickJs {
    /// A runtime; cheap, and each clone shares the live-thread count.
    pub fn new() -> Self {
        Self::default()
    }

    /// Engine threads of this runtime (and its clones) that have not ended yet. Zero once every
    /// run has resolved; a run dropped unfinished counts until its thread notices and ends.
    pub fn live_threads(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
}

impl CodeRuntime for QuickJs {
    fn language(&self) -> &str {
        "javascript"
    }

    fn isolation(&self) -> &str {
        "quickjs-thread"
    }

    fn run(
        &self,
        request: CodeRunRequest,
    ) -> BoxFuture<'static, Result<CodeRunOutcome, CodeRuntimeError>> {
        Box::pin(run(request, Arc::clone(&self.live)))
    }
}

/// Counts a live engine thread until dropped.
struct LiveThread(Arc<AtomicUsize>);

impl Drop for LiveThread {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Aborts the engine if the run's future is dropped before the outcome.
struct AbortOnDrop {
    abort: Arc<AtomicBool>,
    to_engine: mpsc::Sender<HostMsg>,
    armed: bool,
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.abort.store(true, Ordering::SeqCst);
            let _ = self.to_engine.send(HostMsg::Wake);
        }
    }
}

/// Compares by UTF-16 code units, the order the SDK declares tools in.
fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn engine_exit(message: String) -> EngineOutcome {
    EngineOutcome {
        logs: Vec::new(),
        result: Err(CodeRunFailure::new(FailureKind::EngineExit, message)),
        sub_calls: 0,
    }
}

async fn run(
    request: CodeRunRequest,
    live: Arc<AtomicUsize>,
) -> Result<CodeRunOutcome, CodeRuntimeError> {
    let CodeRunRequest {
        program,
        bindings,
        limits,
        mut cancel,
    } = request;
    limits.validate()?;
    let mut names = bindings.names();
    names.sort_by(|a, b| utf16_cmp(a, b));
    names.dedup();
    let started = tokio::time::Instant::now();
    let wall_deadline = started + limits.wall_clock;
    let grace = limits.sub_call_grace;
    let max_parallel = limits.max_parallel_sub_calls;

    let abort = Arc::new(AtomicBool::new(false));
    let (to_host, mut events) = tokio::sync::mpsc::unbounded_channel();
    let (to_engine, from_host) = mpsc::channel();
    let mut guard = AbortOnDrop {
        abort: Arc::clone(&abort),
        to_engine: to_engine.clone(),
        armed: true,
    };
    let input = EngineInput {
        program,
        names,
        limits,
        abort: Arc::clone(&abort),
        to_host: to_host.clone(),
        from_host,
    };

    live.fetch_add(1, Ordering::SeqCst);
    let counted = LiveThread(live);
    let thread = std::thread::Builder::new()
        .name("cordis-code-run".into())
        .stack_size(ENGINE_THREAD_STACK)
        .spawn(move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| crate::engine::run(input)))
                .unwrap_or_else(|panic| {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".to_owned());
                    engine_exit(format!("the engine thread panicked: {why}"))
                });
            let _ = to_host.send(EngineEvent::Done(outcome));
            // Uncount before the last sender goes: the host waits for the channel to close, so
            // the count is already down when `run` returns.
            drop(counted);
            drop(to_host);
        })
        .map_err(CodeRuntimeError::Spawn)?;

    let (over_tx, run_over) = RunOver::channel();
    let mut dispatch = Dispatch::new(&*bindings, max_parallel, run_over);
    // The program's first stretch runs before any commit may start.
    dispatch.hold();
    let mut cancelled = false;
    let outcome = loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Some(EngineEvent::Call { seq, name, arguments }) => dispatch.submit(seq, name, arguments),
                Some(EngineEvent::Waiting) => dispatch.release(),
                Some(EngineEvent::Done(outcome)) => break outcome,
                None => break engine_exit("the engine thread ended without an outcome".to_owned()),
            },
            settled = dispatch.next_settled() => {
                let Settled { seq, name, result } = settled;
                dispatch.hold();
                let _ = to_engine.send(HostMsg::Settled { seq, name, result });
            }
            () = cancel.fired(), if !cancelled => {
                cancelled = true;
                abort.store(true, Ordering::SeqCst);
                let _ = to_engine.send(HostMsg::Wake);
            }
        }
    };

    // The run is settled: tell running calls, give them the grace (within the wall-clock
    // ceiling) to finish and be committed, and abandon the ones that never started.
    let _ = over_tx.send(true);
    dispatch.close();
    if dispatch.busy() {
        let deadline = wall_deadline.min(tokio::time::Instant::now() + grace);
        let drain = async {
            while dispatch.busy() {
                dispatch.next_settled().await;
            }
        };
        let _ = tokio::time::timeout_at(deadline, drain).await;
    }
    drop(dispatch);
    // The channel closes when the engine thread has sent its outcome and uncounted itself, so
    // the join below waits only for the OS thread to exit.
    while events.recv().await.is_some() {}
    let _ = thread.join();
    guard.armed = false;

    Ok(CodeRunOutcome {
        logs: outcome.logs,
        result: outcome.result,
        sub_calls: outcome.sub_calls,
    })
}
