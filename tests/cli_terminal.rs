//! `cordis run` and `cordis check` the way people use them: in a terminal, and with plugins that
//! log through the host from other threads. (Every other CLI test pipes stdin, which is how a
//! stderr lock held for a whole run once hid a prompt that never appeared.)
#![cfg(unix)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::log_events;
use common::pty::Pty;

/// Generous: these only guard against a hang; nothing here measures speed.
const LIMIT: Duration = Duration::from_secs(60);

fn fresh_dir(name: &str, config: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-term-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), config).unwrap();
    dir
}

fn cordis(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env("XDG_STATE_HOME", dir.join(".state"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("CORDIS_LLM")
        .env_remove("RUST_LOG")
        .env_remove("CORDIS_SEED");
    cmd
}

/// Runs a piped command with a deadline; returns (exit code, stdout, stderr).
fn piped(mut cmd: Command, input: &str) -> (Option<i32>, String, String) {
    use std::io::{Read, Write};
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + LIMIT;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = err_reader.join().unwrap();
            panic!("the command did not exit within {LIMIT:?}; stderr:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (code, out_reader.join().unwrap(), err_reader.join().unwrap())
}

#[test]
fn run_in_a_terminal_prompts_answers_and_ends_on_ctrl_d() {
    let dir = fresh_dir("tty", include_str!("../cordis.yml"));
    let mut term = Pty::spawn(cordis(&dir, &["run", "--session", "tty"]));
    term.wait_for("> ", LIMIT);
    term.send("hello\r");
    // The offline demo's real flow on its own scratch file: each change is asked first, the
    // edit with its diff at the real line and its context.
    term.wait_for("allow write_file? [y]es once", LIMIT);
    assert!(
        term.screen().contains("+Status: draft"),
        "{}",
        term.screen()
    );
    term.send("y");
    term.wait_for("allow edit_file? [y]es once", LIMIT);
    // The diff in its colours, once: in the question.
    assert!(
        without_sgr(&term.screen())
            .contains("@@ -1,3 +1,3 @@\r\n The offline demo wrote this file.\r\n-Status: draft\r\n+Status: final\r\n"),
        "{}",
        term.screen()
    );
    assert!(
        term.screen().contains("\x1b[32m+Status: final\x1b[0m"),
        "{}",
        term.screen()
    );
    term.send("y");
    term.wait_for("allow bash? [y]es once", LIMIT);
    term.send("y");
    // The demo's last step ends every turn; a footer says what it cost; then the prompt
    // comes back. The scratch file is gone again.
    term.wait_for("Noted.", LIMIT);
    assert!(term.screen().contains("Status: final"), "{}", term.screen());
    // The diffs asked about are not printed again under their calls: their size is.
    assert!(
        term.screen().contains("+3 −0 lines, as asked")
            && term.screen().contains("+1 −1 lines, as asked"),
        "{}",
        term.screen()
    );
    assert!(!dir.join("cordis-demo.txt").exists());
    term.wait_for(
        " s · 0 tokens in, 0 out · context 0 of 128000 tokens (0.0%)\r\n",
        LIMIT,
    );
    term.wait_for_count("> ", 2, LIMIT);
    term.send("\x04");
    let code = term.wait_exit(LIMIT);
    assert_eq!(code, Some(0), "screen:\n{}", term.screen());
    assert!(
        term.screen().contains("session tty saved"),
        "{}",
        term.screen()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctrl_c_on_a_typed_line_clears_it_and_on_an_empty_line_ends_the_run() {
    let dir = fresh_dir("clear", LOGGING);
    let mut term = Pty::spawn(cordis(&dir, &["run", "--session", "k"]));
    term.wait_for("> ", LIMIT);
    term.send("a draft I do not want");
    term.send("\x03");
    term.send("hello\r");
    term.wait_for("done", LIMIT);
    term.wait_for_count("> ", 2, LIMIT);
    // The cleared draft was never sent; the run goes on until Ctrl-C on the empty line.
    term.send("\x03");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let sent: Vec<String> = log_events(&dir, "k")
        .iter()
        .filter(|e| e["type"] == "user/message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent, ["hello"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A model whose answer is markdown, streamed in two pieces that split a line.
const MARKDOWN: &str = r##"
- {id: system-prompt, name: system-prompt}
- {id: tools, name: tools}
- id: llm
  name: llm
  config:
    adapter: scripted
    model: m
    repeat: true
    responses:
      - text: ["# Plan\n\nRun `cargo test` and **then**", " read it.\n\n- first step\n- second step\n\n```sh\ncargo test\n```\n"]
- {id: sessions, name: sessions, config: {root: .sessions}}
- {id: agent-loop, name: agent-loop}
"##;

#[test]
fn an_answer_is_rendered_as_markdown_at_a_terminal_and_plain_under_no_color() {
    let dir = fresh_dir("markdown", MARKDOWN);
    let mut term = Pty::spawn_sized(cordis(&dir, &["run", "--session", "md"]), 80);
    term.wait_for("> ", LIMIT);
    term.send("plan it\r");
    term.wait_for("╰─", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let screen = term.screen();
    // A heading without its `#`, inline code and bold styled, a bullet, the code framed.
    assert!(screen.contains("\x1b[1;4mPlan\x1b[0m\r\n"), "{screen:?}");
    assert!(!screen.contains("# Plan"), "{screen:?}");
    assert!(
        screen.contains("Run \x1b[36mcargo test\x1b[0m and \x1b[1mthen\x1b[0m read it."),
        "{screen:?}"
    );
    assert!(
        screen.contains("• first step\r\n• second step"),
        "{screen:?}"
    );
    assert!(
        screen.contains("╭─ sh\x1b[0m\r\n\x1b[2m│\x1b[0m cargo test\r\n"),
        "{screen:?}"
    );

    // The same answer plain: as the model wrote it.
    let mut plain = cordis(&dir, &["run", "--session", "md-plain"]);
    plain.env("NO_COLOR", "1");
    let mut term = Pty::spawn_sized(plain, 80);
    term.wait_for("> ", LIMIT);
    term.send("plan it\r");
    term.wait_for("```\r\n", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let screen = term.screen();
    assert!(
        screen.contains("# Plan\r\n\r\nRun `cargo test` and **then** read it.\r\n\r\n- first step\r\n- second step\r\n\r\n```sh\r\ncargo test\r\n```"),
        "{screen:?}"
    );
    assert!(!screen.contains("•"), "{screen:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

const LOGGING: &str = "\
- {id: system-prompt, name: system-prompt}
- {id: tools, name: tools}
- {id: chatty, name: debug/log, config: {level: warn}}
- id: llm
  name: llm
  config:
    adapter: scripted
    model: m
    repeat: true
    responses:
      - toolCalls: [{name: debug_log, arguments: {}}]
      - text: done
- {id: sessions, name: sessions, config: {root: .sessions}}
- {id: agent-loop, name: agent-loop}
";

#[test]
fn check_with_a_plugin_that_logs_at_warn_from_create_exits() {
    let dir = fresh_dir("log-check", LOGGING);
    let (code, out, err) = piped(cordis(&dir, &["check", "--seed", "1"]), "");
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("\"chatty\" applying"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_with_a_tool_that_logs_at_warn_answers_and_exits() {
    let dir = fresh_dir("log-run", LOGGING);
    let (code, out, err) = piped(cordis(&dir, &["run", "--session", "s"]), "go\n");
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("⏺ debug_log {}\n  ⎿ "), "{out}");
    assert!(out.contains("done"), "{out}");
    assert!(err.contains("\"chatty\" called"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_in_a_terminal_with_a_logging_tool_keeps_answering() {
    let dir = fresh_dir("log-tty", LOGGING);
    let mut term = Pty::spawn(cordis(&dir, &["run", "--session", "s"]));
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    term.wait_for("done", LIMIT);
    term.wait_for("\"chatty\" called", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A composition whose model runs `bash` commands (policy `ask` when `ask` is set), then answers.
fn shell_agent(responses: &str, ask: bool) -> String {
    let approvals = if ask {
        "- {id: approvals, name: approvals, config: {tools: {bash: ask}}}\n"
    } else {
        ""
    };
    format!(
        "\
- {{id: system-prompt, name: system-prompt}}
- {{id: tools, name: tools}}
- id: llm
  name: llm
  config:
    adapter: scripted
    model: m
    responses:
{responses}- {{id: sessions, name: sessions, config: {{root: .sessions}}}}
- {{id: agent-loop, name: agent-loop}}
- {{id: workspace, name: workspace, config: {{root: .}}}}
- {{id: shell, name: tool-shell, config: {{env: [PATH, HOME]}}}}
{approvals}"
    )
}

/// The pid a command wrote to `file` (`echo $$ > file; exec sleep …`), once it has.
fn pid_in(file: &Path) -> u32 {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until process `pid` is gone (a zombie counts as gone: it runs nothing).
fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.is_empty() || state.contains(") Z ") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn ctrl_c_cancels_the_turn_and_its_command_the_session_goes_on_and_twice_exits() {
    // Ctrl-C used to kill cordis (exit 130) and leave the command running.
    let responses = concat!(
        "      - toolCalls: [{name: bash, arguments: {command: 'echo $$ > one.pid; exec sleep 30'}}]\n",
        "      - text: Second turn answered.\n",
        "      - toolCalls: [{name: bash, arguments: {command: 'echo $$ > two.pid; exec sleep 30'}}]\n",
    );
    let dir = fresh_dir("cancel", &shell_agent(responses, false));
    let mut term = Pty::spawn_controlling(cordis(&dir, &["run", "--session", "c"]));
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    let first = pid_in(&dir.join("one.pid"));
    term.send("\x03");
    term.wait_for("cordis: cancelling the turn (Ctrl-C again to exit)", LIMIT);
    assert!(gone(first), "the command outlived its cancelled turn");
    term.wait_for_count("> ", 2, LIMIT);
    term.send("again\r");
    term.wait_for("Second turn answered.", LIMIT);
    term.wait_for_count("> ", 3, LIMIT);
    term.send("third\r");
    let second = pid_in(&dir.join("two.pid"));
    // Twice: the turn is cancelled and the run ends (the second lands while the cancelled turn
    // winds down, or at the prompt after it; signals sent at once would merge into one).
    term.send("\x03");
    term.wait_for_count("cancelling the turn", 2, LIMIT);
    term.send("\x03");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    assert!(gone(second), "the command outlived cordis");
    assert!(
        term.screen()
            .contains("session c saved; continue it with: cordis run --resume c"),
        "{}",
        term.screen()
    );
    // Two turns cancelled by the person: neither is a failure.
    assert!(!term.screen().contains("failed"), "{}", term.screen());
    let events = log_events(&dir, "c");
    let ends: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| &e["data"]["reason"])
        .collect();
    assert_eq!(
        ends[..2],
        [
            &serde_json::json!({"kind": "aborted", "reason": "cancelled by the user (Ctrl-C)"}),
            &serde_json::json!({"kind": "completed"}),
        ]
    );
    assert_eq!(ends.len(), 3);
    assert_eq!(ends[2]["kind"], "aborted");
    assert!(
        ends[2]["reason"]
            .as_str()
            .unwrap()
            .starts_with("cancelled by the user (Ctrl-C"),
        "{ends:?}"
    );
    let starts = events.iter().filter(|e| e["type"] == "turn/start").count();
    assert_eq!(starts, 3, "every turn is closed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn closing_the_terminal_mid_turn_ends_the_turn_in_the_log_and_leaves_no_lock() {
    // The window closed under a running turn: SIGHUP, and every later write fails (EIO). The
    // turn used to stay open in the log, its lock file behind.
    let responses = "      - toolCalls: [{name: bash, arguments: {command: 'echo $$ > one.pid; exec sleep 30'}}]\n";
    let dir = fresh_dir("hangup", &shell_agent(responses, false));
    let mut term = Pty::spawn_controlling(cordis(&dir, &["run", "--session", "h"]));
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    let command = pid_in(&dir.join("one.pid"));
    term.hang_up();
    let _ = term.wait_exit(LIMIT);
    assert!(gone(command), "the command outlived its terminal");
    let events = log_events(&dir, "h");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "turn/end", "{events:?}");
    assert_eq!(last["data"]["reason"]["kind"], "aborted", "{last}");
    assert!(
        !dir.join(".sessions/h.lock").exists(),
        "the lock file stayed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_running_commands_output_shows_live_before_it_ends_and_its_last_line_after() {
    // Three seconds of output, a line a second; the result's card shows the last line too.
    let responses = concat!(
        "      - toolCalls: [{name: bash, arguments: {command: 'for i in 1 2 3; do echo step $i; sleep 1; done; echo all done'}}]\n",
        "      - text: Ran it.\n",
    );
    let dir = fresh_dir("live", &shell_agent(responses, false));
    let mut term = Pty::spawn_sized(cordis(&dir, &["run", "--session", "l"]), 100);
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    term.wait_for("· step 1", LIMIT);
    let logged = std::fs::read_to_string(dir.join(".sessions/l.jsonl")).unwrap();
    assert!(
        !logged.contains(r#""type":"tool/result""#),
        "the output showed only after the command ended"
    );
    term.wait_for("Ran it.", LIMIT);
    let screen = term.screen();
    let (live, result) = (
        screen.find("· step 1").unwrap(),
        screen.find("  ⎿ ").unwrap(),
    );
    assert!(live < result, "{screen:?}");
    assert!(screen[result..].contains("all done"), "{screen:?}");
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_ends_the_run_cleanly_and_kills_what_the_turn_started() {
    let responses = "      - toolCalls: [{name: bash, arguments: {command: 'echo $$ > one.pid; exec sleep 30'}}]\n";
    let dir = fresh_dir("sigterm", &shell_agent(responses, false));
    let mut term = Pty::spawn_controlling(cordis(&dir, &["run", "--session", "t"]));
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    let command = pid_in(&dir.join("one.pid"));
    let killed = Command::new("kill")
        .args(["-TERM", &term.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    assert!(gone(command), "the command outlived cordis");
    assert!(
        term.screen().contains("cordis run --resume t"),
        "{}",
        term.screen()
    );
    let events = log_events(&dir, "t");
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn/end")
        .unwrap();
    assert_eq!(
        end["data"]["reason"],
        serde_json::json!({"kind": "aborted", "reason": "cordis was asked to exit"})
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_key_typed_ahead_never_answers_and_always_grants_the_parsed_command_for_the_session_and_its_resume()
 {
    // A `y` typed while the model streamed used to approve a command nobody had seen. And `a`
    // grants the command's program and subcommand (`git status`), never all of bash.
    let responses = concat!(
        "      - {text: [Thinking, ' hard.'], delayMs: 600, toolCalls: [{name: bash, arguments: {command: git status}}]}\n",
        "      - text: First turn over.\n",
        "      - toolCalls: [{name: bash, arguments: {command: git status}}]\n",
        "      - toolCalls: [{name: bash, arguments: {command: git status --short; touch granted.txt}}]\n",
        "      - toolCalls: [{name: bash, arguments: {command: git -C . status}}]\n",
        "      - toolCalls: [{name: bash, arguments: {command: git push}}]\n",
        "      - text: Second turn over.\n",
    );
    let dir = fresh_dir("typed-ahead", &shell_agent(responses, true));
    let mut term = Pty::spawn_controlling(cordis(&dir, &["run", "--session", "a"]));
    let status = "allow bash? [y]es once, [a]lways `git status` this session (read-only), [N]o (or type why not)";
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    term.wait_for("Thinking", LIMIT);
    term.send("y\r");
    term.wait_for(
        "\"y\" was typed while the agent worked: kept as your next message",
        LIMIT,
    );
    term.wait_for(status, LIMIT);
    // Enter is no.
    term.send("\r");
    term.wait_for("First turn over.", LIMIT);
    // The kept `y` is the next message; its turn asks again, and `a` grants `git status`.
    term.wait_for("> y", LIMIT);
    let screen = term.screen();
    let asked_before = screen[..screen.find("> y").unwrap()]
        .matches(status)
        .count();
    term.wait_for_count(status, asked_before + 1, LIMIT);
    term.send("a");
    // `git status --short; touch …` is not all `git status`: it asks (for `touch`).
    term.wait_for("[a]lways `touch granted.txt` this session", LIMIT);
    term.send("y");
    // `git -C . status` is `git` with an option before `status`: a grant matches exact
    // leading words only, so it asks (and would grant only that whole command); then
    // `git push` asks.
    term.wait_for("[a]lways `git -C . status` this session", LIMIT);
    term.send("n");
    term.wait_for("[a]lways `git push` this session", LIMIT);
    term.send("n");
    term.wait_for("Second turn over.", LIMIT);
    assert!(dir.join("granted.txt").exists());
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let decisions: Vec<(bool, String, Vec<serde_json::Value>)> = log_events(&dir, "a")
        .iter()
        .filter(|e| e["type"] == "tool/approval")
        .map(|e| {
            (
                e["data"]["allowed"].as_bool().unwrap(),
                e["data"]["by"].as_str().unwrap().to_owned(),
                e["data"]["grants"].as_array().cloned().unwrap_or_default(),
            )
        })
        .collect();
    let grant = serde_json::json!({"tool": "bash", "command": "git status"});
    assert_eq!(
        decisions,
        [
            (false, "approver".to_owned(), vec![]),
            (true, "approver-always".to_owned(), vec![grant]),
            (true, "approver".to_owned(), vec![]),
            (false, "approver".to_owned(), vec![]),
            (false, "approver".to_owned(), vec![]),
        ]
    );

    // The grant is in the log: the resumed session runs `git status` without asking.
    let mut term = Pty::spawn_controlling(cordis(&dir, &["run", "--resume", "a"]));
    term.wait_for("> ", LIMIT);
    let shown = term.screen().matches("First turn over.").count();
    term.send("go\r");
    term.wait_for_count("First turn over.", shown + 1, LIMIT);
    assert!(!term.screen().contains(status), "{}", term.screen());
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let last = log_events(&dir, "a")
        .into_iter()
        .rfind(|e| e["type"] == "tool/approval")
        .unwrap();
    assert_eq!(last["data"]["by"], "grant", "{last}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether `screen` holds a colour or style sequence (`ESC [ params m`).
/// `screen` without its colours (SGR sequences, `ESC [ … m`).
fn without_sgr(screen: &str) -> String {
    let mut out = String::with_capacity(screen.len());
    let mut rest = screen;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let params = after
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(after.len());
        if after[params..].starts_with('m') {
            rest = &after[params + 1..];
        } else {
            out.push_str("\x1b[");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn has_sgr(screen: &str) -> bool {
    screen.split("\x1b[").skip(1).any(|rest| {
        let params = rest.find(|c: char| !(c.is_ascii_digit() || c == ';'));
        params.is_some_and(|end| rest[end..].starts_with('m'))
    })
}

#[test]
fn a_terminal_transcript_is_coloured_unless_no_color_or_color_never() {
    let dir = fresh_dir("colour", include_str!("../cordis.yml"));
    for (env, args, coloured) in [
        (None, &["run", "--yes", "--session", "c1"][..], true),
        (Some("1"), &["run", "--yes", "--session", "c2"][..], false),
        (
            None,
            &["run", "--yes", "--session", "c3", "--color", "never"][..],
            false,
        ),
    ] {
        let mut cmd = cordis(&dir, args);
        match env {
            Some(v) => cmd.env("NO_COLOR", v),
            None => cmd.env_remove("NO_COLOR"),
        };
        let mut term = Pty::spawn(cmd);
        term.wait_for("> ", LIMIT);
        term.send("hello\r");
        term.wait_for("Noted.", LIMIT);
        term.send("\x04");
        assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
        // Colour is SGR (`ESC [ … m`); the line editor's cursor controls are not colour.
        assert_eq!(
            has_sgr(&term.screen()),
            coloured,
            "NO_COLOR={env:?} {args:?}: {:?}",
            term.screen()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The user messages of a session's log, in order.
fn user_messages(dir: &Path, session: &str) -> Vec<String> {
    log_events(dir, session)
        .iter()
        .filter(|e| e["type"] == "user/message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_line_editor_recalls_messages_keeps_half_typed_text_and_esc_cancels_a_turn() {
    let responses = concat!(
        "      - text: First answer.\n",
        "      - text: Recalled answer.\n",
        "      - toolCalls: [{name: bash, arguments: {command: 'echo $$ > one.pid; exec sleep 30'}}]\n",
        "      - text: After the cancel.\n",
    );
    let dir = fresh_dir("editor", &shell_agent(responses, false));
    let mut term = Pty::spawn_controlling(cordis(&dir, &["run", "--session", "e"]));
    term.wait_for("> ", LIMIT);
    term.send("first\r");
    term.wait_for("First answer.", LIMIT);
    term.wait_for_count("> ", 2, LIMIT);
    // Arrow-up recalls the last message.
    term.send("\x1b[A");
    term.send("\r");
    term.wait_for("Recalled answer.", LIMIT);
    term.wait_for_count("> ", 3, LIMIT);
    term.send("sleep\r");
    let command = pid_in(&dir.join("one.pid"));
    // Typed while the turn runs, without Enter: waits in the editor for the next prompt. An
    // arrow key meanwhile is neither text nor a cancel; Esc alone cancels the turn.
    term.send("half");
    term.send("\x1b[D");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!term.screen().contains("cancelling"), "{}", term.screen());
    term.send("\x1b");
    term.wait_for("cordis: cancelling the turn (Esc)", LIMIT);
    assert!(gone(command), "the command outlived its cancelled turn");
    term.wait_for_count("> ", 4, LIMIT);
    term.send(" done\r");
    term.wait_for("After the cancel.", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    assert_eq!(
        user_messages(&dir, "e"),
        ["first", "first", "sleep", "half done"]
    );
    let ends: Vec<serde_json::Value> = log_events(&dir, "e")
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"].clone())
        .collect();
    assert_eq!(
        ends[2],
        serde_json::json!({"kind": "aborted", "reason": "cancelled by the user (Esc)"})
    );
    assert_eq!(ends.len(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_question_takes_one_key_and_any_other_text_is_the_reason_for_no() {
    let responses = concat!(
        "      - toolCalls: [{name: bash, arguments: {command: touch one.txt}}]\n",
        "      - toolCalls: [{name: bash, arguments: {command: touch two.txt}}]\n",
        "      - toolCalls: [{name: bash, arguments: {command: touch three.txt}}]\n",
        "      - text: All asked.\n",
    );
    let dir = fresh_dir("keys", &shell_agent(responses, true));
    let mut term = Pty::spawn_controlling(cordis(&dir, &["run", "--session", "k"]));
    let question = "allow bash? [y]es once";
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    // One key, no Enter: `n` is no.
    term.wait_for_count(question, 1, LIMIT);
    term.send("n");
    // Any other text starts the reason the model is told.
    term.wait_for_count(question, 2, LIMIT);
    term.send("use rg instead\r");
    // `y` once; typing the whole word and Enter is the same answer, not a next message.
    term.wait_for_count(question, 3, LIMIT);
    term.send("yes\r");
    term.wait_for("All asked.", LIMIT);
    term.wait_for_count("> ", 2, LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    assert!(!dir.join("one.txt").exists() && !dir.join("two.txt").exists());
    assert!(dir.join("three.txt").exists());
    let results: Vec<String> = log_events(&dir, "k")
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| e["data"]["content"].to_string())
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[0].contains("the user said no"), "{results:?}");
    assert!(
        results[1].contains("the user said no: use rg instead"),
        "{results:?}"
    );
    assert_eq!(user_messages(&dir, "k"), ["go"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctrl_d_typed_while_a_turn_runs_ends_the_run_after_it() {
    // Ignored while the turn ran, it used to leave the next prompt waiting for ever.
    let responses = "      - {text: [Working, ' on it.'], delayMs: 600}\n";
    let dir = fresh_dir("ctrl-d-ahead", &shell_agent(responses, false));
    let mut term = Pty::spawn_controlling(cordis(&dir, &["run", "--session", "d"]));
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    term.wait_for("Working", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    assert!(
        term.screen().contains("Working on it."),
        "{}",
        term.screen()
    );
    assert!(
        term.screen().contains("session d saved"),
        "{}",
        term.screen()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A composition whose model writes `notes.txt` over the file that is there (`write_file`
/// asks), then answers.
const WRITE_AGENT: &str = "\
- {id: system-prompt, name: system-prompt}
- {id: tools, name: tools}
- id: llm
  name: llm
  config:
    adapter: scripted
    model: m
    responses:
      - toolCalls: [{name: write_file, arguments: {path: notes.txt, content: \"keep\\nnew line\\n\"}}]
      - text: Written.
- {id: sessions, name: sessions, config: {root: .sessions}}
- {id: agent-loop, name: agent-loop}
- {id: workspace, name: workspace, config: {root: .}}
- {id: fs, name: tool-fs}
- {id: approvals, name: approvals}
- {id: presenter, name: presenter}
";

#[test]
fn a_write_over_a_file_asks_with_what_it_replaces_and_a_change_while_asked_is_kept() {
    // The card used to show the file as new (`--- /dev/null`, only `+` lines), and a change
    // made while the question was open was overwritten.
    let dir = fresh_dir("write-over", WRITE_AGENT);
    std::fs::write(dir.join("notes.txt"), "keep\nold line\n").unwrap();
    let mut term = Pty::spawn(cordis(&dir, &["run", "--session", "w"]));
    term.wait_for("> ", LIMIT);
    term.send("write the notes\r");
    term.wait_for("allow write_file? [y]es once", LIMIT);
    let screen = without_sgr(&term.screen());
    assert!(
        screen.contains("--- a/notes.txt\r\n+++ b/notes.txt\r\n@@ -1,2 +1,2 @@\r\n keep\r\n-old line\r\n+new line\r\n"),
        "{screen}"
    );
    assert!(!screen.contains("/dev/null"), "{screen}");
    // Someone changes the file while the question is open; the yes that follows writes nothing.
    std::fs::write(dir.join("notes.txt"), "someone else's text\n").unwrap();
    term.send("y");
    term.wait_for("Written.", LIMIT);
    assert!(
        term.screen()
            .contains("\"notes.txt\" changed after the write was shown for approval"),
        "{}",
        term.screen()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "someone else's text\n"
    );
    term.wait_for_count("> ", 2, LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A model that answers every message the same (for sessions made to be picked).
const ECHOING: &str = "\
- {id: system-prompt, name: system-prompt}
- {id: tools, name: tools}
- id: llm
  name: llm
  config: {adapter: scripted, model: m, repeat: true, responses: [{text: Noted.}]}
- {id: sessions, name: sessions, config: {root: .sessions}}
- {id: agent-loop, name: agent-loop}
";

#[test]
fn the_session_picker_resumes_the_second_newest_at_start_and_with_slash_resume() {
    let dir = fresh_dir("picker", ECHOING);
    for (id, first) in [("s1", "first"), ("s2", "second"), ("s3", "third")] {
        let (code, out, err) = piped(
            cordis(&dir, &["run", "--session", id]),
            &format!("{first}\n"),
        );
        assert_eq!(code, Some(0), "{out}{err}");
        // Newest first is by the time a log was written: one apart.
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut term = Pty::spawn_sized(cordis(&dir, &["run", "--resume"]), 100);
    term.wait_for("resume which session?", LIMIT);
    term.wait_for("(s1)", LIMIT);
    let screen = term.screen();
    let (third, second, first) = (
        screen.find("third").unwrap(),
        screen.find("second").unwrap(),
        screen.find("first  (s1)").unwrap(),
    );
    assert!(third < second && second < first, "{screen:?}");
    // The newest is selected; ↓ moves to the second-newest, Enter resumes it.
    assert!(screen.contains("❯ just now    third  (s3)"), "{screen:?}");
    term.send("\x1b[B");
    term.wait_for("❯ just now    second  (s2)", LIMIT);
    term.send("\r");
    term.wait_for("resuming session s2", LIMIT);
    // Its last turn is shown (`> second`), then the prompt.
    term.wait_for("(end of the earlier turns)", LIMIT);
    term.wait_for_count("> ", 2, LIMIT);
    // `/resume` in the run: the same picker (the title was drawn twice above: at first and
    // after ↓); ↓↓ Enter is the oldest.
    term.send("/resume\r");
    term.wait_for_count("resume which session?", 3, LIMIT);
    term.send("\x1b[B");
    term.send("\x1b[B");
    term.send("\r");
    term.wait_for("resuming session s1", LIMIT);
    term.wait_for("(session s2 is saved: /resume s2)", LIMIT);
    // Esc leaves it, staying on the session.
    term.send("/resume\r");
    term.wait_for_count("resume which session?", 6, LIMIT);
    term.send("\x1b");
    term.wait_for("no session chosen; staying on this one", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    assert!(
        term.screen().contains("session s1 saved"),
        "{}",
        term.screen()
    );

    // Piped, a bare --resume lists them (no picker) and exits 2.
    let (code, out, _) = piped(cordis(&dir, &["run", "--resume"]), "");
    assert_eq!(code, Some(2));
    assert!(out.contains("s2") && !out.contains("resume which"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn expand_shows_a_calls_whole_output_through_the_pager_or_printed_when_piped() {
    let responses = concat!(
        "      - toolCalls: [{name: bash, arguments: {command: 'seq 1 30'}}]\n",
        "      - text: Counted.\n",
    );
    let dir = fresh_dir("expand", &shell_agent(responses, false));
    let mut cmd = cordis(&dir, &["run", "--session", "x"]);
    cmd.env("PAGER", "cat > paged.txt");
    let mut term = Pty::spawn_sized(cmd, 100);
    term.wait_for("> ", LIMIT);
    term.send("go\r");
    term.wait_for("/expand 1 shows the whole output", LIMIT);
    term.wait_for("Counted.", LIMIT);
    // The card leaves the middle out; the pager gets all of it.
    assert!(
        !without_sgr(&term.screen()).contains("\r\n  15\r\n"),
        "{}",
        term.screen()
    );
    term.wait_for_count("> ", 2, LIMIT);
    term.send("/expand 1\r");
    let deadline = Instant::now() + LIMIT;
    let want: String = (1..=30).map(|i| format!("{i}\n")).collect();
    while std::fs::read_to_string(dir.join("paged.txt")).unwrap_or_default() != want {
        assert!(Instant::now() < deadline, "the pager never got the output");
        std::thread::sleep(Duration::from_millis(20));
    }
    term.wait_for_count("> ", 3, LIMIT);
    term.send("/expand 2\r");
    term.wait_for("/expand N takes a call's number, 1 to 1", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());

    // Piped: printed on stdout.
    let (code, out, err) = piped(cordis(&dir, &["run", "--resume", "x"]), "/expand\n");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&format!("> /expand\ncall 1 (bash), whole output:\n{want}")),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A model whose answer holds fenced Rust, YAML and an unknown language.
const CODE: &str = r##"
- {id: system-prompt, name: system-prompt}
- {id: tools, name: tools}
- id: llm
  name: llm
  config:
    adapter: scripted
    model: m
    repeat: true
    responses:
      - text: ["```rust\nfn main() { let n = 42; } // start\n```\n", "```yaml\nname: \"x\"\n```\n```cobol\nDISPLAY 'HI'.\n```\n"]
- {id: sessions, name: sessions, config: {root: .sessions}}
- {id: agent-loop, name: agent-loop}
"##;

#[test]
fn fenced_code_is_highlighted_by_its_language_and_plain_under_no_color() {
    let dir = fresh_dir("highlight", CODE);
    let mut term = Pty::spawn_sized(cordis(&dir, &["run", "--session", "hl"]), 80);
    term.wait_for("> ", LIMIT);
    term.send("show code\r");
    term.wait_for("DISPLAY", LIMIT);
    term.wait_for_count("╰─", 3, LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let screen = term.screen();
    let bar = "\x1b[2m│\x1b[0m ";
    // Keywords magenta, numbers yellow, comments dim, keys blue, strings green; a language
    // the highlighter does not know in one colour.
    assert!(
        screen.contains(&format!(
            "{bar}\x1b[35mfn\x1b[0m main() {{ \x1b[35mlet\x1b[0m n = \x1b[33m42\x1b[0m; }} \x1b[2m// start\x1b[0m\r\n"
        )),
        "{screen:?}"
    );
    assert!(
        screen.contains(&format!(
            "{bar}\x1b[34mname\x1b[0m: \x1b[32m\"x\"\x1b[0m\r\n"
        )),
        "{screen:?}"
    );
    assert!(
        screen.contains(&format!("{bar}\x1b[36mDISPLAY 'HI'.\x1b[0m\r\n")),
        "{screen:?}"
    );

    let mut plain = cordis(&dir, &["run", "--session", "hl-plain"]);
    plain.env("NO_COLOR", "1");
    let mut term = Pty::spawn_sized(plain, 80);
    term.wait_for("> ", LIMIT);
    term.send("show code\r");
    term.wait_for("DISPLAY 'HI'.\r\n```", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let screen = term.screen();
    assert!(
        screen.contains("```rust\r\nfn main() { let n = 42; } // start\r\n```"),
        "{screen:?}"
    );
    assert!(!has_sgr(&screen), "{screen:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
