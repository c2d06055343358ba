//! The stream decoder: bytes into server-sent events, events into [`Chunk`]s. Pure: the
//! adapter feeds it whatever the body yields, in any splits.

use std::collections::BTreeMap;

use serde_json::Value;

use cordis_conversation::AssistantToolCall;
use cordis_conversation::{Chunk, FinishReason, Usage};

/// Splits a byte stream into server-sent events (`data:` payloads joined by newlines).
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds bytes; returns the data of every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    out.push(data);
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                let rest = rest.strip_prefix(' ').unwrap_or(rest);
                match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(rest);
                    }
                    None => self.data = Some(rest.to_owned()),
                }
            }
            // `event:`, `id:`, `retry:` and `:` comments carry nothing we use.
        }
        out
    }

    /// The data of an event left without its closing blank line at the end of the stream.
    pub fn finish(&mut self) -> Option<String> {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let _ = self.push(&rest);
            let _ = self.push(b"\n");
        }
        self.data.take()
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Folds chat-completion stream events into [`Chunk`]s.
#[derive(Debug, Default)]
pub struct DeltaAssembler {
    calls: BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    finish: Option<String>,
    done: bool,
}

impl DeltaAssembler {
    /// Handles one event's data: text chunks to forward now, or the error that ends the stream.
    ///
    /// # Errors
    /// A message for a malformed event or an error event.
    pub fn event(&mut self, data: &str) -> Result<Vec<Chunk>, String> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            let shown: String = data.chars().take(120).collect();
            format!("malformed stream event ({e}): {shown}")
        })?;
        if let Some(err) = v.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| err.to_string(), str::to_owned);
            return Err(format!(
                "the server reported an error mid-stream: {message}"
            ));
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            // OpenAI nests the cached count; DeepSeek reports hits (and misses) at the top.
            let cached = u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .or_else(|| u.get("prompt_cache_hit_tokens").and_then(Value::as_u64));
            self.usage = Some(Usage {
                input_tokens: n("prompt_tokens"),
                output_tokens: n("completion_tokens"),
                cached_input_tokens: cached,
            });
        }
        let mut out = Vec::new();
        let choices = v.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            if let Some(delta) = choice.get("delta") {
                // DeepSeek, vLLM and others stream `reasoning_content`; some proxies `reasoning`.
                let reasoning = ["reasoning_content", "reasoning"]
                    .into_iter()
                    .find_map(|key| delta.get(key).and_then(Value::as_str));
                if let Some(text) = reasoning
                    && !text.is_empty()
                {
                    out.push(Chunk::Reasoning {
                        delta: text.to_owned(),
                    });
                }
                if let Some(text) = delta.get("content").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    out.push(Chunk::Text {
                        delta: text.to_owned(),
                    });
                }
                for tc in delta
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let index = tc.get("index").and_then(Value::as_u64).unwrap_or(0);
                    let call = self.calls.entry(index).or_default();
                    if let Some(id) = tc.get("id").and_then(Value::as_str) {
                        call.id.push_str(id);
                    }
                    if let Some(f) = tc.get("function") {
                        if let Some(name) = f.get("name").and_then(Value::as_str) {
                            call.name.push_str(name);
                        }
                        if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                            call.arguments.push_str(args);
                        }
                    }
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(reason.to_owned());
            }
        }
        Ok(out)
    }

    /// True once `[DONE]` arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The closing chunks (tool calls, usage, finish). `ended_early` marks a stream that closed
    /// before `[DONE]`: complete only if a finish reason was seen, else an error finish.
    pub fn close(self, ended_early: Option<&str>) -> Vec<Chunk> {
        let mut out = Vec::new();
        let reason = match (self.finish.as_deref(), ended_early) {
            (None, Some(why)) => FinishReason::Error {
                message: format!("the stream ended before the response finished: {why}"),
            },
            (None, None) | (Some("stop"), _) => FinishReason::Stop,
            (Some("tool_calls" | "function_call"), _) => FinishReason::ToolCalls,
            (Some("length"), _) => FinishReason::Length,
            (Some("content_filter"), _) => FinishReason::Error {
                message: "the response was stopped by the content filter".into(),
            },
            (Some(_), _) => FinishReason::Stop,
        };
        if !matches!(reason, FinishReason::Error { .. }) {
            for (i, call) in self.calls.into_values().enumerate() {
                out.push(Chunk::ToolCall {
                    call: AssistantToolCall {
                        id: if call.id.is_empty() {
                            format!("call_{i}")
                        } else {
                            call.id
                        },
                        name: call.name,
                        arguments: if call.arguments.is_empty() {
                            "{}".into()
                        } else {
                            call.arguments
                        },
                    },
                });
            }
        }
        let reason = match reason {
            FinishReason::Stop if out.iter().any(|c| matches!(c, Chunk::ToolCall { .. })) => {
                FinishReason::ToolCalls
            }
            r => r,
        };
        if let Some(usage) = self.usage {
            out.push(Chunk::Usage { usage });
        }
        out.push(Chunk::Finish { reason });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The usage chunk `close` gives after `event`.
    fn usage_of(event: &str) -> Option<Usage> {
        let mut a = DeltaAssembler::default();
        a.event(event).unwrap();
        a.close(None).into_iter().find_map(|c| match c {
            Chunk::Usage { usage } => Some(usage),
            _ => None,
        })
    }

    #[test]
    fn openai_cached_tokens_are_read_from_prompt_tokens_details() {
        let usage = usage_of(
            r#"{"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":40,"total_tokens":1240,"prompt_tokens_details":{"cached_tokens":1024}}}"#,
        );
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 1200,
                output_tokens: 40,
                cached_input_tokens: Some(1024),
            })
        );
    }

    #[test]
    fn deepseek_cache_hit_tokens_are_the_cached_input() {
        let usage = usage_of(
            r#"{"choices":[],"usage":{"prompt_tokens":900,"completion_tokens":12,"prompt_cache_hit_tokens":640,"prompt_cache_miss_tokens":260}}"#,
        );
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 900,
                output_tokens: 12,
                cached_input_tokens: Some(640),
            })
        );
    }

    #[test]
    fn a_usage_without_cache_fields_has_no_cached_count() {
        // Neither shape, and OpenAI's details without the count: unknown, not zero.
        for event in [
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"audio_tokens":0}}}"#,
        ] {
            let usage = usage_of(event).unwrap();
            assert_eq!(usage.cached_input_tokens, None, "{event}");
            assert_eq!((usage.input_tokens, usage.output_tokens), (5, 2));
        }
        // A zero count is a count: the cache missed.
        let usage = usage_of(
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}}"#,
        );
        assert_eq!(usage.unwrap().cached_input_tokens, Some(0));
    }

    #[test]
    fn reasoning_content_deltas_are_reasoning_chunks_before_the_text_of_the_same_event() {
        let mut a = DeltaAssembler::default();
        let got = a
            .event(r#"{"choices":[{"delta":{"reasoning_content":"Let me think."}}]}"#)
            .unwrap();
        assert_eq!(
            got,
            [Chunk::Reasoning {
                delta: "Let me think.".into()
            }]
        );
        // A proxy's `reasoning`, and an event carrying both reasoning and text.
        let got = a
            .event(r#"{"choices":[{"delta":{"reasoning":"Done.","content":"Hi"}}]}"#)
            .unwrap();
        assert_eq!(
            got,
            [
                Chunk::Reasoning {
                    delta: "Done.".into()
                },
                Chunk::Text { delta: "Hi".into() }
            ]
        );
        // Empty or null reasoning (DeepSeek sends `null` once the answer starts) is nothing.
        let got = a
            .event(r#"{"choices":[{"delta":{"reasoning_content":null,"content":"!"}}]}"#)
            .unwrap();
        assert_eq!(got, [Chunk::Text { delta: "!".into() }]);
    }

    #[test]
    fn sse_events_split_anywhere_are_reassembled() {
        let text = b": keep-alive\r\ndata: {\"a\":1}\r\n\r\ndata: x\ndata: y\n\nevent: e\ndata: [DONE]\n\n";
        for split in 0..text.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&text[..split]);
            got.extend(p.push(&text[split..]));
            assert_eq!(got, vec!["{\"a\":1}", "x\ny", "[DONE]"], "split at {split}");
        }
    }
}
