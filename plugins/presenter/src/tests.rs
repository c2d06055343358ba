use std::sync::Arc;

use cordis_runtime::prelude::*;
use serde_json::{Value, json};

use crate::*;

fn ok(content: &Value) -> ResultView<'_> {
    ResultView {
        content,
        is_error: false,
    }
}

#[test]
fn the_standard_tools_have_titles_kinds_and_cards() {
    let p = Presenters::standard();
    let read = p.present_call(
        "read_file",
        &json!({"path": "a.rs", "start_line": 2, "end_line": 9}),
    );
    assert_eq!(
        (read.title.as_str(), read.kind, &read.card),
        ("Read a.rs (lines 2–9)", ToolKind::Read, &Card::Generic)
    );
    assert_eq!(
        read.locations,
        [Location {
            path: "a.rs".into(),
            line: Some(2)
        }]
    );
    let edit = p.present_call(
        "edit_file",
        &json!({"path": "a.rs", "old_string": "x", "new_string": "y"}),
    );
    assert_eq!(
        edit.card,
        Card::Diff {
            path: "a.rs".into(),
            old_text: Some("x".into()),
            new_text: "y".into(),
            first_line: None,
        }
    );
    let write = p.present_call("write_file", &json!({"path": "n.txt", "content": "hi\n"}));
    assert_eq!(
        (write.title.as_str(), write.kind),
        ("Write n.txt", ToolKind::Edit)
    );
    assert_eq!(
        write.card,
        Card::Diff {
            path: "n.txt".into(),
            old_text: None,
            new_text: "hi\n".into(),
            first_line: None,
        }
    );
    let grep = p.present_call("grep", &json!({"pattern": "fn main", "path": "src"}));
    assert_eq!(
        (grep.title.as_str(), grep.kind),
        ("Grep fn main in src", ToolKind::Search)
    );
    let list = p.present_call("list_files", &json!({"pattern": "*.rs"}));
    assert_eq!(
        (list.title.as_str(), list.kind),
        ("List *.rs", ToolKind::Search)
    );
    let bash = p.present_call(
        "bash",
        &json!({"command": "cargo test", "description": "Run the tests"}),
    );
    assert_eq!(
        (bash.title.as_str(), bash.kind, bash.text.as_deref()),
        ("cargo test", ToolKind::Execute, Some("Run the tests"))
    );
}

#[test]
fn results_carry_output_exit_codes_and_errors() {
    let p = Presenters::standard();
    let args = json!({"command": "make"});
    let content = json!({"exit_code": 2, "stdout": "building\n", "stderr": "error: nope\n"});
    let r = p.present_result("bash", &args, ok(&content));
    assert_eq!(
        r.card,
        Card::Terminal {
            output: "building\nerror: nope\n".into(),
            exit_code: Some(2)
        }
    );
    assert_eq!(
        render_card(&r.card),
        "building\nerror: nope\n[exit code 2]\n"
    );
    let content = json!({"path": "a.rs", "content": "     1\tfn a() {}\n", "total_lines": 1});
    let r = p.present_result("read_file", &json!({"path": "a.rs"}), ok(&content));
    assert_eq!(r.text.as_deref(), Some("     1\tfn a() {}\n"));
    let message = json!("old_string was not found in \"a.rs\"");
    let r = p.present_result(
        "edit_file",
        &json!({"path": "a.rs", "old_string": "x", "new_string": "y"}),
        ResultView {
            content: &message,
            is_error: true,
        },
    );
    assert_eq!(
        (r.card, r.text.as_deref()),
        (Card::Generic, Some("old_string was not found in \"a.rs\""))
    );
}

struct Broken;
impl ToolPresenter for Broken {
    fn present_call(&self, _: &Value) -> Result<Presentation, PresentError> {
        panic!("presenter bug")
    }
    fn present_result(&self, _: &Value, _: ResultView<'_>) -> Result<Presentation, PresentError> {
        Err(PresentError::Argument("x", "string"))
    }
}

#[tokio::test]
async fn a_failing_or_missing_presenter_falls_back_to_the_generic_card() {
    let p = Presenters::standard();
    // Arguments the presenter cannot read.
    let args = json!({"cmd": "ls"});
    let g = p.present_call("bash", &args);
    assert_eq!(g, generic("bash", &args));
    assert_eq!((g.title.as_str(), g.kind), ("bash", ToolKind::Other));
    let content = json!({"x": 1});
    let r = p.present_result("unknown_tool", &json!({}), ok(&content));
    assert_eq!(
        (r.card, r.text.as_deref()),
        (Card::Generic, Some("{\"x\":1}"))
    );
    let root = Context::root();
    let _ = p.register(&root, "bash", Arc::new(Broken)).unwrap();
    let args = json!({"command": "ls"});
    assert_eq!(
        p.present_call("bash", &args),
        generic("bash", &args),
        "a panic falls back"
    );
    let r = p.present_result("bash", &args, ok(&content));
    assert_eq!(r.card, Card::Generic);
    root.dispose();
    assert_eq!(
        p.present_call("bash", &args).kind,
        ToolKind::Execute,
        "withdrawn with its scope"
    );
}

#[test]
fn cards_serialize_in_the_wire_shape() {
    let diff = Card::Diff {
        path: "a".into(),
        old_text: None,
        new_text: "b".into(),
        first_line: None,
    };
    assert_eq!(
        serde_json::to_value(&diff).unwrap(),
        json!({"type": "diff", "path": "a", "oldText": null, "newText": "b"})
    );
    let term = Card::Terminal {
        output: "o".into(),
        exit_code: Some(0),
    };
    assert_eq!(
        serde_json::to_value(&term).unwrap(),
        json!({"type": "terminal", "output": "o", "exitCode": 0})
    );
    assert_eq!(
        serde_json::to_value(Card::Generic).unwrap(),
        json!({"type": "generic"})
    );
    let p = Presenters::standard().present_call("grep", &json!({"pattern": "x"}));
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        json!({"title": "Grep x", "kind": "search", "input": {"pattern": "x"}, "card": {"type": "generic"}})
    );
}

