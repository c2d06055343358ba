//! The engine thread's side of a run: one QuickJS runtime, one program, driven to an outcome.
//!
//! Promises of tool calls live in JavaScript (the prelude keeps them in a `Map`), so the engine
//! never holds a JavaScript value outside [`Context::with`] and the garbage collector sees every
//! reference: nothing is left alive when the runtime is freed.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rquickjs::promise::PromiseState;
use rquickjs::{Array, Context, Ctx, Exception, Function, Object, Promise, Runtime, Value};
use serde_json::Value as Json;
use tokio::sync::mpsc::UnboundedSender;

use cordis_code_runtime::{CodeRunFailure, FailureKind, Limits, LogLevel, LogLine, ToolCallError};

const PRELUDE: &str = include_str!("prelude.js");

/// The engine's own stack limit; deeper JavaScript recursion is a `RangeError`, not a crash.
/// The engine thread's stack is several times larger (see `ENGINE_THREAD_STACK`).
const ENGINE_STACK_LIMIT: usize = 2 << 20;

/// What the engine tells the host.
pub(crate) enum EngineEvent {
    /// The program submitted a tool call (sequence numbers count from 1).
    Call {
        seq: u64,
        name: String,
        arguments: Json,
    },
    /// The program ran until it waits for a result: every call it submitted so far was sent.
    Waiting,
    /// The run is over; nothing follows.
    Done(EngineOutcome),
}

/// What the host tells the engine.
pub(crate) enum HostMsg {
    /// A tool call finished.
    Settled {
        seq: u64,
        name: String,
        result: Result<Json, ToolCallError>,
    },
    /// Look at the abort flag now (the engine may be waiting for a tool call).
    Wake,
}

/// The engine's result, before the host adds nothing but its envelope.
pub(crate) struct EngineOutcome {
    pub(crate) logs: Vec<LogLine>,
    pub(crate) result: Result<Option<Json>, CodeRunFailure>,
    pub(crate) sub_calls: u64,
}

/// Everything the engine thread needs.
pub(crate) struct EngineInput {
    pub(crate) program: String,
    pub(crate) names: Vec<String>,
    pub(crate) limits: Limits,
    pub(crate) abort: Arc<AtomicBool>,
    pub(crate) to_host: UnboundedSender<EngineEvent>,
    pub(crate) from_host: Receiver<HostMsg>,
}

/// Why the engine was told to stop; the first reason sticks.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Abort,
    Compute,
    Wall,
    Output,
    SubCalls,
}

/// State shared by the interrupt handler, the host functions and the loop (all on this thread).
struct Shared {
    started: Instant,
    /// Time spent waiting for the host: the CPU budget's stopwatch is paused while it grows.
    waiting: Cell<Duration>,
    stop: Cell<Option<Stop>>,
    abort: Arc<AtomicBool>,
    limits: Limits,
    logs: RefCell<Vec<LogLine>>,
    output_bytes: Cell<usize>,
    submitted: Cell<u64>,
    outstanding: Cell<usize>,
    to_host: UnboundedSender<EngineEvent>,
}

impl Shared {
    /// Whether the run must stop now; records the reason the first time. This is the interrupt
    /// handler: QuickJS calls it every few thousand instructions.
    fn must_stop(&self) -> bool {
        if self.stop.get().is_some() {
            return true;
        }
        let elapsed = self.started.elapsed();
        let stop = if self.abort.load(Ordering::Relaxed) {
            Stop::Abort
        } else if elapsed >= self.limits.wall_clock {
            Stop::Wall
        } else if elapsed.saturating_sub(self.waiting.get()) >= self.limits.cpu_time {
            Stop::Compute
        } else {
            return false;
        };
        self.stop.set(Some(stop));
        true
    }

