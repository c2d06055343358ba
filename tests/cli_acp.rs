//! `cordis acp` driven as an editor would: the real binary on piped stdio, newline-delimited
//! JSON-RPC, the scripted model replaying a script each test writes.
//!
//! Goldens: `tests/snapshots/acp/<name>.jsonl` hold every line the agent wrote on stdout (as
//! parsed JSON, keys sorted, so key order on the wire does not matter), with
//! session ids as `{{sessionId}}` (`{{sessionId2}}`, … in order of appearance), the ids of the
//! agent's own requests as `{{requestId}}` and the test's directory as `{{cwd}}`; a running
//! command's output updates (as many as its reads) are left out. `CORDIS_SNAPSHOT=record` rewrites them instead of comparing.

use crate::cli_acp_common;
use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A generous bound that turns a hang into a failure (never a timing assertion).
const DEADLINE: Duration = Duration::from_secs(30);

/// A scratch directory for one test: the agent's process cwd (its state directory, where the
/// session logs go, is `.state/` in it) and the sessions' workspace.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-acp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Canonical: the agent compares cwds as given, and the goldens scrub this exact text.
    dir.canonicalize().unwrap()
}

/// How the test client answers `session/request_permission`.
#[derive(Clone, Copy)]
enum Answer {
    Allow,
    AllowAlways,
    Reject,
    RejectAlways,
}

/// The editor side of one `cordis acp` process.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    /// Every message the agent wrote, in order.
    seen: Vec<Value>,
    /// The id and method of every request sent.
    sent: Vec<(u64, String)>,
    /// The answer to permission questions.
    answer: Answer,
    /// The editor's buffers (path → text), when it answers `fs/*` requests: a read gets the
    /// buffer (else the disk), a write replaces the buffer and saves it to disk.
    buffers: Option<std::collections::BTreeMap<PathBuf, String>>,
    /// The editor's terminals, when it answers `terminal/*` requests.
    terminals: Option<Terminals>,
    /// The answer to `elicitation/create`, when the editor shows forms.
    form_answer: Option<Value>,
    dir: PathBuf,
}

/// A test editor's terminal: its process, its output as read so far, the threads reading it.
type Running = (
    Child,
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    Vec<std::thread::JoinHandle<()>>,
);

/// A test editor's terminals: real processes, their output collected; `wait_for_exit` is
/// answered when the process has exited (checked while reading).
#[derive(Default)]
struct Terminals {
    running: std::collections::BTreeMap<String, Running>,
    /// `wait_for_exit` requests not answered yet: (request id, terminal).
    waiting: Vec<(Value, String)>,
    made: u64,
}

impl Terminals {
    /// The answer to terminal request `message`, if it is one (`None` for a wait that must
    /// wait).
    fn answer(&mut self, message: &Value) -> Option<Value> {
        let params = &message["params"];
        let id = params["terminalId"].as_str().unwrap_or_default().to_owned();
        match message["method"].as_str()? {
            "terminal/create" => {
                self.made += 1;
                let id = format!("term-{}", self.made);
                let mut cmd = std::process::Command::new(params["command"].as_str().unwrap());
                for a in params["args"].as_array().unwrap() {
                    cmd.arg(a.as_str().unwrap());
                }
                cmd.current_dir(params["cwd"].as_str().unwrap()).env_clear();
                for e in params["env"].as_array().unwrap() {
                    cmd.env(e["name"].as_str().unwrap(), e["value"].as_str().unwrap());
                }
                // One pipe for both streams, as a terminal has: what the command writes
                // arrives in the order it wrote it.
                let (mut reader, writer) = std::io::pipe().unwrap();
                let child = cmd
                    .stdin(std::process::Stdio::null())
                    .stdout(writer.try_clone().unwrap())
                    .stderr(writer)
                    .spawn()
                    .unwrap();
                // The parent's copies of the pipe's write end go with the command.
                drop(cmd);
                let output = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
                let collected = output.clone();
                let readers = vec![std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = reader.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        collected.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                })];
                self.running.insert(id.clone(), (child, output, readers));
                Some(json!({"terminalId": id}))
            }
            "terminal/wait_for_exit" => {
                self.waiting.push((message["id"].clone(), id));
                None
            }
            "terminal/output" => {
                let (child, output, readers) = self.running.get_mut(&id).unwrap();
                let status = child.try_wait().unwrap().map(|s| {
                    use std::os::unix::process::ExitStatusExt;
                    json!({"exitCode": s.code(), "signal": s.signal().map(|n| format!("{n}"))})
                });
                if status.is_some() {
                    // Exited: all its output is read once its pipes close.
                    for reader in readers.drain(..) {
                        reader.join().unwrap();
                    }
                }
                let text = String::from_utf8_lossy(&output.lock().unwrap()).into_owned();
                Some(json!({"output": text, "truncated": false, "exitStatus": status}))
            }
            "terminal/kill" => {
                let (child, _, _) = self.running.get_mut(&id).unwrap();
                let _ = child.kill();
                let _ = child.wait();
                Some(json!({}))
            }
            "terminal/release" => {
                let (mut child, _, _) = self.running.remove(&id).unwrap();
                let _ = child.kill();
                let _ = child.wait();
                Some(json!({}))
            }
            _ => None,
        }
    }

    /// Answers for the waits whose process has exited.
    fn exited(&mut self) -> Vec<(Value, Value)> {
        let mut done = Vec::new();
        let running = &mut self.running;
        self.waiting.retain(|(request, id)| {
            let Some((child, _, _)) = running.get_mut(id) else {
                return true;
            };
            match child.try_wait().unwrap() {
                Some(s) => {
                    done.push((
                        request.clone(),
                        json!({"exitCode": s.code(), "signal": null}),
                    ));
                    false
                }
                None => true,
            }
        });
        done
    }
}

impl Acp {
    /// Starts `cordis acp` in `dir` with `script` as the scripted model's responses.
    fn start(dir: &Path, script: &Value) -> Acp {
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, serde_json::to_string_pretty(script).unwrap()).unwrap();
        Acp::start_with(dir, &script_path)
    }

    /// Starts `cordis acp` in `dir` on an existing script file.
    fn start_with(dir: &Path, script_path: &Path) -> Acp {
        let fixture = common::fixture("acp/agent.yml");
        let mut cmd = common::cordis_command(dir, &["acp", &fixture]);
        cmd.env("ACP_SCRIPT", script_path);
        Acp::spawn(dir, cmd)
    }

    /// Starts `cordis acp ARGS` in `dir` (another config, flags).
    fn start_args(dir: &Path, args: &[&str]) -> Acp {
        let mut argv = vec!["acp"];
        argv.extend_from_slice(args);
        Acp::spawn(dir, common::cordis_command(dir, &argv))
    }

    fn spawn(dir: &Path, mut cmd: std::process::Command) -> Acp {
        let mut child = cmd.spawn().expect("spawn cordis acp");
        let stdin = child.stdin.take();
        let lines = common::lines(child.stdout.take().unwrap());
        Acp {
            child,
            stdin,
            lines,
            next_id: 0,
            seen: Vec::new(),
            sent: Vec::new(),
            answer: Answer::Reject,
            buffers: None,
            terminals: None,
            form_answer: None,
            dir: dir.to_owned(),
        }
    }

    fn write(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Writes raw bytes, then a line end.
    fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its id.
    fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.sent.push((id, method.to_owned()));
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message (answering permission questions on the way); panics after the deadline.
    fn next(&mut self) -> Value {
        let end = Instant::now() + DEADLINE;
        let line = loop {
            // A terminal's process that exited answers its wait.
            let exited = self
                .terminals
                .as_mut()
                .map(Terminals::exited)
                .unwrap_or_default();
            for (id, result) in exited {
                self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
            }
            let step = if self.terminals.is_some() {
                Duration::from_millis(20)
            } else {
                DEADLINE
            };
            match self.lines.recv_timeout(step) {
                Ok(line) => break line,
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < end => {}
                Err(_) => panic!(
                    "no message from cordis acp within {DEADLINE:?}; saw:\n{}",
                    self.seen
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            }
        };
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC, got {line:?}: {e}"));
        self.seen.push(message.clone());
        if message["method"] == "session/request_permission" {
            let option = match self.answer {
                Answer::Allow => "allow-once",
                Answer::AllowAlways => "allow-always",
                Answer::Reject => "reject-once",
                Answer::RejectAlways => "reject-always",
            };
            let id = message["id"].clone();
            self.write(&json!({"jsonrpc": "2.0", "id": id,
                "result": {"outcome": {"outcome": "selected", "optionId": option}}}));
        }
        if message["method"] == "elicitation/create"
            && let Some(answer) = self.form_answer.clone()
        {
            let id = message["id"].clone();
            self.write(&json!({"jsonrpc": "2.0", "id": id, "result": answer}));
        }
        if let Some(result) = self.terminals.as_mut().and_then(|t| t.answer(&message)) {
            let id = message["id"].clone();
            self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
        }
        if let Some(buffers) = self.buffers.as_mut() {
            let path = PathBuf::from(message["params"]["path"].as_str().unwrap_or_default());
            let result = match message["method"].as_str() {
                Some("fs/read_text_file") => Some(match buffers.get(&path) {
                    Some(text) => json!({"content": text}),
                    None => json!({"content": std::fs::read_to_string(&path).unwrap()}),
                }),
                Some("fs/write_text_file") => {
                    let text = message["params"]["content"].as_str().unwrap().to_owned();
                    std::fs::write(&path, &text).unwrap();
                    buffers.insert(path, text);
                    Some(json!({}))
                }
                _ => None,
            };
            if let Some(result) = result {
                let id = message["id"].clone();
                self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
            }
        }
        message
    }

    /// Reads until the response to request `id` and returns it.
    fn response(&mut self, id: u64) -> Value {
        // Answers of concurrent requests come in either order: one read while waiting for
        // another is already in `seen`.
        let answered = |m: &Value| m.get("method").is_none() && m["id"] == json!(id);
        if let Some(m) = self.seen.iter().find(|m| answered(m)) {
            return m.clone();
        }
        loop {
            let m = self.next();
            if answered(&m) {
                return m;
            }
        }
    }

    /// Reads until a message matching `pred`.
    fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = self.next();
            if pred(&m) {
                return m;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let id = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        self.response(id)
    }

    /// `session/new` in `cwd`; returns the session id.
    fn new_session(&mut self, cwd: &Path) -> String {
        let id = self.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let r = self.response(id);
        r["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {r}"))
            .to_owned()
    }

    fn send_prompt(&mut self, session: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// A prompt, run to its answer.
    fn prompt(&mut self, session: &str, text: &str) -> Value {
        let id = self.send_prompt(session, text);
        self.response(id)
    }

    /// Closes stdin, reads what is left and waits for the exit; returns the exit code. Every
    /// message the agent wrote is then checked against the protocol (see [`check_updates`]).
    fn close(&mut self) -> i32 {
        drop(self.stdin.take());
        let end = Instant::now() + DEADLINE;
        loop {
            match self
                .lines
                .recv_timeout(end.saturating_duration_since(Instant::now()))
            {
                Ok(line) => self.seen.push(serde_json::from_str(&line).unwrap()),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("cordis acp did not close stdout"),
            }
        }
        check_updates(self);
        while Instant::now() < end {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("cordis acp did not exit within {DEADLINE:?} after EOF");
    }

    /// The `session/update`s seen so far for `session` that tell its story, as their `update`
    /// objects: all but `available_commands_update` (announced when a session opens, whenever
    /// the client reads it; not part of the log a load replays).
    fn updates(&self, session: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
            .map(|m| m["params"]["update"].clone())
            .filter(|u| u["sessionUpdate"] != "available_commands_update")
            .collect()
    }

    /// Compares everything seen with the golden `name` (or records it).
    fn golden(&self, name: &str) {
        compare_golden(name, &self.seen, &self.dir);
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        // A failed test must not leave the process behind.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Session ids to `{{sessionId}}`, `{{sessionId2}}`…, `dir` to `{{cwd}}`.
fn scrub(messages: &[Value], dir: &Path) -> String {
    let mut text = String::new();
    // A running command's output updates come as its reads do (how many is the scheduler's):
    // tests that show them assert them themselves.
    for m in messages
        .iter()
        .filter(|m| !cli_acp_common::is_progress(&m["params"]["update"]))
    {
        let mut m = m.clone();
        // The agent's own requests (permission questions) carry random ids.
        if m.get("method").is_some() && m.get("id").is_some() {
            m["id"] = json!("{{requestId}}");
        }
        // The environment a terminal is given is the machine's (PATH, HOME): tests that
        // show it assert it themselves.
        if m["method"] == "terminal/create" && m["params"].get("env").is_some() {
            m["params"]["env"] = json!("{{env}}");
        }
        // When a log was last written is the clock's.
        if let Some(sessions) = m
            .get_mut("result")
            .and_then(|r| r.get_mut("sessions"))
            .and_then(Value::as_array_mut)
        {
            for s in sessions {
                if s.get("updatedAt").is_some() {
                    s["updatedAt"] = json!("{{updatedAt}}");
                }
            }
        }
        text.push_str(&m.to_string());
        text.push('\n');
    }
    let mut ids: Vec<String> = Vec::new();
    for m in messages {
        for id in [&m["result"]["sessionId"], &m["params"]["sessionId"]] {
            if let Some(id) = id.as_str()
                && !ids.iter().any(|s| s == id)
            {
                ids.push(id.to_owned());
            }
        }
    }
    for (n, id) in ids.iter().enumerate() {
        let name = if n == 0 {
            "{{sessionId}}".to_owned()
        } else {
            format!("{{{{sessionId{}}}}}", n + 1)
        };
        text = text.replace(id.as_str(), &name);
    }
    text.replace(&dir.display().to_string(), "{{cwd}}")
}

fn compare_golden(name: &str, messages: &[Value], dir: &Path) {
    let actual = scrub(messages, dir);
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots/acp")
        .join(format!("{name}.jsonl"));
    if std::env::var("CORDIS_SNAPSHOT").as_deref() == Ok("record") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (record with CORDIS_SNAPSHOT=record)",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "stdout differs from {}\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }
}

/// Every message the agent wrote is valid against the protocol's JSON Schema (updates,
/// permission questions, answers), and no `tool_call_update` comes before its `tool_call`.
fn check_updates(acp: &Acp) {
    if let Err(problem) = cli_acp_common::check_messages(&acp.seen, &acp.sent) {
        panic!("{problem}");
    }
}

fn text(t: &str) -> Value {
    json!({"text": t})
}

#[test]
fn handshake_negotiates_down_and_advertises_what_the_agent_does() {
    let dir = scratch("handshake");
    let mut acp = Acp::start(&dir, &json!([]));
    acp.initialize();
    acp.new_session(&dir);
    assert_eq!(acp.close(), 0);
    acp.golden("handshake");

    // A client asking for a newer version gets ours.
    let mut acp = Acp::start(&dir, &json!([]));
    let id = acp.request(
        "initialize",
        json!({"protocolVersion": 9, "clientCapabilities": {}}),
    );
    let r = acp.response(id);
    assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    assert_eq!(r["result"]["agentCapabilities"]["loadSession"], true);
    assert_eq!(acp.close(), 0);
}

#[test]
fn a_prompt_streams_its_text_and_ends_the_turn() {
    let dir = scratch("stream");
    let mut acp = Acp::start(&dir, &json!([{"text": ["Hello", ", editor."]}]));
    acp.initialize();
    let s = acp.new_session(&dir);
    let r = acp.prompt(&s, "hi");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(acp.close(), 0);
    acp.golden("prompt-end-turn");
}

#[test]
fn a_tool_call_is_announced_then_updated_with_its_result() {
    let dir = scratch("tool");
    std::fs::write(dir.join("greeting.txt"), "hello from the workspace\n").unwrap();
    let mut acp = Acp::start(
        &dir,
        &json!([
            {"text": "Let me read it.", "toolCalls": [{"id": "read-1", "name": "read_file", "arguments": {"path": "greeting.txt"}}]},
            text("It says hello.")
        ]),
    );
    acp.initialize();
    let s = acp.new_session(&dir);
    let r = acp.prompt(&s, "what does greeting.txt say?");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(acp.close(), 0);
    let ups = acp.updates(&s);
    let call = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(
        (&call["title"], &call["kind"], &call["status"]),
        (
            &json!("Read greeting.txt"),
            &json!("read"),
            // Awaiting the approvals stage's decision and its turn: not running yet.
            &json!("pending")
        )
    );
    let update = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && !cli_acp_common::is_running(u))
        .unwrap();
    assert_eq!(update["status"], "completed");
    assert!(
        update.to_string().contains("hello from the workspace"),
        "{update}"
    );
    acp.golden("tool-call");
}

#[test]
fn a_failing_tool_is_a_failed_update_and_a_failing_turn_rejects_the_prompt() {
    let dir = scratch("failing");
    let mut acp = Acp::start(
        &dir,
        &json!([
            {"toolCalls": [{"id": "read-missing", "name": "read_file", "arguments": {"path": "missing.txt"}}]},
            text("There is no such file."),
            {"text": "Half an ans", "error": "the model connection dropped"}
        ]),
    );
    acp.initialize();
    let s = acp.new_session(&dir);
    let r = acp.prompt(&s, "read missing.txt");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let update = acp
        .updates(&s)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && !cli_acp_common::is_running(u))
        .unwrap();
    assert_eq!(update["status"], "failed", "{update}");
    // The model fails mid-answer: the RPC is rejected with the turn's message, no stop reason.
    let r = acp.prompt(&s, "and now?");
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the model connection dropped"),
        "{r}"
    );
    assert!(r.get("result").is_none());
    assert_eq!(acp.close(), 0);
    acp.golden("tool-failure");
}

