//! The `tool-declare` plugin: tools declared in configuration that answer a fixed result — for
//! stubbing third-party tools in CI and for registration-race tests.

use cordis_runtime::{BoxError, Claim, Context, Inject, Plugin, Schedule};
use cordis_system_prompt::{Section, SystemPrompt};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use serde::Deserialize;

/// One declared tool.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredTool {
    /// The tool name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its parameters schema (`"type": "object"`), shared by every boot of the parsed config.
    pub parameters: std::sync::Arc<serde_json::Value>,
    /// What every call returns; `{"ok": true}` when absent.
    #[serde(default)]
    pub result: Option<serde_json::Value>,
}

/// One declared prompt section (e.g. usage guidance that ships with the declared tools).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredSection {
    /// The unique section name.
    pub name: String,
    /// Where it renders (lower first; equal orders sort by name).
    pub order: f64,
    /// The text; may use `{{variables}}`.
    pub text: String,
}

/// Configuration of `tool-declare`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclareConfig {
    /// The tools to register, in this order (the schedule may still reorder across plugins).
    #[serde(default)]
    pub tools: Vec<DeclaredTool>,
    /// Prompt sections to register beside the tools.
    #[serde(default)]
    pub sections: Vec<DeclaredSection>,
}

/// The `tool-declare` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeclarePlugin;

impl Plugin for DeclarePlugin {
    type Config = DeclareConfig;

    fn name(&self) -> &str {
        "tool-declare"
    }

    fn inject(&self) -> &[Inject] {
        ToolRegistry::INJECT
    }

    fn claims(&self, config: &DeclareConfig) -> Vec<Claim> {
        let tools = config.tools.iter().map(|t| Claim::tool(t.name.clone()));
        let sections = config
            .sections
            .iter()
            .map(|s| Claim::section(s.name.clone()));
        tools.chain(sections).collect()
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &DeclareConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        for declared in &config.tools {
            let result = declared
                .result
                .clone()
                .unwrap_or_else(|| serde_json::json!({"ok": true}));
            let schema = ToolSchema {
                name: declared.name.clone(),
                description: declared.description.clone(),
                parameters: declared.parameters.clone(),
            };
            let def = ToolDefinition::new(schema, move |_, _| {
                let result = result.clone();
                async move { Ok(ToolOutput::new(result)) }
            });
            let _ = registry.register_scheduled(&ctx, def).await?;
        }
        if !config.sections.is_empty() {
            // Present whenever `tools` is: the registry itself injects the system prompt.
            let prompt = ctx.require::<SystemPrompt>()?;
            for section in &config.sections {
                ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
                ctx.trace(Schedule::TRACE_SECTION, section.name.clone());
                let _ = prompt.section(
                    &ctx,
                    Section::fixed(section.name.clone(), section.order, section.text.clone()),
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::Policy;
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{
        AssembleContext, SystemPrompt, SystemPromptConfig, SystemPromptPlugin,
    };
    use cordis_tools::{ToolCall, ToolsConfig, ToolsPlugin};

    use super::*;

    fn declared(name: &str) -> DeclaredTool {
        DeclaredTool {
            name: name.into(),
            description: format!("{name} stub"),
            parameters: serde_json::json!({"type": "object"}).into(),
            result: None,
        }
    }

    async fn header_for(seed: u64, groups: &[&[&str]]) -> (Vec<u8>, Vec<String>) {
        let root = Context::root_with(Schedule::new(Policy::Random, seed));
        for group in groups {
            let tools = group.iter().map(|n| declared(n)).collect();
            root.plugin(
                DeclarePlugin,
                DeclareConfig {
                    tools,
                    ..Default::default()
                },
            );
        }
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.idle().await;
        let sp = root.get::<SystemPrompt>().unwrap();
        let header = sp
            .assemble(AssembleContext::global())
            .await
            .unwrap()
            .header_json()
            .unwrap();
        let order = root
            .trace_events()
            .into_iter()
            .filter(|e| e.kind == Schedule::TRACE_REGISTER)
            .map(|e| e.to_string())
            .collect();
        root.dispose();
        (header, order)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn registration_order_varies_by_seed_but_the_header_bytes_do_not() {
        let groups: &[&[&str]] = &[&["zulu", "alpha"], &["mike"], &["\u{1F600}", "\u{FF5E}"]];
        let (first, _) = header_for(0, groups).await;
        let mut orders = std::collections::BTreeSet::new();
        for seed in 0..16 {
            let (header, order) = header_for(seed, groups).await;
            assert_eq!(header, first, "seed {seed}");
            assert_eq!(order.len(), 5);
            orders.insert(order);
        }
        assert!(
            orders.len() > 1,
            "the schedule should reorder registrations"
        );
        let text = String::from_utf8(first).unwrap();
        let pos = |n: &str| text.find(&format!("\"name\":\"{n}\"")).unwrap();
        assert!(pos("alpha") < pos("mike") && pos("mike") < pos("zulu"));
        assert!(pos("zulu") < pos("\u{1F600}") && pos("\u{1F600}") < pos("\u{FF5E}"));
    }

    #[tokio::test]
    async fn a_declared_tool_answers_its_result_and_a_bad_one_fails_the_plugin() {
        let root = Context::root();
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        let mut with_result = declared("weather");
        with_result.result = Some(serde_json::json!("sunny"));
        let ok = root.plugin(
            DeclarePlugin,
            DeclareConfig {
                tools: vec![with_result, declared("ping")],
                sections: vec![DeclaredSection {
                    name: "guide:weather".into(),
                    order: 120.0,
                    text: "Ask for the weather before going out.".into(),
                }],
            },
        );
        let bad = root.plugin(
            DeclarePlugin,
            DeclareConfig {
                tools: vec![declared("solo"), declared("run_code")],
                ..Default::default()
            },
        );
        root.idle().await;
        assert_eq!(ok.status(), ScopeStatus::Active);
        assert_eq!(bad.status(), ScopeStatus::Failed);
        let prompt = root.get::<SystemPrompt>().unwrap();
        let assembly = prompt.assemble(AssembleContext::global()).await.unwrap();
        assert!(
            assembly.render().unwrap().contains("Ask for the weather"),
            "a declared section reaches the prompt"
        );
        assert!(
            bad.failure()
                .unwrap()
                .to_string()
                .contains("\"run_code\" is reserved")
        );
        let reg = root.get::<ToolRegistry>().unwrap();
        let names: Vec<String> = reg.schemas(None).into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["ping", "weather"],
            "the failed plugin's tools were unwound"
        );
        let call = |name: &str| ToolCall {
            call_id: "1".into(),
            name: name.into(),
            arguments: serde_json::json!({}),
        };
        assert_eq!(reg.execute(call("weather"), None).await.content, "sunny");
        assert_eq!(
            reg.execute(call("ping"), None).await.content,
            serde_json::json!({"ok": true})
        );
        root.dispose();
        assert!(root.live().is_zero());
    }

    #[test]
    fn unknown_config_fields_are_rejected() {
        let err = serde_json::from_value::<DeclareConfig>(serde_json::json!({
            "tools": [{"name": "a", "description": "", "parameters": {"type": "object"}, "extra": 1}]
        }))
        .unwrap_err();
        assert!(err.to_string().contains("unknown field `extra`"), "{err}");
    }
}
