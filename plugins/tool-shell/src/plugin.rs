//! The plugin: registers `bash` over the configured root.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_tools::{Effect, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use cordis_workspace::Workspace;
use serde_json::json;

use crate::config::ShellConfig;
use crate::run::run_bash;

/// The `tool-shell` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShellPlugin;

const INJECT: &[Inject] = &[
    Inject::required(ToolRegistry::NAME),
    Inject::required(Workspace::NAME),
];

/// The tool's schema, built once per process: every apply copies it, which costs less than
/// building the JSON again.
static SCHEMA: LazyLock<ToolSchema> = LazyLock::new(|| {
    ToolSchema {
        name: crate::BASH.to_owned(),
        description: "Run a bash command in the workspace root and return its exit code, stdout and stderr (long output keeps its head and tail). Background processes are killed when the command ends.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line, run with bash -c"},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the command after this many milliseconds"},
                "description": {"type": "string", "description": "A few words on what the command does, shown to the user"}
            },
            "required": ["command"]
        }).into(),
    }
});

/// The `bash` tool running in `root`: effect `execute`, confined when its sandbox is.
pub fn bash_tool(root: PathBuf, config: ShellConfig) -> ToolDefinition {
    let confined = config.is_confined();
    let root = Arc::new(root);
    let config = Arc::new(config);
    let schema = SCHEMA.clone();
    let def = ToolDefinition::new(schema, move |args, _call| {
        let root = root.clone();
        let config = config.clone();
        async move {
            run_bash(&root, &config, args)
                .await
                .map(ToolOutput::new)
                .map_err(|e| e.to_string())
        }
    })
    .with_effect(Effect::Execute);
    if confined { def.confined() } else { def }
}

impl Plugin for ShellPlugin {
    type Config = ShellConfig;

    fn name(&self) -> &str {
        "tool-shell"
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

    async fn apply(&self, ctx: Context, config: &ShellConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let ws = ctx.require::<Workspace>()?;
        let tool = bash_tool(ws.root().to_path_buf(), config.clone());
        let _ = registry.register_scheduled(&ctx, tool).await?;
        Ok(())
    }
}
