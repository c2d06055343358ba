//! The plugin: registers `grep` over the configured root.

use std::sync::{Arc, LazyLock};

use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use cordis_workspace::Workspace;
use serde_json::json;

use crate::grep::{SearchConfig, grep};

/// The `tool-search` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchPlugin;

const INJECT: &[Inject] = &[
    Inject::required(ToolRegistry::NAME),
    Inject::required(Workspace::NAME),
];

/// The tool's schema, built once per process: every apply copies it, which costs less than
/// building the JSON again.
static SCHEMA: LazyLock<ToolSchema> = LazyLock::new(|| {
    ToolSchema {
        name: crate::GREP.to_owned(),
        description: "Search workspace files for a regular expression (Rust regex syntax), honouring .gitignore. Returns path:line:text for each matching line, in path order.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression"},
                "path": {"type": "string", "description": "Directory or file to search (default: the workspace root)"},
                "glob": {"type": "string", "description": "Only files matching this glob (\"*.rs\", \"src/**/*.ts\")"},
                "case_insensitive": {"type": "boolean"},
                "max_matches": {"type": "integer", "minimum": 1}
            },
            "required": ["pattern"]
        }).into(),
    }
});

/// The `grep` tool over `ws`.
pub fn grep_tool(ws: Workspace, config: SearchConfig) -> ToolDefinition {
    let config = Arc::new(config);
    let schema = SCHEMA.clone();
    ToolDefinition::new(schema, move |args, _call| {
        let ws = ws.clone();
        let config = config.clone();
        async move {
            match tokio::task::spawn_blocking(move || grep(&ws, &config, args)).await {
                Ok(Ok(value)) => Ok(ToolOutput::new(value)),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(format!("grep task failed: {e}")),
            }
        }
    })
    .read_only()
}

impl Plugin for SearchPlugin {
    type Config = SearchConfig;

    fn name(&self) -> &str {
        "tool-search"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn claims(&self, _config: &Self::Config) -> Vec<cordis_runtime::Claim> {
        crate::TOOLS
            .iter()
            .map(|name| cordis_runtime::Claim::tool(*name))
            .collect()
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &SearchConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let ws = ctx.require::<Workspace>()?;
        let _ = registry
            .register_scheduled(&ctx, grep_tool((*ws).clone(), config.clone()))
            .await?;
        Ok(())
    }
}
