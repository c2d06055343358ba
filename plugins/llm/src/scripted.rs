//! The scripted adapter: replays responses from a fixture and, when asked, records requests.
//!
//! # Fixture format
//! YAML or JSON (chosen by the file extension: `.json` is JSON, anything else YAML). Either a
//! list of responses, or `{responses: [...], repeat: bool}` (`repeat` cycles the list forever,
//! for benchmarks and demos). A response:
//!
//! ```yaml
//! - text: "Hello"            # one delta, or a list of deltas: ["Hel", "lo"]
//!   toolCalls:               # optional; arguments may be an object or a raw JSON string
//!     - {id: c1, name: read, arguments: {path: a.txt}}
//!   usage: {inputTokens: 10, outputTokens: 3, cachedInputTokens: 8}  # cached: optional
//!   delayMs: 5               # wait before each chunk (abort and timeout tests)
//!   error: "rate limited"    # after the text, the stream ends with finish {kind: error}
//!   finish: length           # override the finish kind (default: tool-calls if any, else stop)
//! ```
//!
//! # Determinism
//! Responses are handed out in request arrival order; tool-call ids default to
//! `call-<response index>-<call index>`.
//!
//! # Recording
//! Requests are not kept unless asked for ([`ScriptedAdapter::recording`], or `recordRequests`
//! in the plugin config): a long-running demo must not keep every request it served. The record
//! is bounded: the last `limit` requests.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde::Deserialize;

use cordis_conversation::{AssistantToolCall, FrozenRequest};
use cordis_conversation::{Chunk, ChunkStream, FinishReason, LlmAdapter, LlmError, Usage};

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The call id; defaults to `call-<response>-<index>`.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool name.
    pub name: String,
    /// Arguments: an object (serialized) or a raw JSON string (sent verbatim).
    #[serde(default)]
    pub arguments: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TextField {
    One(String),
    Many(Vec<String>),
}

fn deltas<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match TextField::deserialize(d)? {
        TextField::One(s) => vec![s],
        TextField::Many(v) => v,
    })
}

/// One scripted response.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptedResponse {
    /// Reasoning deltas, streamed before the text, in order.
    #[serde(default, deserialize_with = "deltas")]
    pub reasoning: Vec<String>,
    /// Text deltas, in order.
    #[serde(default, deserialize_with = "deltas")]
    pub text: Vec<String>,
    /// Tool calls, in order.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Usage to report.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Delay before each chunk, in milliseconds.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Ends the response with `finish {kind: error, message}`.
    #[serde(default)]
    pub error: Option<String>,
    /// Overrides the finish kind: `stop`, `tool-calls`, `length`, `aborted`.
    #[serde(default)]
    pub finish: Option<String>,
}

impl ScriptedResponse {
    /// A text-only response.
    pub fn text(text: impl Into<String>) -> Self {
        ScriptedResponse {
            text: vec![text.into()],
            ..Default::default()
        }
    }

    /// A response that calls `name` with `arguments` (id defaulted).
    pub fn tool_call(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        ScriptedResponse::default().and_call(name, arguments)
    }

    /// Adds a tool call.
    pub fn and_call(mut self, name: impl Into<String>, arguments: serde_json::Value) -> Self {
        self.tool_calls.push(ScriptedToolCall {
            id: None,
            name: name.into(),
            arguments: Some(arguments),
        });
        self
    }

    /// A response that fails with `message`.
    pub fn error(message: impl Into<String>) -> Self {
        ScriptedResponse {
            error: Some(message.into()),
            ..Default::default()
        }
    }

