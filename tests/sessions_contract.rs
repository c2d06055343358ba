//! The cache-prefix contract on real logs (`cordis sessions check`), session search
//! (`cordis sessions --grep`) and a real session exported as an exercise and replayed by
//! `cordis stress --exercise` (issue 42).

use crate::common;

use std::path::{Path, PathBuf};

use common::{piped, sessions_dir};
use serde_json::Value;

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-contract-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), include_str!("../cordis.yml")).unwrap();
    dir
}

/// The id a `cordis run` printed on stderr.
fn session_id(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("cordis: new session "))
        .unwrap_or_else(|| panic!("no session id in:\n{stderr}"));
    line.split_whitespace().next().unwrap().to_owned()
}

/// Runs `cordis run FILE` with `input` piped in; the new session's id.
fn run(dir: &Path, file: &str, input: &str) -> String {
    let (code, _out, err) = piped(dir, &["run", file], input);
    assert_eq!(code, Some(0), "{err}");
    session_id(&err)
}

/// `cordis ARGS` in `dir` with nothing on stdin.
fn cordis(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    piped(dir, args, "")
}

fn log_path(sessions: &Path, id: &str) -> PathBuf {
    sessions.join(format!("{id}.jsonl"))
}

fn read_log(path: &Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().unwrap();
    (header, lines.collect())
}

fn write_log(path: &Path, header: &Value, events: &[Value]) {
    let mut text = serde_json::to_string(header).unwrap();
    text.push('\n');
    for e in events {
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// The messages a log's events carry: `(kind, data)` of user and assistant messages and tool
/// results, in order.
fn messages(events: &[Value]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some("user/message" | "assistant/message" | "tool/result" | "compaction")
            )
        })
        .map(|e| (e["type"].as_str().unwrap().to_owned(), e["data"].clone()))
        .collect()
}

