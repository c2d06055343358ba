//! Shared helpers of the session tests.

use std::path::PathBuf;

use cordis_conversation::{AssistantToolCall, CallConfig, Chunk};
use cordis_session::*;

/// A fresh directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-session-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Appends one complete turn with a tool call and a header.
pub fn complete_turn(s: &Session, turn: u64, tools: Vec<cordis_schema::ToolSchema>) {
    s.append(&TurnStartData { turn }, None).unwrap();
    s.append(
        &UserMessageData {
            turn,
            content: format!("question {turn}"),
            prompt: None,
        },
        None,
    )
    .unwrap();
    s.append(&StepStartData { turn, step: 1 }, None).unwrap();
    let header = RequestHeader::new(CallConfig::model("m"), "be brief".into(), tools);
    let reason = if turn == 1 {
        HeaderReason::Initial
    } else {
        HeaderReason::Change
    };
    s.append(
        &RequestHeaderData {
            header,
            reason,
            changed: Vec::new(),
        },
        None,
    )
    .unwrap();
    let call = AssistantToolCall {
        id: format!("c{turn}"),
        name: "read".into(),
        arguments: "{}".into(),
    };
    let chunk = s
        .append(
            &AssistantChunkData {
                turn,
                step: 1,
                chunk: Chunk::ToolCall { call: call.clone() },
            },
            None,
        )
        .unwrap();
    s.append(
        &AssistantMessageData {
            turn,
            step: 1,
            content: String::new(),
            tool_calls: vec![call],
            usage: None,
            reasoning: None,
        },
        Some(vec![chunk]),
    )
    .unwrap();
    let c = s
        .append(
            &ToolCallData {
                turn,
                step: 1,
                call_id: format!("c{turn}"),
                name: "read".into(),
                arguments: "{}".into(),
            },
            None,
        )
        .unwrap();
    s.append(
        &ToolResultData {
            turn,
            step: 1,
            call_id: format!("c{turn}"),
            name: "read".into(),
            content: "ok".into(),
            is_error: false,
            code: None,
        },
        Some(vec![c]),
    )
    .unwrap();
    s.append(&StepEndData { turn, step: 1 }, None).unwrap();
    s.append(&StepStartData { turn, step: 2 }, None).unwrap();
    s.append(
        &AssistantMessageData {
            turn,
            step: 2,
            content: "done".into(),
            tool_calls: vec![],
            usage: None,
            reasoning: None,
        },
        None,
    )
    .unwrap();
    s.append(&StepEndData { turn, step: 2 }, None).unwrap();
    s.append(
        &TurnEndData {
            turn,
            reason: TurnEndReason::Completed,
        },
        None,
    )
    .unwrap();
}
