//! Session log persistence: contiguous seqs, replay, torn tails, open turns, versions.

use crate::common::{complete_turn, temp_dir};
use cordis_schema::ToolSchema;
use cordis_session::*;

fn tool(name: &str) -> ToolSchema {
    ToolSchema {
        name: name.into(),
        description: format!("{name} tool"),
        parameters: serde_json::json!({"type": "object", "properties": {"b": {}, "a": {}}}).into(),
    }
}

#[tokio::test]
async fn seqs_are_contiguous_and_a_replayed_log_derives_the_same_messages_and_header() {
    let dir = temp_dir("replay");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let s = store.create("s1", Some("/w".into()), None).await.unwrap();
    complete_turn(&s, 1, vec![tool("read"), tool("write")]);
    complete_turn(&s, 2, vec![tool("write"), tool("read")]);
    s.flush().await.unwrap();
    let live_messages = s.messages();
    let live_header = s.request_header().unwrap().unwrap();
    assert_eq!(
        live_messages,
        derive_messages(&s.events()).unwrap(),
        "cache == fresh fold"
    );
    drop(s);

    let text = std::fs::read_to_string(dir.join("s1.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let head: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(head["type"], "session");
    assert_eq!(head["version"], 0);
    assert_eq!(head["cwd"], "/w");
    for (i, line) in lines[1..].iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["seq"], i as u64, "contiguous seq at line {}", i + 2);
    }

    let (again, report) = store.open("s1").await.unwrap();
    assert_eq!(report, OpenReport::default());
    let events = again.events();
    assert_eq!(derive_messages(&events).unwrap(), live_messages);
    assert_eq!(fold_request_header(&events).unwrap().unwrap(), live_header);
    assert_eq!(
        live_header
            .tools
            .as_ref()
            .unwrap()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["write", "read"],
        "the latest snapshot wins, order kept"
    );
    assert_eq!(again.messages(), live_messages);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_torn_final_line_is_truncated_and_reported() {
    let dir = temp_dir("torn");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let s = store.create("t", None, None).await.unwrap();
    complete_turn(&s, 1, vec![]);
    s.flush().await.unwrap();
    let n = s.len();
    drop(s);
    let path = dir.join("t.jsonl");
    let before = std::fs::metadata(&path).unwrap().len();
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(br#"{"type":"turn/start","seq":13,"ti"#)
        .unwrap();
    drop(f);
    let (s, report) = store.open("t").await.unwrap();
    assert_eq!(report.truncated_bytes, Some(33));
    assert!(report.repaired.is_empty());
    assert_eq!((s.id(), report.header_id), ("t", None));
    assert_eq!(s.len(), n);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), before);
    drop(s);

    // A copy is the session its file names, for a writer and a reader alike.
    std::fs::copy(&path, dir.join("u.jsonl")).unwrap();
    let (u, report) = store.open("u").await.unwrap();
    assert_eq!((u.id(), report.header_id.as_deref()), ("u", Some("t")));
    drop(u);
    let source = store.source("u").await.unwrap();
    assert_eq!(source.id(), "u");
    let _ = std::fs::remove_dir_all(dir);
}

