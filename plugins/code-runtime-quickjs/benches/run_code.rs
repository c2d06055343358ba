//! `run_code` through the registry, as a model's call goes: the collapse check, the argument
//! check, a fresh QuickJS engine, and every sub-call through the whole pipeline (pre-execute,
//! argument check, guards, the handler, post-execute, the dispatch events).
//!
//! - `ten_sub_calls`: start to result of a program making 10 trivial sub-calls (target ≤ 5 ms).
//! - `per_sub_call`: a program making 200 sub-calls; divide by 200 for the cost of one over the
//!   tool's own (trivial) time (target ≤ 50 µs).

use std::sync::Arc;

use cordis_code_runtime::CodeRuntimeService;
use cordis_code_runtime_quickjs::QuickJs;
use cordis_runtime::Context;
use cordis_tools::{
    PresentationMode, RUN_CODE, ScopeKey, ToolCall, ToolDefinition, ToolOutput, ToolRegistry,
    ToolSchema,
};

fn main() {
    divan::main();
}

fn program(calls: usize) -> String {
    format!(
        "let n = 0; for (let i = 0; i < {calls}; i++) {{ n += await tools.ping({{}}); }} return n;"
    )
}

fn run(calls: usize, bencher: divan::Bencher) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let _entered = rt.enter();
    let root = Context::root();
    let reg = ToolRegistry::new(root.clone());
    let _ = root
        .provide(CodeRuntimeService(Arc::new(QuickJs::new())))
        .expect("the code runtime");
    let schema = ToolSchema {
        name: "ping".to_owned(),
        description: "Answers 1.".to_owned(),
        parameters: serde_json::json!({"type": "object"}).into(),
    };
    let def = ToolDefinition::new(schema, |_, _| async { Ok(ToolOutput::new(1)) }).read_only();
    let _ = reg.register(&root, def).expect("register");
    let scope = Some(ScopeKey(1));
    let _ = reg
        .present_as(&root, scope, PresentationMode::Code)
        .expect("present as code");
    let code = program(calls);
    bencher.bench_local(|| {
        let call = ToolCall {
            call_id: "bench".to_owned(),
            name: RUN_CODE.to_owned(),
            arguments: serde_json::json!({"code": code, "description": "bench"}),
        };
        let result = rt.block_on(reg.execute(call, scope));
        assert!(!result.is_error, "{result:?}");
        result
    });
    root.dispose();
}

#[divan::bench]
fn ten_sub_calls(bencher: divan::Bencher) {
    run(10, bencher);
}

#[divan::bench(sample_count = 20)]
fn per_sub_call(bencher: divan::Bencher) {
    run(200, bencher);
}