    /// The failure for a recorded stop. Messages quote the configured limits, not measured
    /// times, so the same program fails with the same text on any machine.
    fn stop_failure(&self) -> Option<CodeRunFailure> {
        let limits = &self.limits;
        let (kind, message) = match self.stop.get()? {
            Stop::Abort => (FailureKind::Abort, "run cancelled by the caller".to_owned()),
            Stop::Compute => (
                FailureKind::Timeout,
                format!(
                    "compute budget exhausted ({}ms busy)",
                    limits.cpu_time.as_millis()
                ),
            ),
            Stop::Wall => (
                FailureKind::Timeout,
                format!(
                    "wall-clock ceiling reached ({}ms)",
                    limits.wall_clock.as_millis()
                ),
            ),
            Stop::Output => (
                FailureKind::OutputLimit,
                format!("outer output exceeded {} bytes", limits.output_bytes),
            ),
            Stop::SubCalls => (
                FailureKind::SubCallLimit,
                format!(
                    "the program made more than {} tool calls (the limit of one run; the `tools` entry's `maxSubCalls` sets it)",
                    limits.max_sub_calls
                ),
            ),
        };
        Some(CodeRunFailure::new(kind, message))
    }

    fn memory_failure(&self) -> CodeRunFailure {
        CodeRunFailure::new(
            FailureKind::Memory,
            format!("memory limit reached ({} bytes)", self.limits.memory_bytes),
        )
    }

    /// `hostCall(name, json)`: hands a checked call to the host and returns its sequence number.
    fn submit(&self, ctx: &Ctx<'_>, name: String, text: String) -> rquickjs::Result<f64> {
        let arguments: Json = serde_json::from_str(&text).map_err(|err| {
            Exception::throw_type(ctx, &format!("tool arguments must be lossless JSON: {err}"))
        })?;
        let seq = self.submitted.get() + 1;
        if seq > self.limits.max_sub_calls {
            // Refused before the host sees it: nothing of this call runs or is kept.
            self.stop
                .set(Some(self.stop.get().unwrap_or(Stop::SubCalls)));
            return Err(Exception::throw_range(
                ctx,
                &format!("more than {} tool calls", self.limits.max_sub_calls),
            ));
        }
        self.submitted.set(seq);
        if self
            .to_host
            .send(EngineEvent::Call {
                seq,
                name,
                arguments,
            })
            .is_err()
        {
            // The host dropped the run; stop at the next check rather than wait forever.
            self.stop.set(Some(self.stop.get().unwrap_or(Stop::Abort)));
        } else {
            self.outstanding.set(self.outstanding.get() + 1);
        }
        // Sequence numbers stay far below 2^53, so the conversion is exact.
        Ok(seq as f64)
    }

    /// `hostLog(level, text)`: captures one console line within the output cap.
    fn log(&self, level: &str, text: String) {
        if self.stop.get().is_some() {
            return;
        }
        let total = self.output_bytes.get().saturating_add(text.len());
        if total > self.limits.output_bytes {
            self.stop.set(Some(Stop::Output));
            return;
        }
        self.output_bytes.set(total);
        self.logs.borrow_mut().push(LogLine {
            level: LogLevel::from_name(level),
            text,
        });
    }
}

/// Runs one program to its outcome on the calling thread (the run's dedicated thread).
pub(crate) fn run(input: EngineInput) -> EngineOutcome {
    let EngineInput {
        program,
        names,
        limits,
        abort,
        to_host,
        from_host,
    } = input;
    let shared = Rc::new(Shared {
        started: Instant::now(),
        waiting: Cell::new(Duration::ZERO),
        stop: Cell::new(None),
        abort,
        limits,
        logs: RefCell::new(Vec::new()),
        output_bytes: Cell::new(0),
        submitted: Cell::new(0),
        outstanding: Cell::new(0),
        to_host,
    });
    let result = run_in_fresh_runtime(&shared, &program, &names, &from_host);
    EngineOutcome {
        logs: shared.logs.take(),
        result,
        sub_calls: shared.submitted.get(),
    }
}

fn run_in_fresh_runtime(
    shared: &Rc<Shared>,
    program: &str,
    names: &[String],
    from_host: &Receiver<HostMsg>,
) -> Result<Option<Json>, CodeRunFailure> {
    let engine_exit = |what: &str, err: rquickjs::Error| {
        CodeRunFailure::new(FailureKind::EngineExit, format!("{what}: {err}"))
    };
    let runtime = Runtime::new().map_err(|err| engine_exit("could not create the engine", err))?;
    runtime.set_memory_limit(shared.limits.memory_bytes);
    runtime.set_max_stack_size(ENGINE_STACK_LIMIT);
    let handler = Rc::clone(shared);
    runtime.set_interrupt_handler(Some(Box::new(move || handler.must_stop())));
    let context = Context::full(&runtime).map_err(|err| match err {
        rquickjs::Error::Allocation => shared.memory_failure(),
        other => engine_exit("could not create the engine's context", other),
    })?;
    context.with(|ctx| drive(&ctx, shared, program, names, from_host))
}

