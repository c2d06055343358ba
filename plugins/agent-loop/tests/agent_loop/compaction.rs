//! Compaction's pure parts: the summary request and when it is due.

use cordis_agent_loop::compaction::{
    MAX_SUMMARY_BYTES, SUMMARY_SYSTEM, bounded_summary, due, summary_request,
};
use cordis_conversation::{CallConfig, History, Message};
use cordis_session::{SessionEvent, kinds};

fn tool(i: usize) -> Message {
    Message::Tool {
        call_id: format!("c{i}"),
        name: "read".into(),
        content: serde_json::Value::String("x".repeat(10 + i)),
        is_error: false,
    }
}

#[test]
fn old_tool_results_are_cut_and_the_newest_kept_whole() {
    let messages: History = vec![Message::user("go"), tool(0), tool(1), tool(2)].into();
    let (request, dropped) = summary_request(
        CallConfig::model("m"),
        &messages,
        1,
        Some(" the tests "),
        "s",
    );
    assert_eq!(dropped, 2);
    let sent = request.messages.to_vec();
    assert_eq!(sent.len(), 5);
    assert_eq!(sent[3], tool(2), "the newest result is whole");
    let Message::Tool { content, .. } = &sent[1] else {
        panic!("{:?}", sent[1]);
    };
    assert_eq!(
        content,
        "[older tool result left out of the summary request: 10 bytes]"
    );
    let Message::User { content, .. } = &sent[4] else {
        panic!("{:?}", sent[4]);
    };
    assert!(
        content.ends_with("Pay particular attention to: the tests"),
        "{content}"
    );
    assert!(request.tools.is_empty());
    assert_eq!(request.system.as_deref(), Some(SUMMARY_SYSTEM));
    // The same input asks the same bytes.
    let (again, _) = summary_request(
        CallConfig::model("m"),
        &messages,
        1,
        Some(" the tests "),
        "s",
    );
    assert_eq!(
        serde_json::to_string(&again).unwrap(),
        serde_json::to_string(&request).unwrap()
    );
}

fn usage_event(seq: u64, input: u64) -> SessionEvent {
    SessionEvent {
        kind: kinds::ASSISTANT_MESSAGE.into(),
        seq,
        time: 0,
        data: serde_json::json!({"turn": 1, "step": 1, "content": "a",
            "usage": {"inputTokens": input, "outputTokens": 1}}),
        source_event_seqs: None,
    }
}

#[test]
fn it_is_due_at_the_threshold_and_not_again_after_a_compaction() {
    let events = vec![usage_event(0, 79)];
    assert!(!due(&events, Some(100), 0.8));
    let events = vec![usage_event(0, 80)];
    assert!(due(&events, Some(100), 0.8));
    assert!(!due(&events, None, 0.8), "no window, never");
    let mut compacted = events.clone();
    compacted.push(SessionEvent {
        kind: kinds::COMPACTION.into(),
        seq: 1,
        time: 0,
        data: serde_json::json!({}),
        source_event_seqs: None,
    });
    assert!(!due(&compacted, Some(100), 0.8));
}

#[test]
fn a_summary_over_the_bound_is_cut_at_a_character_boundary_saying_so() {
    let short = "ok".to_owned();
    assert_eq!(bounded_summary(short.clone()), short);
    let long = "é".repeat(MAX_SUMMARY_BYTES);
    let cut = bounded_summary(long);
    let (kept, note) = cut.rsplit_once('\n').unwrap();
    assert!(kept.len() <= MAX_SUMMARY_BYTES && kept.chars().all(|c| c == 'é'));
    assert_eq!(
        note,
        format!(
            "[the summary was cut here: {} bytes over the 64 KiB bound]",
            MAX_SUMMARY_BYTES
        )
    );
}