    fn chunks(&self, index: usize) -> Result<Vec<Chunk>, String> {
        let mut out: Vec<Chunk> = self
            .reasoning
            .iter()
            .map(|t| Chunk::Reasoning { delta: t.clone() })
            .chain(self.text.iter().map(|t| Chunk::Text { delta: t.clone() }))
            .collect();
        for (i, call) in self.tool_calls.iter().enumerate() {
            let arguments = match &call.arguments {
                None => "{}".to_owned(),
                Some(serde_json::Value::String(raw)) => raw.clone(),
                Some(v) => v.to_string(),
            };
            out.push(Chunk::ToolCall {
                call: AssistantToolCall {
                    id: call
                        .id
                        .clone()
                        .unwrap_or_else(|| format!("call-{index}-{i}")),
                    name: call.name.clone(),
                    arguments,
                },
            });
        }
        if let Some(usage) = self.usage {
            out.push(Chunk::Usage { usage });
        }
        let reason = match (&self.error, self.finish.as_deref()) {
            (Some(message), _) => FinishReason::Error {
                message: message.clone(),
            },
            (None, Some("stop")) => FinishReason::Stop,
            (None, Some("tool-calls")) => FinishReason::ToolCalls,
            (None, Some("length")) => FinishReason::Length,
            (None, Some("aborted")) => FinishReason::Aborted,
            (None, Some(other)) => {
                return Err(format!(
                    "response {index}: unknown finish \"{other}\" (expected stop, tool-calls, length or aborted)"
                ));
            }
            (None, None) if self.tool_calls.is_empty() => FinishReason::Stop,
            (None, None) => FinishReason::ToolCalls,
        };
        out.push(Chunk::Finish { reason });
        Ok(out)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScriptFile {
    List(Vec<ScriptedResponse>),
    Doc {
        responses: Vec<ScriptedResponse>,
        #[serde(default)]
        repeat: bool,
    },
}

/// Loading a fixture failed.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("reading script {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file does not parse as a script.
    #[error("parsing script {path}: {message}")]
    Parse {
        /// The path.
        path: String,
        /// What the parser said.
        message: String,
    },
}

struct State {
    next: usize,
    requests: VecDeque<FrozenRequest>,
}

/// Replays scripted responses; records the last requests received when asked to.
pub struct ScriptedAdapter {
    /// Shared: the boots of one configuration hold one list (see [`crate::shared`]).
    responses: Arc<[ScriptedResponse]>,
    repeat: bool,
    /// How many of the latest requests to keep (0: none).
    record: usize,
    state: Mutex<State>,
}

impl std::fmt::Debug for ScriptedAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedAdapter")
            .field("responses", &self.responses.len())
            .field("repeat", &self.repeat)
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

impl ScriptedAdapter {
    /// An adapter answering `responses` in order, then failing.
    pub fn new(responses: Vec<ScriptedResponse>) -> Self {
        ScriptedAdapter::shared(responses.into())
    }

    /// An adapter answering the shared list `responses` in order, then failing.
    pub(crate) fn shared(responses: Arc<[ScriptedResponse]>) -> Self {
        ScriptedAdapter {
            responses,
            repeat: false,
            record: 0,
            state: Mutex::new(State {
                next: 0,
                requests: VecDeque::new(),
            }),
        }
    }

    /// Keeps the last `limit` requests received, for [`ScriptedAdapter::requests`] (tests).
    pub fn recording(mut self, limit: usize) -> Self {
        self.record = limit;
        self
    }

    /// Cycles through the responses forever.
    pub fn repeating(mut self) -> Self {
        self.repeat = true;
        self
    }

    /// Parses a fixture text; `json` selects JSON, otherwise YAML.
    ///
    /// # Errors
    /// [`ScriptError::Parse`] naming `origin`.
    pub fn parse(text: &str, json: bool, origin: &str) -> Result<Self, ScriptError> {
        let file: ScriptFile = if json {
            serde_json::from_str(text).map_err(|e| e.to_string())
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| e.to_string())
        }
        .map_err(|message| ScriptError::Parse {
            path: origin.to_owned(),
            message,
        })?;
        let (responses, repeat) = match file {
            ScriptFile::List(r) => (r, false),
            ScriptFile::Doc { responses, repeat } => (responses, repeat),
        };
        for (i, r) in responses.iter().enumerate() {
            r.chunks(i).map_err(|message| ScriptError::Parse {
                path: origin.to_owned(),
                message,
            })?;
        }
        let adapter = ScriptedAdapter::new(responses);
        Ok(if repeat { adapter.repeating() } else { adapter })
    }

    /// Loads a fixture file (blocking read; call at plugin apply or from a blocking task).
    ///
    /// # Errors
    /// A [`ScriptError`] naming the path.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: shown.clone(),
            source,
        })?;
        let json = path.extension().is_some_and(|e| e == "json");
        ScriptedAdapter::parse(&text, json, &shown)
    }

    /// The recorded requests (the last `limit` of [`ScriptedAdapter::recording`]), in arrival
    /// order; always empty when recording is off.
    pub fn requests(&self) -> Vec<FrozenRequest> {
        let st = cordis_runtime::lock(&self.state);
        st.requests.iter().cloned().collect()
    }

    /// How many responses were handed out.
    pub fn used(&self) -> usize {
        cordis_runtime::lock(&self.state).next
    }
}

impl LlmAdapter for ScriptedAdapter {
    fn name(&self) -> &str {
        "scripted"
    }

