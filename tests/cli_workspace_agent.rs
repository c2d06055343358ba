//! The bundled agent acting on a workspace through `cordis run`: it reads a file, edits it and
//! runs a command to check it, with approvals, and the transcript and session log show it.
#![cfg(unix)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::pty::Pty;

/// The bundled composition with the demo responses replaced by `responses` (YAML).
fn config(responses: &str) -> String {
    let bundled = include_str!("../cordis.yml");
    let start = bundled
        .find("    repeat: true\n")
        .expect("the demo's responses");
    let end = bundled
        .find("\n- id: sessions")
        .expect("the sessions entry");
    format!(
        "{}    responses:\n{responses}{}",
        &bundled[..start],
        &bundled[end..]
    )
}

const ACTING: &str = r#"      - toolCalls: [{name: read_file, arguments: {path: notes.txt}}]
      - toolCalls: [{name: edit_file, arguments: {path: notes.txt, old_string: draft, new_string: final}}]
      - toolCalls: [{name: bash, arguments: {command: "grep -c final notes.txt"}}]
      - text: "The note is final now."
"#;

fn workspace(name: &str, responses: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-act-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), config(responses)).unwrap();
    std::fs::write(dir.join("notes.txt"), "status: draft\n").unwrap();
    dir
}

fn run(dir: &Path, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .arg("run")
        .args(args)
        .current_dir(dir)
        .env_remove("CORDIS_LLM")
        .env_remove("CORDIS_WORKSPACE")
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn log(dir: &Path, id: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(common::sessions_dir(dir).join(format!("{id}.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn with_yes_the_agent_reads_edits_and_checks_a_file_and_the_transcript_shows_the_cards() {
    let dir = workspace("yes", ACTING);
    let note = "# Notes\n\nline 3\nline 4\nline 5\nstatus: draft\nline 7\n";
    std::fs::write(dir.join("notes.txt"), note).unwrap();
    let (code, out, err) = run(
        &dir,
        &["--session", "act", "--yes"],
        "make the note final\n",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        note.replace("draft", "final")
    );
    // The golden of the turn (piped: no colour): one readable line per call, a summary under
    // each; the edit's diff at its real line (the transcript used to print raw JSON, each
    // result twice, and `@@ -1 +1 @@` for a change at line 6).
    assert_eq!(
        out,
        "> make the note final
⏺ Read notes.txt
  ⎿ 7 lines
⏺ Edit notes.txt
  ⎿ --- a/notes.txt
    +++ b/notes.txt
    @@ -6 +6 @@
    -draft
    +final
⏺ $ grep -c final notes.txt
  ⎿ exit 0, 1 line
    1
The note is final now.
"
    );
    assert!(!out.contains('\x1b'), "no escape codes when piped: {out:?}");
    let events = log(&dir, "act");
    let results: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(results.len(), 3, "{events:?}");
    assert!(
        results.iter().all(|r| r["data"]["isError"] == false),
        "{results:?}"
    );
    // The log records each approval decision of an `ask` tool, before its result.
    let approvals: Vec<(String, bool, String)> = events
        .iter()
        .filter(|e| e["type"] == "tool/approval")
        .map(|e| {
            let d = &e["data"];
            (
                d["name"].as_str().unwrap().to_owned(),
                d["allowed"].as_bool().unwrap(),
                d["by"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        approvals,
        [
            ("edit_file".to_owned(), true, "approver".to_owned()),
            ("bash".to_owned(), true, "approver".to_owned())
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn piped_without_approval_the_edit_and_the_command_are_denied_and_nothing_changes() {
    let dir = workspace("denied", ACTING);
    let (code, out, err) = run(&dir, &["--session", "deny"], "make the note final\n");
    // Denials are results the model reads, not failed turns.
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "status: draft\n"
    );
    assert!(
        out.contains(
            "⏺ Edit notes.txt\n  ⎿ error DENIED: tool \"edit_file\" needs approval and no approver is available"
        ),
        "{out}"
    );
    assert!(
        out.contains("⏺ $ grep -c final notes.txt\n  ⎿ error DENIED: "),
        "{out}"
    );
    // read_file is read-only: allowed.
    assert!(out.contains("⏺ Read notes.txt\n  ⎿ 1 line\n"), "{out}");
    let denied: Vec<String> = log(&dir, "deny")
        .iter()
        .filter(|e| e["type"] == "tool/approval")
        .map(|e| {
            format!(
                "{} {} {}",
                e["data"]["name"], e["data"]["allowed"], e["data"]["by"]
            )
        })
        .collect();
    assert_eq!(
        denied,
        [
            "\"edit_file\" false \"no-approver\"",
            "\"bash\" false \"no-approver\""
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn approve_lets_one_tool_through() {
    let dir = workspace("approve", ACTING);
    let (code, out, err) = run(
        &dir,
        &["--session", "one", "--approve", "edit_file"],
        "go\n",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "status: final\n"
    );
    assert!(
        out.contains("  ⎿ error DENIED: the user denied tool \"bash\""),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn at_a_terminal_the_edit_is_shown_and_asked_and_no_denies_it() {
    let dir = workspace("tty", ACTING);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env("XDG_STATE_HOME", dir.join(".state"));
    cmd.args(["run", "--session", "tty"])
        .current_dir(&dir)
        .env_remove("CORDIS_LLM")
        .env_remove("CORDIS_WORKSPACE")
        .env("RUST_LOG", "off");
    let mut term = Pty::spawn(cmd);
    let limit = Duration::from_secs(60);
    term.wait_for("> ", limit);
    term.send("make the note final\r");
    term.wait_for(
        "allow edit_file? [y]es once, [a]lways this session, [N]o",
        limit,
    );
    // The question shows what will happen: the diff of the edit.
    assert!(
        term.screen().contains("+status: final"),
        "{}",
        term.screen()
    );
    term.send("y\r");
    term.wait_for(
        "allow bash? [y]es once, [a]lways `grep -c final notes.txt` this session (read-only), [N]o",
        limit,
    );
    assert!(
        term.screen().contains("grep -c final notes.txt"),
        "{}",
        term.screen()
    );
    term.send("n\r");
    term.wait_for("The note is final now.", limit);
    // Coloured: stdout is the terminal.
    term.wait_for("\x1b[31merror DENIED: the user denied tool \"bash\"", limit);
    term.send("\x04");
    assert_eq!(term.wait_exit(limit), Some(0), "{}", term.screen());
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "status: final\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
