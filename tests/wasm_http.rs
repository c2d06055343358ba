//! The mediated network for WebAssembly guests through `cordis run`: a guest granted
//! `network: {allow: [127.0.0.1:PORT]}` reaches that loopback server and is refused another,
//! and the session log's tool results record each request. (The engine's side — bounds,
//! redirects, the import check — is tested in `plugins/wasm/tests/wasm/http.rs`.)
#![cfg(unix)]

use crate::common;
// The WAT guests (`plugins/wasm/tests/wasm/guests.rs`), loaded once by the `wasm` module.
use crate::wasm::guests;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

/// A loopback server answering every request `hello` (one request per connection); the
/// number of requests it got, and its port.
fn serve() -> (Arc<AtomicUsize>, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 5\r\n\r\nhello",
            );
        }
    });
    (hits, port)
}

#[test]
fn a_guest_reaches_its_allowed_host_is_refused_another_and_the_log_records_both() {
    let dir = std::env::temp_dir().join(format!("cordis-wasm-http-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("web.wasm"), guests::component(&guests::http())).unwrap();
    let ((allowed_hits, allowed), (other_hits, other)) = (serve(), serve());
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
             - id: llm\n  name: llm\n  config:\n    adapter: scripted\n    model: m\n    responses:\n      - toolCalls:\n          - {{name: get, arguments: {{url: \"http://127.0.0.1:{allowed}/a\"}}}}\n          - {{name: get, arguments: {{url: \"http://127.0.0.1:{other}/b\"}}}}\n      - text: Fetched.\n\
             - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
             - {{id: agent-loop, name: agent-loop}}\n\
             - {{id: approvals, name: approvals, config: {{mode: ask, tools: {{get: allow}}}}}}\n\
             - id: web\n  name: ./web.wasm\n  config:\n    capabilities: {{network: {{allow: [\"127.0.0.1:{allowed}\"]}}}}\n"
        ),
    )
    .unwrap();
    let (code, out, err) = common::piped(&dir, &["run", "cordis.yml"], "fetch both\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("Fetched."), "{out}\n{err}");
    assert_eq!(allowed_hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        other_hits.load(Ordering::SeqCst),
        0,
        "nothing reached the other host"
    );
    let mut results = Vec::new();
    for entry in std::fs::read_dir(dir.join(".sessions")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path).unwrap();
            results.extend(
                text.lines()
                    .skip(1)
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|e| e["type"] == "tool/result")
                    .map(|e| e["data"].clone()),
            );
        }
    }
    assert_eq!(results.len(), 2, "{results:#?}");
    // Reached: the guest's answer under `result`, the request under `http`.
    assert_eq!(results[0]["isError"], false, "{results:#?}");
    assert_eq!(
        results[0]["content"]["result"],
        json!({"status": 200, "headers": 2, "body": "hello"})
    );
    let record = &results[0]["content"]["http"][0];
    assert_eq!(record["method"], "GET");
    assert_eq!(record["url"], format!("http://127.0.0.1:{allowed}/a"));
    assert_eq!(record["status"], 200);
    assert_eq!(record["bytes"], 5);
    assert_eq!(
        record["sha256"],
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    // Refused: the host named, the allowlist and the key; the refusal recorded too.
    assert_eq!(results[1]["isError"], true, "{results:#?}");
    let text = results[1]["content"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "127.0.0.1:{other} is not on this entry's network.allow (127.0.0.1:{allowed})"
        )),
        "{text}"
    );
    assert!(text.contains("\nhttp: [{\"method\":\"GET\""), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads one JSON file.
fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The `tool/result` payloads of a log's events.
fn tool_results(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| e["data"].clone())
        .collect()
}

#[test]
fn a_replay_answers_the_guests_requests_from_the_recording_and_a_tampered_one_fails_naming_the_request()
 {
    let dir = std::env::temp_dir().join(format!("cordis-wasm-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("web.wasm"), guests::component(&guests::http())).unwrap();
    let (hits, port) = serve();
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
             - id: llm\n  name: llm\n  config:\n    adapter: scripted\n    model: m\n    responses:\n      - toolCalls:\n          - {{name: get, arguments: {{url: \"http://127.0.0.1:{port}/a\"}}}}\n          - {{name: post, arguments: {{url: \"http://127.0.0.1:{port}/b\"}}}}\n      - text: Fetched.\n\
             - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
             - {{id: agent-loop, name: agent-loop}}\n\
             - {{id: approvals, name: approvals, config: {{mode: ask, tools: {{get: allow, post: allow}}}}}}\n\
             - id: web\n  name: ./web.wasm\n  config:\n    capabilities: {{network: {{allow: [\"127.0.0.1:{port}\"]}}}}\n"
        ),
    )
    .unwrap();
    let (code, out, err) = common::piped(&dir, &["run", "cordis.yml"], "fetch\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    let log = std::fs::read_dir(dir.join(".sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let id = log.file_stem().unwrap().to_str().unwrap().to_owned();
    let events: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let said = tool_results(&events);
    assert_eq!(said.len(), 2, "{said:#?}");
    // What the model saw is the record alone: no kept headers or body.
    assert_eq!(
        said[0]["content"]["http"][0]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["bytes", "method", "sha256", "status", "url"]
    );
    // Each answer is kept next to the log, and the export carries it into the script.
    assert_eq!(
        std::fs::read_dir(dir.join(".sessions/http"))
            .unwrap()
            .count(),
        2
    );
    let (code, out, err) = common::piped(
        &dir,
        &[
            "sessions",
            "export",
            &id,
            "cordis.yml",
            "--exercise",
            "replay.json",
        ],
        "",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let script = read_json(&dir.join("replay.json"));
    let call = script["responses"][0]["toolCalls"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let kept = &script["http"][&call][0];
    assert_eq!(kept["url"], format!("http://127.0.0.1:{port}/a"));
    assert_eq!(kept["answer"]["body"], "aGVsbG8=", "{script:#}");
    assert_eq!(kept["answer"]["headers"].as_array().unwrap().len(), 2);

    // The replay: no request reaches the server, and the tools answer as they did.
    let replay = |file: &str| {
        common::piped(
            &dir,
            &[
                "stress",
                "cordis.yml",
                "--exercise",
                file,
                "--seeds",
                "3",
                "--print-log",
            ],
            "",
        )
    };
    let (code, out, err) = replay("replay.json");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("3 seeds agree"), "{out}\n{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 2, "the replay went out");
    let replayed: Vec<Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let again = tool_results(&replayed);
    assert_eq!(again.len(), 6, "three seeds, two calls each");
    for (now, then) in again.iter().zip(said.iter().cycle()) {
        assert_eq!(now["content"], then["content"]);
        assert_eq!(now["isError"], then["isError"]);
    }

    // A recording whose request differs fails the replay, naming the request and what differed.
    let mut tampered = script.clone();
    tampered["http"][&call][0]["url"] = json!(format!("http://127.0.0.1:{port}/elsewhere"));
    std::fs::write(dir.join("tampered.json"), tampered.to_string()).unwrap();
    let (code, out, err) = replay("tampered.json");
    assert_ne!(code, Some(0), "{out}\n{err}");
    let both = format!("{out}\n{err}");
    assert!(
        both.contains(&format!(
            "replay: request 1 of call {call} (GET http://127.0.0.1:{port}/a) differs from the recording: the URL was http://127.0.0.1:{port}/elsewhere"
        )),
        "{both}"
    );
    // A kept body that is not the recorded one is refused before anything runs.
    let mut tampered = script.clone();
    tampered["http"][&call][0]["answer"]["body"] = json!("aGVsbG8h");
    std::fs::write(dir.join("tampered.json"), tampered.to_string()).unwrap();
    let (code, out, err) = replay("tampered.json");
    assert_ne!(code, Some(0), "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "the script's request 1 of call {call} (GET http://127.0.0.1:{port}/a): the kept body"
        )),
        "{out}\n{err}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2, "no replay went out");
    let _ = std::fs::remove_dir_all(&dir);
}