/// A turn that says "partial" and then runs a command that sleeps, so the test can act while
/// it is in flight; then an answer for the next prompt.
fn held_turn_script(command: &str) -> Value {
    json!([
        {"text": "partial", "toolCalls": [{"id": "hold", "name": "bash", "arguments": {"command": command}}]},
        text("Next answer."),
    ])
}

fn is_update(m: &Value, kind: &str) -> bool {
    m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind
}

/// True for the update that says a call runs now (it was announced `pending`).
fn is_running_now(m: &Value) -> bool {
    is_update(m, "tool_call_update") && cli_acp_common::is_running(&m["params"]["update"])
}

#[test]
fn a_running_commands_output_reaches_the_editor_while_it_runs() {
    let dir = scratch("live-output");
    // The command prints, then waits: what it printed must arrive before it ends.
    let mut acp = Acp::start(&dir, &held_turn_script("echo first line; sleep 30"));
    acp.initialize();
    let s = acp.new_session(&dir);
    let held = acp.send_prompt(&s, "hold on");
    let progress = acp.until(|m| {
        cli_acp_common::is_progress(&m["params"]["update"])
            && m["params"]["update"].to_string().contains("first line")
    });
    assert_eq!(
        progress["params"]["update"],
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "hold",
            "content": [{"type": "content", "content": {"type": "text", "text": "```console\nfirst line\n```"}}]})
    );
    acp.notify("session/cancel", json!({"sessionId": s}));
    assert_eq!(acp.response(held)["result"]["stopReason"], "cancelled");
    assert_eq!(acp.close(), 0);
}

#[test]
fn cancel_mid_stream_settles_cancelled_and_the_next_prompt_runs_at_once() {
    let dir = scratch("cancel");
    let mut acp = Acp::start(&dir, &held_turn_script("sleep 30"));
    acp.initialize();
    let s = acp.new_session(&dir);
    let first = acp.send_prompt(&s, "hold on");
    acp.until(is_running_now);
    acp.notify("session/cancel", json!({"sessionId": s}));
    let r = acp.response(first);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    let r = acp.prompt(&s, "next");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(acp.close(), 0);
    acp.golden("cancel");
}

#[test]
fn a_second_prompt_in_flight_and_an_empty_prompt_are_refused() {
    let dir = scratch("refused");
    let mut acp = Acp::start(&dir, &held_turn_script("sleep 30"));
    acp.initialize();
    let s = acp.new_session(&dir);
    let first = acp.send_prompt(&s, "hold on");
    acp.until(is_running_now);
    let second = acp.send_prompt(&s, "me too");
    let r = acp.response(second);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in flight")
    );
    acp.notify("session/cancel", json!({"sessionId": s}));
    assert_eq!(acp.response(first)["result"]["stopReason"], "cancelled");
    // Empty, blank, and content the agent did not advertise.
    for prompt in [
        json!([]),
        json!([{"type": "text", "text": "  \n"}]),
        json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}]),
    ] {
        let id = acp.request("session/prompt", json!({"sessionId": s, "prompt": prompt}));
        let r = acp.response(id);
        assert_eq!(r["error"]["code"], -32602, "{prompt}: {r}");
    }
    // The session still works.
    assert_eq!(acp.prompt(&s, "next")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    acp.golden("refused");
}

/// A session that exercises every card: text, a read, the plan, an approved edit, a command.
fn every_card_script() -> Value {
    json!([
        {"text": ["Reading ", "first."], "toolCalls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}},
            {"id": "t1", "name": "todo_write", "arguments": {"todos": [
                {"content": "fix the typo", "status": "in_progress"},
                {"content": "say so", "status": "pending"}]}}]},
        {"toolCalls": [{"id": "e1", "name": "edit_file",
            "arguments": {"path": "notes.txt", "old_string": "teh", "new_string": "the"}}]},
        {"toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": "cat notes.txt", "description": "Show the file"}}]},
        text("Fixed the typo."),
        text("Second turn."),
    ])
}

#[test]
fn load_replays_the_session_as_it_was_streamed_live() {
    let dir = scratch("load");
    std::fs::write(dir.join("notes.txt"), "teh notes\n").unwrap();
    let mut acp = Acp::start(&dir, &every_card_script());
    acp.answer = Answer::Allow;
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(
        acp.prompt(&s, "fix notes.txt")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(acp.prompt(&s, "thanks")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "the notes\n"
    );
    let live = acp.updates(&s);
    for kind in [
        "tool_call",
        "tool_call_update",
        "plan",
        "agent_message_chunk",
    ] {
        assert!(
            live.iter().any(|u| u["sessionUpdate"] == kind),
            "no {kind} live"
        );
    }
    assert!(
        live.iter()
            .any(|u| u.to_string().contains("\"type\":\"diff\""))
    );

    let mut acp = Acp::start(&dir, &every_card_script());
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    let r = acp.response(id);
    assert!(r.get("result").is_some(), "{r}");
    let replayed = acp.updates(&s);
    // The replay carries the user's side too; everything else is what the live stream sent.
    let (user, agent): (Vec<Value>, Vec<Value>) = replayed
        .into_iter()
        .partition(|u| u["sessionUpdate"] == "user_message_chunk");
    assert_eq!(
        user,
        vec![
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "fix notes.txt"}}),
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "thanks"}}),
        ]
    );
    assert_eq!(
        cli_acp_common::story(&agent),
        cli_acp_common::story(&live),
        "replay differs from live"
    );
    // The loaded session goes on.
    assert_eq!(acp.prompt(&s, "more")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    acp.golden("load-replay");
}

#[test]
fn close_ends_a_sessions_work_and_resume_opens_it_again_without_a_replay() {
    let dir = scratch("close-resume");
    let mut acp = Acp::start(&dir, &held_turn_script("sleep 30"));
    let caps = acp.initialize()["result"]["agentCapabilities"]["sessionCapabilities"].clone();
    assert_eq!(
        caps,
        json!({"list": {}, "resume": {}, "close": {}, "fork": {}, "delete": {}, "additionalDirectories": {}})
    );
    let s = acp.new_session(&dir);
    let other = acp.new_session(&dir);
    // A close while a prompt runs ends the prompt (as a cancel would) and frees the session.
    let held = acp.send_prompt(&s, "hold on");
    acp.until(is_running_now);
    let id = acp.request("session/close", json!({"sessionId": s}));
    assert_eq!(acp.response(held)["result"]["stopReason"], "cancelled");
    assert_eq!(acp.response(id)["result"], json!({}));
    for (method, params) in [
        (
            "session/prompt",
            json!({"sessionId": s, "prompt": [{"type": "text", "text": "x"}]}),
        ),
        ("session/close", json!({"sessionId": s})),
    ] {
        let id = acp.request(method, params);
        let r = acp.response(id);
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("unknown session"),
            "{r}"
        );
    }
    // The other session never noticed: it runs a prompt of its own (cancelled once it runs).
    let go = acp.send_prompt(&other, "go");
    acp.until(|m| is_running_now(m) && m["params"]["sessionId"] == other);
    acp.notify("session/cancel", json!({"sessionId": other}));
    assert_eq!(acp.response(go)["result"]["stopReason"], "cancelled");
    assert_eq!(acp.close(), 0);

    // `session/resume` in a new process: the session goes on, and nothing is replayed.
    let mut acp = Acp::start(&dir, &json!([text("Back.")]));
    acp.initialize();
    // (`mcpServers` is optional for a resume.)
    let id = acp.request("session/resume", json!({"sessionId": s, "cwd": dir}));
    let r = acp.response(id);
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(
        acp.updates(&s),
        Vec::<Value>::new(),
        "resume replays nothing"
    );
    assert_eq!(
        acp.prompt(&s, "and now")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(acp.close(), 0);
    acp.golden("close-resume");
}

