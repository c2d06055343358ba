//! The wire format: the chat-completions request body, and the message of an error body.

use serde_json::{Value, json};

use cordis_conversation::{LlmRequest, Message};

/// The most images and audio clips of one step's tool results sent to the model (the rest
/// are named only).
pub const MAX_TOOL_MEDIA: usize = 8;

/// What a model takes besides text (the `llm` entry's `imageInput` and `audioInput`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Images, as `image_url` parts.
    pub images: bool,
    /// Audio, as `input_audio` parts (WAV and MP3: what the OpenAI-compatible API takes).
    pub audio: bool,
}

/// An image or an audio clip taken out of a tool result, for the message after the results.
#[derive(Debug, Clone, PartialEq)]
enum Media {
    Image { mime: String, data: String },
    Audio { format: &'static str, data: String },
}

/// The `input_audio` format of an audio MIME type, when the API takes it.
fn audio_format(mime: &str) -> Option<&'static str> {
    match mime {
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        _ => None,
    }
}

/// A tool result's content for the wire: its image and audio blocks (`{"type": "image" |
/// "audio", "mimeType", "data"}` in its `content` list) taken out, each replaced by a text
/// block saying where it went; what was taken, in order. What the model does not take (see
/// `inputs`), or past `room`, is named only.
fn without_media(content: &Value, inputs: Inputs, room: usize) -> (Value, Vec<Media>) {
    let Some(blocks) = content.get("content").and_then(Value::as_array) else {
        return (content.clone(), Vec::new());
    };
    if !blocks
        .iter()
        .any(|b| b["type"] == "image" || b["type"] == "audio")
    {
        return (content.clone(), Vec::new());
    }
    let mut taken = Vec::new();
    let replaced: Vec<Value> = blocks
        .iter()
        .map(|b| {
            let (Some(kind @ ("image" | "audio")), Some(mime), Some(data)) = (
                b["type"].as_str(),
                b["mimeType"].as_str(),
                b["data"].as_str(),
            ) else {
                return b.clone();
            };
            // Base64 is four characters for three bytes.
            let bytes = data.len() / 4 * 3;
            let taking = match kind {
                "image" if inputs.images => Ok(Media::Image {
                    mime: mime.to_owned(),
                    data: data.to_owned(),
                }),
                "image" => Err("this model takes text only (the `llm` entry's `imageInput`)"),
                _ if !inputs.audio => {
                    Err("this model takes no audio (the `llm` entry's `audioInput`)")
                }
                _ => match audio_format(mime) {
                    Some(format) => Ok(Media::Audio {
                        format,
                        data: data.to_owned(),
                    }),
                    None => Err("the model takes WAV and MP3 audio only"),
                },
            };
            match taking {
                Ok(media) if taken.len() < room => {
                    taken.push(media);
                    json!({"type": "text", "text": format!("[{kind} ({mime}, about {bytes} bytes): sent after the tool results]")})
                }
                Ok(_) => json!({"type": "text", "text": format!("[the tool returned {kind} ({mime}, about {bytes} bytes) that is not shown: more images and audio than the model is sent at once]")}),
                Err(why) => json!({"type": "text", "text": format!("[the tool returned {kind} ({mime}, about {bytes} bytes) that is not shown: {why}]")}),
            }
        })
        .collect();
    let mut out = content.clone();
    out["content"] = Value::Array(replaced);
    (out, taken)
}

/// The user message carrying the images and audio of a step's tool results.
fn media_message(media: &[Media]) -> Value {
    let mut parts = vec![
        json!({"type": "text", "text": "The images and audio the tool results above refer to, in order:"}),
    ];
    parts.extend(media.iter().map(|m| match m {
        Media::Image { mime, data } => {
            json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
        }
        Media::Audio { format, data } => {
            json!({"type": "input_audio", "input_audio": {"data": data, "format": format}})
        }
    }));
    json!({"role": "user", "content": parts})
}

/// The chat-completions request body for `request`; `inputs`: what the model takes besides
/// text (the images and audio of tool results follow the results as a user message).
pub fn request_body(request: &LlmRequest, default_model: Option<&str>, inputs: Inputs) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    // Images and audio of the tool results in a row: a tool message cannot carry them, and
    // nothing may come between an assistant's calls and their results, so they follow the
    // last result.
    let mut pending: Vec<Media> = Vec::new();
    for m in &request.messages {
        if !matches!(m, Message::Tool { .. }) && !pending.is_empty() {
            messages.push(media_message(&pending));
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
                let room = MAX_TOOL_MEDIA - pending.len();
                let (content, media) = without_media(content, inputs, room);
                pending.extend(media);
                let text = match content {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                json!({"role": "tool", "tool_call_id": call_id, "content": text})
            }
        });
    }
    if !pending.is_empty() {
        messages.push(media_message(&pending));
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
        let body = request_body(&req, None, Inputs::default());
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
mod media_tests {
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
        let body = request_body(&req, None, IMAGES);
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
        let body = request_body(&with_results(vec![pixel("AAAA")]), None, Inputs::default());
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 4, "no image message");
        let text = m[2]["content"].as_str().unwrap();
        assert!(
            text.contains("that is not shown: this model takes text only"),
            "{text}"
        );
        assert!(!text.contains("AAAA"));

        let many = with_results(vec![pixel("AAAA"); MAX_TOOL_MEDIA + 2]);
        let body = request_body(&many, None, IMAGES);
        let m = body["messages"].as_array().unwrap();
        let parts = m[2 + MAX_TOOL_MEDIA + 2]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 1 + MAX_TOOL_MEDIA);
        let last = m[2 + MAX_TOOL_MEDIA + 1]["content"].as_str().unwrap();
        assert!(
            last.contains("more images and audio than the model is sent at once"),
            "{last}"
        );
    }

    const IMAGES: Inputs = Inputs {
        images: true,
        audio: false,
    };

    fn clip(mime: &str) -> Value {
        json!({"content": [{"type": "audio", "mimeType": mime, "data": "UklG"}]})
    }

    #[test]
    fn tool_audio_follows_the_results_as_input_audio_when_the_model_takes_it() {
        let req = with_results(vec![clip("audio/wav"), pixel("AAAA"), clip("audio/ogg")]);
        let both = Inputs {
            images: true,
            audio: true,
        };
        let body = request_body(&req, None, both);
        let m = body["messages"].as_array().unwrap();
        let parts = m[5]["content"].as_array().unwrap();
        assert_eq!(
            parts[1],
            json!({"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}})
        );
        assert_eq!(parts[2]["type"], "image_url");
        assert_eq!(parts.len(), 3, "the ogg clip is named, not sent");
        let ogg = m[4]["content"].as_str().unwrap();
        assert!(
            ogg.contains("audio (audio/ogg, about 3 bytes) that is not shown: the model takes WAV and MP3 audio only"),
            "{ogg}"
        );
        // Without audioInput, audio is named only; images still go.
        let body = request_body(&req, None, IMAGES);
        let m = body["messages"].as_array().unwrap();
        let wav = m[2]["content"].as_str().unwrap();
        assert!(
            wav.contains(
                "that is not shown: this model takes no audio (the `llm` entry's `audioInput`)"
            ),
            "{wav}"
        );
        assert_eq!(m[5]["content"].as_array().unwrap().len(), 2);
    }
}
