//! `cordis history` on sessions made by `cordis run` with the offline scripted model: pages,
//! tool cards, JSON, reading while the run holds the session, and its errors.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use common::{cordis_command, lines, wait_for};
use serde_json::Value;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A directory with the bundled cordis.yml, and `views.yml`: the same composition whose
/// scripted model also reads `notes.txt` in its first step.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-history-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bundled = include_str!("../cordis.yml");
    std::fs::write(dir.join("cordis.yml"), bundled).unwrap();
    let call = "        toolCalls:\n          - name: todo_write\n";
    assert!(bundled.contains(call), "the bundled demo changed");
    let views = bundled.replace(
        call,
        "        toolCalls:\n          - name: read_file\n            arguments: {path: notes.txt}\n          - name: todo_write\n",
    );
    std::fs::write(dir.join("views.yml"), views).unwrap();
    std::fs::write(dir.join("notes.txt"), "remember the milk\n").unwrap();
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `cordis ARGS` in `dir` with `input` on stdin, to completion.
fn cordis(dir: &Path, args: &[&str], input: &str) -> Output {
    let mut child = cordis_command(dir, args).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn json(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `events A..=B` of a human page.
fn span(stdout: &str) -> (u64, u64) {
    let first = stdout.lines().next().unwrap();
    let range = first.rsplit(' ').next().unwrap();
    let (a, b) = range.split_once("..=").unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

#[test]
fn history_shows_a_run_session_with_messages_and_tool_cards_and_pages_back_to_the_start() {
    let dir = fresh_dir("pages");
    let run = cordis(
        &dir,
        &["run", "views.yml", "--session", "demo"],
        "hello\nsecond\n",
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));

    let out = cordis(&dir, &["history", "demo", "views.yml"], "");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.starts_with("session demo: events 0..="), "{stdout}");
    for needle in [
        "> hello\n",
        "> second\n",
        "This is the offline demo",
        // As the run showed them live: each call's line, its result under it.
        "⏺ Read notes.txt\n  ⎿ 1 line\n",
        "⏺ Todos: 0 of 1 done, 1 in progress\n  ⎿ [~] Set CORDIS_LLM=openai and DEEPSEEK_API_KEY to talk to a real model\n",
        "Noted. Every turn of this demo replays these steps",
        "todos:\n  [~] Set CORDIS_LLM=openai and DEEPSEEK_API_KEY to talk to a real model\n",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
    assert!(!stdout.contains("older events"), "{stdout}");

    // Two messages a page, back to the first event; pages are contiguous.
    let mut args = vec!["history".to_owned(), "demo".into(), "views.yml".into()];
    args.extend(["--max".into(), "2".into()]);
    let mut next_end = None;
    let mut pages = 0;
    loop {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cordis(&dir, &argv, "");
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let (first, last) = span(&stdout);
        if let Some(end) = next_end {
            assert_eq!(last + 1, end, "contiguous pages:\n{stdout}");
        }
        pages += 1;
        let Some(more) = stdout.lines().find(|l| l.starts_with("older events: ")) else {
            assert_eq!(first, 0, "the last page starts the log");
            break;
        };
        assert_eq!(
            more,
            format!("older events: cordis history demo --before {first}")
        );
        next_end = Some(first);
        args.truncate(5);
        args.extend(["--before".into(), first.to_string()]);
    }
    // Two turns of 1 user + 6 assistant messages: 14 messages, 2 a page; the page holding the
    // first message starts at it (seq 1), so `hasMore` (events before the page) leaves the
    // turn/start at 0 for an eighth page, as the reference's pagination does.
    assert_eq!(pages, 8);

    let page = json(&cordis(
        &dir,
        &["history", "demo", "views.yml", "--json"],
        "",
    ));
    let events = page["events"].as_array().unwrap();
    let last = events.last().unwrap()["event"]["seq"].as_u64().unwrap();
    assert_eq!(page["projections"]["asOfSeq"].as_u64(), Some(last));
    assert_eq!(page["hasMore"], false);
    let call = events
        .iter()
        .find(|e| {
            e["event"]["type"] == "tool/call"
                && e["event"]["data"]["name"] == "read_file"
                && e["event"]["data"]["arguments"]
                    .as_str()
                    .is_some_and(|a| a.contains("notes.txt"))
        })
        .unwrap();
    assert_eq!(call["view"]["for"], "call");
    assert_eq!(call["view"]["view"]["title"], "Read notes.txt");
    assert_eq!(call["view"]["view"]["kind"], "read");
    assert_eq!(
        call["view"]["view"]["input"],
        serde_json::json!({"path": "notes.txt"})
    );
    let result = events
        .iter()
        .find(|e| {
            e["event"]["type"] == "tool/result"
                && e["event"]["data"]["callId"] == call["event"]["data"]["callId"]
        })
        .unwrap();
    assert_eq!(result["view"]["for"], "result");
    let older = json(&cordis(
        &dir,
        &["history", "demo", "views.yml", "--json", "--before", "5"],
        "",
    ));
    assert!(older.get("projections").is_none(), "older pages carry none");
    assert_eq!(older["events"].as_array().unwrap().len(), 5);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn history_reads_a_session_while_cordis_run_holds_it_and_the_run_goes_on() {
    let dir = fresh_dir("live");
    let mut run = cordis_command(&dir, &["run", "--session", "live"])
        .spawn()
        .unwrap();
    let out = lines(run.stdout.take().unwrap());
    let mut stdin = run.stdin.take().unwrap();
    writeln!(stdin, "first").unwrap();
    wait_for(&out, "Noted.");

    // The run holds the session's lock: `run --resume` would be refused; history reads it.
    let page = json(&cordis(&dir, &["history", "live", "--json"], ""));
    let kinds: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"turn/start"));
    assert!(kinds.contains(&"user/message"), "{kinds:?}");

    writeln!(stdin, "second").unwrap();
    wait_for(&out, "Noted.");
    drop(stdin);
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let log = std::fs::read_to_string(common::sessions_dir(&dir).join("live.jsonl")).unwrap();
    assert_eq!(log.matches(r#""type":"turn/end""#).count(), 2, "{log}");
    assert!(
        !log.contains("interrupted"),
        "the read disturbed nothing: {log}"
    );
    let page = json(&cordis(&dir, &["history", "live", "--json"], ""));
    assert_eq!(
        page["events"].as_array().unwrap().len(),
        log.lines().count() - 1,
        "every event once the run ended"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_switched_session_reads_as_its_switched_preset_and_a_deleted_preset_still_serves_it() {
    let dir = fresh_dir("presets");
    let run = cordis(
        &dir,
        &["run", "--session", "sw"],
        "/preset minimal\nhello\n",
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let out = cordis(&dir, &["history", "sw"], "");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("(switched to preset minimal)\n> hello\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\npreset: minimal\n"), "{stdout}");
    let page = json(&cordis(&dir, &["history", "sw", "--json"], ""));
    assert_eq!(page["projections"]["values"]["agentPreset"], "minimal");

    // A preset of this directory's own root (a copy of `minimal`, beside copies of the shipped
    // presets it may include), used and then deleted.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("presets");
    copy_dir(&shipped, &dir.join("presets"));
    let mine = dir.join("presets/mine");
    copy_dir(&shipped.join("minimal"), &mine);
    let run = cordis(
        &dir,
        &["run", "--session", "orphan", "--preset", "mine"],
        "hello\n",
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    std::fs::remove_dir_all(&mine).unwrap();
    let out = cordis(&dir, &["history", "orphan"], "");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("> hello\n"), "{stdout}");
    assert!(stdout.contains("Noted."), "{stdout}");
    assert!(stdout.contains("\npreset: mine\n"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_sessions_exit_4_broken_logs_exit_1_and_bad_arguments_exit_2() {
    let dir = fresh_dir("errors");
    for id in ["nope", "../etc/passwd"] {
        let out = cordis(&dir, &["history", id], "");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{stderr}");
        assert_eq!(
            stderr,
            format!(
                "cordis: no session \"{id}\" under {} (`cordis run` prints the id of each new session)\n",
                common::sessions_dir(&dir).display()
            )
        );
        assert!(out.stdout.is_empty());
    }
    std::fs::create_dir_all(common::sessions_dir(&dir)).unwrap();
    std::fs::write(
        common::sessions_dir(&dir).join("bad.jsonl"),
        "{\"type\":\"session\",\"version\":0,\"id\":\"bad\",\"createdAt\":0}\nnot json\n",
    )
    .unwrap();
    let out = cordis(&dir, &["history", "bad"], "");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "cordis: history unavailable for session \"bad\": session file {}, line 2: ",
            common::sessions_dir(&dir).join("bad.jsonl").display()
        )),
        "{stderr}"
    );
    let out = cordis(&dir, &["history", "x", "--max", "0"], "");
    assert_eq!(out.status.code(), Some(2));
    let out = cordis(&dir, &["history"], "");
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn history_in_a_terminal_escapes_what_the_log_holds() {
    let dir = fresh_dir("tty");
    let run = cordis(
        &dir,
        &["run", "--session", "tty"],
        "clear \u{1b}[2J the screen\n",
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let mut term = common::pty::Pty::spawn(cordis_command(&dir, &["history", "tty"]));
    term.wait_for("Noted.", Duration::from_secs(60));
    assert_eq!(term.wait_exit(Duration::from_secs(60)), Some(0));
    let screen = term.screen();
    assert!(
        screen.contains("> clear \\u{001B}[2J the screen"),
        "{screen}"
    );
    // The log's escape is shown, never sent: the only escapes are the transcript's colours.
    assert!(!screen.contains("\u{1b}[2J"), "{screen:?}");
    assert!(
        screen.contains("\u{1b}[1m⏺"),
        "coloured on a terminal: {screen:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
