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

/// Asks nothing itself: keeps the card each question would show, and says no.
struct Keeper {
    presenters: Presenters,
    shown: std::sync::Mutex<Vec<String>>,
}

impl cordis_approvals::Approver for Keeper {
    fn approve(
        &self,
        request: &cordis_approvals::ApprovalRequest,
    ) -> futures_util::future::BoxFuture<'static, cordis_approvals::Answer> {
        let card = self
            .presenters
            .present_approval(&request.call.name, &request.call.arguments)
            .card;
        self.shown.lock().unwrap().push(render_card(&card));
        Box::pin(async { cordis_approvals::Answer::Deny(None) })
    }
}

#[tokio::test]
async fn an_edit_is_worked_out_before_approval_its_diff_has_real_lines_and_one_that_cannot_apply_is_never_asked()
 {
    // The card used to diff the two strings alone (`@@ -1 +1 @@` for a change at line 6), and an
    // edit whose old_string is not in the file was still put up for approval.
    let tmp = tempfile::tempdir().unwrap();
    let file: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(tmp.path().join("ten.txt"), &file).unwrap();
    let root = boot(tmp.path()).await;
    let reg = root.get::<ToolRegistry>().unwrap();
    let keeper = Arc::new(Keeper {
        presenters: root.get::<Presenters>().unwrap().as_ref().clone(),
        shown: std::sync::Mutex::default(),
    });
    let _asks = root.provide(ApproverService(keeper.clone())).unwrap();

    let edit = json!({"path": "ten.txt", "old_string": "line 6\n", "new_string": "line six\n"});
    let r = run(&reg, "e1", "edit_file", edit).await;
    assert_eq!(r.code.as_deref(), Some(codes::DENIED), "{r:?}");
    assert_eq!(
        keeper.shown.lock().unwrap().as_slice(),
        [
            "--- a/ten.txt\n+++ b/ten.txt\n@@ -3,7 +3,7 @@\n line 3\n line 4\n line 5\n-line 6\n+line six\n line 7\n line 8\n line 9\n"
        ]
    );

    let missing = json!({"path": "ten.txt", "old_string": "line 66", "new_string": "x"});
    let r = run(&reg, "e2", "edit_file", missing).await;
    assert!(r.is_error);
    assert_eq!(
        r.content,
        json!(
            "old_string was not found in \"ten.txt\"; read the file and copy the text exactly, including whitespace and indentation"
        )
    );
    assert_eq!(
        keeper.shown.lock().unwrap().len(),
        1,
        "nobody was asked about it"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("ten.txt")).unwrap(),
        file
    );
    root.dispose();
}

/// Says yes, after changing `file` behind the edit's back.
struct ChangesTheFile(std::path::PathBuf);

impl cordis_approvals::Approver for ChangesTheFile {
    fn approve(
        &self,
        _request: &cordis_approvals::ApprovalRequest,
    ) -> futures_util::future::BoxFuture<'static, cordis_approvals::Answer> {
        std::fs::write(&self.0, "someone else's line 6\nline 6\n").unwrap();
        Box::pin(async { cordis_approvals::Answer::Allow })
    }
}

#[tokio::test]
async fn an_edit_whose_file_changed_after_its_diff_was_approved_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("six.txt");
    std::fs::write(&path, "line 6\n").unwrap();
    let root = boot(tmp.path()).await;
    let reg = root.get::<ToolRegistry>().unwrap();
    let _asks = root
        .provide(ApproverService(Arc::new(ChangesTheFile(path.clone()))))
        .unwrap();
    let edit = json!({"path": "six.txt", "old_string": "line 6\n", "new_string": "line six\n"});
    let r = run(&reg, "e1", "edit_file", edit).await;
    assert!(r.is_error, "{r:?}");
    assert_eq!(
        r.content,
        json!(
            "\"six.txt\" changed after the edit was shown for approval; nothing was written: read the file again and retry"
        )
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "someone else's line 6\nline 6\n"
    );
    root.dispose();
}
