//! Booting the real plugins for loop tests.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cordis_agent_loop::{AgentError, AgentLoop, AgentLoopConfig, AgentLoopPlugin, AgentOptions};
use cordis_llm::{FrozenRequest, Llm, LlmConfig, LlmPlugin, ScriptedAdapter, ScriptedResponse};
use cordis_runtime::prelude::*;
use cordis_session::{SessionConfig, SessionEvent, SessionPlugin};
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tool_declare::{DeclareConfig, DeclarePlugin, DeclaredTool};
use cordis_tools::{ToolsConfig, ToolsPlugin};

/// A running runtime with the real plugins and recorders.
pub struct Rig {
    pub root: Context,
    pub prompt: ScopeHandle,
    pub agent_loop: ScopeHandle,
    pub errors: Arc<Mutex<Vec<AgentError>>>,
}

pub fn declared(name: &str) -> DeclaredTool {
    DeclaredTool {
        name: name.into(),
        description: format!("{name} stub"),
        parameters: serde_json::json!({"type": "object", "properties": {"x": {"type": "string"}}})
            .into(),
        result: Some(serde_json::json!({"from": name})),
    }
}

pub fn prompt_config(tool_order: Option<Vec<&str>>) -> SystemPromptConfig {
    SystemPromptConfig {
        persona: Some("You are a test agent.".into()),
        tool_order: tool_order.map(|o| {
            cordis_system_prompt::ToolOrder::new(o.into_iter().map(String::from).collect())
                .expect("a valid test toolOrder")
        }),
    }
}

pub fn loop_config() -> AgentLoopConfig {
    AgentLoopConfig {
        agents: vec![AgentOptions::new("main", "test-model")],
        ..Default::default()
    }
}

/// Boots system-prompt, tools, llm (inline script), sessions (`root` or memory), agent-loop,
/// then one `tool-declare` plugin per tool, each settled before the next (registration order).
pub async fn boot(
    tool_order: Option<Vec<&str>>,
    responses: Vec<ScriptedResponse>,
    tools: &[&str],
    sessions: SessionConfig,
) -> Rig {
    let root = Context::root();
    let prompt = root.plugin(SystemPromptPlugin, prompt_config(tool_order));
    root.plugin(ToolsPlugin, ToolsConfig::default());
    root.plugin(
        LlmPlugin,
        LlmConfig {
            responses: Some(responses),
            record_requests: 64,
            ..Default::default()
        },
    );
    root.plugin(SessionPlugin::default(), sessions);
    let agent_loop = root.plugin(AgentLoopPlugin, loop_config());
    root.idle().await;
    for name in tools {
        let h = root.plugin(
            DeclarePlugin,
            DeclareConfig {
                tools: vec![declared(name)],
                sections: vec![],
            },
        );
        assert_eq!(h.settled().await, ScopeStatus::Active);
    }
    root.idle().await;
    assert_eq!(
        agent_loop.status(),
        ScopeStatus::Active,
        "{:?}",
        agent_loop.failure()
    );
    let errors: Arc<Mutex<Vec<AgentError>>> = Arc::default();
    let e = errors.clone();
    let _ = root.on::<AgentError>(move |err| e.lock().unwrap().push(err.clone()));
    Rig {
        root,
        prompt,
        agent_loop,
        errors,
    }
}

impl Rig {
    pub fn agent(&self) -> cordis_agent_loop::Agent {
        self.root
            .get::<AgentLoop>()
            .expect("agent-loop")
            .agent("main")
            .expect("agent main")
    }

    pub fn requests(&self) -> Vec<FrozenRequest> {
        let llm = self.root.get::<Llm>().unwrap();
        llm.adapter()
            .as_any()
            .downcast_ref::<ScriptedAdapter>()
            .unwrap()
            .requests()
    }

    pub fn kinds(&self) -> Vec<String> {
        self.agent()
            .session()
            .events()
            .iter()
            .map(|e| e.kind.clone())
            .collect()
    }

    pub fn of_kind(&self, kind: &str) -> Vec<SessionEvent> {
        self.agent()
            .session()
            .events()
            .into_iter()
            .filter(|e| e.kind == kind)
            .collect()
    }
}

pub fn names(tools: &[cordis_system_prompt::ToolSchema]) -> Vec<String> {
    tools.iter().map(|t| t.name.clone()).collect()
}

/// Polls `done` until it holds; panics naming `what` after a deadline that only guards against
/// a hang (a test that never gets there fails instead of running forever).
pub async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
