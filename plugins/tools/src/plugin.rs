//! The `tools` plugin: provides the [`ToolRegistry`] and registers it as a tool provider of the
//! system-prompt assembly (the registry is just one provider, as in the reference), plus the two
//! Code Mode sections, which render (and appear) only for a scope whose mode calls for them.
//!
//! The `tool-presentation` plugin declares one presentation for its own scope (a standing scope
//! agents join by parenting): its whole body is [`ToolRegistry::present_as`].

use std::sync::Arc;

use cordis_code_runtime::CodeRuntimeService;
use cordis_runtime::{BoxError, Claim, Context, FnPlugin, Inject, Plugin, Service};
use cordis_system_prompt::SystemPrompt;
use serde::Deserialize;

use crate::presentation::{DEFAULT_MAX_PARALLEL_SUB_CALLS, Presentation, PresentationMode};
use crate::registry::{Restriction, ToolRegistry, declaring_key};

/// Configuration of the `tool-presentation` plugin: the mode, required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPresentationConfig {
    /// How this scope's tools (and those of scopes bound under it) are presented.
    pub mode: PresentationMode,
}

/// The `tool-presentation` plugin: `present_as(mode)` for its own scope (a standing scope agents
/// join by parenting). For `code` and `both` it needs the code runtime: loaded from a
/// `cordis.yml`, the entry itself waits for `code-runtime` ([`Plugin::needs`]), so `check` names
/// it pending; applied directly, its `tool-presentation/runtime` child waits instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolPresentationPlugin;

const PRESENTATION_INJECT: &[Inject] = &[Inject::required(ToolRegistry::NAME)];

impl Plugin for ToolPresentationPlugin {
    type Config = ToolPresentationConfig;

    fn name(&self) -> &str {
        "tool-presentation"
    }

    fn inject(&self) -> &[Inject] {
        PRESENTATION_INJECT
    }

    /// One presentation per composition: two rows would race for the realm's mode.
    fn claims(&self, _config: &ToolPresentationConfig) -> Vec<Claim> {
        vec![Claim::override_of("tool presentation")]
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn needs(&self, config: &ToolPresentationConfig) -> Vec<String> {
        match config.mode {
            PresentationMode::Native => Vec::new(),
            PresentationMode::Code | PresentationMode::Both => {
                vec![CodeRuntimeService::NAME.to_owned()]
            }
        }
    }

    async fn apply(&self, ctx: Context, config: &ToolPresentationConfig) -> Result<(), BoxError> {
        // Under a preset's standing scope the declaration is the realm's, so every agent joined
        // to the preset inherits it; elsewhere it is this row's own scope.
        let key = declaring_key(&ctx);
        let mode = config.mode;
        if mode == PresentationMode::Native {
            let registry = ctx.require::<ToolRegistry>()?;
            let _ = registry.present_as(&ctx, Some(key), mode)?;
            return Ok(());
        }
        // The declaration is an effect of the child: it unwinds when the runtime goes away.
        let waiting = FnPlugin::new(
            "tool-presentation/runtime",
            move |child: Context, (): ()| async move {
                let registry = child.require::<ToolRegistry>()?;
                let _ = registry.present_as(&child, Some(key), mode)?;
                Ok(())
            },
        )
        .inject(Inject::required(ToolRegistry::NAME))
        .inject(Inject::required(CodeRuntimeService::NAME));
        let _ = ctx.plugin(waiting, ());
        Ok(())
    }
}

/// The `tool-restrict` plugin: narrows what agents joined to its realm (a preset's standing
/// scope) inherit, with `allow` and/or `deny` lists of tool names. Outside a realm it restricts
/// its own scope, which agents may join by parenting. The restriction unwinds with the row.
///
/// The names must be tools the scope inherits in the final composition: a misspelt name fails
/// every assembly of the scope (naming the known tools), checked then and not when the row
/// applies, so the outcome does not depend on which entries happened to load first. A preset
/// mounted over the host's tools can only narrow them.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolRestrictPlugin;

impl Plugin for ToolRestrictPlugin {
    type Config = Restriction;

    fn name(&self) -> &str {
        "tool-restrict"
    }

    fn inject(&self) -> &[Inject] {
        PRESENTATION_INJECT
    }

    fn open_claims(&self, _config: &Restriction) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &Restriction) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let _ = registry.restrict(&ctx, declaring_key(&ctx), config.clone())?;
        Ok(())
    }
}

/// Configuration of the `tools` plugin (unknown fields are rejected).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolsConfig {
    /// The presentation of every scope that declares none (default `native`).
    #[serde(default)]
    pub mode: PresentationMode,
    /// How many read-only sub-calls of one `run_code` run may overlap (≥ 1, default 10).
    #[serde(default = "default_parallel")]
    pub max_parallel_sub_calls: usize,
    /// How many tool calls one `run_code` run may make in all (≥ 1, default 1,000): each costs
    /// host memory until the run ends, and waiting on tools does not count as compute time.
    #[serde(default = "default_sub_calls")]
    pub max_sub_calls: u64,
    /// Bytes of output one `run_code` run may produce (logs plus result; ≥ 4, default 256 KiB);
    /// more fails the run with `output-limit`.
    #[serde(default = "default_output")]
    pub max_output_bytes: usize,
}

