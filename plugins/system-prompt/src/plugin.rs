//! The `system-prompt` plugin: validates `toolOrder`, registers the persona section and provides
//! the [`SystemPrompt`] service.

use std::sync::Arc;

use cordis_runtime::{BoxError, Context, Plugin, Service};
use serde::Deserialize;

use crate::order::ToolOrder;
use crate::service::{Section, SystemPrompt};

/// The persona section's name; always registered (possibly empty) so the name stays reserved.
pub const PERSONA_SECTION: &str = "deployment:persona";
/// The persona section's order.
pub const PERSONA_ORDER: f64 = 0.0;

/// Configuration of the `system-prompt` plugin.
///
/// `tool_order` stays an `Option`: absent means lexicographic order, while an explicit `[]` is a
/// configured list without the rest entry and does not parse. The two must never be conflated.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SystemPromptConfig {
    /// The deployment persona (`deployment:persona`, order 0); may use `{{variables}}`.
    #[serde(default)]
    pub persona: Option<String>,
    /// The explicit model-facing tool order; must contain `"<unlisted-tools>"` once.
    #[serde(default)]
    pub tool_order: Option<ToolOrder>,
}

/// The `system-prompt` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemPromptPlugin;

impl Plugin for SystemPromptPlugin {
    type Config = SystemPromptConfig;

    fn name(&self) -> &str {
        "system-prompt"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn provides(&self, _config: &SystemPromptConfig) -> Vec<String> {
        vec![SystemPrompt::NAME.to_owned()]
    }

    fn claims(&self, _config: &SystemPromptConfig) -> Vec<cordis_runtime::Claim> {
        vec![cordis_runtime::Claim::section(PERSONA_SECTION)]
    }

    async fn apply(&self, ctx: Context, config: &SystemPromptConfig) -> Result<(), BoxError> {
        let service = Arc::new(SystemPrompt::with_order(
            ctx.clone(),
            config.tool_order.clone(),
        ));
        let persona = config.persona.clone().unwrap_or_default();
        let _ = service.section(
            &ctx,
            Section::fixed(PERSONA_SECTION, PERSONA_ORDER, persona),
        )?;
        let _ = ctx.provide_arc(service)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;

    use super::*;
    use crate::assembly::AssembleContext;

    fn parse(value: serde_json::Value) -> Result<SystemPromptConfig, serde_json::Error> {
        serde_json::from_value(value)
    }

    #[test]
    fn absent_and_empty_tool_order_stay_different_values() {
        assert_eq!(parse(serde_json::json!({})).unwrap().tool_order, None);
        assert_eq!(
            parse(serde_json::json!({"toolOrder": []}))
                .unwrap_err()
                .to_string(),
            "toolOrder must contain the \"<unlisted-tools>\" rest entry (where unlisted tools are inserted)"
        );
    }

    #[test]
    fn unknown_config_fields_are_rejected() {
        let err = parse(serde_json::json!({"tool_order": ["x"]})).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `tool_order`"),
            "{err}"
        );
    }

    /// Issue 12: a bad `toolOrder` was a scope that failed at run time; it is now a config
    /// that does not parse, with the field path.
    #[test]
    fn an_invalid_tool_order_is_a_config_error_with_its_path() {
        let plugin: std::sync::Arc<dyn cordis_runtime::ErasedPlugin> =
            std::sync::Arc::new(SystemPromptPlugin);
        let err = cordis_runtime::prepare(plugin.clone(), &serde_json::json!({"toolOrder": []}))
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "config.toolOrder: toolOrder must contain the \"<unlisted-tools>\" rest entry (where unlisted tools are inserted)"
        );
        let err = cordis_runtime::prepare(
            plugin,
            &serde_json::json!({"toolOrder": ["a", "<unlisted-tools>", "a"]}),
        )
        .err()
        .unwrap();
        assert_eq!(
            err.to_string(),
            "config.toolOrder: toolOrder lists \"a\" more than once"
        );
    }

    #[tokio::test]
    async fn the_persona_section_renders_at_order_zero_and_unwinds_with_the_plugin() {
        let root = Context::root();
        let handle = root.plugin(
            SystemPromptPlugin,
            SystemPromptConfig {
                persona: Some("You are {{name}}.".into()),
                tool_order: None,
            },
        );
        assert_eq!(handle.settled().await, ScopeStatus::Active);
        let sp = root.get::<SystemPrompt>().unwrap();
        let _ = sp.variable(&root, "name", |_| Some("Ada".into())).unwrap();
        let _ = sp
            .section(
                &root,
                Section::fixed("harness:identity", -100.0, "Harness."),
            )
            .unwrap();
        let assembly = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(assembly.sections[1].name, PERSONA_SECTION);
        assert_eq!(assembly.render().unwrap(), "Harness.\n\nYou are Ada.");
        // A second owner of the name contests it: neither renders until one leaves.
        let second = sp
            .section(&root, Section::fixed(PERSONA_SECTION, 5.0, "x"))
            .unwrap();
        let claim = cordis_runtime::Claim::section(PERSONA_SECTION);
        assert_eq!(root.claim_holders(&claim), ["root", "system-prompt"]);
        let assembly = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(assembly.render().unwrap(), "Harness.");
        second.dispose();
        let assembly = sp.assemble(AssembleContext::global()).await.unwrap();
        assert_eq!(assembly.render().unwrap(), "Harness.\n\nYou are Ada.");
        handle.dispose();
        assert!(root.get::<SystemPrompt>().is_none());
        root.dispose();
        assert!(root.live().is_zero());
    }
}
