//! Forking a session: `cordis run --fork ID[@SEQ]` and ACP `session/fork`. The fork's first
//! request extends the parent's last request (its log says it was forked, and from what), and
//! the parent's file is never written.

use crate::cli_acp_common;
use crate::common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-fork-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// Writes `dir/cordis.yml`: an OpenAI-compatible model at `base`, sessions under `.sessions`.
fn configure(dir: &Path, base: &str) {
    let config = format!(
        "- {{id: system-prompt, name: system-prompt, config: {{persona: Terse.}}}}\n\
         - {{id: tools, name: tools}}\n\
         - {{id: llm, name: llm, config: {{adapter: openai, baseUrl: \"{base}\", model: m, maxRetries: 0}}}}\n\
         - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
         - {{id: agent-loop, name: agent-loop}}\n"
    );
    std::fs::write(dir.join("cordis.yml"), config).unwrap();
}

/// A streamed answer `text`.
fn answer(text: &str) -> Vec<Value> {
    vec![
        json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 3}}),
    ]
}

/// The header line of session `id`'s log under `dir/.sessions`.
fn header(dir: &Path, id: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(format!(".sessions/{id}.jsonl"))).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// The parts of a request body that make its prefix: everything but `messages`, and the
/// messages as sent.
fn split(body: &Value) -> (Value, Vec<Value>) {
    let mut rest = body.clone();
    let messages = rest
        .as_object_mut()
        .unwrap()
        .remove("messages")
        .unwrap()
        .as_array()
        .unwrap()
        .clone();
    (rest, messages)
}

/// Asserts `later`'s request extends `earlier`'s: the same system prompt, tools and settings,
/// and `earlier`'s messages, byte for byte, as the head of `later`'s.
fn assert_extends(earlier: &Value, later: &Value) {
    let (head, messages) = split(earlier);
    let (later_head, later_messages) = split(later);
    assert_eq!(head, later_head, "the request's settings changed");
    assert!(
        later_messages.len() > messages.len(),
        "{later_messages:?} does not extend {messages:?}"
    );
    let bytes = |m: &[Value]| m.iter().map(Value::to_string).collect::<Vec<_>>().join(",");
    assert!(
        bytes(&later_messages).starts_with(&bytes(&messages)),
        "the fork's request does not extend the parent's:\n{}\n{}",
        bytes(&later_messages),
        bytes(&messages)
    );
}

