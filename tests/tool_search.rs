//! Deterministic, cache-safe tool search (issue 46): 210 tools from one MCP fixture server, a
//! `deferred-tools` entry with threshold 64. The first request carries a fixed prefix and
//! `tool_search`; the tools a search loads are appended after it (the header logged as a
//! `tool-load`), the messages keep extending, the cache-prefix contract holds, a resumed and a
//! compacted session send the same tools, and two listing orders give the same requests.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn fresh_dir(name: &str, config: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("cordis-tool-search-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), config).unwrap();
    dir
}

/// A composition on the model at `base` with the fixture server offering 210 tools (its list
/// shuffled by `seed`) and tool search past `threshold` tools.
fn composition(base: &str, seed: u64, threshold: usize) -> String {
    let server = crate::mcp_determinism::fixture_server();
    format!(
        "- {{id: system-prompt, name: system-prompt, config: {{persona: Terse.}}}}\n\
         - {{id: tools, name: tools}}\n\
         - {{id: llm, name: llm, config: {{adapter: openai, baseUrl: \"{base}\", apiKey: k, model: m, maxRetries: 0}}}}\n\
         - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
         - {{id: agent-loop, name: agent-loop}}\n\
         - {{id: deferred-tools, name: deferred-tools, config: {{threshold: {threshold}, prefix: [mcp__fx__greet]}}}}\n\
         - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--extra, \"200\", --seed, \"{seed}\"]}}\n",
        server.display()
    )
}

fn delta(d: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": d}]})
}

fn finish(why: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": why}]})
}

fn call(id: &str, name: &str, arguments: Value) -> Vec<Value> {
    vec![
        delta(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]}),
        ),
        finish("tool_calls"),
    ]
}

fn text(text: &str) -> Vec<Value> {
    vec![delta(json!({"content": text})), finish("stop")]
}

/// The names of a request body's tools, in order.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The logged `request/header` events' `(reason, changed)`.
fn headers(dir: &Path) -> Vec<(String, Value)> {
    common::log_events(dir, "s")
        .iter()
        .filter(|e| e["type"] == "request/header")
        .map(|e| {
            (
                e["data"]["reason"].as_str().unwrap().to_owned(),
                e["data"]["changed"].clone(),
            )
        })
        .collect()
}

/// One session on a fixture listing its tools in `seed`'s order: a search, a call of the
/// loaded tool, an answer; then a resumed process, a compaction and one more turn. The request
/// bodies the model got.
fn searched_session(seed: u64) -> (PathBuf, Vec<Value>) {
    let (base, bodies) = common::openai_serving(vec![
        call("c1", "tool_search", json!({"query": "add numbers"})),
        call("c2", "mcp__fx__add", json!({"a": 2, "b": 3})),
        text("5."),
        text("Again."),
        text("SUMMARY: added 2 and 3."),
        text("More."),
    ]);
    let dir = fresh_dir(&format!("seed{seed}"), &composition(&base, seed, 64));
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--session", "s", "--approve", "mcp__fx__add"],
        "add 2 and 3\n",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("5."), "{out}\n{err}");
    let (code, out, err) =
        common::piped(&dir, &["run", "--resume", "s"], "again\n/compact\nmore\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    (dir, bodies.join().unwrap())
}

#[test]
fn a_search_appends_the_loaded_tools_after_the_prefix_and_the_contract_holds() {
    let (dir, bodies) = searched_session(1);
    assert_eq!(bodies.len(), 6);
    // Request 1: the fixed prefix only, in canonical order.
    let first = tool_names(&bodies[0]);
    assert_eq!(first, ["mcp__fx__greet", "tool_search"]);
    // Request 2: request 1's tools, then the loaded one; its messages extend request 1's.
    let mut expected = first.clone();
    expected.push("mcp__fx__add".into());
    assert_eq!(tool_names(&bodies[1]), expected);
    let (one, two) = (
        bodies[0]["messages"].as_array().unwrap(),
        bodies[1]["messages"].as_array().unwrap(),
    );
    assert_eq!(two[..one.len()], one[..], "request 2 extends request 1");
    let result = two.last().unwrap()["content"].as_str().unwrap();
    assert!(result.contains(r#""loaded":["mcp__fx__add"]"#), "{result}");
    // The model called the loaded tool; the next requests, the resumed one and the one after a
    // compaction keep the same tools.
    assert!(
        bodies[2]["messages"].to_string().contains("sum"),
        "{}",
        bodies[2]
    );
    for at in [2, 3, 5] {
        assert_eq!(tool_names(&bodies[at]), expected, "request {at}");
    }
    assert!(bodies[4].get("tools").is_none(), "the summary request");
    assert_eq!(
        headers(&dir),
        [
            ("initial".to_owned(), Value::Null),
            ("tool-load".to_owned(), json!(["mcp__fx__add"])),
            ("resume".to_owned(), Value::Null),
            ("compaction".to_owned(), Value::Null),
        ]
    );
    let (code, out, err) = common::piped(&dir, &["sessions", "check", "s", "cordis.yml"], "");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("the cache-prefix contract holds: 5 requests checked"),
        "{out}"
    );

    // Another listing order and other delays: the same requests, byte for byte.
    let (other, again) = searched_session(2);
    for (at, (a, b)) in bodies.iter().zip(&again).enumerate() {
        assert_eq!(a["tools"], b["tools"], "request {at}: tools");
        assert_eq!(a["messages"], b["messages"], "request {at}: messages");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn under_the_threshold_the_model_gets_every_tool_and_no_tool_search() {
    let (base, bodies) = common::openai_serving(vec![text("Hi.")]);
    let dir = fresh_dir("under", &composition(&base, 3, 500));
    let (code, out, err) = common::piped(&dir, &["run", "--session", "s"], "hello\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    let names = tool_names(&bodies.join().unwrap()[0]);
    assert_eq!(names.len(), 210, "{names:?}");
    assert!(!names.iter().any(|n| n == "tool_search"), "{names:?}");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "canonical order");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_shows_the_prefix_and_the_deferred_tools_in_canonical_order() {
    let (base, _bodies) = common::openai_serving(vec![]);
    let dir = fresh_dir("check", &composition(&base, 4, 64));
    let (code, out, err) = common::piped(&dir, &["check", "cordis.yml"], "");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains("tools (canonical order, 2):\n    1. mcp__fx__greet\n    2. tool_search\n"),
        "{out}"
    );
    assert!(
        out.contains("deferred (loaded by tool_search, canonical order, 209):\n"),
        "{out}"
    );
    let (code, json_out, err) = common::piped(&dir, &["check", "cordis.yml", "--json"], "");
    assert_eq!(code, Some(0), "{json_out}\n{err}");
    let report: Value = serde_json::from_str(&json_out).unwrap();
    let deferred: Vec<&str> = report["assembly"]["deferred"]
        .as_array()
        .unwrap_or_else(|| panic!("no deferred list: {json_out}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(deferred.len(), 209);
    assert!(deferred.contains(&"mcp__fx__add"), "{deferred:?}");
    let mut sorted = deferred.clone();
    sorted.sort_unstable();
    assert_eq!(deferred, sorted, "canonical order");
    let _ = std::fs::remove_dir_all(&dir);
}
