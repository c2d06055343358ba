//! The cache-prefix contract check of a 2,000-turn log, and `sessions --grep` over 10,000
//! session logs.
//!
//! Each turn of the log is two requests (a tool call, then the answer) under a header of a
//! 2 KB system prompt and 12 tools, with a compaction every 500 turns: 4,000 requests.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use cordis_conversation::{AssistantToolCall, CallConfig, Usage};
use cordis_schema::ToolSchema;
use cordis_session::contract::check_contract;
use cordis_session::index::{GrepQuery, grep};
use cordis_session::{
    AssistantMessageData, CompactionData, CompactionTrigger, CreateOptions, Durability,
    HeaderReason, RequestHeader, RequestHeaderData, Session, SessionEvent, SessionHeader,
    SessionStore, StepEndData, StepStartData, ToolCallData, ToolResultData, TurnEndData,
    TurnEndReason, TurnStartData, UserMessageData,
};

fn main() {
    divan::main();
}

fn header() -> RequestHeader {
    let tools = (0..12)
        .map(|i| ToolSchema {
            name: format!("tool_{i}"),
            description: format!("Tool number {i}, which does one thing well."),
            parameters: Arc::new(serde_json::json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
                "required": ["path"],
            })),
        })
        .collect();
    RequestHeader::new(
        CallConfig::default(),
        "You are a careful coding agent. ".repeat(64),
        tools,
    )
}

fn answer(
    turn: u64,
    step: u64,
    text: String,
    calls: Vec<AssistantToolCall>,
) -> AssistantMessageData {
    AssistantMessageData {
        turn,
        step,
        content: text,
        tool_calls: calls,
        usage: Some(Usage {
            input_tokens: 1000,
            output_tokens: 50,
            cached_input_tokens: Some(900),
        }),
        reasoning: None,
    }
}

/// One turn: the user's message, a step calling a tool, its result, the answer.
fn turn(s: &Session, turn: u64, header: Option<(&RequestHeader, HeaderReason)>) {
    let log = |r: Result<u64, cordis_session::SessionError>| {
        r.unwrap();
    };
    log(s.append(&TurnStartData { turn }, None));
    log(s.append(
        &UserMessageData {
            turn,
            content: format!("Please look at src/module_{turn}.rs and tell me what it does."),
            prompt: None,
        },
        None,
    ));
    log(s.append(&StepStartData { turn, step: 1 }, None));
    if let Some((header, reason)) = header {
        log(s.append(
            &RequestHeaderData {
                header: header.clone(),
                reason,
                changed: Vec::new(),
            },
            None,
        ));
    }
    let call = AssistantToolCall {
        id: format!("call-{turn}"),
        name: "tool_3".into(),
        arguments: format!("{{\"path\":\"src/module_{turn}.rs\"}}"),
    };
    log(s.append(&answer(turn, 1, "Let me read it.".into(), vec![call]), None));
    log(s.append(
        &ToolCallData {
            turn,
            step: 1,
            call_id: format!("call-{turn}"),
            name: "tool_3".into(),
            arguments: format!("{{\"path\":\"src/module_{turn}.rs\"}}"),
        },
        None,
    ));
    log(s.append(
        &ToolResultData {
            turn,
            step: 1,
            call_id: format!("call-{turn}"),
            name: "tool_3".into(),
            content: serde_json::Value::String("fn main() { println!(\"hello\"); }\n".repeat(8)),
            is_error: false,
            code: None,
        },
        None,
    ));
    log(s.append(&StepEndData { turn, step: 1 }, None));
    log(s.append(&StepStartData { turn, step: 2 }, None));
    log(s.append(
        &answer(
            turn,
            2,
            format!("Module {turn} prints hello. ").repeat(4),
            Vec::new(),
        ),
        None,
    ));
    log(s.append(&StepEndData { turn, step: 2 }, None));
    log(s.append(
        &TurnEndData {
            turn,
            reason: TurnEndReason::Completed,
        },
        None,
    ));
}

/// The 2,000-turn log.
static LOG: LazyLock<(SessionHeader, Vec<SessionEvent>)> = LazyLock::new(|| {
    let s = Session::in_memory("long");
    let header = header();
    turn(&s, 1, Some((&header, HeaderReason::Initial)));
    for t in 2..=2000 {
        let due = if t % 500 == 1 {
            s.append(
                &CompactionData {
                    summary: format!("Turns up to {t}: modules read, all print hello."),
                    trigger: CompactionTrigger::Auto,
                    focus: None,
                    through_seq: s.events().len() as u64 - 1,
                    messages: 2000,
                    dropped_tool_results: 0,
                    input_tokens: Some(100_000),
                    usage: None,
                },
                None,
            )
            .unwrap();
            Some((&header, HeaderReason::Compaction))
        } else {
            None
        };
        turn(&s, t, due);
    }
    (s.header().clone(), s.events())
});

/// `check_contract` of the 2,000-turn log (4,000 requests, 3 compactions).
#[divan::bench(sample_count = 20)]
fn check_2000_turns(bencher: divan::Bencher) {
    let (header, events) = &*LOG;
    assert_eq!(check_contract(header, events).unwrap().requests, 4000);
    bencher.bench(|| check_contract(header, events).unwrap());
}

/// 10,000 session logs of 10 turns each (~9 KB apiece); only the oldest says "needle".
static ROOT: LazyLock<PathBuf> = LazyLock::new(|| {
    let dir = std::env::temp_dir().join(format!("cordis-grep-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = SessionStore::new(Some(dir.clone()), Durability::None);
    let header = header();
    for i in 0..10_000u64 {
        let s = rt
            .block_on(store.create_with(&format!("s{i:05}"), CreateOptions::default()))
            .unwrap();
        for t in 1..=10 {
            turn(&s, t, (t == 1).then_some((&header, HeaderReason::Initial)));
        }
        if i == 0 {
            s.append(
                &UserMessageData {
                    turn: 11,
                    content: "Where is the NEEDLE?".into(),
                    prompt: None,
                },
                None,
            )
            .unwrap();
        }
        rt.block_on(s.flush()).unwrap();
        drop(s);
        let file = std::fs::File::options()
            .append(true)
            .open(dir.join(format!("s{i:05}.jsonl")))
            .unwrap();
        file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i))
            .unwrap();
    }
    dir
});

/// `grep` of 10,000 logs for a text only the oldest holds: every log is read.
#[divan::bench(sample_count = 5)]
fn grep_10000_sessions(bencher: divan::Bencher) {
    let root = &*ROOT;
    let found = grep(root, &GrepQuery::new("needle", 20)).unwrap();
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.searched, 10_000);
    bencher.bench(|| grep(root, &GrepQuery::new("needle", 20)).unwrap());
    let _ = std::fs::remove_dir_all(root);
}
