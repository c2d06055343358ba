//! Which preset a session runs: the header's creation value, switched by logged events.

use crate::common::temp_dir;
use cordis_session::*;

#[tokio::test]
async fn the_header_records_the_creation_preset_and_a_logged_switch_wins_after_a_reopen() {
    let dir = temp_dir("preset-switch");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let s = store
        .create_with("p", CreateOptions::default().agent_preset("standard"))
        .await
        .unwrap();
    assert_eq!(s.header().agent_preset.as_deref(), Some("standard"));
    assert_eq!(s.preset().as_deref(), Some("standard"), "header only");
    s.select_preset("minimal").unwrap();
    s.append(&TurnStartData { turn: 1 }, None).unwrap();
    assert_eq!(
        s.preset().as_deref(),
        Some("minimal"),
        "the log beats the header"
    );
    s.select_preset("code").unwrap();
    assert_eq!(s.preset().as_deref(), Some("code"), "the LAST switch wins");
    s.flush().await.unwrap();
    drop(s);

    let text = std::fs::read_to_string(dir.join("p.jsonl")).unwrap();
    let head: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(head["agentPreset"], "standard");
    let switch: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(switch["type"], "agent-preset/selected");
    assert_eq!(
        switch["data"],
        serde_json::json!({"agentPreset": "minimal"})
    );

    let (s, _) = store.open("p").await.unwrap();
    assert_eq!(s.header().agent_preset.as_deref(), Some("standard"));
    assert_eq!(
        resolve_session_preset(s.header(), &s.events()).as_deref(),
        Some("code")
    );
}

#[tokio::test]
async fn a_header_without_a_preset_omits_the_key_and_old_logs_still_read() {
    let dir = temp_dir("preset-absent");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let (s, report) = store.open_or_create("n").await.unwrap();
    assert!(report.created);
    assert_eq!(s.preset(), None);
    drop(s);
    let text = std::fs::read_to_string(dir.join("n.jsonl")).unwrap();
    assert!(!text.contains("agentPreset"), "{text}");

    // A log written before the field existed.
    std::fs::write(
        dir.join("old.jsonl"),
        "{\"type\":\"session\",\"version\":0,\"id\":\"old\",\"createdAt\":1}\n\
         {\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n",
    )
    .unwrap();
    let (old, _) = store.open("old").await.unwrap();
    assert_eq!(old.header().agent_preset, None);
    assert_eq!(old.preset(), None);
}

#[tokio::test]
async fn open_or_create_with_applies_its_options_only_to_a_creation() {
    let dir = temp_dir("preset-ooc");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let (s, report) = store
        .open_or_create_with("o", CreateOptions::default().agent_preset("code").cwd("/w"))
        .await
        .unwrap();
    assert!(report.created);
    assert_eq!(s.header().cwd.as_deref(), Some("/w"));
    drop(s);
    let (s, report) = store
        .open_or_create_with("o", CreateOptions::default().agent_preset("minimal"))
        .await
        .unwrap();
    assert!(!report.created);
    assert_eq!(
        s.preset().as_deref(),
        Some("code"),
        "an existing header is kept"
    );
}

#[test]
fn a_malformed_switch_is_skipped_for_an_older_valid_one() {
    let header = SessionHeader {
        kind: "session".into(),
        version: SESSION_VERSION,
        id: "m".into(),
        created_at: 0,
        cwd: None,
        parent_session: None,
        forked_at: None,
        agent_preset: Some("standard".into()),
    };
    let event = |seq, data| SessionEvent {
        kind: kinds::AGENT_PRESET_SELECTED.into(),
        seq,
        time: 0,
        data,
        source_event_seqs: None,
    };
    let events = vec![
        event(0, serde_json::json!({"agentPreset": "minimal"})),
        event(1, serde_json::json!({"preset": 3})),
    ];
    assert_eq!(
        resolve_session_preset(&header, &events).as_deref(),
        Some("minimal")
    );
    assert_eq!(
        resolve_session_preset(&header, &events[1..]).as_deref(),
        Some("standard")
    );
}