/// The prelude's helpers that the loop calls.
struct Helpers<'js> {
    compile: Function<'js>,
    complete: Function<'js>,
    describe: Function<'js>,
    settle: Function<'js>,
}

fn install<'js>(
    ctx: &Ctx<'js>,
    shared: &Rc<Shared>,
    names: &[String],
) -> rquickjs::Result<Helpers<'js>> {
    let prelude: Function = ctx.eval(PRELUDE)?;
    let caller = Rc::clone(shared);
    let host_call = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, name: String, text: String| caller.submit(&ctx, name, text),
    )?;
    let logger = Rc::clone(shared);
    let host_log = Function::new(ctx.clone(), move |level: String, text: String| {
        logger.log(&level, text)
    })?;
    let binding_names = Array::new(ctx.clone())?;
    for (index, name) in names.iter().enumerate() {
        binding_names.set(index, name.as_str())?;
    }
    let helpers: Object = prelude.call((host_call, host_log, binding_names))?;
    let globals = ctx.globals();
    for global in ["tools", "console", "ToolCallError"] {
        globals.set(global, helpers.get::<_, Value>(global)?)?;
    }
    Ok(Helpers {
        compile: helpers.get("compile")?,
        complete: helpers.get("complete")?,
        describe: helpers.get("describe")?,
        settle: helpers.get("settle")?,
    })
}

/// Whether a thrown value is QuickJS's out-of-memory error. When the engine cannot even
/// allocate that error it throws `null` instead, so a bare `null` counts too (a program that
/// throws `null` itself is then reported as out of memory: a rare, harmless misnomer).
fn is_out_of_memory(thrown: &Value<'_>) -> bool {
    thrown.is_null()
        || thrown
            .as_exception()
            .and_then(Exception::message)
            .is_some_and(|message| message == "out of memory")
}

/// Classifies an engine error: a recorded stop wins, then memory, then `otherwise`.
fn classify<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    err: rquickjs::Error,
    otherwise: impl FnOnce(Value<'js>) -> CodeRunFailure,
) -> CodeRunFailure {
    let thrown = match err {
        rquickjs::Error::Exception => ctx.catch(),
        rquickjs::Error::Allocation => {
            return shared
                .stop_failure()
                .unwrap_or_else(|| shared.memory_failure());
        }
        other => {
            return shared.stop_failure().unwrap_or_else(|| {
                CodeRunFailure::new(
                    FailureKind::EngineExit,
                    format!("the engine failed: {other}"),
                )
            });
        }
    };
    if let Some(stop) = shared.stop_failure() {
        return stop;
    }
    if is_out_of_memory(&thrown) {
        return shared.memory_failure();
    }
    otherwise(thrown)
}

/// The message of a thrown value, through the prelude's `describe`.
fn describe<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    helpers: &Helpers<'js>,
    thrown: Value<'js>,
) -> CodeRunFailure {
    match helpers.describe.call::<_, String>((thrown,)) {
        Ok(message) => CodeRunFailure::new(FailureKind::Exception, message),
        Err(err) => classify(ctx, shared, err, |_| {
            CodeRunFailure::new(
                FailureKind::Exception,
                "uncaught exception (it could not be described)",
            )
        }),
    }
}

fn drive<'js>(
    ctx: &Ctx<'js>,
    shared: &Rc<Shared>,
    program: &str,
    names: &[String],
    from_host: &Receiver<HostMsg>,
) -> Result<Option<Json>, CodeRunFailure> {
    let helpers = install(ctx, shared, names).map_err(|err| {
        classify(ctx, shared, err, |_| {
            CodeRunFailure::new(
                FailureKind::EngineExit,
                "the engine's prelude failed to install",
            )
        })
    })?;
    let main: Function = helpers.compile.call((program,)).map_err(|err| {
        classify(ctx, shared, err, |thrown| {
            describe(ctx, shared, &helpers, thrown)
        })
    })?;
    let promise: Promise = main.call(()).map_err(|err| {
        classify(ctx, shared, err, |thrown| {
            describe(ctx, shared, &helpers, thrown)
        })
    })?;
    loop {
        while !shared.must_stop() && ctx.execute_pending_job() {}
        if let Some(stop) = shared.stop_failure() {
            return Err(stop);
        }
        match promise.state() {
            PromiseState::Resolved => return complete(ctx, shared, &helpers, &promise),
            PromiseState::Rejected => {
                let err = match promise.result::<Value>() {
                    Some(Err(err)) => err,
                    _ => rquickjs::Error::Exception,
                };
                return Err(classify(ctx, shared, err, |thrown| {
                    describe(ctx, shared, &helpers, thrown)
                }));
            }
            PromiseState::Pending => {}
        }
        if shared.outstanding.get() == 0 {
            return Err(CodeRunFailure::new(
                FailureKind::Exception,
                "the program is awaiting a promise that nothing can settle (no tool call is pending)",
            ));
        }
        wait_for_host(ctx, shared, &helpers, from_host)?;
    }
}

