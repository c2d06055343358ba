//! A long session with automatic compaction: peak memory, the compaction's own bookkeeping and
//! the time to reopen the session, at 500 and 2,000 turns.
//!
//! The scripted model answers every request at once, reporting input tokens that climb to the
//! context window (100, 200, … 1,000 of a 1,000-token window, cycling), so the loop compacts
//! about every eighth request, as a real session near its window would. Each size runs in a
//! fresh process and prints: the events logged, the compactions, the peak resident set (`VmHWM`),
//! the mean time of a compaction whose model call returns at once (what compaction costs beside
//! the model), and the time to open the session again from its file, as `--resume` does.
//!
//! `cargo bench -p cordis-agent-loop --bench long_session`

use std::time::Instant;

use cordis_agent_loop::{AgentLoop, AgentLoopConfig, AgentLoopPlugin, AgentOptions};
use cordis_llm::{LlmConfig, LlmPlugin, ScriptedResponse, Usage};
use cordis_runtime::Context;
use cordis_session::{Durability, SessionConfig, SessionPlugin, SessionStore};
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{ToolsConfig, ToolsPlugin};

#[path = "../../../benches/support/peak.rs"]
mod peak;

use peak::status_kib;

fn main() {
    peak::run_each("--turns", &["500", "2000"], measure);
}

/// Ten answers whose reported input climbs to the window, cycled.
fn responses() -> Vec<ScriptedResponse> {
    (1..=10)
        .map(|i| ScriptedResponse {
            usage: Some(Usage {
                input_tokens: 100 * i,
                output_tokens: 20,
                cached_input_tokens: None,
            }),
            ..ScriptedResponse::text(format!("answer {i}: {}", "words ".repeat(40)))
        })
        .collect()
}

fn measure(turns: u64) {
    let dir = std::env::temp_dir().join(format!("cordis-long-session-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let root = Context::root();
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(
            LlmPlugin,
            LlmConfig {
                responses: Some(responses()),
                repeat: true,
                context_window: Some(1_000),
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
        root.plugin(
            AgentLoopPlugin,
            AgentLoopConfig {
                invariant: Some(false),
                ..AgentLoopConfig::default()
            },
        );
        root.idle().await;
        let agents = root.get::<AgentLoop>().expect("the agent loop");
        let agent = agents
            .create_agent(AgentOptions::new("main", "bench-model"))
            .await
            .expect("an agent");
        let started = Instant::now();
        for i in 0..turns {
            agent
                .run_turn(format!("message {i}: {}", "text ".repeat(40)))
                .await
                .expect("a turn");
        }
        let ran = started.elapsed();
        let compactions = agent
            .session()
            .with_events(|e| e.iter().filter(|e| e.kind == "compaction").count());
        let events = agent.session().len();
        let messages = agent.session().messages().len();
        let peak = status_kib("VmHWM:");
        // Compactions on their own: the scripted model answers at once, so this is what
        // compacting costs besides the model.
        let rounds = 20u32;
        let begun = Instant::now();
        for _ in 0..rounds {
            agent.compact(None).await.expect("a compaction");
        }
        let per_compaction = begun.elapsed() / rounds;
        let id = agent.session().id().to_owned();
        agent.session().flush().await.expect("flushed");
        agent.dispose();
        drop(agent);
        root.dispose();
        // Reopened from its file, as `--resume` does: read, parsed, messages folded.
        let store = SessionStore::new(Some(dir.clone()), Durability::None);
        let opened = Instant::now();
        let (session, _) = store.open(&id).await.expect("the session reopens");
        let reopen = opened.elapsed();
        println!(
            "long session: {turns:>5} turns in {:.2} s, {events} events, {compactions} automatic compactions, {messages} messages sent at the end; peak RSS {:.1} MiB; a compaction besides its model call {:.2} ms; reopening {:.1} ms ({} events)",
            ran.as_secs_f64(),
            peak as f64 / 1024.0,
            per_compaction.as_secs_f64() * 1e3,
            reopen.as_secs_f64() * 1e3,
            session.len(),
        );
    });
    let _ = std::fs::remove_dir_all(dir);
}
