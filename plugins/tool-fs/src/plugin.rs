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
    // For the approval card of an edit or a write: the change against the file (see `preflight`).
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
        let planned = plans.take(call.scope, &call.call_id, crate::EDIT_FILE, &args);
        let route = routed::route_of(ctx.as_ref());
        async move {
            preflight::run_edit(route, &ws, &config, planned, args)
                .await
                .map(ToolOutput::new)
                .map_err(|e| e.to_string())
        }
    })
}

/// `read_file` and `write_file`, through the composition's file route when it has one (asked
/// at each call: a front end provides it after the tools registered); `write_file` applies the
/// plan it was shown with when `plans` has one for the call.
fn routed_tools(
    ws: &Workspace,
    config: &Arc<FsConfig>,
    plans: &Plans,
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
    let (write_ws, write_config, plans) = (ws.clone(), config.clone(), plans.clone());
    let write = ToolDefinition::new(SCHEMAS[3].clone(), move |args, call| {
        let (ws, config) = (write_ws.clone(), write_config.clone());
        let planned = plans.take(call.scope, &call.call_id, crate::WRITE_FILE, &args);
        let route = routed::route_of(ctx.as_ref());
        async move {
            preflight::run_write(route, &ws, &config, planned, args)
                .await
                .map(ToolOutput::new)
                .map_err(|e| e.to_string())
        }
    });
    [read, write]
}