#[test]
fn list_shows_sessions_newest_first_filtered_by_cwd_and_paged() {
    let dir = scratch("list");
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let mut acp = Acp::start(&dir, &json!([text("One."), text("Two.")]));
    let caps = acp.initialize()["result"]["agentCapabilities"]["sessionCapabilities"].clone();
    assert_eq!(caps["list"], json!({}));
    let sa = acp.new_session(&a);
    acp.prompt(&sa, "first   in\na");
    let sb = acp.new_session(&b);
    acp.prompt(&sb, "first in b");
    // The first prompt titles each session, live.
    assert!(
        acp.updates(&sa)
            .contains(&json!({"sessionUpdate": "session_info_update", "title": "first in a"})),
        "{:?}",
        acp.updates(&sa)
    );
    let list = |acp: &mut Acp, params: Value| -> Value {
        let id = acp.request("session/list", params);
        acp.response(id)
    };
    let all = list(&mut acp, json!({}));
    let ids: Vec<&str> = all["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [sb.as_str(), sa.as_str()], "newest first: {all}");
    assert_eq!(all["result"]["sessions"][1]["title"], "first in a");
    assert_eq!(all["result"]["sessions"][1]["cwd"], json!(a));
    assert!(all["result"].get("nextCursor").is_none(), "{all}");
    let only_a = list(&mut acp, json!({"cwd": a}));
    assert_eq!(only_a["result"]["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(only_a["result"]["sessions"][0]["sessionId"], json!(sa));
    // Fifty older sessions of `a` (copies of its log, as another process would have left):
    // pages of fifty, newest first, continued by the cursor.
    let log = walk_files(&common::state_home(&dir))
        .into_iter()
        .find(|p| p.file_name().unwrap().to_str() == Some(&format!("{sa}.jsonl")))
        .expect("the session's log");
    for i in 0..50u64 {
        let copy = log.with_file_name(format!("copy-{i:02}.jsonl"));
        std::fs::copy(&log, &copy).unwrap();
        std::fs::File::options()
            .append(true)
            .open(&copy)
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + i))
            .unwrap();
    }
    let first = list(&mut acp, json!({"cwd": a}));
    let page: Vec<&str> = first["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(page.len(), 50, "{first}");
    assert_eq!(page[0], sa);
    assert_eq!(page[1], "copy-49");
    assert_eq!(page[49], "copy-01");
    let cursor = first["result"]["nextCursor"].clone();
    assert!(cursor.is_string(), "{first}");
    let second = list(&mut acp, json!({"cwd": a, "cursor": cursor}));
    assert_eq!(
        second["result"]["sessions"],
        json!([{"sessionId": "copy-00", "cwd": a, "title": "first in a",
            "updatedAt": "2023-11-14T22:13:20.000Z"}]),
        "{second}"
    );
    assert!(second["result"].get("nextCursor").is_none(), "{second}");
    // A cursor no listing gave, and a relative cwd, are the client's mistakes.
    for params in [
        json!({"cursor": "nonsense"}),
        json!({"cwd": "relative/dir"}),
    ] {
        let r = list(&mut acp, params.clone());
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
    }
    assert_eq!(acp.close(), 0);
    acp.golden("list");
}

/// The text of the agent's message chunks in `updates`, joined.
fn said(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

#[test]
fn slash_commands_are_announced_after_new_and_load_and_answered_without_the_model() {
    let dir = scratch("commands");
    let mut acp = Acp::start(&dir, &json!([text("A path.")]));
    acp.initialize();
    let s = acp.new_session(&dir);
    let announced = acp.until(|m| is_update(m, "available_commands_update"));
    let commands = &announced["params"]["update"]["availableCommands"];
    let names: Vec<&str> = commands
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["help", "usage", "compact", "permissions"]);
    assert_eq!(commands[2]["input"], json!({"hint": "[FOCUS]"}));
    assert_eq!(commands[3]["input"], json!({"hint": "[MODE | revoke N]"}));
    let answer = |acp: &mut Acp, prompt: &str| -> String {
        let before = acp.updates(&s).len();
        assert_eq!(acp.prompt(&s, prompt)["result"]["stopReason"], "end_turn");
        said(&acp.updates(&s)[before..])
    };
    assert_eq!(
        answer(&mut acp, "/permissions auto"),
        "permission mode: auto"
    );
    assert!(answer(&mut acp, "/usage").contains("0 tokens in, 0 tokens out"));
    assert!(answer(&mut acp, "/nope x").starts_with("Unknown command /nope"));
    assert!(answer(&mut acp, "/help").contains("`/permissions [MODE | revoke N]`"));
    // `//` sends a message that starts with `/`; only it reached the model and the log.
    assert_eq!(answer(&mut acp, "//etc is a path"), "A path.");
    assert_eq!(assert_user_messages(&dir), ["/etc is a path"]);
    assert_eq!(acp.close(), 0);
    acp.golden("commands");
    // Announced after a load too; the mode the command chose was logged, so it holds.
    let mut acp = Acp::start(&dir, &json!([]));
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    acp.until(|m| is_update(m, "available_commands_update"));
    let before = acp.updates(&s).len();
    acp.prompt(&s, "/permissions");
    assert!(
        said(&acp.updates(&s)[before..]).starts_with("permission mode: auto\n"),
        "{:?}",
        acp.updates(&s)
    );
    assert_eq!(acp.close(), 0);
}

/// The text of every logged user message under `dir`'s state.
fn assert_user_messages(dir: &Path) -> Vec<String> {
    user_messages(dir)
        .iter()
        .map(|m| m["data"]["content"].as_str().unwrap().to_owned())
        .collect()
}

/// Every `request/header` event logged under `dir`'s state, in log order.
fn logged_headers(dir: &Path) -> Vec<Value> {
    walk_files(&common::state_home(dir))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|e| e["type"] == "request/header")
        .collect()
}

#[test]
fn model_and_thought_level_switch_between_prompts_log_a_header_change_and_a_load_keeps_them() {
    let dir = scratch("models");
    let config = std::fs::read_to_string(common::fixture("acp/agent.yml"))
        .unwrap()
        .replace(
            "model: acp-model",
            "model: acp-model\n    models: [alt-model]\n    thoughtLevels: [low, high]",
        );
    assert!(
        config.contains("thoughtLevels"),
        "the fixture names its model"
    );
    std::fs::write(dir.join("agent.yml"), config).unwrap();
    std::fs::write(
        dir.join("script.json"),
        json!([text("One."), text("Two.")]).to_string(),
    )
    .unwrap();
    let start = |dir: &Path| {
        let mut cmd = common::cordis_command(dir, &["acp", "agent.yml"]);
        cmd.env("ACP_SCRIPT", dir.join("script.json"));
        Acp::spawn(dir, cmd)
    };
    let mut acp = start(&dir);
    acp.initialize();
    let id = acp.request("session/new", json!({"cwd": dir, "mcpServers": []}));
    let created = acp.response(id);
    let s = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let options = &created["result"]["configOptions"];
    assert_eq!(options[0]["id"], "model");
    assert_eq!(options[0]["currentValue"], "acp-model");
    assert_eq!(options[0]["options"][1]["value"], "alt-model");
    assert_eq!(options[1]["id"], "thought_level");
    assert_eq!(options[1]["currentValue"], "default");
    assert_eq!(options[1]["options"].as_array().unwrap().len(), 3);
    assert_eq!(acp.prompt(&s, "one")["result"]["stopReason"], "end_turn");
    let set = |acp: &mut Acp, option: &str, value: &str| -> Value {
        let id = acp.request(
            "session/set_config_option",
            json!({"sessionId": s, "configId": option, "value": value}),
        );
        acp.response(id)
    };
    let switched = set(&mut acp, "model", "alt-model");
    assert_eq!(
        switched["result"]["configOptions"][0]["currentValue"], "alt-model",
        "{switched}"
    );
    let thought = set(&mut acp, "thought_level", "high");
    assert_eq!(
        thought["result"]["configOptions"][1]["currentValue"],
        "high"
    );
    // What is not offered is refused, naming what is.
    let bad = set(&mut acp, "model", "gpt-9");
    assert_eq!(bad["error"]["code"], -32602);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains(r#""acp-model", "alt-model""#),
        "{bad}"
    );
    let bad = set(&mut acp, "temperature", "hot");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains(r#"this session has "model", "thought_level""#),
        "{bad}"
    );
    assert_eq!(acp.prompt(&s, "two")["result"]["stopReason"], "end_turn");
    // The switch is the next request's header `change`.
    let headers = logged_headers(&dir);
    assert_eq!(headers.len(), 2, "{headers:?}");
    assert_eq!(headers[0]["data"]["reason"], "initial");
    assert_eq!(
        headers[0]["data"]["header"]["config"],
        json!({"model": "acp-model"})
    );
    assert_eq!(headers[1]["data"]["reason"], "change");
    assert_eq!(
        headers[1]["data"]["header"]["config"],
        json!({"model": "alt-model", "reasoningEffort": "high"})
    );
    // The older `session/set_model` switches too (answered `{}`); no request followed it.
    let id = acp.request(
        "session/set_model",
        json!({"sessionId": s, "modelId": "acp-model"}),
    );
    assert_eq!(acp.response(id)["result"], json!({}));
    assert_eq!(acp.close(), 0);
    acp.golden("config-options");
    // A load takes the model and thought level of the last request back.
    let mut acp = start(&dir);
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    let loaded = acp.response(id);
    assert_eq!(
        loaded["result"]["configOptions"][0]["currentValue"],
        "alt-model"
    );
    assert_eq!(loaded["result"]["configOptions"][1]["currentValue"], "high");
    assert_eq!(acp.close(), 0);
}

/// A one-shot OpenAI-compatible server on loopback: answers the first request with `events`
/// as server-sent events (then `[DONE]`) and returns the request body it read.
fn openai_once(events: Vec<Value>) -> (String, std::thread::JoinHandle<Value>) {
    let (base, server) = common::openai_serving(vec![events]);
    let first = std::thread::spawn(move || server.join().unwrap().remove(0));
    (base, first)
}

#[test]
fn reasoning_content_deltas_of_an_openai_compatible_server_stream_as_thought_chunks() {
    let dir = scratch("openai-thoughts");
    let delta = |d: Value| json!({"choices": [{"index": 0, "delta": d}]});
    let (base, server) = openai_once(vec![
        delta(json!({"role": "assistant", "reasoning_content": "The user wants"})),
        delta(json!({"reasoning_content": " a greeting."})),
        delta(json!({"content": "Hello."})),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]);
    let config = std::fs::read_to_string(common::fixture("acp/agent.yml"))
        .unwrap()
        .replace(
            "adapter: scripted",
            &format!("adapter: openai\n    baseUrl: {base}\n    apiKey: test-key"),
        )
        .replace("    script: \"${{ env.ACP_SCRIPT }}\"\n", "");
    assert!(
        config.contains("adapter: openai"),
        "the fixture's llm entry"
    );
    std::fs::write(dir.join("agent.yml"), config).unwrap();
    let mut acp = Acp::spawn(&dir, common::cordis_command(&dir, &["acp", "agent.yml"]));
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "hi")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    let body = server.join().unwrap();
    assert_eq!(body["model"], "acp-model");
    assert_eq!(
        acp.updates(&s)[1..],
        [
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "The user wants"}}),
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": " a greeting."}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hello."}}),
        ]
    );
}

#[test]
fn images_reach_a_model_that_takes_them_and_are_refused_where_it_does_not() {
    let dir = scratch("images");
    let (base, server) = openai_once(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "A red dot."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]);
    let config = std::fs::read_to_string(common::fixture("acp/agent.yml"))
        .unwrap()
        .replace(
            "adapter: scripted",
            &format!(
                "adapter: openai\n    baseUrl: {base}\n    apiKey: test-key\n    imageInput: true"
            ),
        )
        .replace("    script: \"${{ env.ACP_SCRIPT }}\"\n", "");
    std::fs::write(dir.join("agent.yml"), config).unwrap();
    let mut acp = Acp::spawn(&dir, common::cordis_command(&dir, &["acp", "agent.yml"]));
    let caps = acp.initialize()["result"]["agentCapabilities"]["promptCapabilities"].clone();
    assert_eq!(caps["image"], true, "the model takes images: {caps}");
    let s = acp.new_session(&dir);
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let image = json!({"type": "image", "mimeType": "image/png", "data": png});
    // Refused before anything runs: an unknown type, data that is not base64.
    for bad in [
        json!({"type": "image", "mimeType": "image/tiff", "data": png}),
        json!({"type": "image", "mimeType": "image/png", "data": "not base64!"}),
    ] {
        let id = acp.request(
            "session/prompt",
            json!({"sessionId": s, "prompt": [{"type": "text", "text": "x"}, bad]}),
        );
        assert_eq!(acp.response(id)["error"]["code"], -32602);
    }
    let id = acp.request(
        "session/prompt",
        json!({"sessionId": s, "prompt": [{"type": "text", "text": "What is this?"}, image]}),
    );
    assert_eq!(acp.response(id)["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    let body = server.join().unwrap();
    let user = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        user,
        json!({"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}},
        ]})
    );
    // The log keeps the blocks as sent: a load shows the image again.
    let mut acp = Acp::spawn(&dir, common::cordis_command(&dir, &["acp", "agent.yml"]));
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    assert!(
        acp.updates(&s)
            .contains(&json!({"sessionUpdate": "user_message_chunk", "content": image}))
    );
    assert_eq!(acp.close(), 0);

    // The fixture's scripted model takes none: not advertised, and refused naming the fix.
    let mut acp = Acp::start(&dir, &json!([text("x")]));
    let caps = acp.initialize()["result"]["agentCapabilities"]["promptCapabilities"].clone();
    assert_eq!(caps["image"], false);
    let s = acp.new_session(&dir);
    let id = acp.request(
        "session/prompt",
        json!({"sessionId": s, "prompt": [{"type": "text", "text": "x"}, image]}),
    );
    let refused = acp.response(id);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("imageInput: true"),
        "{refused}"
    );
    assert_eq!(acp.close(), 0);
}