#[test]
fn diffs_render_as_unified_diffs() {
    let old = "a\nb\nc\n";
    let new = "a\nB\nc\n";
    assert_eq!(
        unified_diff("f.txt", Some(old), new),
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    );
    assert_eq!(
        unified_diff("n.txt", None, "x\n"),
        "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+x\n"
    );
    // Strings cut from line 6 of a file: the hunk says so.
    assert_eq!(
        unified_diff_from("f.txt", Some("line 6\n"), "line six\n", 6),
        "--- a/f.txt\n+++ b/f.txt\n@@ -6 +6 @@\n-line 6\n+line six\n"
    );
    let edit = Presenters::standard().present_result(
        "edit_file",
        &json!({"path": "f.txt", "old_string": "b\nc\n", "new_string": "B\nc\n"}),
        ResultView {
            content: &json!({"path": "f.txt", "replacements": 1, "lines": [12]}),
            is_error: false,
        },
    );
    assert_eq!(
        render_card(&edit.card),
        "--- a/f.txt\n+++ b/f.txt\n@@ -12,2 +12,2 @@\n-b\n+B\n c\n"
    );
    assert_eq!(edit.locations[0].line, Some(12));
}

#[test]
fn logged_argument_text_parses_like_the_reference() {
    assert_eq!(parse_arguments_text(""), json!({}));
    assert_eq!(parse_arguments_text("{\"a\":1}"), json!({"a": 1}));
    assert_eq!(parse_arguments_text("{broken"), json!("{broken"));
}

#[tokio::test]
async fn the_plugin_offers_the_service() {
    let root = Context::root();
    let h = root.plugin(PresenterPlugin, PresenterConfig::default());
    root.idle().await;
    assert_eq!(h.status(), ScopeStatus::Active);
    let p = root.get::<Presenters>().unwrap();
    assert_eq!(
        p.present_call("bash", &json!({"command": "ls"})).title,
        "ls"
    );
    h.dispose();
    assert!(root.get::<Presenters>().is_none());
    root.dispose();
    assert!(root.live().is_zero());
}

#[test]
fn run_code_is_titled_by_its_description_and_shows_its_program_and_result() {
    let p = Presenters::standard();
    let args =
        json!({"code": "const a = await tools.alpha({});\nreturn a;", "description": "Call alpha"});
    let call = p.present_call("run_code", &args);
    assert_eq!(
        (call.title.as_str(), call.kind),
        ("Call alpha", ToolKind::Other)
    );
    assert_eq!(
        call.text.as_deref(),
        Some("const a = await tools.alpha({});\nreturn a;")
    );
    let undescribed = p.present_call("run_code", &json!({"code": "return 1;\n// more"}));
    assert_eq!(undescribed.title, "return 1;");
    let result = p.present_result("run_code", &args, ok(&json!("got alpha\nalpha")));
    assert_eq!(result.text.as_deref(), Some("got alpha\nalpha"));
}

/// A presenter that titles every call with its own name.
struct Titled(&'static str);
impl ToolPresenter for Titled {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        Ok(Presentation {
            title: self.0.to_owned(),
            ..generic("any", args)
        })
    }
    fn present_result(
        &self,
        args: &Value,
        _: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        self.present_call(args)
    }
}

/// The standard presenters are shared by every service `standard()` makes: what one service
/// registers stays its own, the latest registration wins over them, and withdrawing it
/// uncovers the one below.
#[tokio::test]
async fn standard_services_share_the_standard_presenters_but_not_registrations() {
    let (p, other) = (Presenters::standard(), Presenters::standard());
    let root = Context::root();
    let (a, b, c) = (
        root.child_scope("a"),
        root.child_scope("b"),
        root.child_scope("c"),
    );
    let args = json!({"command": "ls"});
    let title = |p: &Presenters| p.present_call("bash", &args).title;
    let _ = p
        .register(&a.context().unwrap(), "bash", Arc::new(Titled("a")))
        .unwrap();
    let _ = p
        .register(&b.context().unwrap(), "read_file", Arc::new(Broken))
        .unwrap();
    assert_eq!(title(&p), "a");
    assert_eq!(
        (title(&other), other.present_call("bash", &args).kind),
        ("ls".to_owned(), ToolKind::Execute)
    );
    assert!(Presenters::default().get("bash").is_none());
    assert_eq!(
        format!("{p:?}"),
        "Presenters { tools: [\"bash\", \"edit_file\", \"grep\", \"list_files\", \"read_file\", \"run_code\", \"todo_write\", \"write_file\"] }"
    );
    // The latest registration wins until it is withdrawn; then the one below it does.
    let _ = p
        .register(&c.context().unwrap(), "bash", Arc::new(Titled("c")))
        .unwrap();
    assert_eq!(title(&p), "c");
    c.dispose();
    assert_eq!(title(&p), "a");
    a.dispose();
    assert_eq!(title(&p), "ls");
    assert_eq!(
        p.present_call("read_file", &json!({"path": "x"})),
        generic("read_file", &json!({"path": "x"}))
    );
    b.dispose();
    assert_eq!(
        p.present_call("read_file", &json!({"path": "x"})).kind,
        ToolKind::Read
    );
    root.dispose();
}
