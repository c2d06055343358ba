//! The wire format: the chat-completions request body, and the message of an error body.

use serde_json::{Value, json};

use cordis_conversation::{LlmRequest, Message};

/// The most images of one step's tool results sent to the model (the rest are named only).
pub const MAX_TOOL_IMAGES: usize = 8;

/// A tool result's content for the wire: its image blocks (`{"type": "image", "mimeType",
/// "data"}` in its `content` list) taken out, each replaced by a text block saying where it
/// went; the images taken, in order. With `take` false, or past `room`, an image is named
/// only.
fn without_images(content: &Value, take: bool, room: usize) -> (Value, Vec<(String, String)>) {
    let Some(blocks) = content.get("content").and_then(Value::as_array) else {
        return (content.clone(), Vec::new());
    };
    if !blocks.iter().any(|b| b["type"] == "image") {
        return (content.clone(), Vec::new());
    }
    let mut taken = Vec::new();
    let replaced: Vec<Value> = blocks
        .iter()
        .map(|b| {
            let (Some("image"), Some(mime), Some(data)) = (
                b["type"].as_str(),
                b["mimeType"].as_str(),
                b["data"].as_str(),
            ) else {
                return b.clone();
            };
            // Base64 is four characters for three bytes.
            let bytes = data.len() / 4 * 3;
            if take && taken.len() < room {
                taken.push((mime.to_owned(), data.to_owned()));
                json!({"type": "text", "text": format!("[image ({mime}, about {bytes} bytes): sent after the tool results]")})
            } else {
                let why = if take {
                    "more images than the model is sent at once"
                } else {
                    "this model takes text only (the `llm` entry's `imageInput`)"
                };
                json!({"type": "text", "text": format!("[the tool returned an image ({mime}, about {bytes} bytes) that is not shown: {why}]")})
            }
        })
        .collect();
    let mut out = content.clone();
    out["content"] = Value::Array(replaced);
    (out, taken)
}

/// The user message carrying the images of a step's tool results.
fn images_message(images: &[(String, String)]) -> Value {
    let mut parts = vec![
        json!({"type": "text", "text": "The images the tool results above refer to, in order:"}),
    ];
    parts.extend(images.iter().map(|(mime, data)| {
        json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
    }));
    json!({"role": "user", "content": parts})
}

/// The chat-completions request body for `request`; `image_input`: the model takes images
/// (those of tool results follow the results as a user message).
pub fn request_body(request: &LlmRequest, default_model: Option<&str>, image_input: bool) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    // Images of the tool results in a row: a tool message cannot carry them, and nothing may
    // come between an assistant's calls and their results, so they follow the last result.
    let mut pending: Vec<(String, String)> = Vec::new();
    for m in &request.messages {
        if !matches!(m, Message::Tool { .. }) && !pending.is_empty() {
            messages.push(images_message(&pending));
            pending.clear();
        }
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
                let room = MAX_TOOL_IMAGES - pending.len();
                let (content, images) = without_images(content, image_input, room);
                pending.extend(images);
                let text = match content {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                json!({"role": "tool", "tool_call_id": call_id, "content": text})
            }
        });
    }
    if !pending.is_empty() {
        messages.push(images_message(&pending));
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
        let body = request_body(&req, None, false);
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

#[cfg(test)]
mod image_tests {
    use serde_json::json;

    use super::*;
    use cordis_conversation::AssistantToolCall;

    fn with_results(results: Vec<Value>) -> LlmRequest {
        let calls: Vec<AssistantToolCall> = (0..results.len())
            .map(|i| AssistantToolCall {
                id: format!("c{i}"),
                name: "mcp__fx__image".into(),
                arguments: "{}".into(),
            })
            .collect();
        let mut messages = vec![
            Message::user("show me"),
            Message::Assistant {
                content: String::new(),
                tool_calls: calls,
                reasoning: None,
            },
        ];
        for (i, content) in results.into_iter().enumerate() {
            messages.push(Message::Tool {
                call_id: format!("c{i}"),
                name: "mcp__fx__image".into(),
                content,
                is_error: false,
            });
        }
        messages.push(Message::Assistant {
            content: "A pixel.".into(),
            tool_calls: Vec::new(),
            reasoning: None,
        });
        LlmRequest {
            config: Default::default(),
            messages: messages.into(),
            system: None,
            tools: Vec::new(),
            session_id: "s".into(),
        }
    }

    fn pixel(data: &str) -> Value {
        json!({"content": [{"type": "text", "text": "a pixel"}, {"type": "image", "mimeType": "image/png", "data": data}]})
    }

    #[test]
    fn tool_images_follow_the_results_as_a_user_message_when_the_model_takes_images() {
        let req = with_results(vec![
            pixel("AAAA"),
            json!({"content": [{"type": "text", "text": "no image"}]}),
            pixel("BBBB"),
        ]);
        let body = request_body(&req, None, true);
        let m = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
        // Nothing between the calls and their results; the images after the last result.
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool",
                "tool",
                "tool",
                "user",
                "assistant"
            ]
        );
        let first: Value = serde_json::from_str(m[2]["content"].as_str().unwrap()).unwrap();
        assert_eq!(
            first["content"][1]["text"],
            "[image (image/png, about 3 bytes): sent after the tool results]"
        );
        assert!(!m[2]["content"].as_str().unwrap().contains("AAAA"));
        assert_eq!(
            m[5]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
        assert_eq!(
            m[5]["content"][2]["image_url"]["url"],
            "data:image/png;base64,BBBB"
        );
        assert_eq!(m[5]["content"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn without_image_input_or_past_the_limit_an_image_is_named_not_sent() {
        let body = request_body(&with_results(vec![pixel("AAAA")]), None, false);
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 4, "no image message");
        let text = m[2]["content"].as_str().unwrap();
        assert!(
            text.contains("that is not shown: this model takes text only"),
            "{text}"
        );
        assert!(!text.contains("AAAA"));

        let many = with_results(vec![pixel("AAAA"); MAX_TOOL_IMAGES + 2]);
        let body = request_body(&many, None, true);
        let m = body["messages"].as_array().unwrap();
        let parts = m[2 + MAX_TOOL_IMAGES + 2]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 1 + MAX_TOOL_IMAGES);
        let last = m[2 + MAX_TOOL_IMAGES + 1]["content"].as_str().unwrap();
        assert!(
            last.contains("more images than the model is sent at once"),
            "{last}"
        );
    }
}