#[test]
fn with_watch_an_edit_reaches_open_sessions_between_prompts_and_a_broken_one_changes_nothing() {
    let dir = scratch("watch");
    let fixture = std::fs::read_to_string(common::fixture("acp/agent.yml")).unwrap();
    std::fs::write(dir.join("agent.yml"), &fixture).unwrap();
    std::fs::write(
        dir.join("script.json"),
        json!([text("One."), text("Two."), text("Three.")]).to_string(),
    )
    .unwrap();
    let mut cmd = common::cordis_command(&dir, &["acp", "--watch", "agent.yml"]);
    cmd.env("ACP_SCRIPT", dir.join("script.json"));
    let mut acp = Acp::spawn(&dir, cmd);
    let stderr = common::lines(acp.child.stderr.take().unwrap());
    common::wait_for(&stderr, "over ACP on stdio");
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "one")["result"]["stopReason"], "end_turn");
    let terse = fixture.replace("You are a careful coding agent.", "You are a terse agent.");
    assert_ne!(terse, fixture, "the fixture's persona");
    std::fs::write(dir.join("agent.yml"), &terse).unwrap();
    common::wait_for(&stderr, "changed: new sessions boot it");
    // The idle session reloads at once: only the changed entry restarts.
    let reloaded = common::wait_for(&stderr, &format!("session {s}: "));
    assert!(
        reloaded.contains("restarted system-prompt; failed -"),
        "{reloaded}"
    );
    assert_eq!(acp.prompt(&s, "two")["result"]["stopReason"], "end_turn");
    // An edit that does not load is reported, and the sessions keep the last good one.
    std::fs::write(dir.join("agent.yml"), "- id: [\n").unwrap();
    common::wait_for(
        &stderr,
        "does not load; sessions keep the last good configuration",
    );
    assert_eq!(acp.prompt(&s, "three")["result"]["stopReason"], "end_turn");
    // An edit that would let more run without a question (an agent's `write_file` could have
    // made it) is taken neither by open sessions nor by new ones.
    let wider = terse.replace(
        "config: {env: [PATH, HOME]}",
        "config: {env: [PATH, HOME], sandbox: full-access}",
    );
    assert_ne!(wider, terse, "the fixture's shell entry");
    std::fs::write(dir.join("agent.yml"), &wider).unwrap();
    common::wait_for(&stderr, "changed but would let more run without a question");
    let named = common::wait_for(&stderr, "entry \"shell\"");
    assert!(
        named.contains("the sandbox workspace-write → full-access"),
        "{named}"
    );
    assert_eq!(acp.close(), 0);
    // The editor saw every answer, the reloaded agent's too.
    assert_eq!(said(&acp.updates(&s)), "One.Two.Three.");
    let systems: Vec<(String, String)> = logged_headers(&dir)
        .iter()
        .map(|h| {
            (
                h["data"]["reason"].as_str().unwrap().to_owned(),
                h["data"]["header"]["system"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        systems,
        [
            (
                "initial".to_owned(),
                "You are a careful coding agent.".to_owned()
            ),
            // The edit restarted what the agent loop injects, so the agent was opened again
            // on its session (as `run --watch` does): its first header is a `resume`.
            ("resume".to_owned(), "You are a terse agent.".to_owned()),
        ],
        "the second prompt runs on the edit, the third on the same"
    );
}

#[test]
fn reasoning_streams_as_thought_chunks_and_a_load_replays_them() {
    let dir = scratch("thoughts");
    // Usage too: without a `contextWindow` (this fixture has none) it is no `usage_update`.
    let script = json!([{"reasoning": ["Which file", "? notes."], "text": "Done.",
        "usage": {"inputTokens": 10, "outputTokens": 2}}]);
    let mut acp = Acp::start(&dir, &script);
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "think")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    let live = acp.updates(&s);
    assert_eq!(
        live,
        vec![
            json!({"sessionUpdate": "session_info_update", "title": "think"}),
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "Which file"}}),
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "? notes."}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Done."}}),
        ]
    );
    let mut acp = Acp::start(&dir, &json!([]));
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    let replayed: Vec<Value> = acp
        .updates(&s)
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "user_message_chunk")
        .collect();
    assert_eq!(
        cli_acp_common::story(&replayed),
        cli_acp_common::story(&live),
        "replay == live"
    );
    assert_eq!(acp.close(), 0);
}

#[test]
fn usage_is_the_latest_request_against_the_configured_window_not_a_running_total() {
    let dir = scratch("usage");
    let config = std::fs::read_to_string(common::fixture("acp/agent.yml"))
        .unwrap()
        .replace(
            "model: acp-model",
            "model: acp-model\n    contextWindow: 1000",
        );
    assert!(
        config.contains("contextWindow"),
        "the fixture names its model"
    );
    std::fs::write(dir.join("agent.yml"), config).unwrap();
    let script = json!([
        {"text": "One.", "usage": {"inputTokens": 300, "outputTokens": 20}},
        {"text": "Two.", "usage": {"inputTokens": 340, "outputTokens": 30}},
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let mut cmd = common::cordis_command(&dir, &["acp", "agent.yml"]);
    cmd.env("ACP_SCRIPT", dir.join("script.json"));
    let mut acp = Acp::spawn(&dir, cmd);
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "one")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.prompt(&s, "two")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    let usage: Vec<Value> = acp
        .updates(&s)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .collect();
    assert_eq!(
        usage,
        vec![
            json!({"sessionUpdate": "usage_update", "used": 320, "size": 1000}),
            json!({"sessionUpdate": "usage_update", "used": 370, "size": 1000}),
        ]
    );
    // Without a configured window nothing is claimed: see
    // `reasoning_streams_as_thought_chunks_and_a_load_replays_them`.
}

/// `cordis acp` in `dir` on the fixture with a full-access shell, `script` for the model, for a
/// client whose terminals run commands; initialized, with a session open.
fn terminal_client(dir: &Path, script: &Value) -> (Acp, String) {
    let config = std::fs::read_to_string(common::fixture("acp/agent.yml"))
        .unwrap()
        .replace(
            "config: {env: [PATH, HOME]}",
            "config: {env: [PATH, HOME], sandbox: full-access}",
        );
    assert!(config.contains("full-access"), "the fixture's shell entry");
    std::fs::write(dir.join("agent.yml"), &config).unwrap();
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let mut cmd = common::cordis_command(dir, &["acp", "agent.yml"]);
    cmd.env("ACP_SCRIPT", dir.join("script.json"));
    let mut acp = Acp::spawn(dir, cmd);
    acp.terminals = Some(Terminals::default());
    let id = acp.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"terminal": true}}),
    );
    acp.response(id);
    let s = acp.new_session(dir);
    (acp, s)
}

#[test]
fn a_cancelled_command_kills_and_releases_its_editor_terminal() {
    let dir = scratch("terminal-cancel");
    let (mut acp, s) = terminal_client(&dir, &held_turn_script("sleep 30"));
    let held = acp.send_prompt(&s, "hold on");
    acp.until(|m| m["method"] == "terminal/wait_for_exit");
    acp.notify("session/cancel", json!({"sessionId": s}));
    assert_eq!(acp.response(held)["result"]["stopReason"], "cancelled");
    // The turn's end dropped the call, which kills and releases its terminal (before the
    // prompt's answer, or just after it).
    if !acp.seen.iter().any(|m| m["method"] == "terminal/release") {
        acp.until(|m| m["method"] == "terminal/release");
    }
    let kill = acp.seen.iter().position(|m| m["method"] == "terminal/kill");
    let release = acp
        .seen
        .iter()
        .position(|m| m["method"] == "terminal/release");
    assert!(kill.is_some() && kill < release, "killed, then released");
    assert!(acp.terminals.as_ref().unwrap().running.is_empty());
    assert_eq!(acp.close(), 0);
}

#[test]
fn with_an_editor_that_runs_commands_a_full_access_shell_runs_them_in_its_terminal() {
    let dir = scratch("editor-terminal");
    let bash = |id: &str, arguments: Value| json!({"toolCalls": [{"id": id, "name": "bash", "arguments": arguments}]});
    let script = json!([
        bash(
            "t1",
            json!({"command": "echo from the editor; echo oops >&2; exit 3"})
        ),
        bash("t2", json!({"command": "sleep 30", "timeout_ms": 300})),
        text("Done.")
    ]);
    let (mut acp, s) = terminal_client(&dir, &script);
    assert_eq!(
        acp.prompt(&s, "run them")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(acp.close(), 0);
    acp.golden("editor-terminal");
    let asked: Vec<(String, String)> = acp
        .seen
        .iter()
        .filter(|m| {
            m["method"]
                .as_str()
                .is_some_and(|m| m.starts_with("terminal/"))
        })
        .map(|m| {
            (
                m["method"].as_str().unwrap().to_owned(),
                m["params"]["terminalId"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    let step = |m: &str, t: &str| (format!("terminal/{m}"), t.to_owned());
    assert_eq!(
        asked,
        [
            step("create", "-"),
            step("wait_for_exit", "term-1"),
            step("output", "term-1"),
            step("release", "term-1"),
            step("create", "-"),
            step("wait_for_exit", "term-2"),
            // Past its timeout the command is killed in the editor's terminal.
            step("kill", "term-2"),
            step("output", "term-2"),
            step("release", "term-2"),
        ],
        "{:?}",
        acp.seen
    );
    let create = acp
        .seen
        .iter()
        .find(|m| m["method"] == "terminal/create")
        .unwrap();
    assert_eq!(create["params"]["args"][0], "-c");
    assert_eq!(create["params"]["cwd"], json!(dir));
    // The terminal gets the shell's environment: what the allowlist lets through of the
    // agent's own (PATH), nothing else (cargo's variables, which this test process has).
    let env = create["params"]["env"].as_array().unwrap();
    let var = |name: &str| {
        env.iter()
            .find(|v| v["name"] == name)
            .map(|v| v["value"].clone())
    };
    assert_eq!(
        var("PATH"),
        Some(json!(std::env::var("PATH").unwrap())),
        "{env:?}"
    );
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    assert_eq!(var("CARGO_PKG_NAME"), None, "{env:?}");
    // The call's card shows the terminal while it runs; the result is the terminal's output.
    let updates = acp.updates(&s);
    assert!(
        updates.contains(
            &json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1",
        "content": [{"type": "terminal", "terminalId": "term-1"}]})
        ),
        "{updates:?}"
    );
    let results: Vec<String> = updates
        .iter()
        .filter(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u.get("status").is_some()
                && !cli_acp_common::is_running(u)
        })
        .map(Value::to_string)
        .collect();
    assert!(
        results[0].contains("from the editor") && results[0].contains("oops"),
        "{}",
        results[0]
    );
    assert!(results[0].contains("[exit code 3]"), "{}", results[0]);
    let logged = walk_files(&common::state_home(&dir))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    assert!(
        logged.contains(r#""timed_out":true"#),
        "the second call timed out: {logged}"
    );
}

#[test]
fn a_sandboxed_shell_keeps_its_commands_even_when_the_editor_offers_terminals() {
    let dir = scratch("sandboxed-terminal");
    let mut acp = Acp::start(&dir, &held_turn_script("echo here"));
    acp.terminals = Some(Terminals::default());
    let id = acp.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"terminal": true}}),
    );
    acp.response(id);
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "run")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    assert!(
        !acp.seen.iter().any(|m| m["method"] == "terminal/create"),
        "a sandboxed command left cordis's sandbox"
    );
}

#[test]
fn with_an_editor_that_does_files_the_file_tools_read_its_buffers_and_write_through_it() {
    let dir = scratch("editor-fs");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "teh notes\n").unwrap();
    let call = |id: &str, name: &str, arguments: Value| json!({"toolCalls": [{"id": id, "name": name, "arguments": arguments}]});
    let script = json!([
        call("r1", "read_file", json!({"path": "notes.txt"})),
        call(
            "e1",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "teh", "new_string": "the"})
        ),
        call(
            "w1",
            "write_file",
            json!({"path": "sub/new.txt", "content": "new\n"})
        ),
        call(
            "b1",
            "bash",
            json!({"command": "printf 'from the shell\\n' > notes.txt"})
        ),
        call("r2", "read_file", json!({"path": "notes.txt"})),
        text("Done.")
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Allow;
    // The user has typed a line into the open buffer and not saved it.
    acp.buffers = Some(
        [(notes.clone(), "teh notes\nunsaved line\n".to_owned())]
            .into_iter()
            .collect(),
    );
    let id = acp.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
    );
    acp.response(id);
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "fix it")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    acp.golden("editor-fs");
    let asked: Vec<(String, String)> = acp
        .seen
        .iter()
        .filter(|m| m["method"].as_str().is_some_and(|m| m.starts_with("fs/")))
        .map(|m| {
            let path = m["params"]["path"].as_str().unwrap();
            (
                m["method"].as_str().unwrap().to_owned(),
                path.strip_prefix(dir.to_str().unwrap()).unwrap().to_owned(),
            )
        })
        .collect();
    let pair = |m: &str, p: &str| (m.to_owned(), p.to_owned());
    assert_eq!(
        asked,
        [
            pair("fs/read_text_file", "/notes.txt"),
            // The edit is planned (and shown for approval) on the buffer, checked again, then
            // written through the editor.
            pair("fs/read_text_file", "/notes.txt"),
            pair("fs/read_text_file", "/notes.txt"),
            pair("fs/write_text_file", "/notes.txt"),
            pair("fs/write_text_file", "/sub/new.txt"),
            // After the command changed the file on disk, the read does not ask the editor
            // (whose buffer would be stale): the disk is newer.
        ],
        "{:?}",
        acp.seen
    );
    let edit_write = acp
        .seen
        .iter()
        .find(|m| m["method"] == "fs/write_text_file")
        .unwrap();
    assert_eq!(
        edit_write["params"]["content"], "the notes\nunsaved line\n",
        "the edit applies to the buffer, unsaved line and all"
    );
    // The editor wrote the files (this client saves what it is sent).
    assert_eq!(
        std::fs::read_to_string(dir.join("sub/new.txt")).unwrap(),
        "new\n"
    );
    // The results (an allowed write is first updated `in_progress`, then with its result).
    let results: Vec<String> = acp
        .updates(&s)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] != "in_progress")
        .map(|u| u.to_string())
        .collect();
    assert!(
        results[0].contains("unsaved line"),
        "the read saw the buffer: {}",
        results[0]
    );
    assert!(
        results[4].contains("from the shell"),
        "the last read saw the disk: {}",
        results[4]
    );
    assert!(!results[4].contains("unsaved line"), "{}", results[4]);
    // A path outside the workspace never reaches the editor.
    assert!(!acp.seen.iter().any(|m| {
        m["params"]["path"]
            .as_str()
            .is_some_and(|p| !p.starts_with(dir.to_str().unwrap()))
    }),);
}

