//! Compaction: the summary request that replaces a conversation, and when it is due.
//!
//! # Determinism
//! The summary request is a pure function of the messages, the call config, the focus and
//! the number of tool results kept whole: a replay of the same log asks the same bytes, and
//! the scripted adapter answers it as the next response like any request.

use cordis_conversation::{CallConfig, History, LlmRequest, Message};
use cordis_session::{AssistantMessageData, CompactionData, SessionEvent, kinds};

/// The system prompt of a summary request.
pub const SUMMARY_SYSTEM: &str = "You compact a coding agent's conversation so it can go on in a \
smaller context. Write a summary another instance of the agent can continue from without the \
original messages: the user's goals and every request they made, decisions taken and why, files \
read or changed (with paths), commands run and what they showed, errors met and how they were \
solved, what is done, what is in progress, and the next step. Keep exact names, paths, \
identifiers and numbers. Answer with the summary only.";

/// The most bytes of a summary kept: the model writes it, and it is sent with every later
/// request.
pub const MAX_SUMMARY_BYTES: usize = 64 << 10;

/// `summary` cut to [`MAX_SUMMARY_BYTES`] at a character boundary, saying so.
pub fn bounded_summary(mut summary: String) -> String {
    if summary.len() <= MAX_SUMMARY_BYTES {
        return summary;
    }
    let over = summary.len() - MAX_SUMMARY_BYTES;
    let mut cut = MAX_SUMMARY_BYTES;
    while !summary.is_char_boundary(cut) {
        cut -= 1;
    }
    summary.truncate(cut);
    summary.push_str(&format!(
        "\n[the summary was cut here: {over} bytes over the 64 KiB bound]"
    ));
    summary
}

/// The last user message of a summary request.
pub fn summary_instruction(focus: Option<&str>) -> String {
    let mut text = String::from(
        "Summarize the conversation above as instructed. It will replace the conversation.",
    );
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        text.push_str("\n\nPay particular attention to: ");
        text.push_str(focus);
    }
    text
}

/// What a tool result cut from a summary request becomes.
fn cut_note(content: &serde_json::Value) -> serde_json::Value {
    let size = match content {
        serde_json::Value::String(s) => s.len(),
        other => other.to_string().len(),
    };
    serde_json::Value::String(format!(
        "[older tool result left out of the summary request: {size} bytes]"
    ))
}

/// The summary request for `messages`: the tool results but the newest `keep` cut to a line
/// (returned: how many were cut), then the summary instruction; no tools.
pub fn summary_request(
    config: CallConfig,
    messages: &History,
    keep: usize,
    focus: Option<&str>,
    session_id: &str,
) -> (LlmRequest, u64) {
    let results = messages
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .count();
    let cut_below = results.saturating_sub(keep);
    let mut seen = 0;
    let mut dropped = 0u64;
    let mut out: Vec<Message> = messages
        .iter()
        .map(|m| match m {
            Message::Tool {
                call_id,
                name,
                content,
                is_error,
            } => {
                seen += 1;
                if seen <= cut_below {
                    dropped += 1;
                    Message::Tool {
                        call_id: call_id.clone(),
                        name: name.clone(),
                        content: cut_note(content),
                        is_error: *is_error,
                    }
                } else {
                    m.clone()
                }
            }
            other => other.clone(),
        })
        .collect();
    out.push(Message::user(summary_instruction(focus)));
    let request = LlmRequest {
        config,
        messages: History::from(out),
        system: Some(SUMMARY_SYSTEM.to_owned()),
        tools: Vec::new(),
        session_id: session_id.to_owned(),
    };
    (request, dropped)
}

/// The input tokens of the last model answer since the last compaction (`None` when there
/// is none, or it reported no usage).
pub fn last_input_tokens(events: &[SessionEvent]) -> Option<u64> {
    for e in events.iter().rev() {
        match e.kind.as_str() {
            kinds::COMPACTION => return None,
            kinds::ASSISTANT_MESSAGE => {
                if let Some(usage) = e
                    .data_as::<AssistantMessageData>()
                    .ok()
                    .and_then(|m| m.usage)
                {
                    return Some(usage.input_tokens);
                }
            }
            _ => {}
        }
    }
    None
}

/// True when the last request's input tokens reached `threshold` of `window`.
pub fn due(events: &[SessionEvent], window: Option<u64>, threshold: f64) -> bool {
    let (Some(window), Some(tokens)) = (window, last_input_tokens(events)) else {
        return false;
    };
    // Tokens and windows are far below 2^52: the float comparison is exact enough.
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts are far below 2^52"
    )]
    let reached = tokens as f64 >= threshold * window as f64;
    reached
}

/// The compaction a summary becomes, for a log of `events` whose messages are `messages`.
pub fn record(
    summary: String,
    trigger: cordis_session::CompactionTrigger,
    focus: Option<String>,
    events: &[SessionEvent],
    messages: usize,
    dropped: u64,
    usage: Option<cordis_conversation::Usage>,
) -> CompactionData {
    CompactionData {
        summary,
        trigger,
        focus: focus.filter(|f| !f.trim().is_empty()),
        through_seq: (events.len() as u64).saturating_sub(1),
        messages: messages as u64,
        dropped_tool_results: dropped,
        input_tokens: last_input_tokens(events),
        usage,
    }
}
