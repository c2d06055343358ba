//! Trusting a workspace's hooks and `/init`: at a terminal `cordis run` asks once whether to
//! trust the hooks of the workspace's own `cordis.yml` and remembers a yes; `cordis acp
//! --trust` trusts as `cordis run --trust` does; `/init` shows the starter `AGENTS.md` it
//! would write, writes it with `--yes`, and refuses when one exists.
#![cfg(unix)]

use crate::common;
use crate::common::pty::Pty;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::hooks::config;

fn workspace(name: &str, responses: &str, extra: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-trust-init-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::write(dir.join("cordis.yml"), config(responses, extra)).unwrap();
    dir
}

/// `(hook, decision)` of every `hook/run` in session `id`'s log, in log order.
fn decisions(dir: &Path, id: &str) -> Vec<(String, String)> {
    std::fs::read_to_string(common::sessions_dir(dir).join(format!("{id}.jsonl")))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "hook/run")
        .map(|e| {
            (
                e["data"]["hook"].as_str().unwrap().to_owned(),
                e["data"]["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

const BASH_WRITES: &str = r#"      - toolCalls: [{name: bash, arguments: {command: "echo hi > out.txt"}}]
      - text: "all done"
"#;

const BLOCK_BASH: &str = r#"- id: guard
  name: hooks
  config:
    hooks:
      PreToolUse:
        - matcher: bash
          hooks: [{type: command, command: "sh hooks/guard.sh"}]
"#;

/// `cordis run --session ID --yes` in `dir` on a pseudo-terminal.
fn at_terminal(dir: &Path, session: &str) -> Pty {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.args(["run", "--session", session, "--yes"])
        .current_dir(dir)
        .env("XDG_STATE_HOME", common::state_home(dir))
        .env_remove("CORDIS_LLM")
        .env_remove("CORDIS_WORKSPACE")
        .env("RUST_LOG", "off");
    Pty::spawn(cmd)
}

const QUESTION: &str = "Trust this workspace's hooks?";

#[test]
fn at_a_terminal_the_workspace_hooks_are_asked_about_once_and_a_yes_is_remembered() {
    let dir = workspace("tty", BASH_WRITES, BLOCK_BASH);
    std::fs::write(
        dir.join("hooks/guard.sh"),
        "cat > /dev/null\necho 'no shell writes today' >&2\nexit 2\n",
    )
    .unwrap();
    let limit = Duration::from_secs(60);

    // No: the hook does not run, and the command goes through.
    let mut term = at_terminal(&dir, "no");
    term.wait_for(QUESTION, limit);
    assert!(term.screen().contains("guard"), "{}", term.screen());
    term.send("n\r");
    term.wait_for("this workspace's hooks do not run", limit);
    term.send("go\r");
    term.wait_for("all done", limit);
    term.send("\x04");
    assert_eq!(term.wait_exit(limit), Some(0), "{}", term.screen());
    assert!(dir.join("out.txt").exists());
    assert_eq!(
        decisions(&dir, "no"),
        [("guard#0.0".into(), "untrusted".into())]
    );
    std::fs::remove_file(dir.join("out.txt")).unwrap();

    // Yes: the hook blocks the command.
    let mut term = at_terminal(&dir, "yes");
    term.wait_for(QUESTION, limit);
    term.send("y\r");
    term.wait_for("trusted (remembered)", limit);
    term.send("go\r");
    term.wait_for("all done", limit);
    term.send("\x04");
    assert_eq!(term.wait_exit(limit), Some(0), "{}", term.screen());
    assert!(!dir.join("out.txt").exists());
    assert_eq!(
        decisions(&dir, "yes"),
        [("guard#0.0".into(), "block".into())]
    );

    // Remembered: the next terminal run does not ask, and a piped run trusts it too.
    let mut term = at_terminal(&dir, "again");
    term.wait_for("> ", limit);
    term.send("\x04");
    assert_eq!(term.wait_exit(limit), Some(0), "{}", term.screen());
    assert!(!term.screen().contains(QUESTION), "{}", term.screen());
    let (code, out, err) = common::piped(&dir, &["run", "--session", "piped", "--yes"], "go\n");
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert!(!err.contains(QUESTION), "{err}");
    assert_eq!(
        decisions(&dir, "piped"),
        [("guard#0.0".into(), "block".into())]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_piped_run_does_not_ask_and_refuses_untrusted_hooks() {
    let dir = workspace("piped", BASH_WRITES, BLOCK_BASH);
    std::fs::write(dir.join("hooks/guard.sh"), "cat > /dev/null\nexit 2\n").unwrap();
    let (code, out, err) = common::piped(&dir, &["run", "--session", "p", "--yes"], "go\n");
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert!(!err.contains(QUESTION), "{err}");
    assert_eq!(
        decisions(&dir, "p"),
        [("guard#0.0".into(), "untrusted".into())]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cordis acp cordis.yml [--trust]` in `dir`: one session, one prompt; the session's id.
fn acp_prompt(dir: &Path, trust: bool) -> String {
    use std::io::Write as _;
    let mut args = vec!["acp", "cordis.yml"];
    if trust {
        args.push("--trust");
    }
    let mut child = common::cordis_command(dir, &args).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = common::lines(child.stdout.take().unwrap());
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let m = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{m}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let got: Value = serde_json::from_str(&line).unwrap();
            if got.get("method").is_none() && got["id"] == json!(id) {
                return got;
            }
        }
    };
    ask(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let new = ask(2, "session/new", json!({"cwd": dir, "mcpServers": []}));
    let id = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let said = ask(
        3,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "hello"}]}),
    );
    assert_eq!(said["result"]["stopReason"], "end_turn", "{said}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    id
}

#[test]
fn acp_trust_runs_the_workspace_hooks_and_remembers_the_directory() {
    let responses =
        "      - text: \"hi\"\n      - text: \"hi again\"\n      - text: \"and again\"\n";
    let hooks = r#"- id: context
  name: hooks
  config:
    hooks:
      UserPromptSubmit:
        - hooks: [{type: command, command: "cat > /dev/null; echo 'branch: main'"}]
"#;
    let dir = workspace("acp", responses, hooks);
    let untrusted = acp_prompt(&dir, false);
    assert_eq!(
        decisions(&dir, &untrusted),
        [("context#0.0".into(), "untrusted".into())]
    );
    let trusted = acp_prompt(&dir, true);
    assert_eq!(
        decisions(&dir, &trusted),
        [("context#0.0".into(), "continue".into())]
    );
    let remembered = acp_prompt(&dir, false);
    assert_eq!(
        decisions(&dir, &remembered),
        [("context#0.0".into(), "continue".into())]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn init_shows_the_starter_piped_writes_it_with_yes_and_never_over_one() {
    let dir = workspace("init", "      - text: \"hi\"\n", "");
    std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"demo\"\n").unwrap();
    let agents = dir.join("AGENTS.md");

    let (code, out, err) = common::piped(&dir, &["run", "--session", "shown"], "/init\n");
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert!(err.contains("/init would write"), "{err}");
    assert!(err.contains("A Rust crate, `demo` (Cargo.toml)"), "{err}");
    assert!(err.contains("- Test: `cargo test`"), "{err}");
    assert!(err.contains("not written: without a terminal"), "{err}");
    assert!(!agents.exists());

    let (code, out, err) =
        common::piped(&dir, &["run", "--session", "written", "--yes"], "/init\n");
    assert_eq!(code, Some(0), "{err}\n{out}");
    let text = std::fs::read_to_string(&agents).unwrap();
    assert!(text.starts_with("# AGENTS.md\n"), "{text}");
    assert!(
        text.contains("`Cargo.toml`, `cordis.yml`, `hooks/`"),
        "{text}"
    );
    assert!(text.contains("- Test: `cargo test`"), "{text}");
    assert!(err.contains("cordis: wrote"), "{err}");

    std::fs::write(&agents, "# mine\n").unwrap();
    let (code, out, err) = common::piped(&dir, &["run", "--session", "again", "--yes"], "/init\n");
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert!(
        err.contains("AGENTS.md exists; /init writes only a new one"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&agents).unwrap(), "# mine\n");
    let _ = std::fs::remove_dir_all(&dir);
}
