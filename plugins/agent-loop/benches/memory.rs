//! Memory of a long scripted run: RSS after 200, 800 and 2,000 turns of the bundled demo's shape
//! (one tool call, then an answer), on a persistent session, all in one process.
//!
//! A measurement, not a test: it prints the resident set size (from `/proc/self/status`) at each
//! checkpoint and the growth per turn between checkpoints, which must stay roughly constant
//! (linear growth: the session keeps its events; requests share the history instead of copying
//! it, and the scripted adapter keeps no requests unless asked to).
//!
//! `cargo bench -p cordis-agent-loop --bench memory`

use cordis_agent_loop::{AgentLoop, AgentLoopConfig, AgentLoopPlugin, AgentOptions};
use cordis_llm::{LlmConfig, LlmPlugin, ScriptedResponse};
use cordis_runtime::Context;
use cordis_session::{Durability, SessionConfig, SessionPlugin};
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin, ToolSchema};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolsConfig, ToolsPlugin};

const CHECKPOINTS: [u64; 3] = [200, 800, 2_000];

#[path = "../../../benches/support/peak.rs"]
mod peak;

/// The resident set now, in KiB.
fn rss_kib() -> Option<u64> {
    Some(peak::status_kib("VmRSS:")).filter(|&k| k > 0)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benchmarks; this one has none to list
    }
    let dir = std::env::temp_dir().join(format!("cordis-memory-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let root = Context::root();
        root.plugin(
            SystemPromptPlugin,
            SystemPromptConfig {
                persona: Some("You are a careful coding agent.".into()),
                tool_order: None,
            },
        );
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(
            LlmPlugin,
            LlmConfig {
                responses: Some(vec![
                    ScriptedResponse {
                        text: vec!["This is the offline demo. ".into(), "Let me note that.".into()],
                        ..ScriptedResponse::tool_call(
                            "note",
                            serde_json::json!({"todos": [{"content": "talk to a real model", "status": "in_progress"}]}),
                        )
                    },
                    ScriptedResponse::text("Noted. Every turn of this demo replays these two steps."),
                ]),
                repeat: true,
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
        root.idle().await;
        let registry = root.get::<ToolRegistry>().unwrap();
        for i in 0..20 {
            let name = if i == 0 { "note".to_owned() } else { format!("tool_{i:02}") };
            let schema = ToolSchema {
                name,
                description: "A tool of the benchmark.".into(),
                parameters: serde_json::json!({"type": "object"}).into(),
            };
            let def = ToolDefinition::new(schema, |_, _| async { Ok(ToolOutput::new("ok")) });
            let _ = registry.register(&root, def).unwrap();
        }
        let agents = root.get::<AgentLoop>().unwrap();
        let agent = agents
            .create_agent(AgentOptions::new("main", "bench-model"))
            .await
            .unwrap();
        let start = rss_kib().unwrap_or(0);
        println!("memory: RSS before the first turn {:.1} MiB", start as f64 / 1024.0);
        let (mut turns, mut last_turns, mut last_rss) = (0u64, 0u64, start);
        let began = std::time::Instant::now();
        for target in CHECKPOINTS {
            while turns < target {
                agent.run_turn("hello").await.unwrap();
                turns += 1;
            }
            let rss = rss_kib().unwrap_or(0);
            let per_turn = (rss.saturating_sub(last_rss)) as f64 / (turns - last_turns) as f64;
            println!(
                "memory: {turns:>5} turns: RSS {:>7.1} MiB (+{per_turn:.2} KiB/turn since {last_turns}), {:.2} s so far",
                rss as f64 / 1024.0,
                began.elapsed().as_secs_f64()
            );
            (last_turns, last_rss) = (turns, rss);
        }
        println!(
            "memory: {} events in the session",
            agent.session().len()
        );
        root.dispose();
    });
    let _ = std::fs::remove_dir_all(dir);
}
