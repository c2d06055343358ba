//! The snapshot tier: real `cordis run` processes on a snapshot config, compared with the logs
//! and transcripts recorded under `tests/snapshots/<scenario>/`.
//!
//! Each scenario directory holds `input.yml` (the runs: stdin messages, the scripted responses
//! the `llm` entry replays, `resume: true` for a run that continues the session; optionally a
//! `toolOrder`) and the expected results: `session.jsonl` (the main session `snap`), one
//! `<id>.jsonl` per other session the runs logged (subagents), and `transcript.txt` (stdout of
//! every run, in order).
//!
//! Normalization: `time` and `createdAt` become 0, a header's `cwd` `{{cwd}}`. Only `text-turn` pins the full system prompt
//! and tool list of its `request/header`s; every other scenario stores them as `"{{system}}"`
//! and `"{{tools}}"`, and the test checks that each of its headers equals the pinned one before
//! scrubbing. `CORDIS_SNAPSHOT=record` re-records every scenario instead of comparing.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;
use serde_json::{Value, json};

const PINNED: &str = "text-turn";
const SCENARIOS: &[&str] = &[
    "text-turn",
    "tool-turn",
    "parallel-tool-calls",
    "tool-error",
    "subagent",
    "resume",
    "unknown-tool-order",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Scenario {
    #[serde(default)]
    tool_order: Option<Vec<String>>,
    runs: Vec<Run>,
}

/// `cordis run`'s exit code for a run: 1 when a turn failed (stdin is piped), else 0.
fn expected_exit(transcript_err: &str) -> i32 {
    i32::from(transcript_err.contains(" failed at step "))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Run {
    #[serde(default)]
    resume: bool,
    input: Vec<String>,
    responses: Vec<Value>,
}

fn snapshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// The snapshot config: the bundled composition's shape with canned tools and the scripted
/// adapter replaying `responses` (JSON is YAML).
fn config(sessions: &Path, tool_order: Option<&[String]>, responses: &[Value]) -> String {
    let order = tool_order.map_or_else(|| json!(["todo_write", "<unlisted-tools>"]), |o| json!(o));
    let entries = json!([
        {"id": "system-prompt", "name": "system-prompt",
         "config": {"persona": "You are a careful coding agent. You answer briefly and use tools when they help.",
                    "toolOrder": order}},
        {"id": "tools", "name": "tools"},
        {"id": "todo", "name": "tool-todo"},
        {"id": "fs", "name": "tool-declare", "config": {"tools": [
            {"name": "read_file", "description": "Read a UTF-8 text file from the workspace.",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
             "result": {"content": "hello from a.txt"}},
            {"name": "bash", "description": "Run a shell command in the workspace and return its output.",
             "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
             "result": {"exit_code": 0, "stdout": "a.txt\nb.txt\n", "stderr": ""}}
        ]}},
        {"id": "llm", "name": "llm", "config": {"adapter": "scripted", "model": "snapshot-model", "responses": responses}},
        {"id": "sessions", "name": "sessions", "config": {"root": sessions, "durability": "none"}},
        {"id": "agent-loop", "name": "agent-loop", "config": {"invariant": true}},
        {"id": "subagent", "name": "tool-subagent"}
    ]);
    serde_json::to_string_pretty(&entries).unwrap()
}

/// Runs every run of `scenario` in a fresh directory: the sessions root's logs and stdout.
fn execute(name: &str, scenario: &Scenario) -> (BTreeMap<String, String>, String) {
    let dir = std::env::temp_dir().join(format!("cordis-snap-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sessions = dir.join("sessions");
    let mut transcript = String::new();
    for (i, run) in scenario.runs.iter().enumerate() {
        let file = dir.join(format!("run-{i}.yml"));
        std::fs::write(
            &file,
            config(&sessions, scenario.tool_order.as_deref(), &run.responses),
        )
        .unwrap();
        let flag = if run.resume { "--resume" } else { "--session" };
        let mut child = Command::new(env!("CARGO_BIN_EXE_cordis"))
            .env("XDG_STATE_HOME", dir.join(".state"))
            .args(["run", file.to_str().unwrap(), flag, "snap", "--seed", "1"])
            .current_dir(&dir)
            .env_remove("CORDIS_SEED")
            .env("RUST_LOG", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for line in &run.input {
            writeln!(stdin, "{line}").unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(expected_exit(&stderr)),
            "{name} run {i}: {stderr}"
        );
        transcript += &String::from_utf8(out.stdout).unwrap();
    }
    let mut logs = BTreeMap::new();
    for entry in std::fs::read_dir(&sessions).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue; // a lock sidecar (a pid, not events) or the root's `.gitignore`
        }
        let id = path.file_name().unwrap().to_str().unwrap().to_owned();
        logs.insert(id, std::fs::read_to_string(&path).unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
    (logs, transcript)
}

/// `time`/`createdAt` zeroed; with `scrub`, header system/tools replaced by placeholders.
/// Returns the normalized log and every header (unscrubbed) it contained.
fn normalize(log: &str, scrub: bool) -> (String, Vec<Value>) {
    let mut out = String::new();
    let mut headers = Vec::new();
    for line in log.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v.get("createdAt").is_some() {
            v["createdAt"] = json!(0);
        }
        // The header's project is the scratch directory of the run: present, and the same
        // everywhere once replaced.
        if v["type"] == "session" && v.get("cwd").is_some() {
            v["cwd"] = json!("{{cwd}}");
        }
        if v.get("time").is_some() {
            v["time"] = json!(0);
        }
        if v["type"] == "request/header" {
            headers.push(v["data"]["header"].clone());
            if scrub {
                let h = &mut v["data"]["header"];
                if h.get("system").is_some() {
                    h["system"] = json!("{{system}}");
                }
                if h.get("tools").is_some() {
                    h["tools"] = json!("{{tools}}");
                }
            }
        }
        out += &serde_json::to_string(&v).unwrap();
        out.push('\n');
    }
    (out, headers)
}

fn expected_logs(dir: &Path) -> BTreeMap<String, String> {
    let mut logs = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_owned();
        if let Some(stem) = file.strip_suffix(".jsonl") {
            let id = if stem == "session" { "snap" } else { stem };
            logs.insert(
                format!("{id}.jsonl"),
                std::fs::read_to_string(&path).unwrap(),
            );
        }
    }
    logs
}

fn file_for(id_file: &str) -> String {
    if id_file == "snap.jsonl" {
        "session.jsonl".to_owned()
    } else {
        id_file.to_owned()
    }
}

/// The header `text-turn` pins (its first `request/header`).
fn pinned_header() -> Value {
    let log = std::fs::read_to_string(snapshots().join(PINNED).join("session.jsonl"))
        .expect("text-turn/session.jsonl is recorded");
    let (_, headers) = normalize(&log, false);
    headers.into_iter().next().expect("text-turn logs a header")
}

#[test]
fn every_scenario_replays_to_its_recorded_log_and_transcript() {
    let record = std::env::var("CORDIS_SNAPSHOT").is_ok_and(|v| v == "record");
    let mut failures = Vec::new();
    for &name in SCENARIOS {
        let dir = snapshots().join(name);
        let scenario: Scenario =
            serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("input.yml")).unwrap())
                .unwrap_or_else(|e| panic!("{name}/input.yml: {e}"));
        let (logs, transcript) = execute(name, &scenario);
        assert!(logs.contains_key("snap.jsonl"), "{name}: no main session");
        let scrub = name != PINNED;
        let mut actual = BTreeMap::new();
        let mut headers = Vec::new();
        for (id, log) in &logs {
            let (norm, h) = normalize(log, scrub);
            headers.extend(h);
            actual.insert(id.clone(), norm);
        }
        if record {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "jsonl") {
                    std::fs::remove_file(path).unwrap();
                }
            }
            for (id, log) in &actual {
                std::fs::write(dir.join(file_for(id)), log).unwrap();
            }
            std::fs::write(dir.join("transcript.txt"), &transcript).unwrap();
            continue;
        }
        // Every header of every scenario equals the pinned one (before scrubbing).
        let pinned = pinned_header();
        for h in &headers {
            if *h != pinned {
                failures.push(format!(
                    "{name}: a request/header differs from the one {PINNED} pins:\n{}\nvs\n{}",
                    serde_json::to_string_pretty(h).unwrap(),
                    serde_json::to_string_pretty(&pinned).unwrap()
                ));
            }
        }
        let expected = expected_logs(&dir);
        if expected.keys().collect::<Vec<_>>() != actual.keys().collect::<Vec<_>>() {
            failures.push(format!(
                "{name}: sessions {:?}, recorded {:?}",
                actual.keys().collect::<Vec<_>>(),
                expected.keys().collect::<Vec<_>>()
            ));
        }
        for (id, log) in &actual {
            let Some(want) = expected.get(id) else {
                continue;
            };
            if want != log {
                let first = want
                    .lines()
                    .zip(log.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(want.lines().count().min(log.lines().count()));
                failures.push(format!(
                    "{name}/{}: differs at line {}:\n  recorded: {}\n  actual:   {}",
                    file_for(id),
                    first + 1,
                    want.lines().nth(first).unwrap_or("<end>"),
                    log.lines().nth(first).unwrap_or("<end>")
                ));
            }
        }
        let want = std::fs::read_to_string(dir.join("transcript.txt")).unwrap_or_default();
        if want != transcript {
            failures.push(format!(
                "{name}/transcript.txt differs:\n--- recorded\n{want}--- actual\n{transcript}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n(re-record with CORDIS_SNAPSHOT=record cargo test --test suite snapshots::)",
        failures.join("\n\n")
    );
}

#[test]
fn exactly_one_scenario_pins_the_system_prompt_and_tools() {
    let mut pinning = Vec::new();
    for &name in SCENARIOS {
        for (file, log) in expected_logs(&snapshots().join(name)) {
            for line in log.lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                if v["type"] != "request/header" {
                    continue;
                }
                let h = &v["data"]["header"];
                let scrubbed = h["system"] == "{{system}}" && h["tools"] == "{{tools}}";
                if !scrubbed {
                    pinning.push(format!("{name}/{file}"));
                }
            }
        }
    }
    pinning.dedup();
    assert_eq!(pinning, vec![format!("{PINNED}/snap.jsonl")]);
    let pinned = pinned_header();
    assert!(pinned["system"].as_str().is_some_and(|s| s.len() > 20));
    assert_eq!(pinned["tools"].as_array().map(Vec::len), Some(4));
}