    fn stream(&self, request: FrozenRequest) -> ChunkStream {
        let index = {
            let mut st = cordis_runtime::lock(&self.state);
            if self.record > 0 {
                if st.requests.len() == self.record {
                    st.requests.pop_front();
                }
                st.requests.push_back(request);
            }
            let i = st.next;
            st.next += 1;
            i
        };
        let pick = if self.repeat && !self.responses.is_empty() {
            Some(index % self.responses.len())
        } else {
            (index < self.responses.len()).then_some(index)
        };
        let Some(pick) = pick else {
            let err = LlmError::Adapter {
                adapter: "scripted".into(),
                message: format!(
                    "no scripted response left (request {} of a script with {})",
                    index + 1,
                    self.responses.len()
                ),
            };
            return futures_util::stream::once(async move { Err(err) }).boxed();
        };
        let response = &self.responses[pick];
        let chunks = match response.chunks(pick) {
            Ok(c) => c,
            Err(message) => {
                let err = LlmError::Adapter {
                    adapter: "scripted".into(),
                    message,
                };
                return futures_util::stream::once(async move { Err(err) }).boxed();
            }
        };
        match response.delay_ms {
            None | Some(0) => futures_util::stream::iter(chunks.into_iter().map(Ok)).boxed(),
            Some(ms) => futures_util::stream::iter(chunks)
                .then(move |c| async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(c)
                })
                .boxed(),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordis_conversation::collect;
    use cordis_conversation::{CallConfig, LlmRequest};

    fn request() -> FrozenRequest {
        FrozenRequest::new(LlmRequest {
            config: CallConfig::model("m"),
            messages: Default::default(),
            system: None,
            tools: vec![],
            session_id: "s".into(),
        })
    }

    #[tokio::test]
    async fn a_yaml_script_replays_text_tool_calls_usage_and_errors_in_order() {
        let yaml = r#"
- text: ["Hel", "lo"]
  usage: {inputTokens: 3, outputTokens: 2, cachedInputTokens: 1}
- toolCalls:
    - {name: read, arguments: {path: a}}
    - {id: x, name: raw, arguments: "{not json"}
- error: rate limited
"#;
        let a = ScriptedAdapter::parse(yaml, false, "inline")
            .unwrap()
            .recording(16);
        let one = collect(a.stream(request())).await.unwrap();
        assert_eq!(one.text, "Hello");
        assert_eq!(one.usage.unwrap().output_tokens, 2);
        assert_eq!(one.usage.unwrap().cached_input_tokens, Some(1));
        assert_eq!(one.finish, Some(FinishReason::Stop));
        let two = collect(a.stream(request())).await.unwrap();
        assert_eq!(two.tool_calls[0].id, "call-1-0");
        assert_eq!(two.tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(two.tool_calls[1].arguments, "{not json");
        assert_eq!(two.finish, Some(FinishReason::ToolCalls));
        let three = collect(a.stream(request())).await.unwrap();
        assert_eq!(
            three.finish,
            Some(FinishReason::Error {
                message: "rate limited".into()
            })
        );
        let err = collect(a.stream(request())).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("no scripted response left (request 4 of a script with 3)"),
            "{err}"
        );
        assert_eq!(a.requests().len(), 4);
    }

    #[tokio::test]
    async fn a_json_script_with_repeat_cycles() {
        let json = r#"{"responses": [{"text": "a"}, {"text": "b"}], "repeat": true}"#;
        let a = ScriptedAdapter::parse(json, true, "inline").unwrap();
        let mut texts = String::new();
        for _ in 0..5 {
            texts += &collect(a.stream(request())).await.unwrap().text;
        }
        assert_eq!(texts, "ababa");
    }

    #[tokio::test]
    async fn requests_are_kept_only_when_asked_and_then_only_the_latest() {
        let quiet = ScriptedAdapter::new(vec![ScriptedResponse::text("a")]).repeating();
        for _ in 0..10 {
            collect(quiet.stream(request())).await.unwrap();
        }
        assert!(quiet.requests().is_empty(), "off by default");
        assert_eq!(quiet.used(), 10);
        let kept = ScriptedAdapter::new(vec![ScriptedResponse::text("a")])
            .repeating()
            .recording(3);
        let sent: Vec<FrozenRequest> = (0..10).map(|_| request()).collect();
        for r in &sent {
            collect(kept.stream(r.clone())).await.unwrap();
        }
        let got = kept.requests();
        assert_eq!(got.len(), 3);
        assert!(got.iter().zip(&sent[7..]).all(|(a, b)| a.same(b)));
    }

    #[test]
    fn a_bad_finish_or_unknown_field_is_a_parse_error_naming_the_origin() {
        let err = ScriptedAdapter::parse("- {finish: later}", false, "s.yml").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("parsing script s.yml: response 0: unknown finish \"later\""),
            "{err}"
        );
        let err = ScriptedAdapter::parse("- {txt: a}", false, "s.yml").unwrap_err();
        assert!(err.to_string().contains("s.yml"), "{err}");
    }
}
