//! Start-to-result of `run_code` runs on the QuickJS runtime: an empty run (engine creation and
//! teardown), a run with 10 trivial sub-calls, and 1,000 sub-calls to price one sub-call.

use std::sync::Arc;

use cordis_code_runtime::{
    BoxFuture, Cancel, CodeRunRequest, CodeRuntime, Concurrency, Limits, SubCall, ToolBindings,
    ToolCallError,
};
use cordis_code_runtime_quickjs::QuickJs;
use serde_json::Value;

fn main() {
    divan::main();
}

/// One tool that returns its arguments at once, so a run measures the runtime, not a tool.
struct Noop;

impl ToolBindings for Noop {
    fn names(&self) -> Vec<String> {
        vec!["noop".into()]
    }
    fn concurrency(&self, _: &str) -> Concurrency {
        Concurrency::ReadOnly
    }
    fn call(&self, call: SubCall) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        Box::pin(async move { Ok(call.arguments) })
    }
}

fn bench_program(bencher: divan::Bencher, program: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let runtime = QuickJs::new();
    let bindings: Arc<dyn ToolBindings> = Arc::new(Noop);
    bencher.bench_local(|| {
        let outcome = rt
            .block_on(runtime.run(CodeRunRequest {
                program: program.to_owned(),
                bindings: Arc::clone(&bindings),
                limits: Limits::default(),
                cancel: Cancel::never(),
            }))
            .expect("valid limits");
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    });
}

#[divan::bench]
fn empty_run(bencher: divan::Bencher) {
    bench_program(bencher, "return 1;");
}

#[divan::bench]
fn run_with_10_sequential_sub_calls(bencher: divan::Bencher) {
    bench_program(
        bencher,
        "for (let i = 0; i < 10; i++) await tools.noop({i}); return 1;",
    );
}

#[divan::bench]
fn run_with_10_parallel_sub_calls(bencher: divan::Bencher) {
    bench_program(
        bencher,
        "await Promise.all(Array.from({length: 10}, (_, i) => tools.noop({i}))); return 1;",
    );
}

#[divan::bench(counter = divan::counter::ItemsCount::new(1000usize))]
fn sequential_sub_calls_1000(bencher: divan::Bencher) {
    bench_program(
        bencher,
        "for (let i = 0; i < 1000; i++) await tools.noop({i}); return 1;",
    );
}

#[divan::bench(counter = divan::counter::ItemsCount::new(1000usize))]
fn parallel_sub_calls_1000(bencher: divan::Bencher) {
    bench_program(
        bencher,
        "await Promise.all(Array.from({length: 1000}, (_, i) => tools.noop({i}))); return 1;",
    );
}
