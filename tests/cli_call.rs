//! `cordis call`: boot a config and call one tool, as a plugin author does while writing one.

use crate::common;

use common::cordis;

const BUNDLED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");

#[test]
fn a_call_prints_the_tool_result() {
    let run = cordis(
        &[
            "call",
            BUNDLED,
            "todo_write",
            r#"{"todos": [{"content": "ship", "status": "pending"}]}"#,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    let printed: serde_json::Value = serde_json::from_str(&run.out).unwrap();
    assert_eq!(printed[0]["content"], "ship");
}

#[test]
fn a_failing_call_names_the_code_and_the_schema_rule() {
    let run = cordis(
        &[
            "call",
            BUNDLED,
            "todo_write",
            r#"{"todos": [{"content": "x", "status": "maybe"}]}"#,
        ],
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.out);
    assert!(
        run.err.contains("todo_write failed (INVALID_ARGUMENTS)"),
        "{}",
        run.err
    );
    assert!(run.err.contains("/todos/0/status"), "{}", run.err);
    let unknown = cordis(&["call", BUNDLED, "no_such_tool"], &[]);
    assert_eq!(unknown.code, 1);
    assert!(unknown.err.contains("UNKNOWN_TOOL"), "{}", unknown.err);
}

#[test]
fn bad_words_and_bad_json_are_usage_errors() {
    let not_json = cordis(&["call", BUNDLED, "todo_write", "{oops"], &[]);
    assert_eq!(not_json.code, 2);
    assert!(
        not_json.err.contains("the arguments are not JSON"),
        "{}",
        not_json.err
    );
    let too_many = cordis(&["call", BUNDLED, "todo_write", "extra"], &[]);
    assert_eq!(too_many.code, 2, "{}", too_many.err);
}

#[test]
fn cache_dir_and_prune_work_on_the_named_cache_only() {
    let dir = std::env::temp_dir().join(format!("cordis-cli-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let env = [("CORDIS_DYLIB_CACHE", dir.to_str().unwrap())];
    let shown = cordis(&["cache", "dir"], &env);
    assert_eq!(shown.out.trim(), dir.to_str().unwrap());
    let first = cordis(&["cache", "prune"], &env);
    assert_eq!(first.code, 0, "{}", first.err);
    std::fs::write(dir.join(format!("{}-libp.so", "cd".repeat(32))), b"12345").unwrap();
    std::fs::write(dir.join("keep.txt"), b"mine").unwrap();
    let pruned = cordis(&["cache", "prune"], &env);
    assert_eq!(pruned.code, 0, "{}", pruned.err);
    assert!(
        pruned.out.starts_with("removed 1 file (5 bytes)"),
        "{}",
        pruned.out
    );
    assert!(dir.join("keep.txt").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_call_that_would_ask_is_denied_unless_yes_or_approve_allows_it() {
    // A third party's `grep` declares no effect: it is not the workspace's read-only grep, so
    // it asks (and `cordis call` has nobody to ask).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cordis.yml");
    std::fs::write(
        &file,
        "- {id: system-prompt, name: system-prompt}\n- {id: tools, name: tools}\n\
         - id: declared\n  name: tool-declare\n  config: {tools: [{name: grep, description: not ours, parameters: {type: object}}]}\n\
         - {id: approvals, name: approvals}\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let asked = cordis(&["call", file, "grep"], &[]);
    assert_eq!(asked.code, 1, "{}", asked.out);
    assert!(
        asked.err.contains(
            "grep failed (DENIED): tool \"grep\" needs approval and no approver is available"
        ),
        "{}",
        asked.err
    );
    for flags in [["--yes", ""], ["--approve", "grep"]] {
        let flags: Vec<&str> = flags.into_iter().filter(|f| !f.is_empty()).collect();
        let run = cordis(&[&["call", file, "grep"][..], &flags].concat(), &[]);
        assert_eq!(run.code, 0, "{flags:?}: {}", run.err);
        assert!(run.out.contains("\"ok\": true"), "{}", run.out);
    }
    let other = cordis(&["call", file, "grep", "--approve", "bash"], &[]);
    assert_eq!(other.code, 1, "--approve names another tool: {}", other.out);
    // The bundled shell: asked (denied) without a flag, run in its sandbox with --yes.
    let echo = r#"{"command": "echo sandboxed"}"#;
    let denied = cordis(&["call", BUNDLED, "bash", echo], &[]);
    assert_eq!(denied.code, 1, "{}", denied.out);
    let ran = cordis(&["call", BUNDLED, "bash", echo, "--yes"], &[]);
    assert_eq!(ran.code, 0, "{}", ran.err);
    assert!(ran.out.contains("sandboxed"), "{}", ran.out);
}
