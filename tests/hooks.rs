//! Hooks as people configure them: the bundled composition with `hooks` entries in the Claude
//! Code settings shape, piped with `--yes`. A `PreToolUse` hook that exits 2 blocks `bash` and
//! the model reads why; one rewrites the input; a `PostToolUse` hook adds context; a hanging
//! hook is stopped at its timeout; two entries run in file order (under `permute` and seeded
//! `stress`); a workspace's hooks do not run untrusted; the log holds every decision, and the
//! cache-prefix contract holds over it.
#![cfg(unix)]

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The bundled composition with the demo responses replaced by `responses` (YAML) and `hooks`
/// (YAML entries) appended (the trust tests use it too).
pub(crate) fn config(responses: &str, hooks: &str) -> String {
    let bundled = include_str!("../cordis.yml");
    let start = bundled
        .find("    repeat: true\n")
        .expect("the demo's responses");
    let end = bundled
        .find("\n- id: sessions")
        .expect("the sessions entry");
    format!(
        "{}    responses:\n{responses}{}\n{hooks}",
        &bundled[..start],
        &bundled[end..]
    )
}

fn workspace(name: &str, responses: &str, hooks: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-hooks-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::write(dir.join("cordis.yml"), config(responses, hooks)).unwrap();
    std::fs::write(dir.join("notes.txt"), "status: draft\n").unwrap();
    dir
}

/// A hook script in `dir/hooks/NAME` printing `stdout` (after reading its input).
fn script(dir: &Path, name: &str, body: &str) {
    std::fs::write(
        dir.join("hooks").join(name),
        format!("cat > /dev/null\n{body}\n"),
    )
    .unwrap();
}

