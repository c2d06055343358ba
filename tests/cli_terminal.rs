//! `cordis run` and `cordis check` the way people use them: in a terminal, and with plugins that
//! log through the host from other threads. (Every other CLI test pipes stdin, which is how a
//! stderr lock held for a whole run once hid a prompt that never appeared.)
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    // The demo's second step ends every turn; then the prompt comes back.
    term.wait_for("Noted.", LIMIT);
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
    assert!(out.contains("[result debug_log]"), "{out}");
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
