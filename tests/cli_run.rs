//! `cordis run` as a user runs it: the bundled cordis.yml offline, piped stdin, session files.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{lines, wait_for};

fn run(dir: &Path, args: &[&str], input: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env("XDG_STATE_HOME", dir.join(".state"));
    cmd.arg("run")
        .args(args)
        .current_dir(dir)
        .env_remove("CORDIS_LLM")
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-run-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), include_str!("../cordis.yml")).unwrap();
    dir
}

#[test]
fn the_bundled_config_runs_the_offline_demo_and_resumes_the_session() {
    let dir = fresh_dir("demo");
    let out = run(
        &dir,
        &["--session", "demo"],
        "hello\n\n\"\"\"\nfirst line\nsecond line\n\"\"\"\n",
        &[],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.starts_with("> hello\nThis is the offline demo"),
        "{stdout}"
    );
    assert!(stdout.contains("> first line\n> second line\n"), "{stdout}");
    // The todo list as a checklist, not its JSON.
    assert_eq!(
        stdout
            .matches("⏺ Todos: 0 of 1 done, 1 in progress\n  ⎿ [~] Set CORDIS_LLM=openai")
            .count(),
        2,
        "{stdout}"
    );
    assert!(!stdout.contains("[{\"content\""), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "new session demo ({}); adapter scripted",
            common::sessions_dir(&dir).join("demo.jsonl").display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("cordis run --resume demo"), "{stderr}");
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("demo.jsonl")).unwrap();
    assert!(
        log.contains(r#""content":"first line\nsecond line""#),
        "{log}"
    );
    assert_eq!(log.matches(r#""type":"turn/end""#).count(), 2);

    // A new run may not reuse the id; --resume continues it; an unknown id is refused.
    let again = run(&dir, &["--session", "demo"], "", &[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("--resume demo"));
    let resumed = run(&dir, &["--resume", "demo"], "once more\n", &[]);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed.stderr));
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("demo.jsonl")).unwrap();
    assert_eq!(log.matches(r#""type":"turn/end""#).count(), 3);
    assert!(log.contains(r#""reason":"resume""#), "{log}");
    let missing = run(&dir, &["--resume", "nope"], "", &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("cannot resume session nope"));

    // A copied log is the session its file names: it prints its own path and --resume command,
    // and the original is left as it was (the header's id used to win).
    std::fs::copy(
        common::sessions_dir(&dir).join("demo.jsonl"),
        common::sessions_dir(&dir).join("copy.jsonl"),
    )
    .unwrap();
    let copied = run(&dir, &["--resume", "copy"], "and again\n", &[]);
    let stderr = text(&copied.stderr);
    assert_eq!(copied.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "session copy ({})",
            common::sessions_dir(&dir).join("copy.jsonl").display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("cordis run --resume copy\n"), "{stderr}");
    assert!(
        !stderr.contains("demo.jsonl") && !stderr.contains("--resume demo"),
        "{stderr}"
    );
    let copy = std::fs::read_to_string(common::sessions_dir(&dir).join("copy.jsonl")).unwrap();
    assert_eq!(copy.matches(r#""type":"turn/end""#).count(), 4);
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("demo.jsonl")).unwrap();
    assert_eq!(log.matches(r#""type":"turn/end""#).count(), 3);
    let again = run(&dir, &["--resume", "copy"], "", &[]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failures_are_printed_on_stderr_once_and_a_piped_run_exits_1() {
    let dir = fresh_dir("fail");
    // The openai adapter without its key: the llm entry fails and the run explains why.
    let out = run(
        &dir,
        &[],
        "hi\n",
        &[
            ("CORDIS_LLM", "openai"),
            ("CORDIS_API_KEY_ENV", "CORDIS_TEST_NO_SUCH_KEY"),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("CORDIS_TEST_NO_SUCH_KEY is not set"),
        "{stderr}"
    );
    // The file has every entry: no advice to add them, a pointer at the real problem.
    assert!(!stderr.contains("add `llm`"), "{stderr}");
    assert!(
        stderr.contains("no agent to talk to: entry agent-loop (agent-loop) is pending"),
        "{stderr}"
    );
    // An unknown toolOrder name fails each turn; the run goes on to EOF and, stdin being a
    // pipe, exits 1 so a script sees it.
    let config =
        include_str!("../cordis.yml").replace("toolOrder: [todo_write,", "toolOrder: [ghost_tool,");
    std::fs::write(dir.join("ghost.yml"), config).unwrap();
    let out = run(&dir, &["ghost.yml"], "one\ntwo\n", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr
            .matches("cordis: error: turn 1 failed at step 1: toolOrder lists unregistered tool \"ghost_tool\"")
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("turn 2 failed at step 1"), "{stderr}");
    assert!(stderr.contains("2 turns failed"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_watch_reloads_between_turns_and_the_agent_resumes_its_session() {
    let dir = fresh_dir("watch");
    let mut child = common::cordis_command(&dir, &["run", "--watch", "--session", "w"])
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let err = lines(child.stderr.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    wait_for(&err, "watching cordis.yml");
    writeln!(stdin, "first").unwrap();
    wait_for(&out, "Noted.");
    let file = dir.join("cordis.yml");
    let edited = std::fs::read_to_string(&file)
        .unwrap()
        .replace("maxSteps: 16", "maxSteps: 8");
    std::fs::write(&file, edited).unwrap();
    assert_eq!(
        wait_for(&err, "reload 1:"),
        "cordis: reload 1: added -; removed -; restarted agent-loop; failed -"
    );
    writeln!(stdin, "second").unwrap();
    wait_for(&out, "Noted.");
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // The restart disposed the agent, and the next turn made it again, joined: no alarm
    // (it used to say "the agent is joined to no preset after the reload" every time).
    let rest: Vec<String> = err.iter().collect();
    assert!(
        rest.iter().all(|l| !l.contains("joined to no preset")),
        "{rest:?}"
    );
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("w.jsonl")).unwrap();
    let reasons: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(r#""type":"request/header""#))
        .map(|l| {
            if l.contains(r#""reason":"resume""#) {
                "resume"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(reasons, vec!["other", "resume"], "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_process_on_one_session_is_refused_with_the_holder_and_exit_3() {
    let dir = fresh_dir("locked");
    // The first run has the session open while it waits for input.
    let mut first = common::cordis_command(&dir, &["run", "--session", "shared"])
        .spawn()
        .unwrap();
    let first_err = lines(first.stderr.take().unwrap());
    wait_for(&first_err, "new session shared");
    let second = run(&dir, &["--resume", "shared"], "hello\n", &[]);
    let stderr = text(&second.stderr);
    assert_eq!(second.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!("session shared is open in process {}", first.id())),
        "{stderr}"
    );
    // The first run ends normally; then the session can be resumed.
    let mut stdin = first.stdin.take().unwrap();
    writeln!(stdin, "hi").unwrap();
    drop(stdin);
    assert_eq!(first.wait().unwrap().code(), Some(0));
    let third = run(&dir, &["--resume", "shared"], "again\n", &[]);
    assert_eq!(third.status.code(), Some(0), "{}", text(&third.stderr));
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("shared.jsonl")).unwrap();
    let seqs: Vec<u64> = log
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "contiguous seqs"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_the_default_log_filter_each_failed_turn_is_printed_once() {
    let dir = fresh_dir("once");
    let config =
        include_str!("../cordis.yml").replace("toolOrder: [todo_write,", "toolOrder: [ghost_tool,");
    std::fs::write(dir.join("ghost.yml"), config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .args(["run", "ghost.yml", "--session", "once"])
        .current_dir(&dir)
        .env_remove("CORDIS_LLM")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"one\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The failure's message appears on the boot problem line and once for the turn: no
    // timestamped tracing line repeats it.
    assert_eq!(stderr.matches("turn 1 failed").count(), 1, "{stderr}");
    assert!(!stderr.contains("WARN"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The digest `check` prints is the sha256 of exactly what the session's `request/header`
/// records (its canonical JSON), the call `config` (the model) included.
#[test]
fn the_check_digest_is_the_hash_of_the_logged_request_header() {
    let dir = fresh_dir("digest");
    let check = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .args(["check", "cordis.yml", "--seed", "1", "--json"])
        .current_dir(&dir)
        .env_remove("CORDIS_LLM")
        .env_remove("CORDIS_MODEL")
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(report["assembly"]["config"]["model"], "deepseek-chat");
    let out = run(&dir, &["--session", "d"], "hello\n", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("d.jsonl")).unwrap();
    let header = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "request/header")
        .expect("a request/header is logged")["data"]["header"]
        .clone();
    assert_eq!(header["config"]["model"], "deepseek-chat");
    let logged = cordis_host::assembly::logged_header_digest(&header).unwrap();
    assert_eq!(report["digest"], logged);
    // Another model is another request: the digest moves with it.
    let other = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .args(["check", "cordis.yml", "--seed", "1", "--json"])
        .current_dir(&dir)
        .env_remove("CORDIS_LLM")
        .env("CORDIS_MODEL", "deepseek-reasoner")
        .output()
        .unwrap();
    let other: serde_json::Value = serde_json::from_slice(&other.stdout).unwrap();
    assert_ne!(other["digest"], report["digest"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slash_lines_are_commands_for_cordis_and_never_reach_the_model() {
    let dir = fresh_dir("commands");
    let out = run(
        &dir,
        &["--session", "cmd"],
        "/help\n/nope at all\nhello\n/usage\n//etc is a message\n\"\"\"\n/usr/bin is fenced\n\"\"\"\n/quit\nnever sent\n",
        &[],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("  /preset [ID] ") && l.contains("show the session's preset")),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "cordis: unknown command /nope; /help lists them (start the line with // to send it to the model)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("cordis: session cmd: 0 tokens in, 0 tokens out, over 6 model answers that reported usage"),
        "{stderr}"
    );
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("cmd.jsonl")).unwrap();
    let messages: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "user/message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .collect();
    // A fenced block is a message whatever it starts with; `/quit` ended the run before the
    // last line.
    assert_eq!(
        messages,
        ["hello", "/etc is a message", "/usr/bin is fenced"]
    );
    assert!(!stdout.contains("never sent"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sessions_are_listed_newest_first_and_continue_takes_the_newest() {
    let dir = fresh_dir("list");
    // Before the first session its folder does not exist: none yet, not an error.
    let none = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .args(["sessions", "--json"])
        .current_dir(&dir)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(0), "{}", text(&none.stderr));
    assert_eq!(text(&none.stdout).trim(), "[]");
    // With no session of this directory yet, --continue starts one (in another state
    // directory here, so the listing below holds only the two named sessions).
    let elsewhere = dir.join(".state-first");
    let first = run(
        &dir,
        &["--continue"],
        "",
        &[("XDG_STATE_HOME", elsewhere.to_str().unwrap())],
    );
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert!(
        text(&first.stderr).contains(
            "yet (--continue resumes the newest session started in this directory); starting one"
        ),
        "{}",
        text(&first.stderr)
    );
    for (id, first) in [("older", "the first  question"), ("newer", "a later one")] {
        let out = run(&dir, &["--session", id], &format!("{first}\n"), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let listed = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .args(["sessions", "--json"])
        .current_dir(&dir)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let ids: Vec<(&str, &str, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap(),
                r["title"].as_str().unwrap(),
                r["turns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("newer", "a later one", 1),
            ("older", "the first question", 1)
        ]
    );

    // A bare --resume lists them and says how to continue one.
    let bare = run(&dir, &["--resume"], "", &[]);
    assert_eq!(bare.status.code(), Some(2));
    let (stdout, stderr) = (text(&bare.stdout), text(&bare.stderr));
    assert!(
        stdout.starts_with("ID     LAST WRITTEN          TURNS  FIRST MESSAGE\nnewer  "),
        "{stdout}"
    );
    assert!(stdout.contains("      1  the first question\n"), "{stdout}");
    assert!(
        stderr
            .contains("cordis: continue one with: cordis run --resume ID (the newest of this directory: --continue)"),
        "{stderr}"
    );

    // --continue resumes the newest.
    let continued = run(&dir, &["--continue"], "and more\n", &[]);
    let stderr = text(&continued.stderr);
    assert_eq!(continued.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("resuming session newer"), "{stderr}");
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("newer.jsonl")).unwrap();
    assert_eq!(log.matches(r#""type":"turn/end""#).count(), 2);
    let both = run(&dir, &["--continue", "--resume", "older"], "", &[]);
    assert_eq!(both.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn continue_in_another_directory_never_resumes_the_first_directorys_session() {
    // One config file, one sessions root, two projects: a session in A, then --continue in B.
    let base = fresh_dir("projects");
    let (a, b) = (base.join("a"), base.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let state = base.join(".state");
    let env = [("XDG_STATE_HOME", state.to_str().unwrap())];
    let file = base.join("cordis.yml");
    let file = file.to_str().unwrap();
    let in_a = run(&a, &[file, "--session", "in-a"], "about project a\n", &env);
    assert_eq!(in_a.status.code(), Some(0), "{}", text(&in_a.stderr));

    let in_b = run(&b, &[file, "--continue"], "about project b\n", &env);
    let stderr = text(&in_b.stderr);
    assert_eq!(in_b.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("in-a"),
        "B continued A's session: {stderr}"
    );
    assert!(stderr.contains("starting one"), "{stderr}");
    let again = run(&b, &[file, "--continue"], "more about b\n", &env);
    let stderr = text(&again.stderr);
    assert!(stderr.contains("resuming session"), "{stderr}");
    assert!(!stderr.contains("in-a"), "{stderr}");

    // Each directory lists its own terminal sessions; A's log kept its one turn.
    let listed = |dir: &Path| -> Vec<(String, u64)> {
        let out = Command::new(env!("CARGO_BIN_EXE_cordis"))
            .env("XDG_STATE_HOME", &state)
            .args(["sessions", file, "--json", "--cwd"])
            .arg(dir)
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_str().unwrap().to_owned(),
                    r["turns"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(listed(&a), [("in-a".to_owned(), 1)]);
    let in_b = listed(&b);
    assert_eq!(in_b.len(), 1, "{in_b:?}");
    assert_eq!(
        in_b[0].1, 2,
        "B's one session holds both of B's turns: {in_b:?}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn transcripts_stay_out_of_the_workspace_tools_and_git_and_leave_no_lock_behind() {
    // Logs used to land in the workspace: grep returned old transcripts, list_files listed
    // them, and `.lock` files stayed.
    let base = fresh_dir("hidden");
    let (dir, state) = (base.join("work"), base.join("state"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::rename(base.join("cordis.yml"), dir.join("cordis.yml")).unwrap();
    std::fs::write(dir.join("notes.txt"), "a needle in the notes\n").unwrap();
    let state_env = [("XDG_STATE_HOME", state.to_str().unwrap())];
    let out = run(&dir, &["--session", "h"], "find the needle\n", &state_env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // By default the log is under the state directory, in the project's folder.
    let sessions = state
        .join("cordis/sessions")
        .join(cordis_session::project_key(
            &std::fs::canonicalize(&dir).unwrap(),
        ));
    assert!(sessions.join("h.jsonl").exists(), "{}", text(&out.stderr));
    assert!(!sessions.join("h.lock").exists(), "the lock file stayed");
    let in_workspace: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut in_workspace = in_workspace;
    in_workspace.sort();
    assert_eq!(
        in_workspace,
        ["cordis.yml", "notes.txt"],
        "the workspace got files"
    );
    let call = |tool: &str, args: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_cordis"))
            .env("XDG_STATE_HOME", &state)
            .args(["call", "cordis.yml", tool, args])
            .current_dir(&dir)
            .env("RUST_LOG", "off")
            .env_remove("CORDIS_WORKSPACE")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let found = call("grep", r#"{"pattern": "needle"}"#);
    assert!(found.contains("notes.txt:1:"), "{found}");
    assert!(!found.contains(".jsonl"), "{found}");

    // A root the user puts inside the workspace (relative to the config file, whatever the
    // current directory): git and the workspace tools still never see it.
    let config = std::fs::read_to_string(dir.join("cordis.yml"))
        .unwrap()
        .replace(
            "- id: sessions\n  name: sessions\n",
            "- id: sessions\n  name: sessions\n  config: {root: .sessions}\n",
        );
    std::fs::write(dir.join("cordis.yml"), config).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let out = run(
        &dir.join("sub"),
        &["../cordis.yml", "--session", "h"],
        "find the needle\n",
        &[("CORDIS_WORKSPACE", dir.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        dir.join(".sessions/h.jsonl").exists(),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !dir.join(".sessions/h.lock").exists(),
        "the lock file stayed"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join(".sessions/.gitignore")).unwrap(),
        "# cordis session logs: ignored by git and by the workspace tools\n*\n"
    );
    let found = call("grep", r#"{"pattern": "needle"}"#);
    assert!(found.contains("notes.txt:1:"), "{found}");
    assert!(!found.contains(".sessions"), "{found}");
    let listed = call("list_files", "{}");
    assert!(listed.contains("notes.txt"), "{listed}");
    assert!(!listed.contains(".sessions"), "{listed}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_model_that_cannot_be_reached_is_one_warning_then_the_turns_error() {
    // Each retry used to print a WARN line of its own before the same error.
    let dir = fresh_dir("refused");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .args(["run", "--session", "r"])
        .current_dir(&dir)
        .env("CORDIS_LLM", "openai")
        .env("CORDIS_BASE_URL", "http://127.0.0.1:1")
        .env("DEEPSEEK_API_KEY", "not-a-key")
        .env_remove("RUST_LOG")
        // A proxy would answer for the closed port.
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("all_proxy")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hi\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("retrying").count(), 1, "{stderr}");
    assert!(
        stderr.contains("retrying (up to 3 more attempts)"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("cordis: error: turn 1 failed").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("(gave up after 4 attempts)"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clear_starts_a_new_session_and_resume_goes_back_showing_where_it_left_off() {
    let dir = fresh_dir("clear");
    let out = run(
        &dir,
        &["--session", "first"],
        "hello\n/clear\nsecond\n/resume\n/resume ../../first\n/resume first\nthird\n",
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let cleared = stderr
        .lines()
        .filter(|l| l.contains("(session first is saved"))
        .find_map(|l| l.strip_prefix("cordis: new session "))
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no new session line: {stderr}"))
        .to_owned();
    assert!(
        stderr.contains(&format!(
            "cordis: new session {cleared}, preset standard (session first is saved: /resume first)"
        )),
        "{stderr}"
    );
    // An id that is no file name is refused before any path is looked at.
    assert!(
        stderr.contains("cordis: invalid session id \"../../first\""),
        "{stderr}"
    );
    // `/resume` alone lists both; `/resume first` goes back and shows its last turn.
    let listing = &stderr[stderr.find("cordis: /resume ID continues one").unwrap_or(0)..];
    assert!(!listing.is_empty(), "{stderr}");
    assert!(
        stderr.contains("cordis: resuming session first, preset standard"),
        "{stderr}"
    );
    let shown = &stderr[stderr.find("where session first left off").expect(&stderr)..];
    assert!(shown.contains("> hello"), "{stderr}");
    assert!(!shown[..shown.find("(end of the earlier turns)").unwrap()].contains("second"));
    let messages = |id: &str| -> Vec<String> {
        std::fs::read_to_string(common::sessions_dir(&dir).join(format!("{id}.jsonl")))
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == "user/message")
            .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(messages("first"), ["hello", "third"]);
    assert_eq!(messages(&cleared), ["second"]);
    // The run ends on the session it is on.
    assert!(
        stderr.ends_with(
            "cordis: session first saved; continue it with: cordis run --resume first\n"
        ),
        "{stderr}"
    );
    // Resuming from the command line shows where it left off too; --quiet shows none of it.
    let again = run(&dir, &["--resume", "first"], "", &[]);
    let stderr = text(&again.stderr);
    assert!(stderr.contains("where session first left off"), "{stderr}");
    assert!(stderr.contains("> third"), "{stderr}");
    let quiet = run(&dir, &["--resume", "first", "--quiet"], "", &[]);
    let stderr = text(&quiet.stderr);
    assert!(
        !stderr.contains("left off") && !stderr.contains("resuming"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn an_argument_that_is_not_utf8_is_an_error_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let dir = fresh_dir("utf8");
    let name = std::ffi::OsStr::from_bytes(b"\xff.yml");
    let out = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .arg("run")
        .arg(name)
        .arg("--verbose")
        .current_dir(&dir)
        .env("XDG_STATE_HOME", dir.join(".state"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot read"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reasoning_goes_to_stderr_and_the_answer_alone_to_stdout() {
    let dir = std::env::temp_dir().join(format!("cordis-run-reasoning-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("cordis.yml"),
        "- id: system-prompt\n  name: system-prompt\n  config: {persona: \"Terse.\"}\n\
         - id: tools\n  name: tools\n\
         - id: llm\n  name: llm\n  config:\n    adapter: scripted\n    model: m\n    responses:\n      \
         - {reasoning: [\"First \", \"I think.\"], text: \"The answer.\"}\n\
         - id: sessions\n  name: sessions\n  config: {durability: none}\n\
         - id: agent-loop\n  name: agent-loop\n",
    )
    .unwrap();
    let out = run(&dir, &["--quiet"], "why?\n", &[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("The answer."), "{stdout}");
    assert!(!stdout.contains("I think"), "{stdout}");
    assert!(stderr.contains("First I think.\n"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 40, finding 11): piped lines read while a turn ran were queued up to 32 and
/// every later one dropped ("is dropped"), and the run still exited 0. Piped input is now read
/// when the agent is ready for it: every line reaches the model and the log, in order.
#[test]
fn every_piped_line_reaches_the_model_in_order_however_many_are_piped() {
    let dir = fresh_dir("piped-many");
    std::fs::write(
        dir.join("many.yml"),
        "- {id: system-prompt, name: system-prompt, config: {persona: P}}\n\
         - {id: tools, name: tools}\n\
         - {id: llm, name: llm, config: {adapter: scripted, model: m, repeat: true, responses: [{text: ok}]}}\n\
         - {id: sessions, name: sessions, config: {root: .sessions}}\n\
         - {id: agent-loop, name: agent-loop}\n",
    )
    .unwrap();
    let lines: Vec<String> = (1..=200).map(|i| format!("message {i}")).collect();
    let out = run(
        &dir,
        &["many.yml", "--session", "many"],
        &(lines.join("\n") + "\n"),
        &[],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("dropped"), "{stderr}");
    let sent: Vec<String> = common::log_events(&dir, "many")
        .iter()
        .filter(|e| e["type"] == "user/message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent, lines);
    assert_eq!(stdout.matches("> message ").count(), 200, "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cordis run ARGS` in `dir` with nothing on stdin: its exit code, stdout and stderr.
fn headless(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .env_remove("CORDIS_LLM")
        .env("RUST_LOG", "off")
        .arg("run")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_headless_task_prints_one_json_result_with_its_answer_usage_and_denied_calls() {
    let dir = fresh_dir("headless");
    let (code, stdout, stderr) =
        headless(&dir, &["-p", "show me the demo", "--output-format", "json"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "one object: {stdout}");
    let result: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(
        result["endReason"],
        serde_json::json!({"kind": "completed"})
    );
    assert!(
        result["answer"]
            .as_str()
            .unwrap()
            .starts_with("Noted. Every turn of this demo"),
        "{result}"
    );
    assert_eq!(result["usage"]["answers"], 6, "{result}");
    // Nobody to ask: the write and the command were denied, and the result says by what.
    let denied: Vec<(&str, &str)> = result["denied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["tool"].as_str().unwrap(), d["by"].as_str().unwrap()))
        .collect();
    assert_eq!(
        denied,
        [("write_file", "no-approver"), ("bash", "no-approver")],
        "{result}"
    );
    let session = result["sessionId"].as_str().unwrap();
    assert!(
        common::sessions_dir(&dir)
            .join(format!("{session}.jsonl"))
            .exists()
    );

    // stream-json: every line an object, the log's events in order, the result last.
    let (code, stdout, stderr) = headless(
        &dir,
        &["-p", "again", "--output-format", "stream-json", "--yes"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines[0]["type"], "turn/start");
    let seqs: Vec<u64> = lines[..lines.len() - 1]
        .iter()
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["status"], "completed");
    assert_eq!(
        last["denied"],
        serde_json::json!([]),
        "--yes allowed every call"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_headless_task_stopped_by_its_step_limit_exits_5_and_bad_arguments_exit_2() {
    let dir = fresh_dir("headless-limit");
    let bundled = std::fs::read_to_string(dir.join("cordis.yml")).unwrap();
    let limited = bundled.replacen("config: {maxSteps: 16}", "config: {maxSteps: 2}", 1);
    assert_ne!(limited, bundled, "the bundled agent-loop entry");
    std::fs::write(dir.join("cordis.yml"), limited).unwrap();
    let (code, stdout, stderr) = headless(&dir, &["-p", "go", "--output-format", "json"]);
    assert_eq!(code, Some(5), "{stderr}");
    let result: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["status"], "turn-limit", "{result}");
    assert_eq!(result["endReason"]["kind"], "max-steps", "{result}");

    let (code, _, stderr) = headless(&dir, &["-p", "  "]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--prompt is empty"), "{stderr}");
    let (code, _, stderr) = headless(&dir, &["--output-format", "json"]);
    assert_eq!(code, Some(2), "--output-format needs --prompt: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn max_turns_limits_a_headless_tasks_model_steps_and_exits_5() {
    // The bundled demo takes more than two steps (a write, an edit, a command, an answer).
    let dir = fresh_dir("headless-max-turns");
    let args = ["-p", "go", "--output-format", "json", "--yes"];
    let (code, stdout, stderr) = headless(&dir, &[&args[..], &["--max-turns", "2"]].concat());
    assert_eq!(code, Some(5), "{stderr}");
    let result: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["status"], "turn-limit", "{result}");
    assert_eq!(
        result["endReason"],
        serde_json::json!({"kind": "max-steps", "steps": 2}),
        "{result}"
    );
    // The file is left as it was; without the flag the same task completes.
    let bundled = std::fs::read_to_string(dir.join("cordis.yml")).unwrap();
    assert!(bundled.contains("config: {maxSteps: 16}"));
    let (code, stdout, stderr) = headless(&dir, &args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("\"status\":\"completed\""), "{stdout}");
    let (code, _, stderr) = headless(&dir, &["--max-turns", "2"]);
    assert_eq!(code, Some(2), "--max-turns needs --prompt: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
