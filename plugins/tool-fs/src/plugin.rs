//! The plugin: opens the workspace and registers the four tools.

use std::sync::{Arc, LazyLock};

use cordis_runtime::{BoxError, Context, Inject, Plugin, Position, Service};
use cordis_tools::{
    Decision, Effect, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema, ToolsPostExecute,
    ToolsPreExecute,
};
use cordis_workspace::Workspace;
use serde_json::{Value, json};

use crate::config::FsConfig;
use crate::ops::{self, FsError};
use crate::preflight::{self, Plans};
use crate::routed;

/// The `tool-fs` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsPlugin;

const INJECT: &[Inject] = &[
    Inject::required(ToolRegistry::NAME),
    Inject::required(Workspace::NAME),
    // For the approval card of an edit: its whole-file diff (see `preflight`).
    Inject::optional(<cordis_presenter::Presenters as Service>::NAME),
];

type Op = fn(&Workspace, &FsConfig, Value) -> Result<Value, FsError>;

fn schema(name: &str, description: &str, parameters: Value) -> ToolSchema {
    ToolSchema {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters: parameters.into(),
    }
}

fn tool(ws: &Workspace, config: &Arc<FsConfig>, schema: &ToolSchema, op: Op) -> ToolDefinition {
    let ws = ws.clone();
    let config = config.clone();
    ToolDefinition::new(schema.clone(), move |args, _call| {
        let ws = ws.clone();
        let config = config.clone();
        async move {
            let joined = tokio::task::spawn_blocking(move || op(&ws, &config, args)).await;
            match joined {
                Ok(Ok(value)) => Ok(ToolOutput::new(value)),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(format!("file tool task failed: {e}")),
            }
        }
    })
}

/// The four tools' schemas, sorted by name, built once per process: every apply (each boot,
/// reload and stress seed) copies them, which costs less than building the JSON again.
static SCHEMAS: LazyLock<[ToolSchema; 4]> = LazyLock::new(|| {
    [
        schema(
            crate::EDIT_FILE,
            "Replace an exact string in a workspace file. old_string must match exactly once (copy it from read_file output without the line numbers, with enough context to be unique) unless replace_all is true.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root"},
                    "old_string": {"type": "string", "description": "The exact text to replace"},
                    "new_string": {"type": "string", "description": "The replacement text"},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
                },
                "required": ["path", "old_string", "new_string"]
            }),
        ),
        schema(
            crate::LIST_FILES,
            "List files in the workspace, honouring .gitignore. A pattern without '/' matches file names (\"*.rs\"); with '/' it matches paths from the root (\"src/**/*.rs\").",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob to filter by"},
                    "path": {"type": "string", "description": "Directory to list (default: the workspace root)"}
                }
            }),
        ),
        schema(
            crate::READ_FILE,
            "Read a text file from the workspace as numbered lines. Long files are truncated; pass start_line and end_line (1-based, inclusive) to read a range.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root"},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to read (inclusive)"}
                },
                "required": ["path"]
            }),
        ),
        schema(
            crate::WRITE_FILE,
            "Create or overwrite a workspace file with the given content (parent directories are created). Prefer edit_file for changes to existing files.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root"},
                    "content": {"type": "string", "description": "The complete new content"}
                },
                "required": ["path", "content"]
            }),
        ),
    ]
});

/// The four tools over `ws`, sorted by name.
pub fn fs_tools(ws: &Workspace, config: FsConfig) -> Vec<ToolDefinition> {
    fs_tools_with(ws, Arc::new(config), &Plans::default(), None)
}

/// `edit_file`: the plan it was shown with when `plans` has one for the call.
fn edit_tool(
    ws: &Workspace,
    config: &Arc<FsConfig>,
    plans: &Plans,
    ctx: Option<Context>,
) -> ToolDefinition {
    let (ws, config, plans) = (ws.clone(), config.clone(), plans.clone());
    ToolDefinition::new(SCHEMAS[0].clone(), move |args, call| {
        let (ws, config) = (ws.clone(), config.clone());
        let planned = plans.take(call.scope, &call.call_id, &args);
        let route = routed::route_of(ctx.as_ref());
        async move {
            preflight::run(route, &ws, &config, planned, args)
                .await
                .map(ToolOutput::new)
                .map_err(|e| e.to_string())
        }
    })
}

/// `read_file` and `write_file`, through the composition's file route when it has one (asked
/// at each call: a front end provides it after the tools registered).
fn routed_tools(
    ws: &Workspace,
    config: &Arc<FsConfig>,
    ctx: Option<Context>,
) -> [ToolDefinition; 2] {
    let (read_ws, read_config, read_ctx) = (ws.clone(), config.clone(), ctx.clone());
    let read = ToolDefinition::new(SCHEMAS[2].clone(), move |args, _call| {
        let (ws, config) = (read_ws.clone(), read_config.clone());
        let route = routed::route_of(read_ctx.as_ref());
        async move {
            routed::read_file(route, ws, config, args)
                .await
                .map(ToolOutput::new)
                .map_err(|e| e.to_string())
        }
    });
    let write_ws = ws.clone();
    let write = ToolDefinition::new(SCHEMAS[3].clone(), move |args, _call| {
        let ws = write_ws.clone();
        let route = routed::route_of(ctx.as_ref());
        async move {
            routed::write_file(route, ws, args)
                .await
                .map(ToolOutput::new)
                .map_err(|e| e.to_string())
        }
    });
    [read, write]
}