#[test]
fn the_contract_holds_on_the_bundled_demo_and_a_doctored_log_fails_naming_the_request() {
    let dir = fresh_dir("demo");
    let id = run(&dir, "cordis.yml", "hello\nagain\n");
    let (code, out, err) = cordis(&dir, &["sessions", "check", &id, "cordis.yml"]);
    assert_eq!(code, Some(0), "{out}{err}");
    // Two demo turns of six model requests each.
    assert!(
        out.contains("the cache-prefix contract holds: 12 requests checked"),
        "{out}"
    );

    // Doctor a copy: the step/end of turn 1 step 1 becomes a request/header with the tools
    // reversed. It is logged, but not for request 2, whose bytes now differ in the tools.
    let path = log_path(&sessions_dir(&dir), &id);
    let (mut header, mut events) = read_log(&path);
    let first = events
        .iter()
        .find(|e| e["type"] == "request/header")
        .unwrap()
        .clone();
    let at = events.iter().position(|e| e["type"] == "step/end").unwrap();
    let mut doctored = first.clone();
    doctored["seq"] = events[at]["seq"].clone();
    doctored["data"]["reason"] = "change".into();
    doctored["data"]["header"]["tools"]
        .as_array_mut()
        .unwrap()
        .reverse();
    events[at] = doctored;
    let next_step = events[at + 1..]
        .iter()
        .find(|e| e["type"] == "step/start")
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    header["id"] = "doctored".into();
    write_log(&sessions_dir(&dir).join("doctored.jsonl"), &header, &events);
    let (code, out, err) = cordis(&dir, &["sessions", "check", "doctored", "cordis.yml"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains(&format!(
            "session doctored breaks the cache-prefix contract: request 2 (step/start seq {next_step}, turn 1 step 2): its bytes do not extend request 1's"
        )),
        "{err}"
    );
    assert!(err.contains("first differing byte"), "{err}");
    assert!(err.contains("before:") && err.contains("now:"), "{err}");

    // An unknown session is named, with its own exit code.
    let (code, _, err) = cordis(
        &dir,
        &["sessions", "check", "no-such-session", "cordis.yml"],
    );
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("no session no-such-session"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_contract_holds_on_a_synthesized_fork_whose_first_request_says_fork() {
    let dir = fresh_dir("fork");
    let parent = run(&dir, "cordis.yml", "hello\n");
    let sessions = sessions_dir(&dir);
    let (header, events) = read_log(&log_path(&sessions, &parent));
    let mut fork = header.clone();
    fork["id"] = "forked".into();
    fork["parentSession"] = parent.clone().into();
    fork["forkedAt"] = events.len().into();
    write_log(&sessions.join("forked.jsonl"), &fork, &events);
    let (code, _out, err) = piped(&dir, &["run", "cordis.yml", "--resume", "forked"], "more\n");
    assert_eq!(code, Some(0), "{err}");
    let (_, forked_events) = read_log(&sessions.join("forked.jsonl"));
    let reasons: Vec<&str> = forked_events[events.len()..]
        .iter()
        .filter(|e| e["type"] == "request/header")
        .map(|e| e["data"]["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["fork"]);
    let (code, out, err) = cordis(&dir, &["sessions", "check", "forked", "cordis.yml"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("12 requests checked"), "{out}");

    // The same log claiming a fork without `forkedAt` is caught: the reason explains nothing.
    let mut claimed = fork;
    claimed.as_object_mut().unwrap().remove("forkedAt");
    claimed["id"] = "claimed".into();
    write_log(&sessions.join("claimed.jsonl"), &claimed, &forked_events);
    let (code, _, err) = cordis(&dir, &["sessions", "check", "claimed", "cordis.yml"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("request 7 (step/start seq") && err.contains("says `fork` but"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A composition whose scripted model calls tools, reports usage near its 1,000-token window
/// (so the next turn compacts first), answers the summary request, and goes on.
const COMPACTING: &str = r#"
- {id: system-prompt, name: system-prompt, config: {persona: Terse.}}
- {id: tools, name: tools}
- {id: todo, name: tool-todo}
- {id: workspace, name: workspace, config: {root: "."}}
- {id: fs, name: tool-fs}
- id: llm
  name: llm
  config:
    adapter: scripted
    model: m
    contextWindow: 1000
    responses:
      - text: ["Reading ", "the notes."]
        toolCalls:
          - {name: read_file, arguments: {path: notes.txt}}
          - {name: todo_write, arguments: {todos: [{content: buy milk, status: pending}]}}
        usage: {inputTokens: 300, outputTokens: 9}
      - text: "The notes say to buy milk."
        usage: {inputTokens: 900, outputTokens: 8}
      - text: "We read notes.txt (buy milk) and noted a todo."
        usage: {inputTokens: 950, outputTokens: 12}
      - reasoning: "The summary says milk."
        text: "Still milk."
        usage: {inputTokens: 60, outputTokens: 3}
- {id: sessions, name: sessions, config: {root: .sessions}}
- {id: agent-loop, name: agent-loop, config: {maxSteps: 4}}
"#;

#[test]
fn a_compacted_session_holds_the_contract_and_replays_from_its_export_over_100_seeds() {
    let dir = fresh_dir("compacted");
    std::fs::write(dir.join("compacting.yml"), COMPACTING).unwrap();
    std::fs::write(dir.join("notes.txt"), "buy milk\n").unwrap();
    let id = run(&dir, "compacting.yml", "what do my notes say?\nand now?\n");
    let (_, events) = read_log(&dir.join(format!(".sessions/{id}.jsonl")));
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"compaction"), "{kinds:?}");
    let (code, out, err) = cordis(&dir, &["sessions", "check", &id, "compacting.yml"]);
    assert_eq!(code, Some(0), "{out}{err}");
    // Three requests; the one after the compaction breaks the prefix, explained by the log.
    assert!(
        out.contains("3 requests checked, 1 prefix breaks explained by the log"),
        "{out}"
    );

    // Export it and replay it: every seed agrees, and the replay says what the session said.
    let (code, out, err) = cordis(
        &dir,
        &[
            "sessions",
            "export",
            &id,
            "compacting.yml",
            "--exercise",
            "replay.json",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("wrote 2 turns and 4 model responses"), "{out}");
    let (code, out, err) = cordis(
        &dir,
        &[
            "stress",
            "compacting.yml",
            "--exercise",
            "replay.json",
            "--seeds",
            "100",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("100 seeds agree"), "{out}");
    let replayed = print_log(&dir, "compacting.yml");
    assert_eq!(messages(&replayed), messages(&events));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The scrubbed log one seed of `stress --exercise replay.json` prints.
fn print_log(dir: &Path, file: &str) -> Vec<Value> {
    let (code, out, err) = cordis(
        dir,
        &[
            "stress",
            file,
            "--exercise",
            "replay.json",
            "--seeds",
            "1",
            "--print-log",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    out.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_real_demo_session_exported_replays_under_stress_with_the_same_messages() {
    let dir = fresh_dir("export");
    let id = run(&dir, "cordis.yml", "hello\nagain\n");
    let (_, events) = read_log(&sessions_dir(&dir).join(format!("{id}.jsonl")));
    let (code, out, err) = cordis(
        &dir,
        &[
            "sessions",
            "export",
            &id,
            "cordis.yml",
            "--exercise",
            "replay.json",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let script: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("replay.json")).unwrap()).unwrap();
    assert_eq!(script["turns"], serde_json::json!(["hello", "again"]));
    // Tool calls keep their ids and their arguments verbatim.
    let call = &script["responses"][0]["toolCalls"][0];
    assert_eq!(call["name"], "write_file");
    assert_eq!(call["id"], "call-0-0");
    assert!(
        call["arguments"]
            .as_str()
            .unwrap()
            .contains("cordis-demo.txt")
    );
    let (code, out, err) = cordis(
        &dir,
        &[
            "stress",
            "cordis.yml",
            "--exercise",
            "replay.json",
            "--seeds",
            "100",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("100 seeds agree"), "{out}");
    let replayed = print_log(&dir, "cordis.yml");
    let (said, replayed) = (messages(&events), messages(&replayed));
    assert_eq!(said.len(), 24);
    assert_eq!(replayed, said);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn grep_lists_the_sessions_whose_messages_contain_the_text_and_says_when_the_limit_cut() {
    let dir = fresh_dir("grep");
    let first = run(&dir, "cordis.yml", "Where is the PARSER?\n");
    let second = run(&dir, "cordis.yml", "the parser again\n");
    let other = run(&dir, "cordis.yml", "something else\n");
    let (code, out, err) = cordis(&dir, &["sessions", "cordis.yml", "--grep", "parser"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&first) && out.contains(&second), "{out}");
    assert!(!out.contains(&other), "{out}");
    assert!(out.contains("user (seq 1): Where is the PARSER?"), "{out}");
    // Newest first.
    assert!(
        out.find(&second).unwrap() < out.find(&first).unwrap(),
        "{out}"
    );
    assert!(!err.contains("more sessions match"), "{err}");
    // Assistant text is searched too: every demo session says this.
    let (code, out, err) = cordis(
        &dir,
        &[
            "sessions",
            "cordis.yml",
            "--grep",
            "SCRATCH FILE",
            "--limit",
            "2",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("assistant (seq"), "{out}");
    assert_eq!(out.matches("    assistant (seq").count(), 2, "{out}");
    assert!(
        err.contains("more sessions match: showing the newest 2"),
        "{err}"
    );
    let (code, out, err) = cordis(
        &dir,
        &["sessions", "cordis.yml", "--grep", "absent words", "--json"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "[]");
    let (code, _, err) = cordis(&dir, &["sessions", "cordis.yml", "--grep", ""]);
    assert_eq!(code, Some(2), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_exercise_reports_the_contract_of_its_session() {
    use cordis::exercise::{ExerciseScript, exercise, exercise_plan};
    let file = common::fixture("exercise/parallel.yml");
    let source = std::fs::read_to_string(&file).unwrap();
    let plan = cordis_host::load_plan(
        &source,
        &file,
        &|_| None,
        &cordis::builtins::standard(),
        &cordis_host::PlanOptions::default(),
    )
    .unwrap();
    let script = ExerciseScript::load(Path::new(&common::fixture("exercise/script.yml"))).unwrap();
    let plan = exercise_plan(&plan, &script).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = rt
        .block_on(exercise(
            &plan,
            &script,
            cordis_runtime::Schedule::new(cordis_runtime::Policy::Random, 7),
        ))
        .unwrap();
    let steps = run.log.iter().filter(|e| e["type"] == "step/start").count();
    assert!(steps > 1, "{:?}", run.log);
    assert_eq!(run.contract, Ok(steps));
}
