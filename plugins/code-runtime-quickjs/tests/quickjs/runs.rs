//! Every outcome kind and limit of the QuickJS runtime; each test also checks that the run's
//! engine thread is gone afterwards.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cordis_code_runtime::{
    BoxFuture, Cancel, CodeRunOutcome, CodeRunRequest, CodeRuntime, Concurrency, FailureKind,
    Limits, SubCall, ToolBindings, ToolCallError,
};
use cordis_code_runtime_quickjs::QuickJs;
use serde_json::{Value, json};
use tokio::sync::{Barrier, Notify};

/// Test tools: `echo` returns its arguments; `fail` fails; `pair` completes only when two calls
/// are in it at once; `hang` never completes (it signals `started`); `write` is mutating and
/// records how many calls of any kind overlap it.
struct Tools {
    pair: Barrier,
    started: Notify,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    calls: Mutex<Vec<(u64, String, Value)>>,
}

impl Tools {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            pair: Barrier::new(2),
            started: Notify::new(),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            calls: Mutex::new(Vec::new()),
        })
    }
}

impl ToolBindings for Tools {
    fn names(&self) -> Vec<String> {
        [
            "write",
            "echo",
            "fail",
            "pair",
            "hang",
            "my-tool",
            "__proto__",
            "deaf",
        ]
        .map(String::from)
        .to_vec()
    }

    fn concurrency(&self, name: &str) -> Concurrency {
        if name == "write" {
            Concurrency::Mutating
        } else {
            Concurrency::ReadOnly
        }
    }

    fn call(&self, call: SubCall) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        self.calls
            .lock()
            .unwrap()
            .push((call.seq, call.name.clone(), call.arguments.clone()));
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let result = match call.name.as_str() {
                "fail" => Err(ToolCallError::new("boom")),
                "pair" => {
                    self.pair.wait().await;
                    Ok(json!("paired"))
                }
                "hang" => {
                    self.started.notify_one();
                    call.run_over.wait().await;
                    Err(ToolCallError::new("abandoned"))
                }
                "deaf" => std::future::pending().await,
                "write" => {
                    // Give an overlapping call every chance to start.
                    for _ in 0..10 {
                        tokio::task::yield_now().await;
                    }
                    Ok(json!({"wrote": call.seq}))
                }
                _ => Ok(call.arguments),
            };
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })
    }
}

fn limits() -> Limits {
    Limits {
        memory_bytes: 32 << 20,
        cpu_time: Duration::from_secs(20),
        wall_clock: Duration::from_secs(60),
        ..Limits::default()
    }
}

async fn run_with(
    runtime: &QuickJs,
    program: &str,
    tools: Arc<Tools>,
    limits: Limits,
    cancel: Cancel,
) -> CodeRunOutcome {
    let outcome = runtime
        .run(CodeRunRequest {
            program: program.into(),
            bindings: tools,
            limits,
            cancel,
        })
        .await
        .expect("valid request");
    assert_eq!(
        runtime.live_threads(),
        0,
        "the engine thread outlived its run"
    );
    outcome
}

async fn run(program: &str) -> CodeRunOutcome {
    run_with(
        &QuickJs::new(),
        program,
        Tools::new(),
        limits(),
        Cancel::never(),
    )
    .await
}

fn failure(outcome: &CodeRunOutcome) -> (FailureKind, String) {
    let failure = outcome.result.clone().expect_err("the run should fail");
    (failure.kind, failure.message)
}