#[test]
fn always_reject_refuses_the_tool_for_the_session_without_asking_and_a_load_keeps_it() {
    let dir = scratch("never");
    let write = |id: &str, path: &str| json!({"toolCalls": [{"id": id, "name": "write_file", "arguments": {"path": path, "content": "x\n"}}]});
    let script = json!([write("w1", "a.txt"), write("w2", "b.txt"), text("Neither.")]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::RejectAlways;
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "write")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    acp.golden("reject-always");
    let asked: Vec<&Value> = acp
        .seen
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    assert_eq!(
        asked.len(),
        1,
        "the second write is refused unasked: {asked:?}"
    );
    assert_eq!(
        asked[0]["params"]["options"][3],
        json!({"optionId": "reject-always", "name": "Always reject write_file in this session", "kind": "reject_always"})
    );
    assert!(!dir.join("a.txt").exists() && !dir.join("b.txt").exists());
    // The model is told the refusal holds (the second call's failed update says so).
    let failed: Vec<Value> = acp
        .updates(&s)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[1]
            .to_string()
            .contains("rejected write_file for the rest of this session"),
        "{}",
        failed[1]
    );
    // The refusal is in the log: a loaded session still holds it, and is never asked.
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Allow;
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    assert_eq!(acp.prompt(&s, "again")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    assert!(
        !acp.seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "a loaded session asked for a refused tool"
    );
    assert!(!dir.join("a.txt").exists());
}

