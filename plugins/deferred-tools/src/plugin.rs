//! The plugin: registers `tool_search` and splits every assembly past the threshold.

use std::sync::{Arc, Weak};

use cordis_runtime::{BoxError, Claim, Context, Inject, Plugin, Position, Service};
use cordis_system_prompt::{AssembleContext, SystemPrompt, SystemPromptAssemble, TOOL_SEARCH};
use cordis_tools::{ToolDefinition, ToolRegistry};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::DeferredToolsConfig;
use crate::search::search;

/// The `deferred-tools` plugin (injects `system-prompt` and `tools`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DeferredToolsPlugin;

const INJECT: &[Inject] = &[
    Inject::required(SystemPrompt::NAME),
    Inject::required(ToolRegistry::NAME),
];

// `tool_search`'s arguments (doc comments here are what the model reads).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Words from the name or purpose of the tools you need, or a tool's exact name.
    #[schemars(length(min = 1, max = 256))]
    query: String,
}

/// The `tool_search` tool: searches the deferred tools of the calling scope's assembly and
/// names the best `max_results` as loaded.
pub fn tool_search_tool(prompt: Weak<SystemPrompt>, max_results: usize) -> ToolDefinition {
    let description = format!(
        "Load tools that are available but not listed yet: searches their names and \
         descriptions for the query and loads the best matches (at most {max_results}). Loaded \
         tools can be called from your next step on and stay loaded for the session."
    );
    ToolDefinition::typed(TOOL_SEARCH, description, move |args: Args, call| {
        let prompt = prompt.upgrade();
        async move {
            let prompt = prompt.ok_or("the system prompt service is gone")?;
            let context = match call.scope {
                Some(scope) => AssembleContext::scoped(scope),
                None => AssembleContext::global(),
            };
            let assembly = prompt.assemble(context).await.map_err(|e| e.to_string())?;
            if assembly.deferred.is_empty() {
                return Ok(json!({
                    "loaded": [],
                    "note": "Nothing is deferred: every tool is already listed."
                }));
            }
            let found =
                search(&assembly.deferred, &args.query, max_results).map_err(|e| e.to_string())?;
            let loaded: Vec<&str> = found.iter().map(|t| t.name.as_str()).collect();
            let tools: Vec<Value> = found
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description}))
                .collect();
            let note = if loaded.is_empty() {
                format!(
                    "No deferred tool matches {:?} ({} are deferred); try other words.",
                    args.query,
                    assembly.deferred.len()
                )
            } else {
                format!(
                    "Loaded {} of {} deferred tools; call them from your next step.",
                    loaded.len(),
                    assembly.deferred.len()
                )
            };
            Ok(json!({"loaded": loaded, "tools": tools, "note": note}))
        }
    })
    .read_only()
}

impl Plugin for DeferredToolsPlugin {
    type Config = DeferredToolsConfig;

    fn name(&self) -> &str {
        "deferred-tools"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    /// `tool_search`, and the one deferral of a composition (two entries would race to split).
    fn claims(&self, _config: &DeferredToolsConfig) -> Vec<Claim> {
        vec![
            Claim::tool(TOOL_SEARCH),
            Claim::override_of("tool deferral"),
        ]
    }

    fn open_claims(&self, _config: &DeferredToolsConfig) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &DeferredToolsConfig) -> Result<(), BoxError> {
        let prompt = ctx.require::<SystemPrompt>()?;
        let registry = ctx.require::<ToolRegistry>()?;
        let tool = tool_search_tool(Arc::downgrade(&prompt), config.max_results);
        let _ = registry.register_scheduled(&ctx, tool).await?;
        let config = Arc::new(config.clone());
        // After every other listener (`next` first), so the split sees the final list.
        let _ = ctx.on_waterfall::<SystemPromptAssemble, _, _>(Position::Back, move |v, next| {
            let config = config.clone();
            async move {
                let mut out = next.run(v).await;
                config.split(&mut out.assembly);
                out
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
    use cordis_tools::{ToolCall, ToolOutput, ToolsConfig, ToolsPlugin};

    use super::*;
    use crate::config::Prefix;

    fn tool(name: &str, description: &str) -> ToolDefinition {
        let schema = cordis_tools::ToolSchema {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object"}).into(),
        };
        ToolDefinition::new(schema, |_, _| async { Ok(ToolOutput::new("ok")) })
    }

    /// Boots the plugin over tools registered in `names`' order; the first request's tools
    /// and what `tool_search {query}` loads.
    async fn search_in_order(names: &[&str], query: &str) -> (Vec<String>, Value) {
        let (tools, result) = searched(names, query).await;
        assert!(!result.is_error, "{:?}", result.content);
        (tools, result.content["loaded"].clone())
    }

    /// Boots the plugin over tools registered in `names`' order; the first request's tools
    /// and the result of `tool_search {query}`.
    async fn searched(names: &[&str], query: &str) -> (Vec<String>, cordis_tools::ToolResult) {
        let root = Context::root();
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        let config = DeferredToolsConfig {
            threshold: 3,
            prefix: Prefix::new(vec!["read_*".into()]).unwrap(),
            max_results: 2,
        };
        let plugin = root.plugin(DeferredToolsPlugin, config);
        root.idle().await;
        assert_eq!(plugin.status(), ScopeStatus::Active);
        let registry = root.get::<ToolRegistry>().unwrap();
        for name in names {
            let description = format!("Works with {} files.", name.replace('_', " "));
            let _ = registry.register(&root, tool(name, &description)).unwrap();
        }
        let prompt = root.get::<SystemPrompt>().unwrap();
        let assembly = prompt.assemble(AssembleContext::global()).await.unwrap();
        let call = ToolCall {
            call_id: "c1".into(),
            name: TOOL_SEARCH.into(),
            arguments: json!({"query": query}),
        };
        let result = registry.execute(call, None).await;
        root.dispose();
        let tools = assembly.tools.iter().map(|t| t.name.clone()).collect();
        (tools, result)
    }

    #[tokio::test]
    async fn a_query_longer_than_256_characters_is_refused_by_the_argument_check() {
        let names = ["zip_files", "read_file", "csv_files", "pdf_tool"];
        let (_, result) = searched(&names, &"files ".repeat(43)).await;
        assert!(result.is_error, "{:?}", result.content);
        let (_, result) = searched(&names, &"files ".repeat(42)).await;
        assert!(!result.is_error, "{:?}", result.content);
    }

    #[tokio::test]
    async fn the_prefix_and_a_search_do_not_depend_on_registration_order() {
        let names = [
            "zip_files",
            "read_file",
            "csv_files",
            "pdf_tool",
            "yaml_files",
        ];
        let mut reversed = names;
        reversed.reverse();
        let forward = search_in_order(&names, "files").await;
        let backward = search_in_order(&reversed, "files").await;
        assert_eq!(forward, backward);
        assert_eq!(forward.0, ["read_file", "tool_search"]);
        // Three names say "files" (pdf_tool only its description): ties keep canonical order.
        assert_eq!(forward.1, json!(["csv_files", "yaml_files"]));
    }
}
