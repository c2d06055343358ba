//! The `agent-loop` plugin: provides [`AgentLoop`] and creates the configured agents.

use std::sync::Arc;

use cordis_conversation::Llm;
use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_session::SessionStore;
use cordis_system_prompt::SystemPrompt;
use cordis_tools::ToolRegistry;

use crate::config::AgentLoopConfig;
use crate::service::AgentLoop;

/// The `agent-loop` plugin (injects `llm`, `sessions`, `system-prompt`, `tools`).
///
/// When one of them is withdrawn the loop unwinds (running turns end as `disposed`); when it
/// returns, the configured agents are created again on their sessions (the next request header
/// is logged as `resume`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentLoopPlugin;

const INJECT: &[Inject] = &[
    Inject::required("llm"),
    Inject::required("sessions"),
    Inject::required("system-prompt"),
    Inject::required(ToolRegistry::NAME),
];

impl Plugin for AgentLoopPlugin {
    type Config = AgentLoopConfig;

    fn name(&self) -> &str {
        "agent-loop"
    }

    fn provides(&self, _config: &Self::Config) -> Vec<String> {
        vec![<crate::AgentLoop as cordis_runtime::Service>::NAME.to_owned()]
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &AgentLoopConfig) -> Result<(), BoxError> {
        crate::budget::check(&config.budget, &*ctx.require::<Llm>()?, &config.agents)?;
        let service = Arc::new(AgentLoop::new(
            ctx.clone(),
            ctx.require::<Llm>()?,
            ctx.require::<SystemPrompt>()?,
            ctx.require::<ToolRegistry>()?,
            ctx.require::<SessionStore>()?,
            config.settings(),
        ));
        for options in &config.agents {
            service.create_agent(options.clone()).await?;
        }
        let _ = ctx.provide_arc(service)?;
        Ok(())
    }
}
