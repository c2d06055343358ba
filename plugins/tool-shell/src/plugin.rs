//! The plugin: registers `bash` over the configured root.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_sandbox::SandboxMode;
use cordis_tools::{Clearance, Effect, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use cordis_workspace::Workspace;
use serde_json::json;

use crate::config::ShellConfig;
use crate::run::run_bash_live;

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

/// A piece of a running command's output (`shell/output`: stdout and stderr as they arrive),
/// emitted while it runs so a front end can show it live. Not logged: the call's result holds
/// the output the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The call running the command.
    pub call_id: String,
    /// The scope of the call.
    pub scope: Option<cordis_tools::ScopeKey>,
    /// The text.
    pub text: String,
}

impl cordis_runtime::Event for CommandOutput {
    const NAME: &'static str = "shell/output";
    type Output = ();
}

/// The `bash` tool running in `root`: effect `execute`, confined when its sandbox is.
pub fn bash_tool(root: PathBuf, config: ShellConfig) -> ToolDefinition {
    bash_tool_in(root, config, None)
}

/// [`bash_tool`], emitting each command's output as [`CommandOutput`] events on `ctx` while it
/// runs (when anyone listens).
fn bash_tool_in(root: PathBuf, config: ShellConfig, ctx: Option<Context>) -> ToolDefinition {
    let confined = config.is_confined();
    let root = Arc::new(root);
    let config = Arc::new(config);
    let schema = SCHEMA.clone();
    // What runs without a question runs read-only, whatever the entry's sandbox.
    let read_only = Arc::new(ShellConfig {
        sandbox: SandboxMode::ReadOnly,
        ..(*config).clone()
    });
    let def = ToolDefinition::new(schema, move |args, call| {
        let root = root.clone();
        let narrowed =
            call.clearance == Clearance::ReadOnly && config.sandbox != SandboxMode::ReadOnly;
        let config = if narrowed {
            read_only.clone()
        } else {
            config.clone()
        };
        let ctx = ctx
            .clone()
            .filter(|c| c.listener_count::<CommandOutput>() > 0);
        // A full-access command may run in the front end's terminal (see `host`).
        let host = ctx
            .as_ref()
            .filter(|_| config.sandbox == SandboxMode::FullAccess)
            .and_then(|c| c.get::<crate::host::CommandHostService>());
        async move {
            if let Some(host) = host {
                return run_hosted(&host, &root, &config, &call.call_id, args).await;
            }
            let sink = |text: &str| {
                if let Some(ctx) = &ctx {
                    ctx.emit(CommandOutput {
                        call_id: call.call_id.clone(),
                        scope: call.scope,
                        text: text.to_owned(),
                    });
                }
            };
            let live = crate::run::Live::new(&sink);
            let mut result = run_bash_live(&root, &config, args, ctx.as_ref().map(|_| &live))
                .await
                .map_err(|e| e.to_string())?;
            if narrowed {
                say_read_only(&mut result);
            }
            Ok(ToolOutput::new(result))
        }
    })
    .with_effect(Effect::Execute);
    if confined { def.confined() } else { def }
}

/// Tells the model a command ran read-only because nobody was asked, so a refused write is not
/// a mystery it retries blindly.
fn say_read_only(result: &mut serde_json::Value) {
    const WHY: &str = "it ran without a question (an allow rule, a grant or the permission mode), so in a read-only sandbox: it could write nothing but its $TMPDIR";
    result["sandbox"] = json!(SandboxMode::ReadOnly.as_str());
    result["note"] = match result.get("note").and_then(|n| n.as_str()) {
        Some(note) => json!(format!("{note}; {WHY}")),
        None => json!(WHY),
    };
}

/// `bash` through a command host.
async fn run_hosted(
    host: &crate::host::CommandHostService,
    root: &std::path::Path,
    config: &ShellConfig,
    call_id: &str,
    args: serde_json::Value,
) -> Result<ToolOutput, String> {
    let a: crate::run::BashArgs =
        serde_json::from_value(args).map_err(|e| crate::run::ShellError::Args(e).to_string())?;
    let timeout_ms = a
        .timeout_ms
        .unwrap_or(config.default_timeout_ms)
        .min(config.max_timeout_ms);
    if timeout_ms == 0 {
        return Err(crate::run::ShellError::ZeroTimeout.to_string());
    }
    let command = crate::host::HostedCommand {
        call_id: call_id.to_owned(),
        program: config.shell.clone(),
        args: vec!["-c".to_owned(), a.command],
        cwd: root.to_path_buf(),
        env: config
            .filtered_env()
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect(),
        timeout: std::time::Duration::from_millis(timeout_ms),
        output_limit: config.max_output_bytes,
    };
    let outcome = host
        .0
        .run(command)
        .await
        .map_err(|e| format!("the editor's terminal could not run the command: {e}"))?;
    Ok(ToolOutput::new(crate::host::result_of(
        &outcome, timeout_ms,
    )))
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

    fn widens(&self, old: Option<&ShellConfig>, new: Option<&ShellConfig>) -> Vec<String> {
        match (old, new) {
            (Some(old), Some(new)) => old.widened_by(new),
            (None, Some(new)) => vec![format!("it adds the bash tool ({} sandbox)", new.sandbox)],
            (_, None) => Vec::new(),
        }
    }

    async fn apply(&self, ctx: Context, config: &ShellConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let ws = ctx.require::<Workspace>()?;
        // The workspace's additional roots are the workspace too: `workspace-write` writes
        // there as it writes in the root (commands still run in the root).
        let mut config = config.clone();
        config
            .writable_roots
            .extend(ws.more_roots().map(Path::to_path_buf));
        let tool = bash_tool_in(ws.root().to_path_buf(), config, Some(ctx.clone()));
        let _ = registry.register_scheduled(&ctx, tool).await?;
        Ok(())
    }
}
