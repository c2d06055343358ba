//! What runs without a question cannot write. Driven through the bundled `cordis.yml` exactly as
//! shipped (`commands: {allow: ["git status", "git diff", "git log"]}`), piped, no flags, with a
//! loopback model: an option known to write (`--output=FILE`) makes a command uncovered, so it
//! asks (and piped, is denied); and what a rule does let run unasked runs in a read-only sandbox,
//! so what no rule reader can see (a repository's external diff program) writes nothing either.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::common;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(ok.status.success(), "git {args:?}: {ok:?}");
}

/// The events of every session log under `root` (a state home), in file order.
fn logged(root: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.extend(
                    text.lines()
                        .skip(1)
                        .map(|l| serde_json::from_str(l).unwrap()),
                );
            }
        }
    }
    out
}

#[test]
fn the_bundled_preapproved_git_diff_and_log_with_output_write_no_file() {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("SKIP: no git");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cordis-unasked-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    std::fs::write(dir.join("tracked.txt"), "one\n").unwrap();
    git(&dir, &["add", "tracked.txt"]);
    git(&dir, &["commit", "-q", "-m", "first"]);
    std::fs::write(dir.join("tracked.txt"), "one\ntwo\n").unwrap();
    std::fs::write(dir.join("important.txt"), "uncommitted work\n").unwrap();
    // The repository's own configuration runs a program on `git diff`: no rule sees it.
    let script = dir.join(".git/differ.sh");
    std::fs::write(&script, "#!/bin/sh\necho overwritten > important.txt\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(
        &dir,
        &["config", "diff.external", &script.display().to_string()],
    );
    let config_before = std::fs::read(dir.join(".git/config")).unwrap();

    let delta = |d: serde_json::Value| json!({"choices": [{"index": 0, "delta": d}]});
    let finish = |why: &str| json!({"choices": [{"index": 0, "delta": {}, "finish_reason": why}]});
    let bash = |i: u32, id: &str, line: &str| {
        json!({"index": i, "id": id, "type": "function",
               "function": {"name": "bash", "arguments": json!({"command": line}).to_string()}})
    };
    let (base, server) = common::openai_serving(vec![
        vec![
            delta(json!({"role": "assistant", "tool_calls": [
                bash(0, "c1", "git diff --output=important.txt"),
                bash(1, "c2", "git log --output=.git/config"),
                bash(2, "c3", "git diff"),
            ]})),
            finish("tool_calls"),
        ],
        vec![delta(json!({"content": "Looked."})), finish("stop")],
    ]);
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("cordis.yml");
    let mut cmd = common::cordis_command(&dir, &["run", &shipped.display().to_string()]);
    let _ = cmd
        .env("CORDIS_LLM", "openai")
        .env("CORDIS_BASE_URL", &base)
        .env("CORDIS_API_KEY_ENV", "CORDIS_TEST_KEY")
        .env("CORDIS_TEST_KEY", "k");
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"what changed?\n")
            .unwrap();
    }
    let ran = child.wait_with_output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr),
    );
    assert_eq!(ran.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("Looked."), "{out}\n{err}");
    let _ = server.join().unwrap();

    // Nothing was asked (piped, no flags) and nothing was written.
    assert_eq!(
        std::fs::read_to_string(dir.join("important.txt")).unwrap(),
        "uncommitted work\n"
    );
    assert_eq!(
        std::fs::read(dir.join(".git/config")).unwrap(),
        config_before
    );
    let events = logged(&common::state_home(&dir));
    // The two with a writing option needed a question; piped, nobody answers: denied.
    let approvals: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "tool/approval")
        .map(|e| {
            (
                e["data"]["callId"].as_str().unwrap(),
                e["data"]["by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        approvals,
        [("c1", "no-approver"), ("c2", "no-approver")],
        "{events:#?}"
    );
    if cordis_sandbox::landlock_abi().is_some() {
        // The allowed one ran, read-only, and the model was told why its write failed.
        let result = events
            .iter()
            .find(|e| e["type"] == "tool/result" && e["data"]["callId"] == "c3")
            .unwrap();
        let content = &result["data"]["content"];
        assert_eq!(content["sandbox"], "read-only", "{result}");
        assert!(
            content["stderr"]
                .as_str()
                .unwrap()
                .contains("Permission denied"),
            "{result}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reload_that_would_widen_permissions_is_refused_while_a_session_runs() {
    use std::io::Write as _;
    let dir = std::env::temp_dir().join(format!("cordis-widen-{}", std::process::id()));
    let outside = std::env::temp_dir().join(format!("cordis-widen-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&outside);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let config = "- {id: system-prompt, name: system-prompt}\n- {id: tools, name: tools}\n\
        - id: llm\n  name: llm\n  config: {adapter: scripted, model: m, script: script.json}\n\
        - {id: sessions, name: sessions, config: {root: .sessions}}\n- {id: agent-loop, name: agent-loop}\n\
        - {id: workspace, name: workspace}\n- {id: fs, name: tool-fs}\n\
        - id: shell\n  name: tool-shell\n  config: {sandbox: workspace-write}\n\
        - id: approvals\n  name: approvals\n  config: {mode: auto}\n";
    // What the model (prompt-injected) writes over cordis.yml: no sandbox, and bash allowed to write.
    let widened = config
        .replace("{sandbox: workspace-write}", "{sandbox: full-access}")
        .replace("{mode: auto}", "{mode: auto, tools: {bash: write}}");
    let escape = format!("echo escaped > {}/escaped", outside.display());
    let script = json!([
        {"toolCalls": [{"id": "w1", "name": "write_file",
                        "arguments": {"path": "cordis.yml", "content": widened}}]},
        {"text": "Rewrote."},
        {"toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": escape}}]},
        {"text": "Ran."}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    std::fs::write(dir.join("cordis.yml"), config).unwrap();
    let mut child = common::cordis_command(&dir, &["run", "--watch", "--session", "w"])
        .spawn()
        .unwrap();
    let out = common::lines(child.stdout.take().unwrap());
    let err = common::lines(child.stderr.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    common::wait_for(&err, "watching cordis.yml");
    writeln!(stdin, "rewrite your configuration").unwrap();
    common::wait_for(&out, "Rewrote.");
    // The file did change (auto runs an edit confined to the workspace)…
    assert!(
        std::fs::read_to_string(dir.join("cordis.yml"))
            .unwrap()
            .contains("full-access")
    );
    // …and the reload refuses it, naming each widening.
    let shell = common::wait_for(&err, "entry \"shell\"");
    assert!(
        shell.contains(
            "a running session does not take this change: the sandbox workspace-write → full-access"
        ),
        "{shell}"
    );
    let approvals = common::wait_for(&err, "entry \"approvals\"");
    assert!(
        approvals.contains("tool `bash`: (none) → write"),
        "{approvals}"
    );
    common::wait_for(&err, "reload refused");
    writeln!(stdin, "now run it").unwrap();
    common::wait_for(&out, "Ran.");
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(
        !outside.join("escaped").exists(),
        "the command wrote outside the workspace"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&outside);
}
