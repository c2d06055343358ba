//! Host memory per `run_code` sub-call in an agent's turn, and the bound the sub-call limit
//! puts on it: the scripted model calls `run_code` with a program looping
//! `await tools.read({})` (a read-only tool answering 1 KiB of text), as a prompt-injected
//! model would; every sub-call goes through the registry's pipeline and is logged (a start
//! and a settle event, kept in the session as the log is).
//!
//! A measurement, not a test: each size runs in a fresh process (this bench runs itself with
//! `--calls N`) after a one-sub-call turn that sets everything up, and prints the peak resident
//! set growth of the turn (`VmHWM`, reset through `/proc/self/clear_refs`): 250, 500 and 1,000
//! sub-calls (the default `maxSubCalls`), the growth per sub-call, and what a program asking
//! for 100,000 costs: its run fails at the limit.
//!
//! `cargo bench -p cordis-agent-loop --bench run_code_memory`

use std::sync::Arc;

use cordis_agent_loop::{AgentLoop, AgentLoopConfig, AgentLoopPlugin, AgentOptions};
use cordis_code_runtime::CodeRuntimeService;
use cordis_code_runtime_quickjs::QuickJs;
use cordis_llm::{LlmConfig, LlmPlugin, ScriptedResponse};
use cordis_runtime::Context;
use cordis_session::{Durability, SessionConfig, SessionPlugin};
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin, ToolSchema};
use cordis_tools::{
    PresentationMode, ToolDefinition, ToolOutput, ToolRegistry, ToolsConfig, ToolsPlugin,
};

#[path = "../../../benches/support/peak.rs"]
mod peak;

use peak::{reset_peak, status_kib};

fn main() {
    peak::run_each("--calls", &["250", "500", "1000", "100000"], measure);
}

/// The scripted model's turn: one `run_code` call of `calls` sub-calls, then an answer.
fn turn(calls: u64) -> Vec<ScriptedResponse> {
    let code = format!(
        "let n = 0; for (let i = 0; i < {calls}; i++) {{ n += (await tools.read({{}})).length; }} return n;"
    );
    vec![
        ScriptedResponse::tool_call(
            "run_code",
            serde_json::json!({"code": code, "description": "Read in a loop"}),
        ),
        ScriptedResponse::text("done"),
    ]
}

/// One warm-up turn, then one measured turn of `calls` sub-calls.
fn measure(calls: u64) {
    let dir = std::env::temp_dir().join(format!("cordis-run-code-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let root = Context::root();
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        let mut responses = turn(1);
        responses.extend(turn(calls));
        root.plugin(
            LlmPlugin,
            LlmConfig {
                responses: Some(responses),
                ..Default::default()
            },
        );
        root.plugin(
            SessionPlugin::default(),
            SessionConfig {
                root: Some(dir.clone()),
                durability: Durability::None,
                ..SessionConfig::default()
            },
        );
        root.plugin(AgentLoopPlugin, AgentLoopConfig::default());
        let _ = root
            .provide(CodeRuntimeService(Arc::new(QuickJs::new())))
            .expect("the code runtime");
        root.idle().await;
        let registry = root.get::<ToolRegistry>().expect("the registry");
        let schema = ToolSchema {
            name: "read".into(),
            description: "Answers 1 KiB of text.".into(),
            parameters: serde_json::json!({"type": "object"}).into(),
        };
        let text = "x".repeat(1024);
        let def = ToolDefinition::new(schema, move |_, _| {
            let text = text.clone();
            async move { Ok(ToolOutput::new(text)) }
        })
        .read_only();
        let _ = registry.register(&root, def).expect("register");
        let agents = root.get::<AgentLoop>().expect("the agent loop");
        let agent = agents
            .create_agent(AgentOptions::new("main", "bench-model"))
            .await
            .expect("an agent");
        let actx = agent.context().expect("the agent's scope");
        let _ = registry
            .present_as(&actx, Some(agent.scope_key()), PresentationMode::Code)
            .expect("present as code");
        agent.run_turn("warm up").await.expect("the warm-up turn");
        reset_peak();
        let (before, events) = (status_kib("VmRSS:"), agent.session().len());
        agent.run_turn("go").await.expect("the measured turn");
        let grown = status_kib("VmHWM:").saturating_sub(before);
        let logged = agent.session().len() - events;
        let result = agent
            .session()
            .events()
            .iter()
            .rev()
            .find(|e| e.kind == "tool/result")
            .map(|e| e.data["content"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        let outcome = if result.contains("sub-call-limit") {
            "failed at the sub-call limit"
        } else {
            "completed"
        };
        println!(
            "run_code memory: {calls:>6} sub-calls asked, {outcome}: {logged} events logged, peak RSS +{grown} KiB ({:.2} KiB per sub-call run)",
            grown as f64 / calls.min(1_000) as f64
        );
        root.dispose();
    });
    let _ = std::fs::remove_dir_all(dir);
}