#[test]
fn always_allow_grants_the_tool_for_the_session_and_a_load_keeps_the_grant() {
    let dir = scratch("always");
    let write = |id: &str, path: &str| json!({"toolCalls": [{"id": id, "name": "write_file", "arguments": {"path": path, "content": "x\n"}}]});
    let script = json!([
        write("w1", "a.txt"),
        write("w2", "b.txt"),
        text("Both."),
        write("w3", "c.txt"),
        text("Three.")
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::AllowAlways;
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(
        acp.prompt(&s, "write two")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(acp.close(), 0);
    acp.golden("allow-always");
    let asked: Vec<&Value> = acp
        .seen
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    assert_eq!(asked.len(), 1, "the second write is granted: {asked:?}");
    assert_eq!(
        asked[0]["params"]["options"][1],
        json!({"optionId": "allow-always", "name": "Always allow write_file in this session", "kind": "allow_always"})
    );
    assert!(dir.join("a.txt").exists() && dir.join("b.txt").exists());

    // The grant is in the log: a loaded session still holds it (and is never asked again).
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Reject;
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    // The loaded session's script starts over: its first answer writes a.txt again.
    assert_eq!(acp.prompt(&s, "again")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    assert!(
        !acp.seen
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "a loaded session asked for a granted tool"
    );
}

#[test]
fn an_embedded_text_resource_reaches_the_model_with_its_uri_and_a_binary_one_is_refused() {
    let dir = scratch("embedded");
    let mut acp = Acp::start(&dir, &json!([text("Read it.")]));
    let caps = acp.initialize()["result"]["agentCapabilities"]["promptCapabilities"].clone();
    assert_eq!(caps["embeddedContext"], true);
    let s = acp.new_session(&dir);
    let blob = json!([{"type": "resource", "resource": {"uri": "file:///x.png", "blob": "AA==", "mimeType": "image/png"}}]);
    let id = acp.request("session/prompt", json!({"sessionId": s, "prompt": blob}));
    let r = acp.response(id);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("file:///x.png is binary"),
        "{r}"
    );
    let blocks = json!([
        {"type": "text", "text": "explain"},
        {"type": "resource", "resource": {"uri": "file:///w/a.rs", "text": "fn main() {}", "mimeType": "text/x-rust"}},
    ]);
    let id = acp.request("session/prompt", json!({"sessionId": s, "prompt": blocks}));
    assert_eq!(acp.response(id)["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    let content: Vec<Value> = user_messages(&dir)
        .into_iter()
        .map(|e| e["data"]["content"].clone())
        .collect();
    assert_eq!(
        content,
        [json!(
            "explain\n[resource uri=\"file:///w/a.rs\"]\nfn main() {}\n[/resource]\n"
        )]
    );
}

/// Regression (issue 28): a prompt's `resource_link` came back from `session/load` as text
/// (`[resource_link name=… uri=…]`): the prompt was flattened before it was logged, so the replay
/// was not the prompt the user sent.
#[test]
fn load_replays_a_prompt_of_text_and_a_resource_link_as_the_blocks_sent() {
    let dir = scratch("load-blocks");
    let mut acp = Acp::start(&dir, &json!([text("Looked.")]));
    acp.initialize();
    let s = acp.new_session(&dir);
    let blocks = json!([
        {"type": "text", "text": "read this: "},
        {"type": "resource_link", "name": "notes.txt", "uri": "file:///work/notes.txt",
         "mimeType": "text/plain"},
    ]);
    let id = acp.request("session/prompt", json!({"sessionId": s, "prompt": blocks}));
    assert_eq!(acp.response(id)["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);

    // The model was sent the blocks as one text; the log keeps the blocks beside it.
    let logs = user_messages(&dir);
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(
        logs[0]["data"]["content"],
        "read this: \n[resource_link name=\"notes.txt\" uri=\"file:///work/notes.txt\"]\n"
    );
    assert_eq!(logs[0]["data"]["prompt"], blocks);

    let mut acp = Acp::start(&dir, &json!([]));
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    let user: Vec<Value> = acp
        .updates(&s)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .map(|u| u["content"].clone())
        .collect();
    assert_eq!(
        Value::Array(user),
        blocks,
        "the replay is the prompt as sent"
    );
    // Every message, the replayed resource link included, is judged against the schema.
    assert_eq!(acp.close(), 0);
}

/// The `user/message` events of every session log of the scratch `dir`.
fn user_messages(dir: &Path) -> Vec<Value> {
    walk_files(&common::state_home(dir))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|e| e["type"] == "user/message")
        .collect()
}

/// Every file below `dir` (no links followed).
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out
}

#[test]
fn load_refuses_another_cwd_an_unknown_session_and_a_relative_cwd() {
    let dir = scratch("load-refused");
    let other = dir.join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let mut acp = Acp::start(&dir, &json!([text("Hi.")]));
    acp.initialize();
    let s = acp.new_session(&dir);
    acp.prompt(&s, "hi");
    assert_eq!(acp.close(), 0);

    let mut acp = Acp::start(&dir, &json!([text("Hi.")]));
    acp.initialize();
    let load = |acp: &mut Acp, session: &str, cwd: &Value| {
        let id = acp.request(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        );
        acp.response(id)
    };
    let r = load(&mut acp, &s, &json!(other));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("belongs to")
    );
    let r = load(&mut acp, "acp-no-such-session", &json!(dir));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    let r = load(&mut acp, &s, &json!("relative/dir"));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let id = acp.request("session/new", json!({"cwd": "relative", "mcpServers": []}));
    assert_eq!(acp.response(id)["error"]["code"], -32602);
    let id = acp.request(
        "session/new",
        json!({"cwd": dir.join("no-such-dir"), "mcpServers": []}),
    );
    assert_eq!(acp.response(id)["error"]["code"], -32602);
    // The refused loads left the session loadable.
    let r = load(&mut acp, &s, &json!(dir));
    assert!(r.get("result").is_some(), "{r}");
    // And a second load of a live id is refused.
    let r = load(&mut acp, &s, &json!(dir));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(acp.close(), 0);
    acp.golden("load-refused");
}

#[test]
fn a_tool_that_asks_asks_the_editor_and_a_rejection_denies_it() {
    let dir = scratch("permission");
    let script = json!([
        {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "new.txt", "content": "written\n"}}]},
        text("Done."),
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Reject;
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(
        acp.prompt(&s, "write it")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(acp.close(), 0);
    assert!(!dir.join("new.txt").exists(), "a rejected write ran");
    let asked = acp
        .seen
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .expect("the editor was asked");
    assert_eq!(asked["params"]["toolCall"]["toolCallId"], "w1");
    let update = acp
        .updates(&s)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && !cli_acp_common::is_running(u))
        .unwrap();
    assert_eq!(update["status"], "failed", "{update}");
    acp.golden("permission-rejected");

    // Allowed once, it runs.
    let dir = scratch("permission-allowed");
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Allow;
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(
        acp.prompt(&s, "write it")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(acp.close(), 0);
    assert_eq!(
        std::fs::read_to_string(dir.join("new.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn a_write_over_a_file_is_asked_with_its_diff_against_the_files_text_and_a_new_file_as_new() {
    // The question used to carry no content: the editor showed the call's card, made from the
    // arguments alone, a new file (no `oldText`) for a file that exists.
    let dir = scratch("permission-diff");
    std::fs::write(dir.join("notes.txt"), "keep\nold line\n").unwrap();
    let script = json!([
        {"toolCalls": [
            {"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "keep\nnew line\n"}},
            {"id": "w2", "name": "write_file", "arguments": {"path": "fresh.txt", "content": "hello\n"}}
        ]},
        text("Done."),
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Reject;
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(
        acp.prompt(&s, "write them")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(acp.close(), 0);
    let asked: Vec<Value> = acp
        .seen
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .map(|m| m["params"]["toolCall"].clone())
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    let of = |id: &str| {
        asked
            .iter()
            .find(|t| t["toolCallId"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        of("w1")["content"],
        json!([{"type": "diff", "path": dir.join("notes.txt"),
                "oldText": "keep\nold line\n", "newText": "keep\nnew line\n"}])
    );
    assert_eq!(
        of("w2")["content"],
        json!([{"type": "diff", "path": dir.join("fresh.txt"), "newText": "hello\n"}])
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "keep\nold line\n"
    );
}

#[test]
fn two_sessions_run_side_by_side_and_interleave_nothing() {
    let dir = scratch("two");
    let (a_dir, b_dir) = (dir.join("a"), dir.join("b"));
    for (d, body) in [(&a_dir, "in a\n"), (&b_dir, "in b\n")] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("greeting.txt"), body).unwrap();
    }
    let script = json!([
        {"text": ["Reading ", "it."], "toolCalls": [{"id": "r", "name": "read_file", "arguments": {"path": "greeting.txt"}}]},
        text("Read."),
        {"text": "partial", "toolCalls": [{"id": "hold", "name": "bash", "arguments": {"command": "sleep 30"}}]},
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.initialize();
    let a = acp.new_session(&a_dir);
    let b = acp.new_session(&b_dir);
    assert_ne!(a, b);
    // Both in flight at once.
    let pa = acp.send_prompt(&a, "read");
    let pb = acp.send_prompt(&b, "read");
    let (mut ra, mut rb) = (None, None);
    while ra.is_none() || rb.is_none() {
        let m = acp.next();
        if m.get("method").is_none() && m["id"] == json!(pa) {
            ra = Some(m);
        } else if m.get("method").is_none() && m["id"] == json!(pb) {
            rb = Some(m);
        }
    }
    assert_eq!(ra.unwrap()["result"]["stopReason"], "end_turn");
    assert_eq!(rb.unwrap()["result"]["stopReason"], "end_turn");
    let (ua, ub) = (acp.updates(&a), acp.updates(&b));
    // Each session's stream is its own: the same script, its own workspace's file.
    assert!(ua.iter().any(|u| u.to_string().contains("in a")));
    assert!(ub.iter().any(|u| u.to_string().contains("in b")));
    assert!(!ua.iter().any(|u| u.to_string().contains("in b")));
    assert!(!ub.iter().any(|u| u.to_string().contains("in a")));
    let strip = |ups: &[Value], d: &Path| -> Vec<String> {
        ups.iter()
            .map(|u| u.to_string().replace(&d.display().to_string(), "{{cwd}}"))
            .map(|t| t.replace("in a", "in X").replace("in b", "in X"))
            .collect()
    };
    assert_eq!(strip(&ua, &a_dir), strip(&ub, &b_dir));

    // Cancelling one leaves the other running.
    let ha = acp.send_prompt(&a, "hold");
    let hb = acp.send_prompt(&b, "hold");
    let mut held = 0;
    while held < 2 {
        if is_update(&acp.next(), "tool_call") {
            held += 1;
        }
    }
    acp.notify("session/cancel", json!({"sessionId": a}));
    assert_eq!(acp.response(ha)["result"]["stopReason"], "cancelled");
    let b_len = acp.seen.len();
    assert!(
        !acp.seen[..b_len].iter().any(|m| m["id"] == json!(hb)),
        "b settled when a was cancelled"
    );
    acp.notify("session/cancel", json!({"sessionId": b}));
    assert_eq!(acp.response(hb)["result"]["stopReason"], "cancelled");
    assert_eq!(acp.close(), 0);
}

#[test]
fn a_disconnect_mid_prompt_disposes_the_turn_logs_its_end_and_leaks_no_process() {
    let dir = scratch("disconnect");
    let mut acp = Acp::start(&dir, &held_turn_script("echo $$ > pid.txt; exec sleep 30"));
    acp.initialize();
    let s = acp.new_session(&dir);
    acp.send_prompt(&s, "hold on");
    acp.until(is_running_now);
    let pid_file = dir.join("pid.txt");
    let end = Instant::now() + DEADLINE;
    let pid = loop {
        if let Ok(t) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = t.trim().parse::<u32>()
        {
            break pid;
        }
        assert!(Instant::now() < end, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    assert_eq!(acp.close(), 0);
    // The command's process group was killed with the turn.
    let end = Instant::now() + DEADLINE;
    while Path::new(&format!("/proc/{pid}")).exists() {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.contains(") Z ") {
            break; // a zombie is dead; its parent is gone too
        }
        assert!(Instant::now() < end, "sleep {pid} outlived the agent");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The closing events are in the log: the open call answered, the turn ended `disposed`.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp");
    let sessions = common::sessions_of(&dir, &fixtures);
    let log = std::fs::read_to_string(sessions.join(format!("{s}.jsonl"))).unwrap();
    let events: Vec<Value> = log
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = events.last().unwrap();
    assert_eq!(last["type"], "turn/end", "{last}");
    assert_eq!(last["data"]["reason"]["kind"], "disposed", "{last}");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool/result" && e["data"]["callId"] == "hold"),
        "the open call has no result"
    );
    // Nothing was left locked: the session loads again.
    let mut acp = Acp::start(&dir, &held_turn_script("true"));
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    assert_eq!(acp.close(), 0);
}

use crate::common::npm::mcp_fixture_server;

#[test]
fn an_mcp_servers_progress_on_a_long_call_reaches_the_editor_while_it_runs() {
    let server = mcp_fixture_server();
    let dir = scratch("mcp-progress");
    let script = json!([
        {"toolCalls": [{"id": "p1", "name": "mcp__fixture__progress", "arguments": {"steps": 3, "everyMs": 300}}]},
        text("Done."),
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Allow;
    acp.initialize();
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [{"name": "fixture", "command": server,
            "args": ["--tools", "progress"], "env": []}]}),
    );
    let r = acp.response(id);
    let s = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    assert_eq!(acp.prompt(&s, "go")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    let updates = acp.updates(&s);
    let progress: Vec<&Value> = updates
        .iter()
        .filter(|u| cli_acp_common::is_progress(u))
        .collect();
    assert!(!progress.is_empty(), "{updates:?}");
    assert!(
        progress[0].to_string().contains("progress 1"),
        "{}",
        progress[0]
    );
    let last = updates
        .iter()
        .rposition(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(
        updates[last]["status"], "completed",
        "the result comes last"
    );
}

#[test]
fn an_mcp_servers_question_is_asked_through_the_editors_form_and_checked() {
    let server = mcp_fixture_server();
    let dir = scratch("mcp-elicit");
    let script = json!([
        {"toolCalls": [{"id": "a1", "name": "mcp__fixture__ask", "arguments": {}}]},
        text("Thanks."),
        {"toolCalls": [{"id": "a2", "name": "mcp__fixture__ask", "arguments": {"url": true}}]},
        text("Paged."),
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Allow;
    acp.form_answer = Some(json!({"action": "accept", "content": {"name": "Ada"}}));
    let id = acp.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"elicitation": {"form": {}, "url": {}}}}),
    );
    acp.response(id);
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [{"name": "fixture", "command": server,
            "args": ["--tools", "ask"], "env": []}]}),
    );
    let r = acp.response(id);
    let s = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    assert_eq!(acp.prompt(&s, "ask me")["result"]["stopReason"], "end_turn");
    // URL mode: the page goes to the editor as it is.
    assert_eq!(acp.prompt(&s, "a page")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    check_updates(&acp);
    let page = acp
        .seen
        .iter()
        .filter(|m| m["method"] == "elicitation/create")
        .nth(1)
        .expect("the editor was shown the page");
    assert_eq!(
        page["params"],
        json!({"sessionId": s, "mode": "url", "message": "fixture asks: Open this",
               "url": "https://example.test/x", "elicitationId": "e1"})
    );
    // The server said the page is done: so is the editor told.
    let done = acp
        .seen
        .iter()
        .find(|m| m["method"] == "elicitation/complete")
        .expect("the editor was told the page is done");
    assert_eq!(done["params"], json!({"elicitationId": "e1"}));
    let asked = acp
        .seen
        .iter()
        .find(|m| m["method"] == "elicitation/create")
        .expect("the editor was asked");
    assert_eq!(asked["params"]["sessionId"], json!(s));
    assert_eq!(asked["params"]["message"], "fixture asks: Who are you?");
    assert_eq!(
        asked["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let result = acp
        .updates(&s)
        .into_iter()
        .find(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u.get("status").is_some()
                && u["status"] != "in_progress"
        })
        .unwrap()
        .to_string();
    // The server got the answer, its default filled in by the checks.
    assert!(result.contains("Ada") && result.contains("red"), "{result}");
}

#[test]
fn a_sessions_mcp_servers_give_it_their_tools_and_a_broken_one_refuses_the_session() {
    let server = mcp_fixture_server();
    let dir = scratch("mcp");
    let log = dir.join("mcp.log");
    let script = json!([
        {"toolCalls": [{"id": "g1", "name": "mcp__fixture__greet", "arguments": {"name": "editor"}}]},
        text("Greeted."),
        {"toolCalls": [{"id": "g2", "name": "mcp__fixture__greet", "arguments": {"name": "again"}}]},
        text("No such tool here."),
    ]);
    let mut acp = Acp::start(&dir, &script);
    // MCP tools ask first (their approval policy defaults to `ask`).
    acp.answer = Answer::Allow;
    acp.initialize();
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [{"name": "fixture", "command": server,
            "args": ["--tools", "greet", "--log", log], "env": []}]}),
    );
    let r = acp.response(id);
    let with_mcp = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    assert_eq!(
        acp.prompt(&with_mcp, "greet")["result"]["stopReason"],
        "end_turn"
    );
    // Allowed, the call is updated `in_progress`, then with its result.
    let update = acp
        .updates(&with_mcp)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] != "in_progress")
        .unwrap();
    assert_eq!(update["status"], "completed", "{update}");
    assert!(update.to_string().contains("Hello, editor!"), "{update}");
    // Another session on the same connection does not have them.
    let without = acp.new_session(&dir);
    acp.prompt(&without, "greet");
    let update = acp
        .updates(&without)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && !cli_acp_common::is_running(u))
        .unwrap();
    assert_eq!(update["status"], "failed", "{update}");
    // A server that cannot start refuses the session, naming it; other kinds are refused.
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [{"name": "broken", "command": dir.join("no-such-server"),
            "args": [], "env": []}]}),
    );
    let r = acp.response(id);
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"broken\""),
        "{r}"
    );
    // An HTTP server goes to the `mcp` plugin's HTTP transport: one that does not answer
    // refuses the session, naming it (a refused transport would be -32602 without the name).
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [{"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer x"}]}]}),
    );
    let r = acp.response(id);
    assert_eq!(r["error"]["code"], -32603, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"web\""), "{r}");
    assert!(message.contains("http://127.0.0.1:1/mcp"), "{r}");
    assert!(
        !message.contains("rmcp::"),
        "type names are not for people: {r}"
    );
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [{"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []}]}),
    );
    assert_eq!(acp.response(id)["error"]["code"], -32602);
    assert_eq!(acp.close(), 0);
    // The server was stopped with its session.
    let started: Vec<u32> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("start ").and_then(|p| p.trim().parse().ok()))
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    let end = Instant::now() + DEADLINE;
    while Path::new(&format!("/proc/{}", started[0])).exists()
        && !std::fs::read_to_string(format!("/proc/{}/stat", started[0]))
            .unwrap_or_default()
            .contains(") Z ")
    {
        assert!(Instant::now() < end, "the MCP server outlived its session");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn presets_are_modes_and_a_blank_session_switches_between_them() {
    // The bundled cordis.yml: its agent-presets roster (default `standard`) and the demo model.
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("cordis.yml");
    let bundled = bundled.display().to_string();
    let dir = scratch("modes");
    let mut acp = Acp::start_args(&dir, &[&bundled]);
    acp.initialize();
    let id = acp.request("session/new", json!({"cwd": dir, "mcpServers": []}));
    let r = acp.response(id);
    let s = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let modes = &r["result"]["modes"];
    assert_eq!(modes["currentModeId"], "standard", "{r}");
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"standard") && ids.contains(&"minimal"),
        "{ids:?}"
    );
    let set = |acp: &mut Acp, mode: &str| {
        let id = acp.request("session/set_mode", json!({"sessionId": s, "modeId": mode}));
        acp.response(id)
    };
    // The modes are the `mode` select of configOptions too (the protocol's successor).
    let options = &r["result"]["configOptions"];
    assert_eq!(options[0]["id"], "mode", "{r}");
    assert_eq!(options[0]["category"], "mode", "{r}");
    assert_eq!(options[0]["currentValue"], "standard", "{r}");
    let values: Vec<&str> = options[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ids, "one list of modes");
    let set_option = |acp: &mut Acp, config: &str, value: Value| {
        let id = acp.request(
            "session/set_config_option",
            json!({"sessionId": s, "configId": config, "value": value}),
        );
        acp.response(id)
    };
    let r = set_option(&mut acp, "model", json!("x"));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown config option \"model\""),
        "{r}"
    );
    assert_eq!(
        set_option(&mut acp, "mode", json!(3))["error"]["code"],
        -32602
    );
    // Unknown modes are refused; a blank session switches (by either method), and the answer
    // of set_config_option carries the options as they are now.
    assert_eq!(set(&mut acp, "no-such-mode")["error"]["code"], -32602);
    let r = set_option(&mut acp, "mode", json!("code"));
    assert_eq!(
        r["result"]["configOptions"][0]["currentValue"], "code",
        "{r}"
    );
    let r = set(&mut acp, "minimal");
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(acp.prompt(&s, "hi")["result"]["stopReason"], "end_turn");
    // After a turn the session switches too (the editor's picker stays live), and back.
    let r = set(&mut acp, "standard");
    assert!(r.get("result").is_some(), "{r}");
    let r = set(&mut acp, "minimal");
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(acp.close(), 0);
    // A load comes back in the mode its log records last.
    let mut acp = Acp::start_args(&dir, &[&bundled]);
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    let r = acp.response(id);
    assert_eq!(r["result"]["modes"]["currentModeId"], "minimal", "{r}");
    assert_eq!(
        r["result"]["configOptions"][0]["currentValue"], "minimal",
        "{r}"
    );
    assert_eq!(acp.close(), 0);
    // `--preset` picks new sessions' mode, recorded in the session header.
    let mut acp = Acp::start_args(&dir, &[&bundled, "--preset", "minimal"]);
    acp.initialize();
    let id = acp.request("session/new", json!({"cwd": dir, "mcpServers": []}));
    let r = acp.response(id);
    assert_eq!(r["result"]["modes"]["currentModeId"], "minimal", "{r}");
    let s2 = r["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(acp.close(), 0);
    let sessions = common::sessions_of(&dir, Path::new(env!("CARGO_MANIFEST_DIR")));
    let log = std::fs::read_to_string(sessions.join(format!("{s2}.jsonl"))).unwrap();
    let header: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(header["agentPreset"], "minimal", "{header}");
    assert_eq!(header["cwd"], json!(dir), "{header}");
    // A file without a roster has no modes.
    let mut acp = Acp::start(&dir, &json!([]));
    acp.initialize();
    let id = acp.request("session/new", json!({"cwd": dir, "mcpServers": []}));
    let r = acp.response(id);
    assert!(r["result"].get("modes").is_none(), "{r}");
    let s3 = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let id = acp.request(
        "session/set_mode",
        json!({"sessionId": s3, "modeId": "minimal"}),
    );
    assert_eq!(acp.response(id)["error"]["code"], -32602);
    assert_eq!(acp.close(), 0);
}

#[test]
fn the_step_limit_ends_the_prompt_with_max_turn_requests() {
    let dir = scratch("max-steps");
    // The fixture's agent-loop allows 8 steps; the model keeps calling tools.
    let call = json!({"toolCalls": [{"name": "list_files", "arguments": {"pattern": "*"}}]});
    let script = Value::Array(vec![call; 8]);
    let mut acp = Acp::start(&dir, &script);
    acp.initialize();
    let s = acp.new_session(&dir);
    let r = acp.prompt(&s, "loop");
    assert_eq!(r["result"]["stopReason"], "max_turn_requests", "{r}");
    assert_eq!(acp.close(), 0);
}

#[test]
fn a_config_that_does_not_load_fails_the_command_before_any_protocol() {
    // Nothing is served: diagnostics on stderr, exit 2, stdout untouched.
    let missing = common::cordis(&["acp", "no-such-file.yml"], &[]);
    assert_eq!(missing.code, 2, "{}", missing.err);
    assert!(
        missing.err.contains("cannot read no-such-file.yml"),
        "{}",
        missing.err
    );
    assert!(missing.out.is_empty());
    let bad = common::cordis(&["acp", &common::fixture("bad-unknown-plugin.yml")], &[]);
    assert_eq!(bad.code, 2, "{}", bad.err);
    assert!(bad.err.contains("configuration error"), "{}", bad.err);
    assert!(bad.out.is_empty());
}