#[tokio::test]
async fn a_program_returns_json_and_its_logs() {
    let outcome = run(r#"
        console.log("a", 1, {b: 2}, [1], null, undefined);
        console.warn("careful");
        const r = await tools.echo({x: [1, "two", {three: 3}]});
        return {r, sum: 1 + 1};
    "#)
    .await;
    let texts: Vec<_> = outcome.logs.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(texts, [r#"a 1 {"b":2} [1] null undefined"#, "careful"]);
    assert_eq!(
        outcome.result.unwrap(),
        Some(json!({"r": {"x": [1, "two", {"three": 3}]}, "sum": 2}))
    );
    assert_eq!(outcome.sub_calls, 1);
}

#[tokio::test]
async fn returning_nothing_is_a_completion_without_a_value() {
    assert_eq!(run("console.log('only logs');").await.result.unwrap(), None);
}

#[tokio::test]
async fn a_hot_loop_is_interrupted_by_the_cpu_budget() {
    let limits = Limits {
        cpu_time: Duration::from_millis(200),
        ..limits()
    };
    let outcome = run_with(
        &QuickJs::new(),
        "while (true) {}",
        Tools::new(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(
        failure(&outcome),
        (
            FailureKind::Timeout,
            "compute budget exhausted (200ms busy)".into()
        )
    );
}

#[tokio::test]
async fn a_hot_loop_that_catches_the_interrupt_still_stops() {
    let limits = Limits {
        cpu_time: Duration::from_millis(100),
        ..limits()
    };
    let program = "for (;;) { try { while (true) {} } catch (e) { console.log('caught'); } }";
    let outcome = run_with(
        &QuickJs::new(),
        program,
        Tools::new(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(failure(&outcome).0, FailureKind::Timeout);
}

#[tokio::test]
async fn the_wall_clock_ceiling_ends_a_run_waiting_on_a_tool() {
    let limits = Limits {
        wall_clock: Duration::from_millis(300),
        ..limits()
    };
    let outcome = run_with(
        &QuickJs::new(),
        "await tools.hang({});",
        Tools::new(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(
        failure(&outcome),
        (
            FailureKind::Timeout,
            "wall-clock ceiling reached (300ms)".into()
        )
    );
}

#[tokio::test]
async fn time_waiting_on_tools_does_not_count_against_the_cpu_budget() {
    // The tool is slow, the budget is small: waiting must not spend it.
    struct Slow;
    impl ToolBindings for Slow {
        fn names(&self) -> Vec<String> {
            vec!["slow".into()]
        }
        fn concurrency(&self, _: &str) -> Concurrency {
            Concurrency::ReadOnly
        }
        fn call(&self, _: SubCall) -> BoxFuture<'_, Result<Value, ToolCallError>> {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(400)).await;
                Ok(json!(1))
            })
        }
    }
    let runtime = QuickJs::new();
    let limits = Limits {
        cpu_time: Duration::from_millis(150),
        ..limits()
    };
    let outcome = runtime
        .run(CodeRunRequest {
            program: "return await tools.slow({});".into(),
            bindings: Arc::new(Slow),
            limits,
            cancel: Cancel::never(),
        })
        .await
        .unwrap();
    assert_eq!(outcome.result.unwrap(), Some(json!(1)));
    assert_eq!(runtime.live_threads(), 0);
}

#[tokio::test]
async fn a_memory_blow_up_fails_with_the_memory_kind() {
    let outcome = run("const all = []; while (true) all.push(new Array(100000).fill(1.5));").await;
    assert_eq!(
        failure(&outcome),
        (
            FailureKind::Memory,
            format!("memory limit reached ({} bytes)", 32 << 20)
        )
    );
}

#[tokio::test]
async fn a_blow_up_of_small_objects_fails_with_the_memory_kind() {
    let outcome =
        run("const m = new Map(); let i = 0; while (true) m.set(i, {i: i++, s: 'x' + i});").await;
    assert_eq!(failure(&outcome).0, FailureKind::Memory);
}

#[tokio::test]
async fn a_syntax_error_is_an_exception() {
    let (kind, message) = failure(&run("\n\nreturn (;").await);
    assert_eq!(kind, FailureKind::Exception);
    assert!(message.starts_with("SyntaxError: "), "{message}");
    assert!(message.ends_with(" (line 3, column 9)"), "{message}");
}

#[tokio::test]
async fn a_throw_is_an_exception_with_its_message() {
    assert_eq!(
        failure(&run("throw new TypeError('nope');").await),
        (
            FailureKind::Exception,
            "TypeError: nope (line 1, column 11)".into()
        )
    );
    assert_eq!(
        failure(&run("const a = 1;\n\nnull.x;").await),
        (
            FailureKind::Exception,
            "TypeError: cannot read property 'x' of null (line 3, column 1)".into()
        )
    );
    assert_eq!(
        failure(&run("throw {code: 7};").await),
        (FailureKind::Exception, r#"uncaught {"code":7}"#.into())
    );
    assert_eq!(
        failure(&run("throw undefined;").await),
        (FailureKind::Exception, "uncaught undefined".into())
    );
}

#[tokio::test]
async fn deep_recursion_is_a_range_error_not_a_crash() {
    let (kind, message) =
        failure(&run("function f(n) { return f(n + 1) + 1; } return f(0);").await);
    assert_eq!(kind, FailureKind::Exception);
    assert!(message.starts_with("RangeError"), "{message}");
}

#[tokio::test]
async fn a_completion_that_is_not_lossless_json_is_invalid_output() {
    for (program, detail) in [
        ("return {f() {}};", "the completion.f is a function"),
        ("return NaN;", "the completion is NaN"),
        (
            "return [1, , 3];",
            "the completion[1] is a hole in a sparse array",
        ),
        ("return 10n;", "the completion is a BigInt"),
        (
            "const a = {}; a.self = a; return a;",
            "the completion.self refers back",
        ),
        ("return new Map();", "the completion is a Map object"),
        ("return {x: undefined};", "the completion.x is undefined"),
        ("return -0;", "the completion is -0"),
    ] {
        let (kind, message) = failure(&run(program).await);
        assert_eq!(kind, FailureKind::InvalidOutput, "{program}");
        assert!(
            message.starts_with(&format!(
                "program completion must be lossless JSON: {detail}"
            )),
            "{program}: {message}"
        );
    }
}

#[tokio::test]
async fn cancelling_while_a_tool_call_is_pending_aborts_the_run() {
    let tools = Tools::new();
    let started = Arc::clone(&tools);
    let cancel = Cancel::on(async move { started.started.notified().await });
    let outcome = run_with(
        &QuickJs::new(),
        "console.log('before'); await tools.hang({}); console.log('after');",
        tools,
        limits(),
        cancel,
    )
    .await;
    assert_eq!(
        failure(&outcome),
        (FailureKind::Abort, "run cancelled by the caller".into())
    );
    assert_eq!(outcome.logs.len(), 1, "logs before the abort are kept");
}

#[tokio::test]
async fn a_sub_call_that_ignores_the_end_of_its_run_is_dropped_after_the_grace() {
    let limits = Limits {
        sub_call_grace: Duration::from_millis(50),
        ..limits()
    };
    // The program returns without awaiting its call; the call never finishes.
    let outcome = run_with(
        &QuickJs::new(),
        "tools.deaf({}); return 1;",
        Tools::new(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(outcome.result.unwrap(), Some(json!(1)));
    assert_eq!(outcome.sub_calls, 1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_hot_loop_does_not_stall_a_single_threaded_host() {
    // The cancel fires from a task on the same one-thread executor; if the engine ran on that
    // thread, the task could never run and the run would end by its CPU budget instead.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let ticker = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = tx.send(());
    });
    let cancel = Cancel::on(async move {
        let _ = rx.await;
    });
    let outcome = run_with(
        &QuickJs::new(),
        "while (true) {}",
        Tools::new(),
        limits(),
        cancel,
    )
    .await;
    assert_eq!(failure(&outcome).0, FailureKind::Abort);
    ticker.await.unwrap();
}

#[tokio::test]
async fn logs_beyond_the_output_cap_fail_with_output_limit() {
    let limits = Limits {
        output_bytes: 1000,
        ..limits()
    };
    let outcome = run_with(
        &QuickJs::new(),
        "for (;;) console.log('x'.repeat(100));",
        Tools::new(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(
        failure(&outcome),
        (
            FailureKind::OutputLimit,
            "outer output exceeded 1000 bytes".into()
        )
    );
    assert_eq!(outcome.logs.len(), 10, "the lines within the cap are kept");
}

#[tokio::test]
async fn a_completion_beyond_the_output_cap_fails_with_output_limit() {
    let limits = Limits {
        output_bytes: 100,
        ..limits()
    };
    let outcome = run_with(
        &QuickJs::new(),
        "console.log('x'.repeat(50)); return 'y'.repeat(60);",
        Tools::new(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(failure(&outcome).0, FailureKind::OutputLimit);
}

#[tokio::test]
async fn two_read_only_calls_overlap_under_promise_all() {
    // `pair` completes only when both calls are inside it at once.
    let outcome = run("return await Promise.all([tools.pair({n: 1}), tools.pair({n: 2})]);").await;
    assert_eq!(outcome.result.unwrap(), Some(json!(["paired", "paired"])));
}

#[tokio::test]
async fn mutating_calls_run_alone_in_submission_order() {
    let tools = Tools::new();
    let outcome = run_with(
        &QuickJs::new(),
        "return await Promise.all([tools.write({n: 1}), tools.echo({n: 2}), tools.write({n: 3}), tools.echo({n: 4})]);",
        Arc::clone(&tools),
        limits(),
        Cancel::never(),
    )
    .await;
    assert_eq!(
        outcome.result.unwrap(),
        Some(json!([{"wrote": 1}, {"n": 2}, {"wrote": 3}, {"n": 4}]))
    );
    assert_eq!(tools.max_in_flight.load(Ordering::SeqCst), 1);
    let seqs: Vec<_> = tools
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|(seq, name, _)| (*seq, name.clone()))
        .collect();
    assert_eq!(
        seqs,
        [
            (1, "write".into()),
            (2, "echo".into()),
            (3, "write".into()),
            (4, "echo".into())
        ]
    );
}

#[tokio::test]
async fn the_parallel_limit_caps_overlapping_reads() {
    let tools = Tools::new();
    let limits = Limits {
        max_parallel_sub_calls: 1,
        ..limits()
    };
    let program = "return await Promise.all([1, 2, 3].map((n) => tools.echo({n})));";
    let outcome = run_with(
        &QuickJs::new(),
        program,
        Arc::clone(&tools),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(
        outcome.result.unwrap(),
        Some(json!([{"n": 1}, {"n": 2}, {"n": 3}]))
    );
    assert_eq!(tools.max_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failing_sub_call_rejects_with_a_catchable_tool_call_error() {
    let outcome = run(r#"
        try {
            await tools.fail({});
        } catch (e) {
            return [e instanceof ToolCallError, e instanceof Error, e.name, e.toolName, e.message];
        }
    "#)
    .await;
    assert_eq!(
        outcome.result.unwrap(),
        Some(json!([true, true, "ToolCallError", "fail", "boom"]))
    );
}

#[tokio::test]
async fn an_uncaught_tool_call_error_names_the_tool() {
    assert_eq!(
        failure(&run("await tools.fail({});").await),
        (
            FailureKind::Exception,
            r#"ToolCallError: boom (from tool "fail")"#.into()
        )
    );
}

#[tokio::test]
async fn arguments_that_are_not_lossless_json_reject_only_that_call() {
    let tools = Tools::new();
    let outcome = run_with(
        &QuickJs::new(),
        r#"
        const cyclic = {}; cyclic.me = cyclic;
        const messages = [];
        for (const args of [undefined, {x: undefined}, {f() {}}, {n: NaN}, {b: 1n}, cyclic, [1, , 2], new Date(0)]) {
            try { await tools.echo(args); messages.push("sent"); } catch (e) { messages.push(`${e.name}: ${e.message}`); }
        }
        messages.push(await tools.echo({ok: true}));
        return messages;
        "#,
        Arc::clone(&tools),
        limits(),
        Cancel::never(),
    )
    .await;
    let messages = outcome.result.unwrap().unwrap();
    let expected = json!([
        "TypeError: tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`)",
        "TypeError: tool arguments must be lossless JSON: arguments.x is undefined, which JSON cannot represent",
        "TypeError: tool arguments must be lossless JSON: arguments.f is a function, which JSON cannot represent",
        "TypeError: tool arguments must be lossless JSON: arguments.n is NaN, which JSON cannot represent",
        "TypeError: tool arguments must be lossless JSON: arguments.b is a BigInt, which JSON cannot represent",
        "TypeError: tool arguments must be lossless JSON: arguments.me refers back to an enclosing value (a cycle), which JSON cannot represent",
        "TypeError: tool arguments must be lossless JSON: arguments[1] is a hole in a sparse array, which JSON cannot represent",
        "TypeError: tool arguments must be lossless JSON: arguments is a Date object, which JSON cannot represent",
        {"ok": true}
    ]);
    assert_eq!(messages, expected);
    // Only the good call reached the host, as sub-call 1.
    assert_eq!(
        *tools.calls.lock().unwrap(),
        [(1, "echo".to_owned(), json!({"ok": true}))]
    );
    assert_eq!(outcome.sub_calls, 1);
}

#[tokio::test]
async fn names_that_are_not_identifiers_are_bindings_too() {
    let outcome = run(r#"
        const a = await tools["my-tool"]({a: 1});
        const b = await tools["__proto__"]({b: 2});
        return [a, b, Object.keys(tools)];
    "#)
    .await;
    assert_eq!(
        outcome.result.unwrap(),
        Some(
            json!([{"a": 1}, {"b": 2}, ["__proto__", "deaf", "echo", "fail", "hang", "my-tool", "pair", "write"]])
        )
    );
}

#[tokio::test]
async fn an_unknown_binding_is_a_type_error() {
    let (kind, message) = failure(&run("await tools.nope({});").await);
    assert_eq!(kind, FailureKind::Exception);
    assert!(message.starts_with("TypeError"), "{message}");
}

#[tokio::test]
async fn awaiting_a_promise_nothing_can_settle_is_an_exception() {
    let (kind, message) = failure(&run("await new Promise(() => {});").await);
    assert_eq!(kind, FailureKind::Exception);
    assert!(message.contains("nothing can settle"), "{message}");
}

#[tokio::test]
async fn the_engine_has_no_ambient_io() {
    let outcome = run(r#"
        return ["setTimeout", "require", "process", "std", "os", "fetch", "XMLHttpRequest", "Deno"]
            .filter((name) => typeof globalThis[name] !== "undefined");
    "#)
    .await;
    assert_eq!(outcome.result.unwrap(), Some(json!([])));
}

#[tokio::test]
async fn runs_do_not_share_state() {
    let runtime = QuickJs::new();
    let first = run_with(
        &runtime,
        "globalThis.leak = 1; return 1;",
        Tools::new(),
        limits(),
        Cancel::never(),
    )
    .await;
    assert_eq!(first.result.unwrap(), Some(json!(1)));
    let second = run_with(
        &runtime,
        "return typeof leak;",
        Tools::new(),
        limits(),
        Cancel::never(),
    )
    .await;
    assert_eq!(second.result.unwrap(), Some(json!("undefined")));
}

#[tokio::test]
async fn a_dropped_run_ends_its_thread() {
    let runtime = QuickJs::new();
    let run = runtime.run(CodeRunRequest {
        program: "while (true) {}".into(),
        bindings: Tools::new(),
        limits: limits(),
        cancel: Cancel::never(),
    });
    let dropped = tokio::time::timeout(Duration::from_millis(100), run).await;
    assert!(dropped.is_err(), "a hot loop cannot finish on its own");
    // The thread notices the abort at its next interrupt check; this deadline only guards
    // against a hang.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while runtime.live_threads() != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the engine thread never ended"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn invalid_limits_are_refused_before_anything_runs() {
    let runtime = QuickJs::new();
    let err = runtime
        .run(CodeRunRequest {
            program: "return 1".into(),
            bindings: Tools::new(),
            limits: Limits {
                output_bytes: 0,
                ..limits()
            },
            cancel: Cancel::never(),
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("output_bytes"), "{err}");
    assert_eq!(runtime.live_threads(), 0);
}

#[tokio::test]
async fn atomics_wait_cannot_block_the_engine() {
    let (kind, message) =
        failure(&run("Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);").await);
    assert_eq!(kind, FailureKind::Exception);
    assert!(message.starts_with("TypeError"), "{message}");
}

#[tokio::test]
async fn catastrophic_regex_backtracking_is_interrupted() {
    let limits = Limits {
        cpu_time: Duration::from_millis(200),
        ..limits()
    };
    let program = "return /(a+)+b/.test('a'.repeat(64));";
    let outcome = run_with(
        &QuickJs::new(),
        program,
        Tools::new(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(failure(&outcome).0, FailureKind::Timeout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_each_get_their_own_engine_and_all_threads_end() {
    let runtime = QuickJs::new();
    let runs = (0..8).map(|n| {
        let runtime = runtime.clone();
        async move {
            runtime
                .run(CodeRunRequest {
                    program: format!("globalThis.n = (globalThis.n ?? 0) + {n}; return (await tools.echo({{n}})).n + n;"),
                    bindings: Tools::new(),
                    limits: limits(),
                    cancel: Cancel::never(),
                })
                .await
                .unwrap()
        }
    });
    let outcomes = futures_util::future::join_all(runs).await;
    for (n, outcome) in outcomes.into_iter().enumerate() {
        assert_eq!(outcome.result.unwrap(), Some(json!(2 * n)));
    }
    assert_eq!(runtime.live_threads(), 0);
}

/// `first` finishes only after `second` has: execution order is the reverse of submission.
struct Reversed {
    second_done: Notify,
    commits: Mutex<Vec<u64>>,
}

impl ToolBindings for Reversed {
    fn names(&self) -> Vec<String> {
        vec!["first".into(), "second".into()]
    }
    fn concurrency(&self, _: &str) -> Concurrency {
        Concurrency::ReadOnly
    }
    fn call(&self, call: SubCall) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        Box::pin(async move {
            if call.name == "first" {
                self.second_done.notified().await;
            } else {
                self.second_done.notify_one();
            }
            Ok(json!(call.name))
        })
    }
    fn commit(
        &self,
        executed: cordis_code_runtime::Executed,
    ) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        self.commits.lock().unwrap().push(executed.seq);
        Box::pin(std::future::ready(executed.result))
    }
}

#[tokio::test]
async fn results_reach_the_program_in_submission_order_whatever_finishes_first() {
    let runtime = QuickJs::new();
    let bindings = Arc::new(Reversed {
        second_done: Notify::new(),
        commits: Mutex::new(Vec::new()),
    });
    let program = r#"
        const winner = await Promise.race([
            tools.first({}).then((r) => { console.log(r); return r; }),
            tools.second({}).then((r) => { console.log(r); return r; }),
        ]);
        await new Promise((resolve) => setTimeoutLike(resolve));
        return winner;
        function setTimeoutLike(resolve) { tools.second({}).then(resolve); }
    "#;
    let outcome = runtime
        .run(CodeRunRequest {
            program: program.into(),
            bindings: bindings.clone(),
            limits: limits(),
            cancel: Cancel::never(),
        })
        .await
        .unwrap();
    let texts: Vec<_> = outcome.logs.iter().map(|line| line.text.as_str()).collect();
    assert_eq!(texts, ["first", "second"]);
    assert_eq!(outcome.result.unwrap(), Some(json!("first")));
    assert_eq!(*bindings.commits.lock().unwrap(), [1, 2, 3]);
    assert_eq!(runtime.live_threads(), 0);
}

#[tokio::test]
async fn an_endless_chain_of_microtasks_is_stopped_by_the_cpu_budget() {
    let limits = Limits {
        cpu_time: Duration::from_millis(200),
        ..limits()
    };
    let outcome = run_with(
        &QuickJs::new(),
        "for (;;) await null;",
        Tools::new(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(
        failure(&outcome),
        (
            FailureKind::Timeout,
            "compute budget exhausted (200ms busy)".into()
        )
    );
}

/// Regression (issue 24, high 2): a loop of allowed tool calls had no bound on their number
/// (time waiting on tools is not compute time), and each cost the host memory until the run
/// ended: 1 GB at 120,000 calls.
#[tokio::test]
async fn a_loop_of_tool_calls_stops_at_the_sub_call_limit_even_if_it_catches() {
    let limits = Limits {
        max_sub_calls: 50,
        ..limits()
    };
    let tools = Tools::new();
    let outcome = run_with(
        &QuickJs::new(),
        "for (let i = 0; i < 1000000; i++) { try { await tools.echo({i}); } catch (e) {} } return 'done';",
        tools.clone(),
        limits,
        Cancel::never(),
    )
    .await;
    assert_eq!(
        failure(&outcome),
        (
            FailureKind::SubCallLimit,
            "the program made more than 50 tool calls (the limit of one run; the `tools` entry's `maxSubCalls` sets it)".into()
        )
    );
    assert_eq!(outcome.result.unwrap_err().kind.as_str(), "sub-call-limit");
    assert_eq!(
        tools.calls.lock().unwrap().len(),
        50,
        "the host saw exactly the limit"
    );
}
