//! The `agent-core` plugin: one config row that mounts the whole harness core — `llm`,
//! `sessions`, `system-prompt`, `tools` and `agent-loop` — as child plugins of its scope.
//!
//! `persona` and `toolOrder` sit side by side in its config and are forwarded to the
//! system prompt as they are: an absent `toolOrder` stays absent (lexicographic order), an
//! explicit `[]` stays `[]` (and fails the system prompt's load: no rest entry). The two are
//! never conflated on the way down.
//!
//! # Examples
//! ```yaml
//! - id: core
//!   name: agent-core
//!   config:
//!     persona: You are terse.
//!     toolOrder: [todo_write, "<unlisted-tools>"]
//!     llm: {adapter: scripted, script: ./script.yml}
//!     sessions: {root: ./.sessions}
//!     agents: [{id: main, model: deepseek-v4-flash}]
//! ```

use cordis_agent_loop::{AgentLoopConfig, AgentLoopPlugin, AgentOptions};
use cordis_llm::{LlmConfig, LlmPlugin};
use cordis_runtime::{BoxError, Context, Plugin};
use cordis_session::{SessionConfig, SessionPlugin};
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{ToolsConfig, ToolsPlugin};
use serde::Deserialize;

/// Configuration of `agent-core`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentCoreConfig {
    /// The deployment persona, forwarded to `system-prompt`.
    #[serde(default)]
    pub persona: Option<String>,
    /// The explicit tool order, forwarded to `system-prompt` only when present.
    #[serde(default)]
    pub tool_order: Option<Vec<String>>,
    /// The `llm` plugin's config; absent mounts no `llm` (another plugin provides it).
    #[serde(default)]
    pub llm: Option<LlmConfig>,
    /// The `sessions` plugin's config (default: in memory).
    #[serde(default)]
    pub sessions: SessionConfig,
    /// Agents to create.
    #[serde(default)]
    pub agents: Vec<AgentOptions>,
    /// See [`AgentLoopConfig::max_parallel_tools`].
    #[serde(default)]
    pub max_parallel_tools: Option<usize>,
    /// See [`AgentLoopConfig::max_steps`].
    #[serde(default)]
    pub max_steps: Option<u64>,
    /// See [`AgentLoopConfig::invariant`].
    #[serde(default)]
    pub invariant: Option<bool>,
    /// See [`AgentLoopConfig::tool_timeout_ms`].
    #[serde(default)]
    pub tool_timeout_ms: Option<u64>,
}

impl AgentCoreConfig {
    /// What `system-prompt` receives: `persona` and `toolOrder` exactly as given.
    pub fn system_prompt_config(&self) -> SystemPromptConfig {
        SystemPromptConfig {
            persona: self.persona.clone(),
            tool_order: self.tool_order.clone(),
        }
    }

    /// What `agent-loop` receives.
    pub fn agent_loop_config(&self) -> AgentLoopConfig {
        let defaults = AgentLoopConfig::default();
        AgentLoopConfig {
            agents: self.agents.clone(),
            max_parallel_tools: self
                .max_parallel_tools
                .unwrap_or(defaults.max_parallel_tools),
            max_steps: self.max_steps.unwrap_or(defaults.max_steps),
            invariant: self.invariant,
            tool_timeout_ms: self.tool_timeout_ms,
        }
    }
}

/// The `agent-core` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentCorePlugin;

impl Plugin for AgentCorePlugin {
    type Config = AgentCoreConfig;

    fn name(&self) -> &str {
        "agent-core"
    }

    async fn apply(&self, ctx: Context, config: &AgentCoreConfig) -> Result<(), BoxError> {
        if let Some(llm) = &config.llm {
            ctx.plugin(LlmPlugin, llm.clone());
        }
        ctx.plugin(SessionPlugin, config.sessions.clone());
        ctx.plugin(SystemPromptPlugin, config.system_prompt_config());
        ctx.plugin(ToolsPlugin, ToolsConfig::default());
        ctx.plugin(AgentLoopPlugin, config.agent_loop_config());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_agent_loop::AgentLoop;
    use cordis_runtime::prelude::*;
    use cordis_session::TurnEndReason;
    use cordis_system_prompt::SystemPrompt;

    use super::*;

    fn parse(v: serde_json::Value) -> AgentCoreConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn absent_tool_order_stays_absent_and_an_empty_list_stays_empty() {
        let absent = parse(serde_json::json!({"persona": "p"}));
        assert_eq!(absent.system_prompt_config().tool_order, None);
        assert_eq!(absent.system_prompt_config().persona.as_deref(), Some("p"));
        let empty = parse(serde_json::json!({"toolOrder": []}));
        assert_eq!(empty.system_prompt_config().tool_order, Some(vec![]));
        let listed =
            parse(serde_json::json!({"persona": "p", "toolOrder": ["a", "<unlisted-tools>"]}));
        assert_eq!(
            listed.system_prompt_config(),
            SystemPromptConfig {
                persona: Some("p".into()),
                tool_order: Some(vec!["a".into(), "<unlisted-tools>".into()])
            }
        );
    }

    #[tokio::test]
    async fn the_composition_boots_and_forwards_persona_and_tool_order() {
        let root = Context::root();
        let config = parse(serde_json::json!({
            "persona": "You are terse.",
            "llm": {"adapter": "scripted", "responses": [{"text": "hi"}]},
            "agents": [{"id": "main", "model": "m"}],
        }));
        let core = root.plugin(AgentCorePlugin, config);
        root.idle().await;
        assert_eq!(core.status(), ScopeStatus::Active);
        let prompt = root.get::<SystemPrompt>().unwrap();
        assert!(
            prompt.tool_order().is_none(),
            "absent toolOrder reaches system-prompt absent"
        );
        let agent = root.get::<AgentLoop>().unwrap().agent("main").unwrap();
        assert_eq!(
            agent.run_turn("hello").await.unwrap(),
            TurnEndReason::Completed
        );
        let header = agent.session().request_header().unwrap().unwrap();
        assert_eq!(header.system.as_deref(), Some("You are terse."));
        core.dispose();
        assert!(root.get::<AgentLoop>().is_none());

        // An explicit empty toolOrder is forwarded, and system-prompt refuses it.
        let core = root.plugin(AgentCorePlugin, parse(serde_json::json!({"toolOrder": []})));
        root.idle().await;
        assert_eq!(core.status(), ScopeStatus::Active);
        assert!(
            root.get::<SystemPrompt>().is_none(),
            "[] was not turned into absent"
        );
        root.dispose();
    }
}