/// Blocks until the host settles a call (or wakes the engine), then delivers that one result.
/// One at a time: the caller runs the program until it waits again before it takes the next,
/// so the program's course does not depend on how results were batched in the channel. The CPU
/// stopwatch is paused for the wait.
fn wait_for_host<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    helpers: &Helpers<'js>,
    from_host: &Receiver<HostMsg>,
) -> Result<(), CodeRunFailure> {
    let deadline = shared.started + shared.limits.wall_clock;
    // The host holds its next commit until it hears this (see `Dispatch::hold`). A lost host is
    // seen by the receive below.
    let _ = shared.to_host.send(EngineEvent::Waiting);
    let waiting_since = Instant::now();
    let message = from_host.recv_timeout(deadline.saturating_duration_since(waiting_since));
    shared
        .waiting
        .set(shared.waiting.get() + waiting_since.elapsed());
    match message {
        Ok(HostMsg::Settled { seq, name, result }) => {
            shared
                .outstanding
                .set(shared.outstanding.get().saturating_sub(1));
            let (ok, payload) = match result {
                Ok(value) => (true, value.to_string()),
                Err(err) => (false, err.message),
            };
            // Sequence numbers stay far below 2^53, so the conversion is exact.
            if let Err(err) = helpers
                .settle
                .call::<_, ()>((seq as f64, ok, payload, name))
            {
                return Err(classify(ctx, shared, err, |thrown| {
                    describe(ctx, shared, helpers, thrown)
                }));
            }
        }
        Ok(HostMsg::Wake) | Err(RecvTimeoutError::Timeout) => {}
        Err(RecvTimeoutError::Disconnected) => shared.abort.store(true, Ordering::Relaxed),
    }
    // A wake, a timeout or a lost host is picked up here rather than at the next interrupt.
    shared.must_stop();
    Ok(())
}

/// The completion of a resolved program: lossless JSON within the output cap.
fn complete<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    helpers: &Helpers<'js>,
    promise: &Promise<'js>,
) -> Result<Option<Json>, CodeRunFailure> {
    let invalid = |message: String| {
        CodeRunFailure::new(
            FailureKind::InvalidOutput,
            format!("program completion must be lossless JSON: {message}"),
        )
    };
    let value = match promise.result::<Value>() {
        Some(Ok(value)) => value,
        Some(Err(err)) => {
            return Err(classify(ctx, shared, err, |thrown| {
                describe(ctx, shared, helpers, thrown)
            }));
        }
        None => {
            return Err(CodeRunFailure::new(
                FailureKind::EngineExit,
                "the program's promise was not settled",
            ));
        }
    };
    let text: Value = helpers.complete.call((value,)).map_err(|err| {
        classify(ctx, shared, err, |thrown| {
            let message = thrown
                .as_exception()
                .and_then(Exception::message)
                .unwrap_or_else(|| "the completion could not be checked".to_owned());
            invalid(message)
        })
    })?;
    if text.is_undefined() {
        return Ok(None);
    }
    let text: String = text.get().map_err(|err| {
        classify(ctx, shared, err, |_| {
            invalid("the completion could not be read".to_owned())
        })
    })?;
    if shared.output_bytes.get().saturating_add(text.len()) > shared.limits.output_bytes {
        return Err(CodeRunFailure::new(
            FailureKind::OutputLimit,
            format!("outer output exceeded {} bytes", shared.limits.output_bytes),
        ));
    }
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|err| invalid(err.to_string()))
}
