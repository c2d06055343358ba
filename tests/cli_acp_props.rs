//! Properties of `cordis acp` over generated conversations (the scripted model's responses are
//! drawn by proptest; each case runs the real binary, then loads the session in a second one):
//!
//! - every message the agent writes is valid against the protocol's JSON Schema (each
//!   `session/update` a `SessionNotification` of the session it names, each answer its
//!   method's response type; see `tests/cli_acp_common`);
//! - no `tool_call_update` comes before its `tool_call`, and every call gets exactly one final
//!   update before its prompt is answered (a running command's progress updates come between
//!   its call and that one);
//! - the model's reasoning streams as thought chunks, and the first prompt titles the session;
//! - each prompt settles as its script says: `end_turn`, `max_tokens` when the model ran out
//!   of tokens, an error when the model failed;
//! - `session/load` replays exactly what was streamed live (plus the user's side; a command's
//!   progress is not logged, so its output is compared as the terminal ends up showing it).

use crate::cli_acp_common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(30);

/// One model response of a generated turn.
#[derive(Debug, Clone)]
struct Step {
    text: Vec<String>,
    calls: Vec<Value>,
    /// The model's reasoning before it (`agent_thought_chunk`s).
    reasoning: Vec<String>,
}

/// How a generated turn ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    /// A plain answer: `end_turn`.
    Answer,
    /// The answer hit the token limit: `max_tokens`.
    Length,
    /// The model failed: the prompt is rejected.
    Failure,
}

#[derive(Debug, Clone)]
struct Turn {
    steps: Vec<Step>,
    ending: Ending,
    last_text: Vec<String>,
}

fn text_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Hello".to_owned()),
        Just(" world\n".to_owned()),
        Just("ünïcødé ✓".to_owned()),
        Just("`code`".to_owned()),
        "[a-z ]{1,12}",
    ]
}

/// A tool call: reads (present and missing), plans, listings, commands, an edit that asks (and
/// is rejected), a write that asks, an unknown tool, arguments that are not JSON.
fn call() -> impl Strategy<Value = Value> {
    let todos = prop::collection::vec(
        (
            "[a-z]{1,8}",
            prop_oneof![Just("pending"), Just("in_progress"), Just("completed")],
        ),
        0..4,
    )
    .prop_map(|items| {
        json!({"todos": items.into_iter().map(|(c, s)| json!({"content": c, "status": s})).collect::<Vec<_>>()})
    });
    prop_oneof![
        Just(json!({"name": "read_file", "arguments": {"path": "notes.txt"}})),
        Just(json!({"name": "read_file", "arguments": {"path": "missing.txt"}})),
        todos.prop_map(|a| json!({"name": "todo_write", "arguments": a})),
        Just(json!({"name": "list_files", "arguments": {"pattern": "*.txt"}})),
        Just(json!({"name": "bash", "arguments": {"command": "echo out; echo err >&2; exit 3"}})),
        // Output in two pieces: live progress updates while it runs.
        Just(json!({"name": "bash", "arguments": {"command": "echo one; sleep 0.01; echo two"}})),
        Just(
            json!({"name": "edit_file", "arguments": {"path": "notes.txt", "old_string": "a", "new_string": "b"}})
        ),
        Just(json!({"name": "write_file", "arguments": {"path": "new.txt", "content": "x"}})),
        Just(json!({"name": "no_such_tool", "arguments": {}})),
        Just(json!({"name": "read_file", "arguments": "{not json"})),
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    let step = (
        prop::collection::vec(text_piece(), 0..3),
        prop::collection::vec(call(), 1..4),
        prop::collection::vec(text_piece(), 0..2),
    )
        .prop_map(|(text, calls, reasoning)| Step {
            text,
            calls,
            reasoning,
        });
    (
        prop::collection::vec(step, 0..3),
        prop_oneof![
            4 => Just(Ending::Answer),
            1 => Just(Ending::Length),
            1 => Just(Ending::Failure),
        ],
        prop::collection::vec(text_piece(), 1..3),
    )
        .prop_map(|(steps, ending, last_text)| Turn {
            steps,
            ending,
            last_text,
        })
}

/// The scripted model's responses for `turns`, with call ids unique in the session.
fn script(turns: &[Turn]) -> Value {
    let mut responses = Vec::new();
    for (t, turn) in turns.iter().enumerate() {
        for (s, step) in turn.steps.iter().enumerate() {
            let calls: Vec<Value> = step
                .calls
                .iter()
                .enumerate()
                .map(|(c, call)| {
                    let mut call = call.clone();
                    call["id"] = json!(format!("t{t}s{s}c{c}"));
                    call
                })
                .collect();
            let mut response = json!({"text": step.text, "toolCalls": calls});
            if !step.reasoning.is_empty() {
                response["reasoning"] = json!(step.reasoning);
            }
            responses.push(response);
        }
        let mut last = json!({"text": turn.last_text});
        match turn.ending {
            Ending::Answer => {}
            Ending::Length => last["finish"] = json!("length"),
            Ending::Failure => last["error"] = json!("generated failure"),
        }
        responses.push(last);
    }
    Value::Array(responses)
}

struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    seen: Vec<Value>,
    sent: Vec<(u64, String)>,
}