/// Regression: a last event that was written whole but lost its newline used to be discarded as
/// a torn tail.
#[tokio::test]
async fn a_complete_final_event_missing_only_its_newline_is_kept_and_the_newline_written() {
    use std::io::Write;
    let dir = temp_dir("newline");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let s = store.create("nl", None, None).await.unwrap();
    complete_turn(&s, 1, vec![]);
    s.flush().await.unwrap();
    let n = s.len() as u64;
    drop(s);
    let path = dir.join("nl.jsonl");
    let line = format!(r#"{{"type":"turn/start","seq":{n},"time":1,"data":{{"turn":2}}}}"#);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(line.as_bytes()).unwrap();
    drop(f);
    let (s, report) = store.open("nl").await.unwrap();
    assert!(report.newline_repaired, "{report:?}");
    assert_eq!(report.truncated_bytes, None);
    let events = s.events();
    assert_eq!(events[n as usize].kind, kinds::TURN_START);
    assert_eq!(events[n as usize].data["turn"], 2);
    // The kept turn was open: crash repair closes it after the kept event.
    assert_eq!(report.repaired, vec![n + 1]);
    s.flush().await.unwrap();
    drop(s);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("{line}\n")), "{text}");
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
    );
    let (again, second) = store.open("nl").await.unwrap();
    assert_eq!(second, OpenReport::default());
    assert_eq!(again.len() as u64, n + 2);
    drop(again);

    // A complete object whose seq does not follow is not the next event: cut as torn.
    let before = std::fs::metadata(&path).unwrap().len();
    let stray = r#"{"type":"turn/start","seq":999,"time":1,"data":{"turn":3}}"#;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(stray.as_bytes()).unwrap();
    drop(f);
    let (s, report) = store.open("nl").await.unwrap();
    assert_eq!(report.truncated_bytes, Some(stray.len() as u64));
    assert!(!report.newline_repaired);
    assert_eq!(s.len() as u64, n + 2);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), before);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn an_open_turn_is_closed_with_error_results_step_end_and_interrupted() {
    let dir = temp_dir("open");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let s = store.create("o", None, None).await.unwrap();
    s.append(&TurnStartData { turn: 1 }, None).unwrap();
    s.append(
        &UserMessageData {
            turn: 1,
            content: "go".into(),
            prompt: None,
        },
        None,
    )
    .unwrap();
    s.append(&StepStartData { turn: 1, step: 1 }, None).unwrap();
    let call = cordis_conversation::AssistantToolCall {
        id: "a".into(),
        name: "slow".into(),
        arguments: "{}".into(),
    };
    s.append(
        &AssistantMessageData {
            turn: 1,
            step: 1,
            content: String::new(),
            tool_calls: vec![call],
            usage: None,
            reasoning: None,
        },
        None,
    )
    .unwrap();
    s.append(
        &ToolCallData {
            turn: 1,
            step: 1,
            call_id: "a".into(),
            name: "slow".into(),
            arguments: "{}".into(),
        },
        None,
    )
    .unwrap();
    s.flush().await.unwrap();
    drop(s);
    let (s, report) = store.open("o").await.unwrap();
    assert_eq!(report.repaired, [5, 6, 7]);
    let kinds: Vec<String> = s.events()[5..].iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, ["tool/result", "step/end", "turn/end"]);
    let events = s.events();
    assert_eq!(events[5].data["isError"], true);
    assert_eq!(events[5].data["code"], "INTERRUPTED");
    assert_eq!(events[5].source_event_seqs, Some(vec![4]));
    assert_eq!(
        events[7].data,
        serde_json::json!({"turn": 1, "reason": {"kind": "interrupted"}})
    );
    drop(s);
    let (s, report) = store.open("o").await.unwrap();
    assert_eq!(report, OpenReport::default(), "the repair was durable");
    assert_eq!(s.len(), 8);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn unknown_versions_corrupt_lines_and_bad_ids_are_refused_with_clear_errors() {
    let dir = temp_dir("refuse");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    std::fs::write(
        dir.join("v.jsonl"),
        "{\"type\":\"session\",\"version\":7,\"id\":\"v\",\"createdAt\":0}\n",
    )
    .unwrap();
    let err = store.open("v").await.unwrap_err();
    assert!(matches!(err, SessionError::UnsupportedVersion { .. }));
    assert!(
        err.to_string().ends_with(
            "v.jsonl has format version 7; this build reads version 0 only (no migration exists)"
        ),
        "{err}"
    );
    std::fs::write(dir.join("c.jsonl"), "{\"type\":\"session\",\"version\":0,\"id\":\"c\",\"createdAt\":0}\n{\"type\":\"x\",\"seq\":1,\"time\":0,\"data\":null}\n").unwrap();
    let err = store.open("c").await.unwrap_err();
    assert!(
        err.to_string()
            .ends_with("c.jsonl, line 2: seq 1 where 0 was expected"),
        "{err}"
    );
    let err = store.create("../x", None, None).await.unwrap_err();
    assert!(matches!(err, SessionError::InvalidId { .. }));
    store.create("dup", None, None).await.unwrap();
    assert!(matches!(
        store.create("dup", None, None).await.unwrap_err(),
        SessionError::AlreadyExists { .. }
    ));
    assert!(matches!(
        store.open("nope").await.unwrap_err(),
        SessionError::NotFound { .. }
    ));
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(unix)]
#[tokio::test]
async fn a_root_is_made_by_the_first_session_private_to_the_user_and_lists_none_before() {
    use std::os::unix::fs::PermissionsExt;
    let base = temp_dir("private-root");
    let root = base.join("state/cordis/sessions/p");
    let store = SessionStore::new(Some(root.clone()), Durability::Fsync);
    // Not made yet: no sessions, not an error.
    assert!(store.recent(10).await.unwrap().is_empty());
    let s = store.create("s1", None, None).await.unwrap();
    s.flush().await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&base.join("state/cordis")), 0o700);
    assert_eq!(mode(&root.join("s1.jsonl")), 0o600);
    assert!(
        std::fs::read_to_string(root.join(".gitignore"))
            .unwrap()
            .contains("*\n")
    );
    let _ = std::fs::remove_dir_all(&base);
}