/// [`fs_tools`], `edit_file` applying the plans of `plans`, reads and writes through the file
/// route of `ctx`'s composition when it has one.
fn fs_tools_with(
    ws: &Workspace,
    config: Arc<FsConfig>,
    plans: &Plans,
    ctx: Option<Context>,
) -> Vec<ToolDefinition> {
    let [read, write] = routed_tools(ws, &config, ctx.clone());
    vec![
        // Every path resolves beneath the workspace root (`RESOLVE_BENEATH`): confined.
        edit_tool(ws, &config, plans, ctx)
            .with_effect(Effect::Edit)
            .confined(),
        tool(ws, &config, &SCHEMAS[1], ops::list_files).read_only(),
        read.read_only(),
        write.with_effect(Effect::Edit).confined(),
    ]
}

impl Plugin for FsPlugin {
    type Config = FsConfig;

    fn name(&self) -> &str {
        "tool-fs"
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

    async fn apply(&self, ctx: Context, config: &FsConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let ws = ctx.require::<Workspace>()?;
        let config = Arc::new(config.clone());
        let plans = Plans::default();
        // Planned before the approvals' listener (at the back) asks anyone.
        let (planning, plan_ws, plan_config) = (plans.clone(), ws.clone(), config.clone());
        let plan_ctx = ctx.clone();
        let _ = ctx.on_waterfall::<ToolsPreExecute, _, _>(Position::Front, move |mut v, next| {
            let (plans, ws, config) = (planning.clone(), plan_ws.clone(), plan_config.clone());
            let route = routed::route_of(Some(&plan_ctx));
            async move {
                if v.call.name == crate::EDIT_FILE && v.decision == Decision::Allow {
                    let planned = preflight::plan(
                        &plans,
                        route.as_ref(),
                        &ws,
                        &config,
                        v.scope,
                        &v.call.call_id,
                        &v.call.arguments,
                    )
                    .await;
                    if let Err(why) = planned {
                        v.decision = Decision::Deny(why);
                    }
                }
                let v = next.run(v).await;
                // Denied later (the user said no): no call will take the plan.
                if v.call.name == crate::EDIT_FILE && matches!(v.decision, Decision::Deny(_)) {
                    let _ = plans.take(v.scope, &v.call.call_id, &v.call.arguments);
                }
                v
            }
        });
        let ended = plans.clone();
        // A call stopped after planning (a guard, bad arguments) leaves its plan here.
        let _ = ctx.on_waterfall::<ToolsPostExecute, _, _>(Position::Front, move |v, next| {
            if v.call.name == crate::EDIT_FILE {
                let _ = ended.take(v.scope, &v.call.call_id, &v.call.arguments);
            }
            next.run(v)
        });
        if let Some(presenters) = ctx.get::<cordis_presenter::Presenters>()
            && let Some(standard) = cordis_presenter::Presenters::standard().get(crate::EDIT_FILE)
        {
            let presenter = preflight::EditPresenter {
                plans: plans.clone(),
                standard,
            };
            let _ = presenters.register(&ctx, crate::EDIT_FILE, Arc::new(presenter))?;
        }
        for def in fs_tools_with(&ws, config, &plans, Some(ctx.clone())) {
            let _ = registry.register_scheduled(&ctx, def).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
    use cordis_tools::{ToolCall, ToolsConfig, ToolsPlugin, codes};
    use cordis_workspace::{WorkspaceConfig, WorkspacePlugin};

    use super::*;

    #[test]
    fn reads_may_overlap_and_writes_run_alone() {
        let ws = Workspace::open(std::env::temp_dir()).unwrap();
        let classes: Vec<_> = fs_tools(&ws, FsConfig::default())
            .iter()
            .map(|t| (t.name().to_owned(), t.concurrency, t.effect, t.confined))
            .collect();
        use cordis_tools::Concurrency::{Mutating, ReadOnly};
        assert_eq!(
            classes,
            [
                (crate::EDIT_FILE.to_owned(), Mutating, Effect::Edit, true),
                (crate::LIST_FILES.to_owned(), ReadOnly, Effect::Read, false),
                (crate::READ_FILE.to_owned(), ReadOnly, Effect::Read, false),
                (crate::WRITE_FILE.to_owned(), Mutating, Effect::Edit, true),
            ]
        );
    }

    #[tokio::test]
    async fn the_plugin_registers_the_four_tools_over_the_workspace_service() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("hello.txt"), "hi\n").unwrap();
        let root = Context::root();
        let fs = root.plugin(FsPlugin, FsConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.idle().await;
        assert_eq!(fs.status(), ScopeStatus::Pending, "waits for the workspace");
        let ws = root.plugin(
            WorkspacePlugin,
            WorkspaceConfig {
                root: Some(tmp.path().to_path_buf()),
            },
        );
        root.idle().await;
        assert_eq!(fs.status(), ScopeStatus::Active);
        let reg = root.get::<ToolRegistry>().unwrap();
        let names: Vec<String> = reg.schemas(None).into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["edit_file", "list_files", "read_file", "write_file"]
        );
        let call = |name: &str, args: Value| ToolCall {
            call_id: "1".into(),
            name: name.into(),
            arguments: args,
        };
        let r = reg
            .execute(call("read_file", json!({"path": "hello.txt"})), None)
            .await;
        assert!(!r.is_error, "{r:?}");
        assert_eq!(r.content["content"], "     1\thi\n");
        let r = reg
            .execute(
                call("write_file", json!({"path": "../x", "content": ""})),
                None,
            )
            .await;
        assert_eq!(r.code.as_deref(), Some(codes::TOOL_ERROR));
        assert!(
            r.content
                .as_str()
                .unwrap()
                .contains("outside the workspace root"),
            "{r:?}"
        );
        ws.dispose();
        assert!(reg.schemas(None).is_empty(), "withdrawn with the workspace");
        root.dispose();
        assert!(root.live().is_zero());
    }
}
