//! Sampling: a server's `sampling/createMessage` answered through the composition's model
//! (the `llm` service), each request only after the user allowed it through the approver the
//! front end provides (the terminal, the editor, the web page). Without an approver (CI, piped
//! runs, `cordis check`) or without a model, the request is refused with the reason, and
//! traced ([`TRACE_SAMPLING`]).
//!
//! Bounded: at most [`MAX_SAMPLING_MESSAGES`] messages of text only, [`MAX_SAMPLING_BYTES`] of
//! it in all, [`MAX_SAMPLING_TOKENS`] tokens asked of the model, [`MAX_SAMPLING_ANSWER`] bytes
//! of answer. The server's model hints pick among the `llm` entry's models (else its default);
//! no tools are offered to the model. MCP deprecates sampling (SEP-2577); it stays while servers
//! use it.

use std::sync::atomic::{AtomicU64, Ordering};

use cordis_approvals::{Answer, ApprovalRequest, ApproverService, Policy};
use cordis_conversation::{
    CallConfig, Chunk, FinishReason, FrozenRequest, History, Llm, LlmRequest, Message,
};
use cordis_runtime::Context;
use cordis_tools::ToolCall;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// The trace kind of each sampling request's outcome.
pub const TRACE_SAMPLING: &str = "mcp-sampling";

/// The most messages one request may hold.
pub const MAX_SAMPLING_MESSAGES: usize = 64;

/// The most text (system prompt and messages) one request may hold.
pub const MAX_SAMPLING_BYTES: usize = 256 << 10;

/// The most tokens asked of the model (a server asking for more gets this many).
pub const MAX_SAMPLING_TOKENS: u32 = 4096;

/// The most answer text kept (the rest is cut, and the stop reason says `maxTokens`).
pub const MAX_SAMPLING_ANSWER: usize = 256 << 10;

/// The JSON-RPC code the spec gives a request the user rejected.
const USER_REJECTED: i32 = -1;

/// Why a request was not answered: the JSON-RPC code and the message.
pub(crate) type Refusal = (i32, String);

fn refuse(code: i32, message: impl Into<String>) -> Refusal {
    (code, message.into())
}

/// The request's messages as the model's, checked against the bounds.
fn messages_of(params: &Value) -> Result<(Vec<Message>, usize), Refusal> {
    let invalid = |m: String| refuse(-32602, m);
    let messages = params["messages"]
        .as_array()
        .ok_or_else(|| invalid("`messages` is missing".into()))?;
    if messages.is_empty() || messages.len() > MAX_SAMPLING_MESSAGES {
        return Err(invalid(format!(
            "{} messages: 1 to {MAX_SAMPLING_MESSAGES} are accepted",
            messages.len()
        )));
    }
    let mut bytes = 0usize;
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let blocks: Vec<&Value> = match &m["content"] {
            Value::Array(blocks) => blocks.iter().collect(),
            block => vec![block],
        };
        let mut text = String::new();
        for block in blocks {
            match block["type"].as_str() {
                Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
                Some(other) => {
                    return Err(invalid(format!(
                        "message {i} holds {other} content: only text is sampled here"
                    )));
                }
                None => return Err(invalid(format!("message {i} has content without a type"))),
            }
        }
        bytes += text.len();
        if bytes > MAX_SAMPLING_BYTES {
            return Err(invalid(format!(
                "the messages hold more than {MAX_SAMPLING_BYTES} bytes of text"
            )));
        }
        out.push(match m["role"].as_str() {
            Some("user") => Message::user(text),
            Some("assistant") => Message::Assistant {
                content: text,
                tool_calls: Vec::new(),
                reasoning: None,
            },
            other => return Err(invalid(format!("message {i} has role {other:?}"))),
        });
    }
    Ok((out, bytes))
}

/// The model to use: the first hint naming one of `offered` (or a prefix of one), else the
/// default.
fn model_for(params: &Value, offered: &[String]) -> Option<String> {
    let hints = params["modelPreferences"]["hints"].as_array();
    for hint in hints.into_iter().flatten() {
        if let Some(name) = hint["name"].as_str()
            && let Some(model) = offered.iter().find(|m| m.starts_with(name))
        {
            return Some(model.clone());
        }
    }
    offered.first().cloned()
}

