//! The `persona` row: a preset's persona, replacing the deployment's `deployment:persona` for
//! the agents joined to the preset and for no one else.

use std::sync::Arc;

use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_system_prompt::{PERSONA_SECTION, SystemPrompt};
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
