//! Loop overhead per step: a one-step turn (text answer) with 50 registered tools, the
//! scripted adapter and an in-memory session; with and without the invariant. `adapter_only`
//! measures the scripted adapter alone, to subtract.

use std::sync::atomic::{AtomicUsize, Ordering};

use cordis_agent_loop::{Agent, AgentLoop, AgentLoopConfig, AgentLoopPlugin, AgentOptions};
use cordis_llm::{
    CallConfig, FrozenRequest, LlmAdapter, LlmConfig, LlmPlugin, LlmRequest, ScriptedAdapter,
    ScriptedResponse, collect,
};
use cordis_runtime::Context;
use cordis_session::{SessionConfig, SessionPlugin};
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin, ToolSchema};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolsConfig, ToolsPlugin};
use tokio::runtime::Runtime;

fn main() {
    divan::main();
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn schema(i: usize) -> ToolSchema {
    ToolSchema {
        name: format!("tool_{i:02}"),
        description: format!("tool number {i}, which does a thing"),
        parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}}).into(),
    }
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

fn fresh_agent(rt: &Runtime, root: &Context) -> Agent {
    let service = root.get::<AgentLoop>().unwrap();
    let id = format!("a{}", NEXT.fetch_add(1, Ordering::Relaxed));
    rt.block_on(service.create_agent(AgentOptions::new(id, "bench-model")))
        .unwrap()
}

fn step(bencher: divan::Bencher, invariant: bool) {
    let rt = runtime();
    let root = boot_root(&rt, invariant);
    bencher
        .with_inputs(|| fresh_agent(&rt, &root))
        .bench_local_values(|agent| {
            let reason = rt.block_on(agent.run_turn("hello"));
            assert!(reason.is_ok());
            agent
        });
}

fn boot_root(rt: &Runtime, invariant: bool) -> Context {
    rt.block_on(async {
        let root = Context::root();
        root.plugin(
            SystemPromptPlugin,
            SystemPromptConfig {
                persona: Some("You are a benchmark.".into()),
                tool_order: None,
            },
        );
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(
            LlmPlugin,
            LlmConfig {
                responses: Some(vec![ScriptedResponse::text("ok")]),
                repeat: true,
                ..Default::default()
            },
        );
        root.plugin(SessionPlugin::default(), SessionConfig::in_memory());
        root.plugin(
            AgentLoopPlugin,
            AgentLoopConfig {
                invariant: Some(invariant),
                ..Default::default()
            },
        );
        root.idle().await;
        let reg = root.get::<ToolRegistry>().unwrap();
        for i in 0..50 {
            let def = ToolDefinition::new(schema(i), |_, _| async { Ok(ToolOutput::new("ok")) });
            let _ = reg.register(&root, def).unwrap();
        }
        root
    })
}

/// One turn = one step (text answer), 50 tools, invariant off (the release default).
#[divan::bench(sample_count = 200)]
fn one_step_turn_50_tools(bencher: divan::Bencher) {
    step(bencher, false);
}

/// The same with the reconstructability invariant on (the debug/test default).
#[divan::bench(sample_count = 200)]
fn one_step_turn_50_tools_with_invariant(bencher: divan::Bencher) {
    step(bencher, true);
}

/// The scripted adapter alone (to subtract from the turn).
#[divan::bench(sample_count = 200)]
fn adapter_only(bencher: divan::Bencher) {
    let rt = runtime();
    let adapter = ScriptedAdapter::new(vec![ScriptedResponse::text("ok")]).repeating();
    let request = FrozenRequest::new(LlmRequest {
        config: CallConfig::model("m"),
        messages: Default::default(),
        system: Some("s".into()),
        tools: (0..50).map(schema).collect(),
        session_id: "s".into(),
    });
    bencher.bench_local(|| {
        rt.block_on(collect(adapter.stream(request.clone())))
            .unwrap()
    });
}

/// Steady state: one agent, one more one-step turn per iteration (header unchanged, not
/// re-logged; the history grows by two messages per iteration).
#[divan::bench(sample_count = 200)]
fn steady_one_step_turn_50_tools(bencher: divan::Bencher) {
    let rt = runtime();
    let root = boot_root(&rt, false);
    let agent = fresh_agent(&rt, &root);
    bencher.bench_local(|| rt.block_on(agent.run_turn("hello")).unwrap());
}

/// Steady state with the invariant on.
#[divan::bench(sample_count = 200)]
fn steady_one_step_turn_50_tools_with_invariant(bencher: divan::Bencher) {
    let rt = runtime();
    let root = boot_root(&rt, true);
    let agent = fresh_agent(&rt, &root);
    bencher.bench_local(|| rt.block_on(agent.run_turn("hello")).unwrap());
}

/// One more one-step turn on an agent with 200 turns of history (the per-step cost the history
/// must not dominate: requests share it instead of copying it).
#[divan::bench(sample_count = 100, sample_size = 1)]
fn step_50_tools_at_200_turns(bencher: divan::Bencher) {
    let rt = runtime();
    let root = boot_root(&rt, false);
    bencher
        .with_inputs(|| {
            let agent = fresh_agent(&rt, &root);
            for _ in 0..200 {
                rt.block_on(agent.run_turn("hello")).unwrap();
            }
            agent
        })
        .bench_local_values(|agent| {
            let reason = rt.block_on(agent.run_turn("hello"));
            assert!(reason.is_ok());
            agent
        });
}

/// Assembly alone (the system-prompt part of a step) for 50 tools.
#[divan::bench(sample_count = 200)]
fn assemble_50_tools(bencher: divan::Bencher) {
    let rt = runtime();
    let root = boot_root(&rt, false);
    let prompt = root.get::<cordis_system_prompt::SystemPrompt>().unwrap();
    bencher.bench_local(|| {
        rt.block_on(prompt.assemble(cordis_system_prompt::AssembleContext::global()))
            .unwrap()
    });
}