#[test]
fn a_client_with_the_terminal_extension_gets_commands_as_terminals_live_and_replayed() {
    let dir = scratch("terminal");
    let script = json!([
        {"toolCalls": [{"id": "sh", "name": "bash", "arguments": {"command": "echo from the shell", "description": "Say hello"}}]},
        text("Done."),
    ]);
    let init = json!({"protocolVersion": 1,
        "clientCapabilities": {"_meta": {"terminal_output": true}}});
    let mut acp = Acp::start(&dir, &script);
    let id = acp.request("initialize", init.clone());
    acp.response(id);
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "run it")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    let live = acp.updates(&s);
    let call = live
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(
        call["content"],
        json!([{"type": "terminal", "terminalId": "sh"}]),
        "{call}"
    );
    assert_eq!(
        call["_meta"]["terminal_info"],
        json!({"terminal_id": "sh", "cwd": dir})
    );
    // The output streams into the terminal while the command runs; the last update ends it.
    let updates: Vec<&Value> = live
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && !cli_acp_common::is_running(u))
        .collect();
    let (last, running) = updates.split_last().unwrap();
    let streamed: String = running
        .iter()
        .map(|u| {
            assert!(cli_acp_common::is_progress(u), "{u}");
            u["_meta"]["terminal_output"]["data"].as_str().unwrap()
        })
        .collect();
    assert_eq!(streamed, "from the shell\n");
    assert!(last.get("content").is_none(), "{last}");
    assert_eq!(
        last["_meta"],
        json!({"terminal_exit": {"terminal_id": "sh", "exit_code": 0, "signal": null}})
    );
    // A load by the same client shows the same terminal.
    let mut acp = Acp::start(&dir, &script);
    let id = acp.request("initialize", init);
    acp.response(id);
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    assert_eq!(acp.close(), 0);
    let replayed: Vec<Value> = acp
        .updates(&s)
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "user_message_chunk")
        .collect();
    // The replay has the output whole in the last update.
    assert_eq!(replayed, cli_acp_common::story(&live));
}

/// Regression (issue 24, low 14): one byte that is not UTF-8 ended the connection without an
/// answer, and a line had no size limit (a 1 GiB line used 2.1 GB). Each is now one bad message,
/// answered with a parse error, and the connection goes on.
#[test]
fn a_line_that_is_not_utf8_or_too_long_is_answered_and_the_connection_goes_on() {
    let dir = scratch("bad-lines");
    let mut acp = Acp::start(&dir, &json!([{"text": "hi"}]));
    acp.write_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \xff\xfe}");
    let error = acp.next();
    assert_eq!(error["id"], Value::Null, "{error}");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert_eq!(
        error["error"]["message"],
        "Parse error: a message that is not UTF-8 text"
    );
    let init = acp.initialize();
    assert!(init["result"].is_object(), "{init}");
    let long = vec![b'x'; (16 << 20) + 10];
    acp.write_raw(&long);
    let error = acp.next();
    assert_eq!(
        error["error"]["message"],
        "Parse error: a message of 16777226 bytes, over the 16777216-byte limit; it was skipped"
    );
    let session = acp.new_session(&dir);
    assert!(!session.is_empty());
    assert_eq!(acp.close(), 0);
}

#[test]
fn an_mcp_servers_prompts_are_commands_the_editor_is_told_of_and_their_rendering_is_the_message() {
    let server = mcp_fixture_server();
    let dir = scratch("mcp-prompts");
    let mut acp = Acp::start(
        &dir,
        &json!([
            text("Hello, Ada."),
            {"toolCalls": [{"id": "t1", "name": "mcp__fixture__toggle", "arguments": {"prompt": "fresh"}}]},
            text("Added.")
        ]),
    );
    acp.initialize();
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [{"name": "fixture", "command": server,
            "args": ["--catalog"], "env": []}]}),
    );
    let r = acp.response(id);
    let s = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    // A missing argument is answered, not sent.
    assert_eq!(
        acp.prompt(&s, "/mcp__fixture__review")["result"]["stopReason"],
        "end_turn"
    );
    // The editor was told (after the session's answer) of the server's prompts beside cordis's own commands.
    let announced = acp
        .seen
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .map(|m| m["params"]["update"]["availableCommands"].clone())
        .expect("the commands are announced");
    let names: Vec<&str> = announced
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "help",
            "usage",
            "compact",
            "permissions",
            "mcp__fixture__greeting",
            "mcp__fixture__review",
            "mcp__fixture__summarize"
        ]
    );
    assert_eq!(
        announced[5],
        json!({"name": "mcp__fixture__review", "description": "Asks for a review of one file.",
               "input": {"hint": "file=… [focus=…]"}})
    );
    // The rendering is what the model gets.
    assert_eq!(
        acp.prompt(&s, "/mcp__fixture__greeting Ada")["result"]["stopReason"],
        "end_turn"
    );
    // The server adds a prompt (its `list_changed`): the editor is told the new commands.
    acp.answer = Answer::Allow;
    assert_eq!(
        acp.prompt(&s, "add a prompt")["result"]["stopReason"],
        "end_turn"
    );
    // (The server re-lists after its notification: the update may come before or after the
    // prompt's answer.)
    let fresh = |m: &Value| {
        m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            && m["params"]["update"]["availableCommands"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["name"] == "mcp__fixture__fresh"))
    };
    let again = match acp.seen.iter().find(|m| fresh(m)) {
        Some(seen) => seen.clone(),
        None => acp.until(fresh),
    };
    assert_eq!(again["params"]["sessionId"], s.as_str());
    assert_eq!(acp.close(), 0);
    let announcements = acp
        .seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .count();
    assert_eq!(
        announcements, 2,
        "announced once, and again once on the change"
    );
    check_updates(&acp);
    let said: Vec<String> = acp
        .updates(&s)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        said,
        [
            "the prompt review needs file (usage: /… file=… [focus=…])",
            "Hello, Ada.",
            "Added."
        ]
    );
    let logged = walk_files(&common::state_home(&dir))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    let users: Vec<Value> = logged
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "user/message")
        .map(|e| e["data"]["content"].clone())
        .collect();
    assert_eq!(users, [json!("Say hello to Ada."), json!("add a prompt")]);
}

#[test]
fn an_editors_http_server_that_needs_a_login_names_the_url_login_and_opens_after_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let oauth = rt.block_on(crate::oauth_fixture::OAuthFixture::start());
    let dir = scratch("mcp-oauth");
    let data = dir.join(".data");
    let script = dir.join("script.json");
    std::fs::write(&script, json!([text("Hi.")]).to_string()).unwrap();
    let mut cmd = common::cordis_command(&dir, &["acp", &common::fixture("acp/agent.yml")]);
    cmd.env("ACP_SCRIPT", &script).env("XDG_DATA_HOME", &data);
    let mut acp = Acp::spawn(&dir, cmd);
    acp.initialize();
    let servers = json!([{"type": "http", "name": "guarded", "url": oauth.mcp, "headers": []}]);
    let id = acp.request("session/new", json!({"cwd": dir, "mcpServers": servers}));
    let r = acp.response(id);
    let message = r["error"]["message"].as_str().unwrap_or_default();
    // No file holds the server: the login goes by its URL.
    assert!(
        message.contains(&format!(
            "the server needs authorization: run `cordis mcp login --url {}`",
            oauth.mcp
        )),
        "{r}"
    );

    let mut login =
        common::cordis_command(&dir, &["mcp", "login", "--url", &oauth.mcp, "--no-browser"]);
    login.env("XDG_DATA_HOME", &data);
    let (_, out) = crate::mcp_auth::login_headless(&rt, login);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "Authorized cordis for MCP server at {}",
            oauth.mcp
        )),
        "{stdout}"
    );

    // The same editor, asking again: the session opens with the server's tools.
    let id = acp.request("session/new", json!({"cwd": dir, "mcpServers": servers}));
    let r = acp.response(id);
    assert!(r["result"]["sessionId"].is_string(), "{r}");
    assert_eq!(acp.close(), 0);
}

/// Regression (issue 40, finding 10): an editor answering `fs/read_text_file` with more than the
/// message line limit left `read_file` waiting forever (the line was skipped, the request never
/// settled). The answer now fails that one call at once, naming the limit, and the connection
/// goes on. The id comes last, behind the 16 MiB of content, as an editor may write it.
#[test]
fn an_editors_answer_over_the_line_limit_fails_that_read_at_once_and_the_connection_goes_on() {
    let dir = scratch("editor-huge-read");
    std::fs::write(dir.join("notes.txt"), "small\n").unwrap();
    let script = json!([
        {"toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        text("The editor's copy was too large."),
        text("Still here.")
    ]);
    let mut acp = Acp::start(&dir, &script);
    let id = acp.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true}}}),
    );
    acp.response(id);
    let s = acp.new_session(&dir);
    let prompt = acp.send_prompt(&s, "read notes.txt");
    let asked = acp.until(|m| m["method"] == "fs/read_text_file");
    let mut answer = br#"{"jsonrpc":"2.0","result":{"content":""#.to_vec();
    answer.extend(std::iter::repeat_n(b'x', (16 << 20) + 10));
    answer.extend(format!(r#""}},"id":{}}}"#, asked["id"]).as_bytes());
    acp.write_raw(&answer);
    let r = acp.response(prompt);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let update = acp
        .updates(&s)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && !cli_acp_common::is_running(u))
        .unwrap();
    assert_eq!(update["status"], "failed", "{update}");
    assert!(
        update.to_string().contains(&format!(
            "the client's answer of {} bytes is over the 16777216-byte message limit",
            answer.len()
        )),
        "{update}"
    );
    // The agent answered no response: the answer was an answer, not a request.
    assert!(
        !acp.seen.iter().any(|m| m["error"]["code"] == -32700),
        "{:?}",
        acp.seen
            .iter()
            .filter(|m| m.get("error").is_some())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        acp.prompt(&s, "and now?")["result"]["stopReason"],
        "end_turn"
    );
    // A request over the limit is answered under its own id (not a null one).
    let mut request = format!(
        r#"{{"jsonrpc":"2.0","id":77,"method":"session/prompt","params":{{"sessionId":"{s}","prompt":[{{"type":"text","text":""#
    )
    .into_bytes();
    request.extend(std::iter::repeat_n(b'y', 16 << 20));
    request.extend(br#""}]}}"#);
    acp.write_raw(&request);
    let refused = acp.response(77);
    assert_eq!(refused["error"]["code"], -32700, "{refused}");
    assert_eq!(acp.close(), 0);
}

/// Regression (issue 40, finding 15): a request whose id was an object, an array or a boolean
/// was served and answered under that id; JSON-RPC allows only a string, a number or null. It
/// is now an Invalid Request, answered with a null id, and the connection goes on.
#[test]
fn a_request_id_that_is_an_object_an_array_or_a_boolean_is_an_invalid_request() {
    let dir = scratch("bad-ids");
    let mut acp = Acp::start(&dir, &json!([text("hi")]));
    for (id, kind) in [
        (json!({"n": 1}), "an object"),
        (json!([1]), "an array"),
        (json!(true), "a boolean"),
    ] {
        acp.write(&json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}));
        let answer = acp.next();
        assert_eq!(answer["id"], Value::Null, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        assert_eq!(
            answer["error"]["message"],
            format!("the id is {kind}; JSON-RPC allows only a string, a number or null")
        );
        assert!(answer.get("result").is_none(), "{answer}");
    }
    let init = acp.initialize();
    assert!(init["result"].is_object(), "{init}");
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "hello")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
}

#[test]
fn compact_is_answered_as_a_command_and_replayed_as_one_item() {
    let dir = scratch("compact");
    let mut acp = Acp::start(&dir, &json!([text("Hello."), text("SUMMARY: greeted.")]));
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "hi")["result"]["stopReason"], "end_turn");
    let before = acp.updates(&s).len();
    assert_eq!(
        acp.prompt(&s, "/compact the greeting")["result"]["stopReason"],
        "end_turn"
    );
    let updates = acp.updates(&s)[before..].to_vec();
    assert!(
        said(&updates)
            .starts_with("conversation compacted (/compact): 2 messages replaced by a summary"),
        "{updates:?}"
    );
    // The compaction itself, as one finished item with the summary.
    let item = |updates: &[Value]| -> Value {
        updates
            .iter()
            .find(|u| {
                u["sessionUpdate"] == "tool_call"
                    && u["toolCallId"]
                        .as_str()
                        .is_some_and(|id| id.starts_with("compaction-"))
            })
            .cloned()
            .unwrap_or_else(|| panic!("no compaction item: {updates:?}"))
    };
    let live = item(&updates);
    assert_eq!(live["status"], "completed");
    assert_eq!(live["content"][0]["content"]["text"], "SUMMARY: greeted.");
    assert_eq!(acp.close(), 0);
    // Loaded again, the editor sees the same item.
    let mut acp = Acp::start(&dir, &json!([]));
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    assert_eq!(item(&acp.updates(&s)), live);
    assert_eq!(acp.close(), 0);
}