fn log(dir: &Path, id: &str) -> Vec<Value> {
    std::fs::read_to_string(common::sessions_dir(dir).join(format!("{id}.jsonl")))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// `(hook, decision)` of every `hook/run`, in log order.
fn decisions(events: &[Value]) -> Vec<(String, String)> {
    of_kind(events, "hook/run")
        .iter()
        .map(|e| {
            (
                e["data"]["hook"].as_str().unwrap().to_owned(),
                e["data"]["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn contract_holds(dir: &Path, id: &str) {
    let (code, out, err) = common::piped(dir, &["sessions", "check", id, "cordis.yml"], "");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("the cache-prefix contract holds"), "{out}");
}

const BASH_WRITES: &str = r#"      - toolCalls: [{name: bash, arguments: {command: "echo hi > out.txt"}}]
      - text: "done"
"#;

const BLOCK_BASH: &str = r#"- id: guard
  name: hooks
  config:
    hooks:
      PreToolUse:
        - matcher: bash
          hooks: [{type: command, command: "sh hooks/guard.sh"}]
"#;

#[test]
fn a_pre_tool_use_hook_that_exits_2_blocks_bash_and_the_next_request_carries_its_reason() {
    let dir = workspace("block", BASH_WRITES, BLOCK_BASH);
    script(&dir, "guard.sh", "echo 'no shell writes today' >&2\nexit 2");
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--session", "blocked", "--yes", "--trust"],
        "write a file\n",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert!(!dir.join("out.txt").exists(), "the blocked command ran");
    let events = log(&dir, "blocked");
    let results = of_kind(&events, "tool/result");
    assert_eq!(results.len(), 1, "{events:?}");
    let result = &results[0]["data"];
    assert_eq!(result["isError"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("a PreToolUse hook blocked this call: no shell writes today"),
        "{result}"
    );
    // The decision is logged before the result it explains, derived from the call.
    let run = of_kind(&events, "hook/run")[0];
    assert_eq!(run["data"]["decision"], "block");
    assert_eq!(run["data"]["exitCode"], 2);
    assert_eq!(run["data"]["tool"], "bash");
    assert!(run["seq"].as_u64() < results[0]["seq"].as_u64());
    // The request after it is rebuilt from the log: the result, with the reason, is in it.
    assert_eq!(of_kind(&events, "step/start").len(), 2);
    contract_holds(&dir, "blocked");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hook_rewrites_the_tool_input_and_a_post_tool_use_hook_adds_context() {
    let responses = r#"      - toolCalls: [{name: bash, arguments: {command: "echo original"}}]
      - toolCalls: [{name: read_file, arguments: {path: notes.txt}}]
      - text: "done"
"#;
    let hooks = r#"- id: hooks
  name: hooks
  config:
    hooks:
      PreToolUse:
        - matcher: bash
          hooks: [{type: command, command: "sh hooks/rewrite.sh"}]
      PostToolUse:
        - matcher: read_file
          hooks: [{type: command, command: "sh hooks/context.sh"}]
"#;
    let dir = workspace("rewrite", responses, hooks);
    script(
        &dir,
        "rewrite.sh",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo rewritten"}}}'"#,
    );
    script(
        &dir,
        "context.sh",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "the notes are generated; do not edit them"}}'"#,
    );
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--session", "rewrite", "--yes", "--trust"],
        "go\n",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let events = log(&dir, "rewrite");
    let results = of_kind(&events, "tool/result");
    let bash = results[0]["data"]["content"].to_string();
    assert!(
        bash.contains("rewritten") && !bash.contains("original"),
        "{bash}"
    );
    let read = results[1]["data"]["content"].as_str().unwrap();
    assert!(
        read.ends_with("[PostToolUse hook context] the notes are generated; do not edit them"),
        "{read}"
    );
    let runs = of_kind(&events, "hook/run");
    assert_eq!(runs[0]["data"]["decision"], "allow");
    assert_eq!(
        runs[0]["data"]["updatedInput"],
        serde_json::json!({"command": "echo rewritten"})
    );
    assert_eq!(runs[1]["data"]["event"], "PostToolUse");
    assert_eq!(
        runs[1]["data"]["context"],
        "the notes are generated; do not edit them"
    );
    contract_holds(&dir, "rewrite");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hook_that_hangs_is_stopped_at_its_timeout_and_blocks_nothing() {
    let hooks = r#"- id: slow
  name: hooks
  config:
    hooks:
      PreToolUse:
        - matcher: bash
          hooks: [{type: command, command: "sleep 600", timeout: 1}]
"#;
    let dir = workspace("hang", BASH_WRITES, hooks);
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--session", "hang", "--yes", "--trust"],
        "write a file\n",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let events = log(&dir, "hang");
    assert_eq!(decisions(&events), [("slow#0.0".into(), "timeout".into())]);
    // Reported to the user; the call went on.
    assert!(
        err.contains("PreToolUse hook `sleep 600`: the hook did not finish within 1 s"),
        "{err}"
    );
    assert_eq!(of_kind(&events, "tool/result")[0]["data"]["isError"], false);
    assert!(dir.join("out.txt").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two entries on `PreToolUse`, the later one's id sorting first, with two hooks in the first.
const TWO_ENTRIES: &str = r#"- id: zeta
  name: hooks
  config:
    hooks:
      PreToolUse:
        - matcher: "read_file|bash"
          hooks: [{type: command, command: "cat > /dev/null"}, {type: command, command: "true"}]
- id: alpha
  name: hooks
  config:
    hooks:
      PreToolUse:
        - hooks: [{type: command, command: "cat > /dev/null"}]
"#;

#[test]
fn two_hook_entries_on_one_event_run_in_file_order() {
    let responses = r#"      - toolCalls: [{name: read_file, arguments: {path: notes.txt}}]
      - text: "done"
"#;
    let dir = workspace("order", responses, TWO_ENTRIES);
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--session", "order", "--yes", "--trust"],
        "read\n",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let expected: Vec<(String, String)> = ["zeta#0.0", "zeta#0.1", "alpha#0.0"]
        .map(|h| (h.to_owned(), "continue".to_owned()))
        .to_vec();
    assert_eq!(decisions(&log(&dir, "order")), expected);

    // Every load order of the entries is one outcome.
    let (code, out, err) = common::piped(&dir, &["permute", "cordis.yml"], "");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        format!("{out}{err}").contains(": 1 distinct outcome"),
        "{out}{err}"
    );

    // Seeded stress with a conversation: the whole log, hook runs included, agrees across
    // seeds. The config is the user's own here (the workspace is a folder below it).
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws/notes.txt"), "status: draft\n").unwrap();
    std::fs::write(
        dir.join("script.yml"),
        "turns: [read]\nresponses:\n  - toolCalls: [{name: read_file, arguments: {path: notes.txt}}]\n  - text: done\n",
    )
    .unwrap();
    let mut stress = common::cordis_command(
        &dir,
        &[
            "stress",
            "cordis.yml",
            "--seeds",
            "6",
            "--jobs",
            "2",
            "--exercise",
            "script.yml",
            "--print-log",
        ],
    );
    let ran = stress
        .env("CORDIS_WORKSPACE", dir.join("ws"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&ran.stdout);
    let err = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(0), "{out}{err}");
    let hooks: Vec<String> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "hook/run")
        .map(|e| format!("{}:{}", e["data"]["hook"], e["data"]["decision"]))
        .collect();
    assert!(!hooks.is_empty(), "{out}");
    for seed in hooks.chunks(3) {
        assert_eq!(
            seed,
            [
                "\"zeta#0.0\":\"continue\"",
                "\"zeta#0.1\":\"continue\"",
                "\"alpha#0.0\":\"continue\""
            ],
            "{out}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_workspace_hook_does_not_run_until_the_workspace_is_trusted() {
    let dir = workspace("trust", BASH_WRITES, BLOCK_BASH);
    script(&dir, "guard.sh", "echo 'no shell writes today' >&2\nexit 2");
    let (code, out, err) = common::piped(&dir, &["run", "--session", "untrusted", "--yes"], "go\n");
    assert_eq!(code, Some(0), "{err}\n{out}");
    // Not run: the command went through, and the log and the user are told why.
    assert!(dir.join("out.txt").exists());
    let events = log(&dir, "untrusted");
    assert_eq!(
        decisions(&events),
        [("guard#0.0".into(), "untrusted".into())]
    );
    assert!(
        err.contains("is not trusted (run `cordis run --trust` there"),
        "{err}"
    );
    std::fs::remove_file(dir.join("out.txt")).unwrap();

    // Trusted once with --trust, it is remembered for the directory.
    for (session, args) in [("trusted", vec!["--trust"]), ("remembered", vec![])] {
        let mut argv = vec!["run", "--session", session, "--yes"];
        argv.extend(args);
        let (code, out, err) = common::piped(&dir, &argv, "go\n");
        assert_eq!(code, Some(0), "{err}\n{out}");
        assert!(!dir.join("out.txt").exists(), "{session}");
        assert_eq!(
            decisions(&log(&dir, session)),
            [("guard#0.0".into(), "block".into())]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stop_hook_makes_the_model_go_on_and_prompt_context_joins_the_message() {
    let responses = r#"      - text: "done"
      - text: "tests pass now"
"#;
    let hooks = r#"- id: hooks
  name: hooks
  config:
    hooks:
      UserPromptSubmit:
        - hooks: [{type: command, command: "cat > /dev/null; echo 'branch: main'"}]
      Stop:
        - hooks: [{type: command, command: "sh hooks/stop.sh"}]
"#;
    let dir = workspace("stop", responses, hooks);
    std::fs::write(
        dir.join("hooks/stop.sh"),
        "if grep -q '\"stop_hook_active\":true'; then exit 0; fi\necho 'run the tests first' >&2\nexit 2\n",
    )
    .unwrap();
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--session", "stop", "--yes", "--trust"],
        "fix it\n",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let events = log(&dir, "stop");
    let users: Vec<&str> = of_kind(&events, "user/message")
        .iter()
        .map(|e| e["data"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        [
            "fix it\n\nbranch: main",
            "Stop hook feedback: run the tests first"
        ]
    );
    let expected: Vec<(String, String)> = [
        ("hooks#0.0", "continue"),
        ("hooks#0.0", "block"),
        ("hooks#0.0", "continue"),
    ]
    .map(|(h, d)| (h.to_owned(), d.to_owned()))
    .to_vec();
    assert_eq!(decisions(&events), expected);
    assert!(out.contains("tests pass now"), "{out}");
    contract_holds(&dir, "stop");
    let _ = std::fs::remove_dir_all(&dir);
}
