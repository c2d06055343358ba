//! The workspace tools, approvals and presenters composed as an app would compose them.

use std::sync::Arc;

use cordis_approvals::{AllowAll, Approvals, ApprovalsConfig, ApprovalsPlugin, ApproverService};
use cordis_presenter::{
    Card, PresenterConfig, PresenterPlugin, Presenters, ResultView, render_card,
};
use cordis_runtime::prelude::*;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tool_fs::{FsConfig, FsPlugin};
use cordis_tool_search::{SearchConfig, SearchPlugin};
use cordis_tool_shell::{ShellConfig, ShellPlugin};
use cordis_tools::{ScopeKey, ToolCall, ToolRegistry, ToolResult, ToolsConfig, ToolsPlugin, codes};
use cordis_workspace::{WorkspaceConfig, WorkspacePlugin};
use serde_json::{Value, json};

async fn boot(dir: &std::path::Path) -> Context {
    let root = Context::root();
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    root.plugin(ToolsPlugin, ToolsConfig::default());
    root.plugin(
        WorkspacePlugin,
        WorkspaceConfig {
            root: Some(dir.to_path_buf()),
        },
    );
    root.plugin(FsPlugin, FsConfig::default());
    root.plugin(SearchPlugin, SearchConfig::default());
    root.plugin(ShellPlugin, ShellConfig::default());
    root.plugin(ApprovalsPlugin, ApprovalsConfig::default());
    root.plugin(PresenterPlugin, PresenterConfig::default());
    root.idle().await;
    root
}

async fn run(reg: &ToolRegistry, id: &str, name: &str, args: Value) -> ToolResult {
    let call = ToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments: args,
    };
    reg.execute(call, Some(ScopeKey(1))).await
}

#[tokio::test]
async fn an_agent_reads_edits_and_checks_a_file_once_approved() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("greet.sh"), "echo hello\n").unwrap();
    let root = boot(tmp.path()).await;
    let reg = root.get::<ToolRegistry>().unwrap();
    let names: Vec<String> = reg.schemas(None).into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "bash",
            "edit_file",
            "grep",
            "list_files",
            "read_file",
            "write_file"
        ]
    );
    let approvals = root.get::<Approvals>().unwrap();

    // Read-only tools run without asking; mutating ones are denied with no approver.
    let r = run(&reg, "c1", "read_file", json!({"path": "greet.sh"})).await;
    assert_eq!(r.content["content"], "     1\techo hello\n");
    let edit = json!({"path": "greet.sh", "old_string": "hello", "new_string": "world"});
    let r = run(&reg, "c2", "edit_file", edit.clone()).await;
    assert_eq!(r.code.as_deref(), Some(codes::DENIED));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("greet.sh")).unwrap(),
        "echo hello\n"
    );
    let d = approvals.take_decision(Some(ScopeKey(1)), "c2").unwrap();
    assert!(!d.allowed);

    let _yes = root.provide(ApproverService(Arc::new(AllowAll))).unwrap();
    let r = run(&reg, "c3", "edit_file", edit.clone()).await;
    assert!(!r.is_error, "{r:?}");
    let r = run(&reg, "c4", "bash", json!({"command": "bash greet.sh"})).await;
    assert_eq!(
        (r.content["exit_code"].clone(), r.content["stdout"].clone()),
        (json!(0), json!("world\n"))
    );
    let r = run(&reg, "c5", "grep", json!({"pattern": "world"})).await;
    assert_eq!(r.content["content"], "greet.sh:1:echo world\n");

    let presenters = root.get::<Presenters>().unwrap();
    let card = presenters.present_call("edit_file", &edit).card;
    assert_eq!(
        render_card(&card),
        "--- a/greet.sh\n+++ b/greet.sh\n@@ -1 +1 @@\n-hello\n+world\n"
    );
    let shown = presenters.present_result(
        "bash",
        &json!({"command": "bash greet.sh"}),
        ResultView {
            content: &json!({"exit_code": 0, "stdout": "world\n", "stderr": ""}),
            is_error: false,
        },
    );
    assert_eq!(
        shown.card,
        Card::Terminal {
            output: "world\n".into(),
            exit_code: Some(0)
        }
    );
    root.dispose();
    assert!(root.live().is_zero(), "{:?}", root.live());
}