fn default_output() -> usize {
    crate::presentation::DEFAULT_MAX_OUTPUT_BYTES
}

fn default_sub_calls() -> u64 {
    cordis_code_runtime::DEFAULT_MAX_SUB_CALLS
}

fn default_parallel() -> usize {
    DEFAULT_MAX_PARALLEL_SUB_CALLS
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            mode: PresentationMode::Native,
            max_parallel_sub_calls: DEFAULT_MAX_PARALLEL_SUB_CALLS,
            max_sub_calls: default_sub_calls(),
            max_output_bytes: default_output(),
        }
    }
}

/// A `tools` config the registry refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsConfigError {
    /// `maxParallelSubCalls: 0` would let no sub-call start.
    #[error("tools: maxParallelSubCalls must be a positive integer (got {0})")]
    ZeroParallelism(usize),
    /// `maxSubCalls: 0` would fail every program that calls a tool.
    #[error("tools: maxSubCalls must be a positive integer (got 0)")]
    ZeroSubCalls,
    /// `maxOutputBytes` below 4 cannot hold any result.
    #[error("tools: maxOutputBytes must be at least 4 (got {0})")]
    TinyOutput(usize),
}

impl ToolsConfig {
    /// The registry settings this config asks for.
    ///
    /// # Errors
    /// [`ToolsConfigError::ZeroParallelism`] for `maxParallelSubCalls: 0`.
    pub fn presentation(&self) -> Result<Presentation, ToolsConfigError> {
        if self.max_parallel_sub_calls == 0 {
            return Err(ToolsConfigError::ZeroParallelism(0));
        }
        if self.max_sub_calls == 0 {
            return Err(ToolsConfigError::ZeroSubCalls);
        }
        if self.max_output_bytes < 4 {
            return Err(ToolsConfigError::TinyOutput(self.max_output_bytes));
        }
        Ok(Presentation {
            mode: self.mode,
            max_parallel_sub_calls: self.max_parallel_sub_calls,
            max_sub_calls: self.max_sub_calls,
            max_output_bytes: self.max_output_bytes,
        })
    }
}

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

    fn provides(&self, _config: &ToolsConfig) -> Vec<String> {
        vec![ToolRegistry::NAME.to_owned()]
    }

    /// The two Code Mode sections.
    fn claims(&self, _config: &ToolsConfig) -> Vec<Claim> {
        vec![
            Claim::section(cordis_code_mode::CODE_ONLY_SECTION),
            Claim::section(cordis_code_mode::SDK_SECTION),
        ]
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &ToolsConfig) -> Result<(), BoxError> {
        let presentation = config.presentation()?;
        let prompt = ctx.require::<SystemPrompt>()?;
        let registry = ToolRegistry::with_presentation(ctx.clone(), presentation);
        for section in registry.sections() {
            let _ = prompt.section(&ctx, section)?;
        }
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

    #[test]
    fn the_tools_config_defaults_to_native_and_refuses_zero_parallelism() {
        let config: ToolsConfig = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(config, ToolsConfig::default());
        assert_eq!(config.presentation().unwrap(), Presentation::default());
        let config: ToolsConfig =
            serde_json::from_value(serde_json::json!({"mode": "both", "maxParallelSubCalls": 3}))
                .unwrap();
        assert_eq!(config.presentation().unwrap().max_parallel_sub_calls, 3);
        let zero: ToolsConfig =
            serde_json::from_value(serde_json::json!({"maxParallelSubCalls": 0})).unwrap();
        assert_eq!(
            zero.presentation().unwrap_err().to_string(),
            "tools: maxParallelSubCalls must be a positive integer (got 0)"
        );
        let limited: ToolsConfig =
            serde_json::from_value(serde_json::json!({"maxSubCalls": 20})).unwrap();
        assert_eq!(limited.presentation().unwrap().max_sub_calls, 20);
        assert_eq!(Presentation::default().max_sub_calls, 1_000);
        assert_eq!(Presentation::default().max_output_bytes, 256 << 10);
        let zero: ToolsConfig =
            serde_json::from_value(serde_json::json!({"maxSubCalls": 0})).unwrap();
        assert_eq!(
            zero.presentation().unwrap_err().to_string(),
            "tools: maxSubCalls must be a positive integer (got 0)"
        );
        let err = serde_json::from_value::<ToolsConfig>(serde_json::json!({"mode": "codes"}))
            .unwrap_err();
        assert!(err.to_string().contains("unknown variant `codes`"), "{err}");
        let err =
            serde_json::from_value::<ToolPresentationConfig>(serde_json::json!({})).unwrap_err();
        assert!(err.to_string().contains("missing field `mode`"), "{err}");
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
