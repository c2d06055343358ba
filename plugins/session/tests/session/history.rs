//! History reads: message-boundary pages, the cut and its baseline, cold reads that leave the
//! file and its writer alone.

use crate::common::{complete_turn, temp_dir};
use cordis_session::*;

fn todo_result(s: &Session, turn: u64, todos: serde_json::Value, is_error: bool) {
    s.append(
        &ToolResultData {
            turn,
            step: 1,
            call_id: format!("t{turn}"),
            name: TODO_WRITE_TOOL.into(),
            content: todos,
            is_error,
            code: None,
        },
        None,
    )
    .unwrap();
}

fn message_seqs(events: &[SessionEvent]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.kind == kinds::USER_MESSAGE || e.kind == kinds::ASSISTANT_MESSAGE)
        .map(|e| e.seq)
        .collect()
}

#[test]
fn pages_count_messages_backwards_and_never_split_a_message_from_its_chunks() {
    let s = Session::in_memory("p");
    for turn in 1..=3 {
        complete_turn(&s, turn, vec![]);
    }
    // Each turn: turn/start, user/message, step/start, request/header, chunk, assistant/message
    // (sourced from the chunk), tool/call, tool/result, step/end, step/start, assistant/message,
    // step/end, turn/end = 13 events, 3 messages.
    let events = s.events();
    assert_eq!(events.len(), 39);
    assert_eq!(message_seqs(&events), [1, 5, 10, 14, 18, 23, 27, 31, 36]);

    // The 2nd message back is an assistant message sourced from its chunk at 30: the page
    // starts at the chunk, not at the message (31).
    assert_eq!(events[31].source_event_seqs, Some(vec![30]));
    let tail = page_bounds(&events, None, 2);
    assert_eq!((tail.start, tail.end, tail.has_more), (30, 39, true));
    let three = page_bounds(&events, None, 3);
    assert_eq!((three.start, three.has_more), (27, true));

    let older = page_bounds(&events, Some(30), 4);
    assert_eq!((older.start, older.end, older.has_more), (14, 30, true));
    let oldest = page_bounds(&events, Some(14), 50);
    assert_eq!((oldest.start, oldest.end, oldest.has_more), (0, 14, false));
    let everything = page_bounds(&events, None, DEFAULT_MAX_MESSAGES);
    assert_eq!(
        (everything.start, everything.end, everything.has_more),
        (0, 39, false)
    );
    // A before_seq past the end is the end; 0 messages counts as 1.
    assert_eq!(page_bounds(&events, Some(1000), 1).end, 39);
    assert_eq!(page_bounds(&events, None, 0), page_bounds(&events, None, 1));
    assert_eq!(
        page_bounds(&events, Some(0), 5),
        PageBounds {
            start: 0,
            end: 0,
            has_more: false
        }
    );
}

#[test]
fn a_tail_cut_carries_the_baseline_of_its_last_event_and_an_older_page_none() {
    let s = Session::in_memory("c");
    let empty = s.cut(None, 5);
    assert!(empty.events.is_empty() && !empty.has_more);
    let p = empty.projections.unwrap();
    assert_eq!(p.as_of_seq, None);
    assert!(p.values.is_empty());

    complete_turn(&s, 1, vec![]);
    s.select_preset("minimal").unwrap();
    todo_result(
        &s,
        2,
        serde_json::json!([{"content": "a", "status": "pending"}]),
        false,
    );
    todo_result(&s, 3, serde_json::json!("bad"), true);
    complete_turn(&s, 2, vec![]);
    let cut = s.cut(None, 2);
    let p = cut.projections.clone().unwrap();
    assert_eq!(p.as_of_seq, Some(cut.events.last().unwrap().seq));
    assert_eq!(p.as_of_seq, Some(s.len() as u64 - 1));
    assert_eq!(p.values["agentPreset"], "minimal");
    assert_eq!(
        p.values["todos"],
        serde_json::json!([{"content": "a", "status": "pending"}]),
        "a failed todo_write is not the list"
    );
    assert_eq!(
        p.values,
        projection_values(s.header(), &s.events()),
        "the append-kept marks agree with a fresh fold"
    );
    let older = s.cut(Some(cut.events[0].seq), 2);
    assert!(older.projections.is_none(), "older pages carry no baseline");
    assert_eq!(
        older.events.last().unwrap().seq + 1,
        cut.events[0].seq,
        "pages are contiguous"
    );
}

#[tokio::test]
async fn a_cold_read_neither_repairs_nor_locks_and_a_live_writer_keeps_writing() {
    let dir = temp_dir("cold");
    let writer = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let s = writer
        .create_with("w", CreateOptions::default().agent_preset("standard"))
        .await
        .unwrap();
    complete_turn(&s, 1, vec![]);
    s.select_preset("code").unwrap();
    s.append(&TurnStartData { turn: 2 }, None).unwrap();
    s.flush().await.unwrap();

    // Another store stands for another process: the writer's lock is held.
    let reader = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    assert!(matches!(
        reader.open("w").await.unwrap_err(),
        SessionError::SessionLocked { .. }
    ));
    let path = dir.join("w.jsonl");
    // A torn line, as a writer mid-write leaves it.
    let mut bytes = std::fs::read(&path).unwrap();
    let before = bytes.len();
    bytes.extend_from_slice(b"{\"type\":\"user/mess");
    std::fs::write(&path, &bytes).unwrap();

    let source = reader.source("w").await.unwrap();
    let SessionSource::Detached(snapshot) = &source else {
        panic!("not open in this store: detached");
    };
    assert_eq!(
        snapshot.events().len(),
        s.len(),
        "the torn line is not an event"
    );
    assert_eq!(source.preset().as_deref(), Some("code"), "from the log");
    assert_eq!(
        std::fs::read(&path).unwrap().len(),
        before + 18,
        "nothing truncated"
    );
    let cut = source.cut(None, 50);
    assert_eq!(
        cut.projections.unwrap().as_of_seq,
        Some(s.len() as u64 - 1),
        "the open turn is served as it is, not closed"
    );
    assert!(
        !cut.events
            .iter()
            .any(|e| e.kind == kinds::TURN_END && e.seq > 13)
    );

    // The live store serves its own session attached.
    assert!(matches!(
        writer.source("w").await.unwrap(),
        SessionSource::Attached(_)
    ));
    // Unknown and invalid ids are not found.
    for id in ["nope", "../etc"] {
        assert!(matches!(
            reader.source(id).await.unwrap_err(),
            SessionError::NotFound { .. }
        ));
    }
}