/// The `request/header` events of session `s`'s log (under `sessions`): (reason, tool names).
fn headers(sessions: &Path, s: &str) -> Vec<(String, Vec<String>)> {
    let log = std::fs::read_to_string(sessions.join(format!("{s}.jsonl"))).unwrap();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "request/header")
        .map(|e| {
            let tools = e["data"]["header"]["tools"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .map(|t| t["name"].as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            (e["data"]["reason"].as_str().unwrap().to_owned(), tools)
        })
        .collect()
}

#[test]
fn a_mode_switch_after_a_prompt_takes_effect_on_the_next_request() {
    // The bundled cordis.yml: `standard` and `minimal` offer different tools.
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("cordis.yml");
    let bundled = bundled.display().to_string();
    let dir = scratch("mode-later");
    let mut acp = Acp::start_args(&dir, &[&bundled]);
    acp.initialize();
    let id = acp.request("session/new", json!({"cwd": dir, "mcpServers": []}));
    let r = acp.response(id);
    let s = r["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(r["result"]["modes"]["currentModeId"], "standard", "{r}");
    assert_eq!(acp.prompt(&s, "hi")["result"]["stopReason"], "end_turn");
    let id = acp.request(
        "session/set_config_option",
        json!({"sessionId": s, "configId": "mode", "value": "minimal"}),
    );
    let r = acp.response(id);
    assert_eq!(
        r["result"]["configOptions"][0]["currentValue"], "minimal",
        "{r}"
    );
    assert_eq!(acp.prompt(&s, "again")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    check_updates(&acp);
    let sessions = common::sessions_of(&dir, Path::new(env!("CARGO_MANIFEST_DIR")));
    let headers = headers(&sessions, &s);
    let [(first, before), (second, after)] = &headers[..] else {
        panic!("two headers: {headers:?}");
    };
    assert_eq!(first, "initial");
    // The second request runs the new preset: its tools, logged as a change.
    assert_eq!(second, "change", "{headers:?}");
    assert_ne!(before, after, "the new preset's tools");
    let mut acp = Acp::start_args(&dir, &[&bundled]);
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    let r = acp.response(id);
    assert_eq!(r["result"]["modes"]["currentModeId"], "minimal", "{r}");
    assert_eq!(acp.close(), 0);
}

#[test]
fn an_mcp_tools_resource_link_and_image_arrive_as_content_blocks_after_a_pending_question() {
    let server = mcp_fixture_server();
    let dir = scratch("mcp-content");
    let script = json!([
        {"toolCalls": [{"id": "l1", "name": "mcp__fixture__links", "arguments": {}}]},
        text("Shown."),
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Allow;
    acp.initialize();
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [{"name": "fixture", "command": server,
            "args": ["--tools", "links"], "env": []}]}),
    );
    let r = acp.response(id);
    let s = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    assert_eq!(acp.prompt(&s, "show")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    // Every message is the schema's (the blocks included).
    check_updates(&acp);
    // The call awaiting approval is `pending` in the question, `in_progress` once allowed.
    let asked = acp
        .seen
        .iter()
        .position(|m| m["method"] == "session/request_permission")
        .expect("the editor was asked");
    assert_eq!(
        acp.seen[asked]["params"]["toolCall"]["status"], "pending",
        "{}",
        acp.seen[asked]
    );
    let statuses: Vec<&str> = acp.seen[asked..]
        .iter()
        .filter(|m| m["params"]["update"]["toolCallId"] == "l1")
        .filter_map(|m| m["params"]["update"]["status"].as_str())
        .collect();
    assert_eq!(statuses, ["in_progress", "completed"]);
    let update = acp
        .updates(&s)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .unwrap();
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    assert_eq!(
        update["content"],
        json!([
            {"type": "content", "content": {"type": "text", "text": "two files"}},
            {"type": "content", "content": {"type": "resource_link", "uri": "file:///project/notes.md",
                "name": "notes.md", "mimeType": "text/markdown"}},
            {"type": "content", "content": {"type": "image", "mimeType": "image/png", "data": png}},
            {"type": "content", "content": {"type": "resource", "resource": {"uri": "mem://readme",
                "mimeType": "text/plain", "text": "read me"}}},
        ]),
        "{update}"
    );
    // A load shows the same blocks.
    let mut acp = Acp::start(&dir, &json!([]));
    acp.initialize();
    let id = acp.request(
        "session/load",
        json!({"sessionId": s, "cwd": dir, "mcpServers": []}),
    );
    assert!(acp.response(id).get("result").is_some());
    assert_eq!(acp.close(), 0);
    let replayed = acp
        .updates(&s)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && !cli_acp_common::is_running(u))
        .unwrap();
    assert_eq!(replayed["content"], update["content"]);
}

#[test]
fn session_delete_removes_a_listed_session_and_refuses_one_open_anywhere() {
    let dir = scratch("delete");
    let mut acp = Acp::start(&dir, &json!([text("One."), text("Two.")]));
    let caps = acp.initialize()["result"]["agentCapabilities"]["sessionCapabilities"].clone();
    assert_eq!(caps["delete"], json!({}));
    let gone = acp.new_session(&dir);
    acp.prompt(&gone, "to delete");
    let held = acp.new_session(&dir);
    acp.prompt(&held, "to keep");
    let delete = |acp: &mut Acp, s: &str| {
        let id = acp.request("session/delete", json!({"sessionId": s}));
        acp.response(id)
    };
    // Open here: close it first.
    let r = delete(&mut acp, &gone);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let id = acp.request("session/close", json!({"sessionId": gone}));
    acp.response(id);
    assert_eq!(delete(&mut acp, &gone)["result"], json!({}));
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp");
    let sessions = common::sessions_of(&dir, &fixtures);
    assert!(sessions.join(format!("{held}.jsonl")).exists());
    let listed: Vec<String> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!listed.iter().any(|f| f.starts_with(&gone)), "{listed:?}");
    let index: Vec<String> = std::fs::read_dir(sessions.join(".index"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(!index.iter().any(|f| f.starts_with(&gone)), "{index:?}");
    let id = acp.request("session/list", json!({}));
    let r = acp.response(id);
    let ids: Vec<&str> = r["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [held.as_str()], "{r}");
    // Gone: unknown.
    assert_eq!(delete(&mut acp, &gone)["error"]["code"], -32002);
    // Open in another process: refused, naming it, and kept.
    let mut other = Acp::start(&dir, &json!([text("Three.")]));
    other.initialize();
    let id = other.request("session/new", json!({"cwd": dir, "mcpServers": []}));
    let theirs = other.response(id)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    other.prompt(&theirs, "mine");
    let r = delete(&mut acp, &theirs);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("process {}", other.child.id())),
        "{r}"
    );
    assert_eq!(other.close(), 0);
    assert_eq!(acp.close(), 0);
    check_updates(&acp);
}

#[test]
fn cancel_request_ends_a_prompt_cancelled() {
    let dir = scratch("cancel-request");
    let mut acp = Acp::start(&dir, &held_turn_script("sleep 30"));
    acp.initialize();
    let s = acp.new_session(&dir);
    let held = acp.send_prompt(&s, "hold on");
    acp.until(is_running_now);
    // A request id that names nothing running changes nothing.
    acp.notify("$/cancel_request", json!({"requestId": 9999}));
    acp.notify("$/cancel_request", json!({"requestId": held}));
    assert_eq!(acp.response(held)["result"]["stopReason"], "cancelled");
    // The session goes on.
    assert_eq!(acp.prompt(&s, "more")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    check_updates(&acp);
}

#[test]
fn authenticate_refuses_a_method_it_never_offered_and_extra_directories_must_be_absolute() {
    let dir = scratch("authenticate");
    let mut acp = Acp::start(&dir, &json!([]));
    let r = acp.initialize();
    assert_eq!(r["result"]["authMethods"], json!([]), "{r}");
    let id = acp.request("authenticate", json!({"methodId": "oauth"}));
    let r = acp.response(id);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"oauth\""),
        "{r}"
    );
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [], "additionalDirectories": ["relative"]}),
    );
    assert_eq!(acp.response(id)["error"]["code"], -32602);
    let extra = dir.join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [], "additionalDirectories": [extra]}),
    );
    let r = acp.response(id);
    assert!(r["result"]["sessionId"].is_string(), "{r}");
    assert_eq!(acp.close(), 0);
    check_updates(&acp);
}

/// The result text of call `id` among `updates` (its last `tool_call_update` with a status).
fn result_of(updates: &[Value], id: &str) -> (String, String) {
    let u = updates
        .iter()
        .rev()
        .find(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == id
                && u["status"] != "in_progress"
                && u.get("status").is_some()
        })
        .unwrap_or_else(|| panic!("no result of {id}: {updates:?}"));
    (
        u["status"].as_str().unwrap_or_default().to_owned(),
        u["content"].to_string(),
    )
}

#[test]
fn additional_directories_are_workspace_roots_the_tools_use_and_a_path_outside_every_root_is_refused()
 {
    let dir = scratch("roots");
    let more = scratch("roots-more");
    let outside = scratch("roots-outside");
    std::fs::write(more.join("notes.txt"), "from the other root\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    let at = |d: &Path, f: &str| d.join(f).display().to_string();
    let script = json!([
        {"toolCalls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": at(&more, "notes.txt")}},
            {"id": "r2", "name": "read_file", "arguments": {"path": at(&outside, "secret.txt")}},
            {"id": "g1", "name": "grep", "arguments": {"pattern": "other", "path": more.display().to_string()}},
            {"id": "w1", "name": "write_file", "arguments": {"path": at(&more, "made/new.txt"), "content": "written\n"}},
            {"id": "b1", "name": "bash", "arguments": {"command": format!("echo shell > {}", at(&more, "shell.txt"))}},
            {"id": "b2", "name": "bash", "arguments": {"command": format!("echo shell > {}", at(&outside, "shell.txt"))}},
        ]},
        text("Done."),
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Allow;
    let r = acp.initialize();
    assert_eq!(
        r["result"]["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"],
        json!({}),
        "advertised: {r}"
    );
    // Checked: an existing directory each (a file or a missing path is refused, naming it).
    for bad in [more.join("notes.txt"), more.join("missing")] {
        let id = acp.request(
            "session/new",
            json!({"cwd": dir, "mcpServers": [], "additionalDirectories": [bad]}),
        );
        let r = acp.response(id);
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&bad.display().to_string()),
            "{r}"
        );
    }
    let many: Vec<&Path> = std::iter::repeat_n(more.as_path(), 33).collect();
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [], "additionalDirectories": many}),
    );
    assert_eq!(acp.response(id)["error"]["code"], -32602);
    let id = acp.request(
        "session/new",
        json!({"cwd": dir, "mcpServers": [], "additionalDirectories": [more]}),
    );
    let r = acp.response(id);
    let s = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    assert_eq!(
        acp.prompt(&s, "use both")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(acp.close(), 0);
    check_updates(&acp);
    let updates = acp.updates(&s);
    let (status, text) = result_of(&updates, "r1");
    assert_eq!(status, "completed", "{text}");
    assert!(text.contains("from the other root"), "{text}");
    let (status, text) = result_of(&updates, "r2");
    assert_eq!(status, "failed", "outside every root: {text}");
    let (status, text) = result_of(&updates, "g1");
    assert_eq!(status, "completed", "{text}");
    assert!(text.contains("notes.txt:1:from the other root"), "{text}");
    assert_eq!(
        std::fs::read_to_string(more.join("made/new.txt")).unwrap(),
        "written\n"
    );
    // `bash` writes in an additional root under `workspace-write`, and nowhere else.
    assert_eq!(
        std::fs::read_to_string(more.join("shell.txt")).unwrap(),
        "shell\n"
    );
    assert!(
        !outside.join("shell.txt").exists(),
        "{:?}",
        result_of(&updates, "b2")
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
}

#[test]
fn a_call_awaiting_approval_is_announced_pending_and_in_progress_once_it_runs() {
    let dir = scratch("pending");
    let script = json!([
        {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}]},
        text("Done."),
    ]);
    let mut acp = Acp::start(&dir, &script);
    acp.answer = Answer::Allow;
    acp.initialize();
    let s = acp.new_session(&dir);
    assert_eq!(acp.prompt(&s, "write")["result"]["stopReason"], "end_turn");
    assert_eq!(acp.close(), 0);
    check_updates(&acp);
    // In order: announced `pending`, asked `pending`, `in_progress` once allowed, completed.
    let story: Vec<String> = acp
        .seen
        .iter()
        .filter_map(|m| {
            let update = &m["params"]["update"];
            if m["method"] == "session/request_permission" {
                return Some(format!("asked {}", m["params"]["toolCall"]["status"]));
            }
            (update["toolCallId"] == "w1").then(|| {
                format!(
                    "{} {}",
                    update["sessionUpdate"].as_str().unwrap_or_default(),
                    update["status"]
                )
            })
        })
        .collect();
    assert_eq!(
        story,
        [
            "tool_call \"pending\"",
            "asked \"pending\"",
            "tool_call_update \"in_progress\"",
            "tool_call_update \"completed\"",
        ]
    );
}

/// The capabilities an MCP server was declared at its `initialize` (its `--capabilities` file).
fn declared(file: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

#[test]
fn an_mcp_server_is_declared_the_elicitation_modes_the_editor_shows_and_none_without() {
    let server = mcp_fixture_server();
    for (caps, want) in [
        (json!({}), Value::Null),
        (json!({"elicitation": {"form": {}}}), json!({"form": {}})),
        (
            json!({"elicitation": {"form": {}, "url": {}}}),
            json!({"form": {}, "url": {}}),
        ),
    ] {
        let dir = scratch("mcp-declared");
        let file = dir.join("capabilities.json");
        let mut acp = Acp::start(&dir, &json!([]));
        let id = acp.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": caps}),
        );
        acp.response(id);
        let id = acp.request(
            "session/new",
            json!({"cwd": dir, "mcpServers": [{"name": "fixture", "command": server,
                "args": ["--tools", "add", "--capabilities", file], "env": []}]}),
        );
        let r = acp.response(id);
        assert!(r["result"]["sessionId"].is_string(), "{r}");
        assert_eq!(acp.close(), 0);
        let declared = declared(&file);
        assert_eq!(declared["elicitation"], want, "editor {caps}: {declared}");
        assert_eq!(
            declared["roots"],
            json!({"listChanged": false}),
            "{declared}"
        );
    }
}
