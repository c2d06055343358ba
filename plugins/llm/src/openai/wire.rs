//! The wire format: the chat-completions request body, and the message of an error body.

use serde_json::{Value, json};

use cordis_conversation::{LlmRequest, Message};

/// The chat-completions request body for `request`.
pub fn request_body(request: &LlmRequest, default_model: Option<&str>) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for m in &request.messages {
        messages.push(match m {
            Message::User { content, images } if images.is_empty() => {
                json!({"role": "user", "content": content})
            }
            // OpenAI-compatible content parts: the text, then each image as a data URL.
            Message::User { content, images } => {
                let mut parts = vec![json!({"type": "text", "text": content})];
                parts.extend(images.iter().map(|i| {
                    json!({"type": "image_url", "image_url": {"url": format!("data:{};base64,{}", i.mime_type, i.data)}})
                }));
                json!({"role": "user", "content": parts})
            }
            Message::Assistant {
                content,
                tool_calls,
                reasoning,
            } => {
                let mut msg = json!({"role": "assistant", "content": content});
                if let Some(reasoning) = reasoning {
                    msg["reasoning_content"] = Value::String(reasoning.clone());
                }
                if !tool_calls.is_empty() {
                    if content.is_empty() {
                        msg["content"] = Value::Null;
                    }
                    msg["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect();
                }
                msg
            }
            Message::Tool {
                call_id, content, ..
            } => {
                let text = match content {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                json!({"role": "tool", "tool_call_id": call_id, "content": text})
            }
        });
    }
    let model = if request.config.model.is_empty() {
        default_model.unwrap_or_default()
    } else {
        &request.config.model
    };
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
    }
    if let Some(t) = request.config.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(effort) = &request.config.reasoning_effort {
        body["reasoning_effort"] = json!(effort);
    }
    if let Some(n) = request.config.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if let Some(stop) = &request.config.stop {
        body["stop"] = json!(stop);
    }
    body
}

/// The error message of an error body: `error.message` when it is JSON, else the text.
pub(super) fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    from_json.unwrap_or_else(|| {
        let t = body.trim();
        if t.chars().count() > 300 {
            format!("{}…", t.chars().take(300).collect::<String>())
        } else {
            t.to_owned()
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use cordis_conversation::{AssistantToolCall, CallConfig};

    #[test]
    fn the_body_carries_system_tools_tool_results_and_stream_options() {
        let req = LlmRequest {
            config: CallConfig {
                model: "deepseek-chat".into(),
                temperature: Some(0.5),
                reasoning_effort: Some("high".into()),
                ..Default::default()
            },
            messages: vec![
                Message::user("hi"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![AssistantToolCall {
                        id: "c1".into(),
                        name: "read".into(),
                        arguments: "{}".into(),
                    }],
                    reasoning: Some("Read it first.".into()),
                },
                Message::Tool {
                    call_id: "c1".into(),
                    name: "read".into(),
                    content: json!({"ok": true}),
                    is_error: false,
                },
            ]
            .into(),
            system: Some("sys".into()),
            tools: vec![cordis_schema::ToolSchema {
                name: "read".into(),
                description: "Read.".into(),
                parameters: json!({"type": "object"}).into(),
            }],
            session_id: "s".into(),
        };
        let body = request_body(&req, None);
        assert_eq!(body["model"], "deepseek-chat");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(body["messages"][2]["content"], Value::Null);
        // DeepSeek's thinking mode wants a tool-calling turn's reasoning back.
        assert_eq!(body["messages"][2]["reasoning_content"], "Read it first.");
        assert!(body["messages"][1].get("reasoning_content").is_none());
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["name"],
            "read"
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "{\"ok\":true}"})
        );
        assert_eq!(body["tools"][0]["function"]["name"], "read");
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["reasoning_effort"], "high");
    }
}