/// [`fs_tools`], `edit_file` and `write_file` applying the plans of `plans`, reads and writes through the file
/// route of `ctx`'s composition when it has one.
fn fs_tools_with(
    ws: &Workspace,
    config: Arc<FsConfig>,
    plans: &Plans,
    ctx: Option<Context>,
) -> Vec<ToolDefinition> {
    let [read, write] = routed_tools(ws, &config, plans, ctx.clone());
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

/// The tool of `name` when its calls are planned before approval.
fn planned_tool(name: &str) -> Option<&'static str> {
    [crate::EDIT_FILE, crate::WRITE_FILE]
        .into_iter()
        .find(|t| *t == name)
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
        // Planned before the approval stage (after pre-execute) asks anyone.
        let (planning, plan_ws, plan_config) = (plans.clone(), ws.clone(), config.clone());
        let plan_ctx = ctx.clone();
        let _ = ctx.on_waterfall::<ToolsPreExecute, _, _>(Position::Front, move |mut v, next| {
            let (plans, ws, config) = (planning.clone(), plan_ws.clone(), plan_config.clone());
            let route = routed::route_of(Some(&plan_ctx));
            async move {
                let tool = planned_tool(&v.call.name);
                if let Some(tool) = tool
                    && v.decision == Decision::Allow
                {
                    let planned = preflight::plan(
                        &plans,
                        route.as_ref(),
                        &ws,
                        &config,
                        v.scope,
                        &v.call.call_id,
                        tool,
                        &v.call.arguments,
                    )
                    .await;
                    if let Err(why) = planned {
                        v.decision = Decision::Deny(why);
                    }
                }
                let v = next.run(v).await;
                // Denied later: no call will take the plan.
                if let Some(tool) = tool
                    && matches!(v.decision, Decision::Deny(_))
                {
                    let _ = plans.take(v.scope, &v.call.call_id, tool, &v.call.arguments);
                }
                v
            }
        });
        let ended = plans.clone();
        // A call stopped after planning (a guard, bad arguments, the user's no) leaves its plan
        // here.
        let _ = ctx.on_waterfall::<ToolsPostExecute, _, _>(Position::Front, move |v, next| {
            if let Some(tool) = planned_tool(&v.call.name) {
                let _ = ended.take(v.scope, &v.call.call_id, tool, &v.call.arguments);
            }
            next.run(v)
        });
        if let Some(presenters) = ctx.get::<cordis_presenter::Presenters>() {
            for tool in [crate::EDIT_FILE, crate::WRITE_FILE] {
                if let Some(standard) = cordis_presenter::Presenters::standard().get(tool) {
                    let presenter = preflight::PlannedPresenter {
                        tool,
                        plans: plans.clone(),
                        standard,
                    };
                    let _ = presenters.register(&ctx, tool, Arc::new(presenter))?;
                }
            }
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

    /// Boots the file tools with presenters over `dir`, questions answered by `stage`.
    async fn booted(dir: &std::path::Path, stage: Arc<dyn cordis_tools::ApprovalStage>) -> Context {
        let root = Context::root();
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(
            cordis_presenter::PresenterPlugin,
            cordis_presenter::PresenterConfig::default(),
        );
        root.plugin(
            WorkspacePlugin,
            WorkspaceConfig {
                root: Some(dir.to_path_buf()),
            },
        );
        root.plugin(FsPlugin, FsConfig::default());
        root.idle().await;
        let reg = root.get::<ToolRegistry>().unwrap();
        let _ = reg.set_approval(&root, stage).unwrap();
        root
    }

    type Answered = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<cordis_tools::Clearance, String>> + Send>,
    >;

    /// An approval stage: keeps each question's card (as a terminal prints it), runs `meanwhile`
    /// while the question is open, then answers `allow`.
    struct Asking {
        presenters: std::sync::Mutex<Option<Arc<cordis_presenter::Presenters>>>,
        shown: std::sync::Mutex<Vec<String>>,
        meanwhile: Box<dyn Fn() + Send + Sync>,
        allow: bool,
    }

    impl Asking {
        fn new(allow: bool, meanwhile: impl Fn() + Send + Sync + 'static) -> Arc<Self> {
            Arc::new(Asking {
                presenters: std::sync::Mutex::default(),
                shown: std::sync::Mutex::default(),
                meanwhile: Box::new(meanwhile),
                allow,
            })
        }
    }

    impl cordis_tools::ApprovalStage for Asking {
        fn approve(
            &self,
            call: &ToolCall,
            _scope: Option<cordis_tools::ScopeKey>,
            _tool: &ToolDefinition,
        ) -> Answered {
            if let Some(p) = self.presenters.lock().unwrap().as_ref() {
                let shown = p.present_approval(&call.name, &call.arguments);
                let mut text = cordis_presenter::render_card(&shown.card);
                if let Some(more) = shown.text {
                    text.push_str(&more);
                }
                self.shown.lock().unwrap().push(text);
            }
            (self.meanwhile)();
            let allow = self.allow;
            Box::pin(async move {
                if allow {
                    Ok(cordis_tools::Clearance::Full)
                } else {
                    Err("the user said no".to_owned())
                }
            })
        }
    }

    fn write_call(id: &str, path: &str, content: &str) -> ToolCall {
        ToolCall {
            call_id: id.into(),
            name: crate::WRITE_FILE.into(),
            arguments: json!({"path": path, "content": content}),
        }
    }

    #[tokio::test]
    async fn a_write_over_a_file_is_asked_with_the_diff_against_its_text_and_a_new_file_as_new() {
        // The card used to be `--- /dev/null` and only `+` lines for a file that exists.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("notes.txt"), "keep\nold line\n").unwrap();
        std::fs::write(tmp.path().join("blob.bin"), [0u8, 1, 2]).unwrap();
        let asking = Asking::new(false, || {});
        let root = booted(tmp.path(), asking.clone()).await;
        *asking.presenters.lock().unwrap() = root.get::<cordis_presenter::Presenters>();
        let reg = root.get::<ToolRegistry>().unwrap();
        for call in [
            write_call("w1", "notes.txt", "keep\nnew line\n"),
            write_call("w2", "fresh.txt", "hello\n"),
            write_call("w3", "blob.bin", "text now\n"),
        ] {
            let r = reg.execute(call, None).await;
            assert_eq!(r.code.as_deref(), Some(codes::DENIED), "{r:?}");
        }
        assert_eq!(
            asking.shown.lock().unwrap().as_slice(),
            [
                "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n keep\n-old line\n+new line\n",
                "--- /dev/null\n+++ b/fresh.txt\n@@ -0,0 +1 @@\n+hello\n",
                "--- a/blob.bin\n+++ b/blob.bin\n@@ -0,0 +1 @@\n+text now\nreplaces a binary file of 3 bytes (not shown)",
            ]
        );
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("notes.txt")).unwrap(),
            "keep\nold line\n"
        );
        // The transcript's card (replayed from the arguments alone) is unchanged.
        let p = root.get::<cordis_presenter::Presenters>().unwrap();
        let call = p.present_call(
            crate::WRITE_FILE,
            &json!({"path": "notes.txt", "content": "x\n"}),
        );
        assert!(matches!(
            call.card,
            cordis_presenter::Card::Diff { old_text: None, .. }
        ));
        root.dispose();
        assert!(root.live().is_zero(), "{:?}", root.live());
    }

    #[tokio::test]
    async fn a_write_whose_file_changed_while_it_was_asked_writes_nothing_and_names_the_change() {
        // It used to overwrite the change silently (only edit_file checked).
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::write(dir.join("a.txt"), "shown\n").unwrap();
        std::fs::write(dir.join("gone.txt"), "shown\n").unwrap();
        let changes = dir.clone();
        let asking = Asking::new(true, move || {
            std::fs::write(changes.join("a.txt"), "changed meanwhile\n").unwrap();
            std::fs::write(changes.join("new.txt"), "appeared meanwhile\n").unwrap();
            let _ = std::fs::remove_file(changes.join("gone.txt"));
        });
        let root = booted(&dir, asking).await;
        let reg = root.get::<ToolRegistry>().unwrap();
        for (id, path, change) in [
            ("w1", "a.txt", "changed"),
            ("w2", "new.txt", "was created"),
            ("w3", "gone.txt", "was deleted"),
        ] {
            // As shown: each question changes all three.
            std::fs::write(dir.join("a.txt"), "shown\n").unwrap();
            std::fs::write(dir.join("gone.txt"), "shown\n").unwrap();
            let _ = std::fs::remove_file(dir.join("new.txt"));
            let r = reg.execute(write_call(id, path, "mine\n"), None).await;
            assert_eq!(r.code.as_deref(), Some(codes::TOOL_ERROR), "{r:?}");
            assert_eq!(
                r.content,
                json!(format!(
                    "\"{path}\" {change} after the write was shown for approval; nothing was written: read the file again and retry"
                ))
            );
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("a.txt")).unwrap(),
            "changed meanwhile\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("new.txt")).unwrap(),
            "appeared meanwhile\n"
        );
        assert!(!dir.join("gone.txt").exists());
        // Unchanged while asked: written.
        std::fs::write(dir.join("b.txt"), "shown\n").unwrap();
        let quiet = Asking::new(true, || {});
        root.dispose();
        let root = booted(&dir, quiet).await;
        let reg = root.get::<ToolRegistry>().unwrap();
        let r = reg.execute(write_call("w4", "b.txt", "mine\n"), None).await;
        assert!(!r.is_error, "{r:?}");
        assert_eq!(r.content["created"], false);
        assert_eq!(
            std::fs::read_to_string(dir.join("b.txt")).unwrap(),
            "mine\n"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn an_edit_or_write_with_arguments_its_schema_refuses_is_invalid_arguments_not_denied() {
        // The edit's plan ran before the argument check and turned its decoding error into a
        // denial.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "a\n").unwrap();
        let asking = Asking::new(true, || {});
        let root = booted(tmp.path(), asking).await;
        let reg = root.get::<ToolRegistry>().unwrap();
        for (name, args) in [
            (
                crate::EDIT_FILE,
                json!({"path": "a.txt", "old_string": "a"}),
            ),
            (
                crate::EDIT_FILE,
                json!({"path": 7, "old_string": "a", "new_string": "b"}),
            ),
            (crate::WRITE_FILE, json!({"path": "a.txt"})),
        ] {
            let call = ToolCall {
                call_id: "1".into(),
                name: name.into(),
                arguments: args,
            };
            let r = reg.execute(call, None).await;
            assert_eq!(r.code.as_deref(), Some(codes::INVALID_ARGUMENTS), "{r:?}");
        }
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("a.txt")).unwrap(),
            "a\n"
        );
        root.dispose();
    }
}