/// Answers `params` (a `sampling/createMessage` request of `server`, as JSON): the result as
/// JSON, or why not.
pub(crate) async fn answer(ctx: &Context, server: &str, params: Value) -> Result<Value, Refusal> {
    static ASKED: AtomicU64 = AtomicU64::new(0);
    if params.get("tools").is_some_and(|t| !t.is_null()) {
        return Err(refuse(
            -32602,
            "sampling with tools is not supported by this client",
        ));
    }
    let (messages, bytes) = messages_of(&params)?;
    let system = params["systemPrompt"].as_str().map(str::to_owned);
    if bytes + system.as_ref().map_or(0, String::len) > MAX_SAMPLING_BYTES {
        return Err(refuse(
            -32602,
            format!("the request holds more than {MAX_SAMPLING_BYTES} bytes of text"),
        ));
    }
    let Some(llm) = ctx.get::<Llm>() else {
        return Err(refuse(
            -32603,
            "this composition has no model (`llm` entry) to sample with",
        ));
    };
    let asked = params["maxTokens"].as_u64().unwrap_or(0);
    let max_tokens = u32::try_from(asked)
        .unwrap_or(u32::MAX)
        .clamp(1, MAX_SAMPLING_TOKENS);
    let model = model_for(&params, &llm.models()).unwrap_or_else(|| "default".to_owned());

    // The user decides, through the front end's approver.
    let Some(approver) = ctx.get::<ApproverService>() else {
        return Err(refuse(
            USER_REJECTED,
            "declined: no one to ask (sampling needs a front end that asks: `cordis run` at a terminal, an editor, the web view)",
        ));
    };
    let shown: Vec<Value> = params["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| json!({"role": m["role"], "text": m["content"]["text"]}))
        .collect();
    let request = ApprovalRequest {
        call: ToolCall {
            call_id: format!("sampling-{}", ASKED.fetch_add(1, Ordering::Relaxed) + 1),
            name: format!("mcp__{server}__sampling"),
            arguments: json!({
                "model": model,
                "maxTokens": max_tokens,
                "systemPrompt": system,
                "messages": shown,
            }),
        },
        scope: None,
        policy: Policy::Ask,
        grants: Vec::new(),
    };
    match approver.0.approve(&request).await {
        Answer::Allow | Answer::AllowAlways => {}
        Answer::Deny(reason) => {
            return Err(refuse(
                USER_REJECTED,
                format!(
                    "the user declined{}",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                ),
            ));
        }
        other => {
            return Err(refuse(
                USER_REJECTED,
                format!("the user declined ({other:?})"),
            ));
        }
    }

    let mut config = CallConfig::model(model.clone());
    config.max_tokens = Some(max_tokens);
    config.temperature = params["temperature"].as_f64();
    config.stop = params["stopSequences"].as_array().map(|s| {
        s.iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    });
    let request = FrozenRequest::new(LlmRequest {
        config,
        messages: History::from(messages),
        system,
        tools: Vec::new(),
        session_id: format!("mcp-sampling:{server}"),
    });
    let (_, mut stream) = llm
        .stream(request, None)
        .await
        .map_err(|e| refuse(-32603, format!("the model call failed: {e}")))?;
    let mut text = String::new();
    let mut stop = "endTurn";
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(Chunk::Text { delta }) => {
                if text.len() + delta.len() > MAX_SAMPLING_ANSWER {
                    stop = "maxTokens";
                    break;
                }
                text.push_str(&delta);
            }
            Ok(Chunk::Finish { reason }) => match reason {
                FinishReason::Length => stop = "maxTokens",
                FinishReason::Error { message } => {
                    return Err(refuse(-32603, format!("the model call failed: {message}")));
                }
                FinishReason::Aborted => {
                    return Err(refuse(-32603, "the model call was aborted"));
                }
                FinishReason::Stop | FinishReason::ToolCalls => {}
            },
            Ok(_) => {}
            Err(e) => return Err(refuse(-32603, format!("the model call failed: {e}"))),
        }
    }
    Ok(json!({
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": model,
        "stopReason": stop,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bounded_text_messages_of_users_and_assistants_are_sampled() {
        let ok = json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "hi"}},
            {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}
        ]});
        assert_eq!(messages_of(&ok).unwrap().1, 4);
        let image = json!({"messages": [{"role": "user", "content": {"type": "image", "data": "", "mimeType": "image/png"}}]});
        assert!(messages_of(&image).unwrap_err().1.contains("only text"));
        let many = json!({"messages": vec![json!({"role": "user", "content": {"type": "text", "text": "x"}}); 65]});
        assert!(messages_of(&many).unwrap_err().1.contains("1 to 64"));
        let big = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "x".repeat(MAX_SAMPLING_BYTES + 1)}}]});
        assert!(messages_of(&big).unwrap_err().1.contains("bytes of text"));
        let role =
            json!({"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]});
        assert!(messages_of(&role).is_err());
    }

    #[test]
    fn a_hint_picks_an_offered_model_else_the_default() {
        let offered = ["deepseek-chat".to_owned(), "deepseek-reasoner".to_owned()];
        let hinted =
            json!({"modelPreferences": {"hints": [{"name": "claude"}, {"name": "deepseek-r"}]}});
        assert_eq!(
            model_for(&hinted, &offered).as_deref(),
            Some("deepseek-reasoner")
        );
        assert_eq!(
            model_for(&json!({}), &offered).as_deref(),
            Some("deepseek-chat")
        );
    }
}