fn contents(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The `request/header` reasons of session `id`'s own events (from `from` on).
fn reasons_from(dir: &Path, id: &str, from: u64) -> Vec<String> {
    common::log_events(dir, id)
        .iter()
        .filter(|e| e["type"] == "request/header" && e["seq"].as_u64().unwrap() >= from)
        .map(|e| e["data"]["reason"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn run_fork_goes_on_from_the_parents_history_and_its_request_extends_the_parents() {
    let dir = fresh_dir("run");
    let (base, bodies) = common::openai_serving(vec![answer("one"), answer("two")]);
    configure(&dir, &base);
    let (code, _, stderr) = common::piped(&dir, &["run", "--session", "p"], "a\nb\n");
    assert_eq!(code, Some(0), "{stderr}");
    let parent = bodies.join().unwrap();
    let parent_path = dir.join(".sessions/p.jsonl");
    let before = std::fs::read(&parent_path).unwrap();
    let parent_events = common::log_events(&dir, "p");
    let len = parent_events.len() as u64;

    // At its end: the whole conversation, then the new message.
    let (base, bodies) = common::openai_serving(vec![answer("three")]);
    configure(&dir, &base);
    let (code, _, stderr) = common::piped(&dir, &["run", "--fork", "p", "--session", "f"], "c\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cordis: forked session p through seq {} into new session f",
            len - 1
        )),
        "{stderr}"
    );
    let fork = bodies.join().unwrap();
    assert_extends(&parent[1], &fork[0]);
    assert_eq!(
        contents(&fork[0]),
        [
            "system: Terse.",
            "user: a",
            "assistant: one",
            "user: b",
            "assistant: two",
            "user: c"
        ]
    );
    let h = header(&dir, "f");
    assert_eq!(h["parentSession"], "p");
    assert_eq!(h["forkedAt"], len);
    assert_eq!(h["cwd"], dir.display().to_string());
    // The copy keeps the parent's events and seqs; the fork's own first request says why.
    let events = common::log_events(&dir, "f");
    assert_eq!(events[..len as usize], parent_events[..]);
    assert_eq!(reasons_from(&dir, "f", len), ["fork"]);

    // At a seq inside the second turn: cut back to the end of the first.
    let second = parent_events
        .iter()
        .find(|e| e["type"] == "user/message" && e["data"]["content"] == "b")
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    let first_end = parent_events
        .iter()
        .find(|e| e["type"] == "turn/end")
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    let (base, bodies) = common::openai_serving(vec![answer("four")]);
    configure(&dir, &base);
    let spec = format!("p@{second}");
    let (code, _, stderr) = common::piped(&dir, &["run", "--fork", &spec, "--session", "g"], "d\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cordis: forked session p through seq {first_end} into new session g"
        )),
        "{stderr}"
    );
    let fork = bodies.join().unwrap();
    assert_extends(&parent[0], &fork[0]);
    assert_eq!(
        contents(&fork[0]),
        ["system: Terse.", "user: a", "assistant: one", "user: d"]
    );
    assert_eq!(header(&dir, "g")["forkedAt"], first_end + 1);
    assert_eq!(reasons_from(&dir, "g", first_end + 1), ["fork"]);

    // A fork is a session like any other: resumed, it goes on with a `resume` header.
    let (base, bodies) = common::openai_serving(vec![answer("five")]);
    configure(&dir, &base);
    let (code, _, stderr) = common::piped(&dir, &["run", "--resume", "g"], "e\n");
    assert_eq!(code, Some(0), "{stderr}");
    let resumed = bodies.join().unwrap();
    assert_extends(&fork[0], &resumed[0]);
    assert_eq!(reasons_from(&dir, "g", first_end + 1), ["fork", "resume"]);

    assert_eq!(
        std::fs::read(&parent_path).unwrap(),
        before,
        "forking wrote the parent"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_fork_of_an_unknown_session_or_past_its_log_fails_and_says_why() {
    let dir = fresh_dir("errors");
    let (base, bodies) = common::openai_serving(vec![answer("one")]);
    configure(&dir, &base);
    let (code, _, stderr) = common::piped(&dir, &["run", "--session", "p"], "a\n");
    assert_eq!(code, Some(0), "{stderr}");
    bodies.join().unwrap();
    let len = common::log_events(&dir, "p").len();
    let before = std::fs::read(dir.join(".sessions/p.jsonl")).unwrap();
    // No model is asked anything below: the address is one nothing listens on.
    configure(&dir, "http://127.0.0.1:9");
    let beyond = format!("p@{len}");
    for (args, says) in [
        (
            vec!["run", "--fork", "nope"],
            "cordis: cannot fork session nope: no such session".to_owned(),
        ),
        (
            vec!["run", "--fork", &beyond],
            format!(
                "cordis: cannot fork session p at seq {len}: its log ends at seq {}",
                len - 1
            ),
        ),
        (
            vec!["run", "--fork", "p@0"],
            "cordis: cannot fork session p at seq 0: it has no complete turn to fork through seq 0"
                .to_owned(),
        ),
        (
            vec!["run", "--fork", "p@x"],
            "cordis: --fork p@x: SEQ must be an event number".to_owned(),
        ),
    ] {
        let (code, _, stderr) = common::piped(&dir, &args, "never sent\n");
        assert_ne!(code, Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains(&says), "{args:?}: {stderr}");
    }
    for other in ["--resume", "--continue"] {
        let args: Vec<&str> = if other == "--resume" {
            vec!["run", "--fork", "p", other, "p"]
        } else {
            vec!["run", "--fork", "p", other]
        };
        let (code, _, stderr) = common::piped(&dir, &args, "");
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("cannot be used with"), "{stderr}");
    }
    // Nothing was created, and the parent is as it was.
    let logs: Vec<_> = std::fs::read_dir(dir.join(".sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    assert_eq!(logs, ["p.jsonl"]);
    assert_eq!(
        std::fs::read(dir.join(".sessions/p.jsonl")).unwrap(),
        before
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bare ACP client of one `cordis acp` process (the scripted model of the ACP tests' fixture).
struct Client {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    seen: Vec<Value>,
    sent: Vec<(u64, String)>,
}

impl Client {
    fn start(dir: &Path, script: &Value) -> Client {
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let fixture = common::fixture("acp/agent.yml");
        let mut cmd = common::cordis_command(dir, &["acp", &fixture]);
        cmd.env("ACP_SCRIPT", &script_path);
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let lines = common::lines(child.stdout.take().unwrap());
        Client {
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
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no answer to {method}; saw {:?}", self.seen));
            let m: Value = serde_json::from_str(&line).unwrap();
            self.seen.push(m.clone());
            if m.get("method").is_none() && m["id"] == json!(id) {
                return m;
            }
        }
    }

    /// Closes stdin, waits for the exit, and checks every message against the protocol.
    fn close(mut self) {
        drop(self.stdin.take());
        for line in self.lines.iter() {
            self.seen.push(serde_json::from_str(&line).unwrap());
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
        if let Err(problem) = cli_acp_common::check_messages(&self.seen, &self.sent) {
            panic!("{problem}");
        }
    }
}

/// The log of session `id` under `dir`'s state directory: (header, events).
fn acp_log(dir: &Path, id: &str) -> (Value, Vec<Value>) {
    let sessions = common::sessions_of(dir, Path::new(&common::fixture("acp")));
    let text = std::fs::read_to_string(sessions.join(format!("{id}.jsonl"))).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().unwrap();
    (header, lines.collect())
}

#[test]
fn acp_session_fork_is_advertised_and_answers_a_new_session_with_the_parents_history() {
    let dir = fresh_dir("acp");
    let mut acp = Client::start(
        &dir,
        &json!([{"text": "First."}, {"text": "Forked."}, {"text": "Parent."}]),
    );
    let init = acp.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({})
    );
    let new = acp.request("session/new", json!({"cwd": dir, "mcpServers": []}));
    let parent = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let said = acp.request(
        "session/prompt",
        json!({"sessionId": parent, "prompt": [{"type": "text", "text": "hello"}]}),
    );
    assert_eq!(said["result"]["stopReason"], "end_turn", "{said}");
    let (_, parent_events) = acp_log(&dir, &parent);

    let forked = acp.request(
        "session/fork",
        json!({"sessionId": parent, "cwd": dir, "mcpServers": []}),
    );
    let result = &forked["result"];
    cli_acp_common::validate("NewSessionResponse", result).unwrap();
    let fork = result["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(fork, parent);
    let went_on = acp.request(
        "session/prompt",
        json!({"sessionId": fork, "prompt": [{"type": "text", "text": "and then"}]}),
    );
    assert_eq!(went_on["result"]["stopReason"], "end_turn", "{went_on}");
    // The parent goes on by itself, untouched by the fork.
    let again = acp.request(
        "session/prompt",
        json!({"sessionId": parent, "prompt": [{"type": "text", "text": "again"}]}),
    );
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    let unknown = acp.request(
        "session/fork",
        json!({"sessionId": "no-such-session", "cwd": dir, "mcpServers": []}),
    );
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    acp.close();

    let (header, events) = acp_log(&dir, &fork);
    let n = parent_events.len();
    assert_eq!(header["parentSession"], parent.as_str());
    assert_eq!(header["forkedAt"], n);
    assert_eq!(header["cwd"], dir.display().to_string());
    assert_eq!(events[..n], parent_events[..]);
    let own: Vec<&Value> = events[n..].iter().collect();
    let reasons: Vec<&Value> = own
        .iter()
        .filter(|e| e["type"] == "request/header")
        .map(|e| &e["data"]["reason"])
        .collect();
    assert_eq!(reasons, [&json!("fork")]);
    let messages: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "user/message")
        .map(|e| &e["data"]["content"])
        .collect();
    assert_eq!(messages, [&json!("hello"), &json!("and then")]);
    let (_, parent_after) = acp_log(&dir, &parent);
    assert!(
        !parent_after
            .iter()
            .any(|e| e["data"]["content"] == "and then"),
        "the fork's message reached the parent"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
