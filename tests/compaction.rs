//! Compaction as people meet it: automatically near the context window, `/compact` piped, in a
//! terminal and from the page, a failed one, and a resumed session that goes on from the summary.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn fresh_dir(name: &str, config: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-compact-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), config).unwrap();
    dir
}

/// A composition on `llm` (the llm entry's config, flow style) with sessions under `.sessions`.
fn composition(llm: &str) -> String {
    format!(
        "- {{id: system-prompt, name: system-prompt, config: {{persona: Terse.}}}}\n\
         - {{id: tools, name: tools}}\n\
         - {{id: llm, name: llm, config: {llm}}}\n\
         - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
         - {{id: agent-loop, name: agent-loop}}\n"
    )
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// A streamed answer `text` reporting `input` prompt tokens.
fn answer(text: &str, input: u64) -> Vec<Value> {
    vec![
        json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": input, "completion_tokens": 3}}),
    ]
}

/// The (role, content) pairs of a request body's messages.
fn said(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

const SUMMARY_PREFIX: &str = "The conversation so far was compacted to save context.";

#[test]
fn automatic_compaction_at_the_threshold_restarts_the_conversation_from_the_summary() {
    let (base, bodies) = common::openai_serving(vec![
        answer("one", 500),
        answer("two", 850),
        answer("SUMMARY: the user said a and b.", 900),
        answer("three", 120),
    ]);
    let llm = format!(
        "{{adapter: openai, baseUrl: \"{base}\", model: m, contextWindow: 1000, maxRetries: 0}}"
    );
    let dir = fresh_dir("auto", &composition(&llm));
    let (code, stdout, stderr) = common::piped(&dir, &["run", "--session", "s"], "a\nb\nc\n");
    assert_eq!(code, Some(0), "{stderr}");
    let bodies = bodies.join().unwrap();
    assert_eq!(bodies.len(), 4);
    // 500 of 1000 is under the 80% default; 850 is over it: before the third turn, a summary.
    let ask = said(&bodies[2]);
    assert_eq!(ask[0].0, "system");
    assert!(
        ask[0]
            .1
            .starts_with("You compact a coding agent's conversation"),
        "{ask:?}"
    );
    assert_eq!(
        ask[1..ask.len() - 1],
        [
            ("user".into(), "a".into()),
            ("assistant".into(), "one".into()),
            ("user".into(), "b".into()),
            ("assistant".into(), "two".into()),
        ]
    );
    assert!(bodies[2].get("tools").is_none(), "{}", bodies[2]);
    // The third turn goes on from the summary: the system prompt, the summary, the message.
    let sent = said(&bodies[3]);
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[0], ("system".into(), "Terse.".into()));
    assert!(
        sent[1].1.starts_with(SUMMARY_PREFIX)
            && sent[1].1.ends_with("SUMMARY: the user said a and b."),
        "{sent:?}"
    );
    assert_eq!(sent[2], ("user".into(), "c".into()));
    let events = common::log_events(&dir, "s");
    let at = kinds(&events)
        .iter()
        .position(|k| *k == "compaction")
        .unwrap();
    let c = &events[at]["data"];
    assert_eq!(c["trigger"], "auto");
    assert_eq!(c["messages"], 4);
    assert_eq!(c["inputTokens"], 850);
    assert_eq!(c["usage"]["inputTokens"], 900);
    assert_eq!(c["throughSeq"], at - 1);
    // It lies between the second turn and the third, and the next header says why.
    assert_eq!(events[at - 1]["type"], "turn/end");
    assert_eq!(events[at + 1]["type"], "turn/start");
    let header = events[at..]
        .iter()
        .find(|e| e["type"] == "request/header")
        .unwrap();
    assert_eq!(header["data"]["reason"], "compaction");
    assert!(
        stdout.contains("(conversation compacted (automatically"),
        "{stdout}"
    );
    assert!(stdout.contains("three"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compact_piped_with_a_focus_and_a_resumed_session_goes_on_from_the_summary() {
    let (base, bodies) = common::openai_serving(vec![
        answer("hi there", 40),
        answer("SUM: greeted.", 50),
        answer("again!", 30),
        answer("resumed", 35),
    ]);
    let llm = format!("{{adapter: openai, baseUrl: \"{base}\", model: m, maxRetries: 0}}");
    let dir = fresh_dir("manual", &composition(&llm));
    let (code, _, stderr) = common::piped(
        &dir,
        &["run", "--session", "m"],
        "hello\n/compact keep the names\nagain\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "cordis: conversation compacted (/compact): 2 messages replaced by a summary; the conversation goes on from the summary (13 characters)."
        ),
        "{stderr}"
    );
    // A second process resumes the compacted session: it sends the compacted history.
    let (code, _, stderr) = common::piped(&dir, &["run", "--resume", "m"], "more\n");
    assert_eq!(code, Some(0), "{stderr}");
    let bodies = bodies.join().unwrap();
    let ask = said(&bodies[1]);
    assert!(
        ask.last()
            .unwrap()
            .1
            .ends_with("Pay particular attention to: keep the names"),
        "{ask:?}"
    );
    let sent = said(&bodies[2]);
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[1].1.ends_with("SUM: greeted."), "{sent:?}");
    let resumed = said(&bodies[3]);
    assert_eq!(
        resumed[1..],
        [
            sent[1].clone(),
            ("user".into(), "again".into()),
            ("assistant".into(), "again!".into()),
            ("user".into(), "more".into()),
        ]
    );
    let events = common::log_events(&dir, "m");
    let compaction = events.iter().find(|e| e["type"] == "compaction").unwrap();
    assert_eq!(compaction["data"]["trigger"], "manual");
    assert_eq!(compaction["data"]["focus"], "keep the names");
    let reasons: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "request/header")
        .map(|e| e["data"]["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["initial", "compaction", "resume"]);
    // History shows it as one item, with the summary.
    let (code, out, err) = common::piped(&dir, &["history", "m", "--color", "never"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("(conversation compacted (/compact): 2 messages replaced by a summary)\n  SUM: greeted.\n"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_compaction_changes_nothing_and_says_why() {
    let dir = fresh_dir(
        "failed",
        &composition(
            "{adapter: scripted, model: m, responses: [{text: first}, {error: overloaded}, {text: \"\"}, {text: second}]}",
        ),
    );
    let (code, stdout, stderr) = common::piped(
        &dir,
        &["run", "--session", "f"],
        "one\n/compact\n/compact\ntwo\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("cordis: the compaction failed, the conversation is unchanged: overloaded"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "cordis: the compaction failed, the conversation is unchanged: the model answered with an empty summary"
        ),
        "{stderr}"
    );
    assert!(stdout.contains("second"), "{stdout}");
    let events = common::log_events(&dir, "f");
    assert!(!kinds(&events).contains(&"compaction"), "{events:?}");
    let turns = events.iter().filter(|e| e["type"] == "turn/end").count();
    assert_eq!(turns, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The log of `dir`'s session `id` with what differs between two runs of one script (times)
/// left out.
fn timeless(dir: &Path, id: &str) -> Vec<Value> {
    common::log_events(dir, id)
        .into_iter()
        .map(|mut e| {
            e.as_object_mut().unwrap().remove("time");
            e
        })
        .collect()
}

#[test]
fn a_compacted_session_replays_to_the_same_log() {
    let llm = "{adapter: scripted, model: m, contextWindow: 100, responses: [\
        {text: a, usage: {inputTokens: 90, outputTokens: 1}}, \
        {text: \"S1\", usage: {inputTokens: 95, outputTokens: 2}}, \
        {text: b, usage: {inputTokens: 85, outputTokens: 1}}, \
        {text: \"S2\"}, {text: c}]}";
    let mut logs = Vec::new();
    for run in ["one", "two"] {
        let dir = fresh_dir(&format!("replay-{run}"), &composition(llm));
        let (code, _, stderr) = common::piped(&dir, &["run", "--session", "r"], "x\ny\nz\n");
        assert_eq!(code, Some(0), "{stderr}");
        logs.push(timeless(&dir, "r"));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let compactions = logs[0].iter().filter(|e| e["type"] == "compaction").count();
    assert_eq!(compactions, 2, "{:?}", logs[0]);
    assert_eq!(logs[0], logs[1]);
}

#[test]
fn compact_in_a_terminal_says_what_it_did() {
    use common::pty::Pty;
    use std::time::Duration;
    let dir = fresh_dir(
        "tty",
        &composition("{adapter: scripted, model: m, responses: [{text: hey}, {text: \"SUM.\"}]}"),
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env("XDG_STATE_HOME", dir.join(".state"))
        .args(["run", "--session", "t"])
        .current_dir(&dir)
        .env_remove("CORDIS_LLM")
        .env_remove("RUST_LOG");
    let limit = Duration::from_secs(60);
    let mut term = Pty::spawn(cmd);
    term.wait_for("> ", limit);
    term.send("hi\r");
    term.wait_for("hey", limit);
    term.wait_for_count("> ", 2, limit);
    term.send("/compact\r");
    term.wait_for("2 messages replaced by a summary", limit);
    term.send("\x04");
    assert_eq!(term.wait_exit(limit), Some(0), "{}", term.screen());
    let events = common::log_events(&dir, "t");
    assert_eq!(
        events.iter().filter(|e| e["type"] == "compaction").count(),
        1
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_turn_near_the_window_compacts_between_its_steps_and_goes_on() {
    let config = "- {id: system-prompt, name: system-prompt, config: {persona: Terse.}}\n\
         - {id: tools, name: tools}\n\
         - {id: todo, name: tool-todo}\n\
         - {id: llm, name: llm, config: {adapter: scripted, model: m, contextWindow: 100, responses: [\
           {toolCalls: [{name: todo_write, arguments: {todos: [{content: a, status: pending}]}}], usage: {inputTokens: 90, outputTokens: 5}}, \
           {text: \"S: wrote the list\"}, {text: done}]}}\n\
         - {id: sessions, name: sessions, config: {root: .sessions}}\n\
         - {id: agent-loop, name: agent-loop}\n";
    let dir = fresh_dir("mid-turn", config);
    let (code, stdout, stderr) = common::piped(&dir, &["run", "--session", "t"], "plan it\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("done"), "{stdout}");
    let events = common::log_events(&dir, "t");
    let kinds = kinds(&events);
    let at = kinds.iter().position(|k| *k == "compaction").unwrap();
    assert_eq!(
        kinds[at - 2..at + 3],
        [
            "tool/result",
            "step/end",
            "compaction",
            "step/start",
            "request/header"
        ]
    );
    assert_eq!(events[at + 2]["data"]["reason"], "compaction");
    assert_eq!(events[at]["data"]["messages"], 3);
    assert_eq!(
        events.last().unwrap()["data"]["reason"]["kind"],
        "completed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
