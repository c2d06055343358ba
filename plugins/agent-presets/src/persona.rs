//! The prompt rows of a preset: `persona` replaces the deployment's `deployment:persona`, and
//! `tool-order` its `toolOrder`, for the agents joined to the preset and for no one else.

use std::sync::Arc;

use cordis_runtime::{BoxError, Claim, Context, Inject, Plugin, Service};
use cordis_system_prompt::{PERSONA_SECTION, SystemPrompt, ToolOrder};
use cordis_tools::{ToolRegistry, declaring_key};
use serde::Deserialize;

/// Configuration of the `persona` row.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaConfig {
    /// The persona text (may use `{{variables}}`, like the deployment's).
    pub text: String,
}

/// The `persona` plugin: under a preset's standing scope (a realm), an override of
/// `deployment:persona` that applies to assemblies whose scope chain reaches the realm — the
/// agents joined to the preset, and a scope-only read of its standing key. Outside a realm it
/// applies to its own scope's chain. It unwinds with the row.
#[derive(Debug, Clone, Copy, Default)]
pub struct PersonaPlugin;

const INJECT: &[Inject] = &[
    Inject::required(SystemPrompt::NAME),
    Inject::required(ToolRegistry::NAME),
];

impl Plugin for PersonaPlugin {
    type Config = PersonaConfig;

    fn name(&self) -> &str {
        "persona"
    }

    /// One persona per composition (a preset): two rows would both apply to its agents.
    fn claims(&self, _config: &PersonaConfig) -> Vec<Claim> {
        vec![Claim::override_of("persona")]
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    async fn apply(&self, ctx: Context, config: &PersonaConfig) -> Result<(), BoxError> {
        let prompt = ctx.require::<SystemPrompt>()?;
        let registry = ctx.require::<ToolRegistry>()?;
        let realm = declaring_key(&ctx);
        let text: Arc<str> = config.text.as_str().into();
        let _ = prompt.override_section(&ctx, PERSONA_SECTION, move |assemble| {
            let scope = assemble.scope?;
            registry
                .chain(scope)
                .contains(&realm)
                .then(|| text.to_string())
        })?;
        Ok(())
    }
}

/// Configuration of the `tool-order` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolOrderConfig {
    /// The order for this preset's agents; absent: plain lexicographic order.
    #[serde(default)]
    pub tool_order: Option<ToolOrder>,
}

/// The `tool-order` plugin: replaces the deployment's `toolOrder` for the agents joined to its
/// realm (a preset's standing scope). The `code` preset needs it: under Code Mode the model
/// receives `run_code` alone, so a deployment order naming a native tool would fail every
/// assembly of its agents.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolOrderPlugin;

impl Plugin for ToolOrderPlugin {
    type Config = ToolOrderConfig;

    fn name(&self) -> &str {
        "tool-order"
    }

    /// One tool order per composition (a preset): the model-facing order must not depend on
    /// which row registered first.
    fn claims(&self, _config: &ToolOrderConfig) -> Vec<Claim> {
        vec![Claim::override_of("tool order")]
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    async fn apply(&self, ctx: Context, config: &ToolOrderConfig) -> Result<(), BoxError> {
        let prompt = ctx.require::<SystemPrompt>()?;
        let registry = ctx.require::<ToolRegistry>()?;
        let realm = declaring_key(&ctx);
        let order = config.tool_order.clone();
        let _ = prompt.override_tool_order(&ctx, move |assemble| {
            let scope = assemble.scope?;
            registry
                .chain(scope)
                .contains(&realm)
                .then(|| order.clone())
        })?;
        Ok(())
    }
}
