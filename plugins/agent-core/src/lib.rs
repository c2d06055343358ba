//! The `agent-core` plugin: one config row that mounts the whole harness core — `llm`,
//! `sessions`, `system-prompt`, `tools` and `agent-loop` — as child plugins of its scope.
//!
//! `persona` and `toolOrder` sit side by side in its config and are forwarded to the
//! system prompt as they are: an absent `toolOrder` stays absent (lexicographic order). A
//! `toolOrder` is a [`ToolOrder`], validated when the config is parsed, so an explicit `[]` (no
//! rest entry) is a configuration error of this entry (`config.toolOrder: …`), never a
//! system prompt that fails later while `agent-core` looks fine.
//!
//! `agent-core` is active only when its parts are: its apply waits until no part is still
//! loading, and if one failed, `agent-core` fails with that part's reason (its other parts are
//! then disposed with it). A part left pending for a service from outside (no `llm` here, say)
//! does not hold it back.
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
use cordis_runtime::{BoxError, Context, Plugin, ScopeHandle, ScopeStatus};
use cordis_session::{SessionConfig, SessionPlugin};
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin, ToolOrder};
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
    pub tool_order: Option<ToolOrder>,
    /// The `llm` plugin's config; absent mounts no `llm` (another plugin provides it).
    #[serde(default)]
    pub llm: Option<LlmConfig>,
    /// The `sessions` plugin's config (default: in memory; a relative `root` is against the
    /// current directory).
    #[serde(default = "SessionConfig::in_memory")]
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
    /// See [`AgentLoopConfig::compaction`].
    #[serde(default)]
    pub compaction: cordis_agent_loop::CompactionConfig,
    /// See [`AgentLoopConfig::budget`].
    #[serde(default)]
    pub budget: cordis_agent_loop::Budget,
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
            compaction: self.compaction,
            budget: self.budget,
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

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    /// What its hidden children provide and claim, asked of each child plugin, so a sibling
    /// entry providing one of them is refused before loading (it would be contested).
    fn provides(&self, config: &AgentCoreConfig) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(llm) = &config.llm {
            out.extend(LlmPlugin.provides(llm));
        }
        out.extend(SessionPlugin::default().provides(&config.sessions));
        out.extend(SystemPromptPlugin.provides(&config.system_prompt_config()));
        out.extend(ToolsPlugin.provides(&ToolsConfig::default()));
        out.extend(AgentLoopPlugin.provides(&config.agent_loop_config()));
        out
    }

    /// What its hidden children claim: the persona section and the tool registry's Code Mode
    /// sections.
    fn claims(&self, config: &AgentCoreConfig) -> Vec<cordis_runtime::Claim> {
        let mut out = SystemPromptPlugin.claims(&config.system_prompt_config());
        out.extend(ToolsPlugin.claims(&ToolsConfig::default()));
        out
    }

    async fn apply(&self, ctx: Context, config: &AgentCoreConfig) -> Result<(), BoxError> {
        let mut parts = Vec::with_capacity(5);
        if let Some(llm) = &config.llm {
            parts.push(("llm", ctx.plugin(LlmPlugin, llm.clone())));
        }
        parts.push((
            "sessions",
            ctx.plugin(SessionPlugin::default(), config.sessions.clone()),
        ));
        parts.push((
            "system-prompt",
            ctx.plugin(SystemPromptPlugin, config.system_prompt_config()),
        ));
        parts.push(("tools", ctx.plugin(ToolsPlugin, ToolsConfig::default())));
        parts.push((
            "agent-loop",
            ctx.plugin(AgentLoopPlugin, config.agent_loop_config()),
        ));
        settle(&parts).await
    }
}

/// Waits until no part is loading, then fails with the first failed part's reason (in mount
/// order, so the message does not depend on which part finished first).
///
/// # Cancel safety
/// Cancel safe: dropping it only stops the wait.
async fn settle(parts: &[(&str, ScopeHandle)]) -> Result<(), BoxError> {
    // A part that settles can start a pending sibling (by providing its service), so one pass
    // is not enough: repeat until a pass finds every part settled.
    loop {
        for (_, part) in parts {
            part.settled().await;
        }
        if parts
            .iter()
            .all(|(_, part)| part.status() != ScopeStatus::Loading)
        {
            break;
        }
    }
    for (name, part) in parts {
        if part.status() == ScopeStatus::Failed {
            let reason = part
                .failure()
                .map_or_else(|| "failed".to_owned(), |f| f.to_string());
            return Err(format!("part \"{name}\" failed: {reason}").into());
        }
    }
    Ok(())
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
    fn absent_tool_order_stays_absent_and_an_empty_list_does_not_parse() {
        let absent = parse(serde_json::json!({"persona": "p"}));
        assert_eq!(absent.system_prompt_config().tool_order, None);
        assert_eq!(absent.system_prompt_config().persona.as_deref(), Some("p"));
        let empty = serde_json::from_value::<AgentCoreConfig>(serde_json::json!({"toolOrder": []}));
        assert!(
            empty
                .unwrap_err()
                .to_string()
                .starts_with("toolOrder must contain the \"<unlisted-tools>\" rest entry"),
        );
        let listed =
            parse(serde_json::json!({"persona": "p", "toolOrder": ["a", "<unlisted-tools>"]}));
        assert_eq!(
            listed.system_prompt_config(),
            SystemPromptConfig {
                persona: Some("p".into()),
                tool_order: Some(
                    ToolOrder::new(vec!["a".into(), "<unlisted-tools>".into()]).unwrap()
                )
            }
        );
    }

    /// Issue 12: a failing part left `agent-core` active and the failure a log line.
    #[tokio::test]
    async fn a_failing_part_fails_the_composite_with_its_reason() {
        let root = Context::root();
        // `script` and `responses` together: the `llm` part refuses to start.
        let config = parse(serde_json::json!({
            "llm": {"adapter": "scripted", "script": "s.yml", "responses": [{"text": "hi"}]},
            "agents": [{"id": "main", "model": "m"}],
        }));
        let core = root.plugin(AgentCorePlugin, config);
        assert_eq!(core.settled().await, ScopeStatus::Failed);
        let reason = core.failure().unwrap().to_string();
        assert!(reason.starts_with("part \"llm\" failed: "), "{reason}");
        root.idle().await;
        assert!(
            root.get::<SystemPrompt>().is_none(),
            "the other parts went with it"
        );
        root.dispose();
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

        root.dispose();
    }
}