impl Agent {
    fn start(dir: &Path, script: &Path) -> Agent {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp/agent.yml");
        let mut child = Command::new(env!("CARGO_BIN_EXE_cordis"))
            .env("XDG_STATE_HOME", dir.join(".state"))
            .arg("acp")
            .arg(&fixture)
            .current_dir(dir)
            .env_remove("CORDIS_LLM")
            .env_remove("CORDIS_WORKSPACE")
            .env("RUST_LOG", "off")
            .env("ACP_SCRIPT", script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn cordis acp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Agent {
            child,
            stdin,
            lines,
            next_id: 0,
            seen: Vec::new(),
            sent: Vec::new(),
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.sent.push((id, method.to_owned()));
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .unwrap();
        stdin.flush().unwrap();
        loop {
            let line = self
                .lines
                .recv_timeout(DEADLINE)
                .expect("cordis acp answered in time");
            let m: Value = serde_json::from_str(&line).expect("stdout is JSON-RPC");
            self.seen.push(m.clone());
            if m["method"] == "session/request_permission" {
                let stdin = self.stdin.as_mut().unwrap();
                writeln!(
                    stdin,
                    "{}",
                    json!({"jsonrpc": "2.0", "id": m["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "reject-once"}}})
                )
                .unwrap();
                stdin.flush().unwrap();
            } else if m.get("method").is_none() && m["id"] == json!(id) {
                return m;
            }
        }
    }

    fn close(mut self) {
        drop(self.stdin.take());
        while self.lines.recv_timeout(DEADLINE).is_ok() {}
        let status = self.child.wait().unwrap();
        assert!(status.success(), "cordis acp exited with {status}");
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The updates of `messages`, checked: each a `SessionNotification` of `session`, each
/// `tool_call_update` after its `tool_call`, no call updated twice.
fn checked_updates(messages: &[Value], session: &str) -> Result<Vec<Value>, TestCaseError> {
    let mut calls: BTreeMap<String, u32> = BTreeMap::new();
    let mut updates = Vec::new();
    for m in messages.iter().filter(|m| m["method"] == "session/update") {
        cli_acp_common::validate("SessionNotification", &m["params"])
            .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&m["params"]["sessionId"], session);
        let update = &m["params"]["update"];
        let call = update["toolCallId"].as_str().unwrap_or_default().to_owned();
        match update["sessionUpdate"].as_str() {
            Some("tool_call") => {
                prop_assert!(
                    calls.insert(call.clone(), 0).is_none(),
                    "tool_call {} announced twice",
                    call
                );
            }
            // A running command's output so far, or the word that the call runs now: after its
            // call, before its result.
            Some("tool_call_update")
                if cli_acp_common::is_progress(update) || cli_acp_common::is_running(update) =>
            {
                prop_assert!(
                    calls.get(&call) == Some(&0),
                    "progress outside its running call: {}",
                    m
                );
            }
            Some("tool_call_update") => {
                let seen = calls.get_mut(&call);
                prop_assert!(
                    seen.is_some(),
                    "tool_call_update before its tool_call: {}",
                    m
                );
                let seen = seen.unwrap();
                *seen += 1;
                prop_assert_eq!(*seen, 1, "tool call {} updated twice", call);
            }
            // The session's commands: announced when it opens, not part of its log.
            Some("available_commands_update") => continue,
            _ => {}
        }
        updates.push(m["params"]["update"].clone());
    }
    prop_assert!(
        calls.values().all(|n| *n == 1),
        "a tool call without its update: {:?}",
        calls
    );
    Ok(updates)
}

fn scratch(n: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-acp-prop-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "a note\n").unwrap();
    dir.canonicalize().unwrap()
}

fn run_case(turns: &[Turn]) -> Result<(), TestCaseError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CASE: AtomicU64 = AtomicU64::new(0);
    let dir = scratch(CASE.fetch_add(1, Ordering::Relaxed));
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script(turns).to_string()).unwrap();

    let mut live = Agent::start(&dir, &script_path);
    live.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let r = live.request("session/new", json!({"cwd": dir, "mcpServers": []}));
    let session = r["result"]["sessionId"].as_str().unwrap().to_owned();
    for (t, turn) in turns.iter().enumerate() {
        let r = live.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": format!("turn {t}")}]}),
        );
        match turn.ending {
            Ending::Answer => prop_assert_eq!(&r["result"]["stopReason"], "end_turn", "{}", r),
            Ending::Length => prop_assert_eq!(&r["result"]["stopReason"], "max_tokens", "{}", r),
            Ending::Failure => {
                prop_assert_eq!(&r["error"]["code"], -32603, "{}", r);
                prop_assert!(
                    r["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("generated failure")
                );
            }
        }
        // Every call of the turn was announced and settled before its answer.
        checked_updates(&live.seen, &session)?;
    }
    let seen = std::mem::take(&mut live.seen);
    cli_acp_common::check_messages(&seen, &live.sent).map_err(TestCaseError::fail)?;
    live.close();
    let streamed = checked_updates(&seen, &session)?;

    let mut loaded = Agent::start(&dir, &script_path);
    loaded.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let r = loaded.request(
        "session/load",
        json!({"sessionId": session, "cwd": dir, "mcpServers": []}),
    );
    prop_assert!(r.get("result").is_some(), "{}", r);
    let seen = std::mem::take(&mut loaded.seen);
    cli_acp_common::check_messages(&seen, &loaded.sent).map_err(TestCaseError::fail)?;
    loaded.close();
    let replayed: Vec<Value> = checked_updates(&seen, &session)?
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "user_message_chunk")
        .collect();
    prop_assert_eq!(
        cli_acp_common::story(&replayed),
        cli_acp_common::story(&streamed),
        "replay differs from live"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Each case runs two processes; PROPTEST_CASES=500 for a longer run.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(24),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_update_is_valid_ordered_and_replayed_as_streamed(
        turns in prop::collection::vec(turn(), 1..4)
    ) {
        run_case(&turns)?;
    }
}
