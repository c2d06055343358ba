//! The `tools` plugin: provides the [`ToolRegistry`] and registers it as a tool provider of the
//! system-prompt assembly (the registry is just one provider, as in the reference).

use std::sync::Arc;

use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_system_prompt::SystemPrompt;
use serde::Deserialize;

use crate::registry::ToolRegistry;

/// Configuration of the `tools` plugin (none yet; unknown fields are rejected).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {}

/// The configuration of a plugin that takes none: `{}` (unknown fields are rejected).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoConfig {}

/// The `tools` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolsPlugin;

const INJECT: &[Inject] = &[Inject::required(SystemPrompt::NAME)];

impl Plugin for ToolsPlugin {
    type Config = ToolsConfig;

    fn name(&self) -> &str {
        "tools"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    async fn apply(&self, ctx: Context, _config: &ToolsConfig) -> Result<(), BoxError> {
        let prompt = ctx.require::<SystemPrompt>()?;
        let registry = ToolRegistry::new(ctx.clone());
        // The provider holds the registry weakly: the provider effect may outlive a restart.
        let weak = Arc::downgrade(&registry.inner);
        let _ = prompt.tools(&ctx, move |assemble| {
            weak.upgrade()
                .map(|inner| inner.provider_result(assemble.scope))
                .unwrap_or_default()
        })?;
        let _ = ctx.provide(registry)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{
        AssembleContext, ScopeKey, SystemPromptConfig, SystemPromptPlugin, TOOL_ORDER_REST,
        ToolOrder,
    };

    use super::*;
    use crate::test_support::{names, tool};

    async fn boot(tool_order: Option<Vec<String>>) -> Context {
        let root = Context::root();
        let tools = root.plugin(ToolsPlugin, ToolsConfig::default());
        let prompt = root.plugin(
            SystemPromptPlugin,
            SystemPromptConfig {
                persona: None,
                tool_order: tool_order.map(|o| ToolOrder::new(o).unwrap()),
            },
        );
        root.idle().await;
        assert_eq!(prompt.status(), ScopeStatus::Active);
        assert_eq!(tools.status(), ScopeStatus::Active);
        root
    }

    #[tokio::test]
    async fn the_registry_is_a_tool_provider_of_the_assembly() {
        let root = boot(Some(vec!["zulu".into(), TOOL_ORDER_REST.into()])).await;
        let reg = root.get::<ToolRegistry>().unwrap();
        let sp = root.get::<SystemPrompt>().unwrap();
        for n in ["mike", "zulu", "alpha"] {
            let _ = reg.register(&root, tool(n)).unwrap();
        }
        let agent = root.child_scope("agent");
        let actx = agent.context().unwrap();
        let a = ScopeKey::from(agent.id());
        let _ = reg.register_scoped(&actx, a, tool("own")).unwrap();
        let _ = reg
            .restrict(
                &actx,
                a,
                crate::Restriction {
                    allow: None,
                    deny: Some(vec!["zulu".into()]),
                },
            )
            .unwrap();
        let global = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(names(&global.tools), ["zulu", "alpha", "mike"]);
        // zulu is restricted away for the agent but still known: a legal absence.
        let scoped = sp.assemble(AssembleContext::scoped(a)).await.unwrap();
        assert_eq!(names(&scoped.tools), ["alpha", "mike", "own"]);
        agent.dispose();
        let scoped = sp.assemble(AssembleContext::scoped(a)).await.unwrap();
        assert_eq!(names(&scoped.tools), ["zulu", "alpha", "mike"]);
        root.dispose();
        assert!(root.live().is_zero(), "{:?}", root.live());
    }

    #[tokio::test]
    async fn withdrawing_the_system_prompt_unwinds_the_registry_and_its_provider() {
        let root = Context::root();
        let prompt = root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        let tools = root.plugin(ToolsPlugin, ToolsConfig::default());
        root.idle().await;
        assert!(root.get::<ToolRegistry>().is_some());
        prompt.dispose();
        assert_eq!(tools.status(), ScopeStatus::Pending);
        assert!(root.get::<ToolRegistry>().is_none());
        root.dispose();
        assert!(root.live().is_zero());
    }
}
