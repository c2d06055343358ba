//! The OpenAI-compatible streaming adapter: `POST {baseUrl}/chat/completions` with
//! `stream: true` and `stream_options: {include_usage: true}` (DeepSeek, OpenAI and compatible
//! servers).
//!
//! # Behaviour
//! - Text deltas are forwarded as they arrive; tool calls are assembled from their streamed
//!   deltas (keyed by the delta `index`) and emitted complete, in index order, when the response
//!   finishes, followed by usage and the finish reason.
//! - HTTP 429 and 5xx responses (and connection failures) are retried before anything was
//!   streamed, at most `maxRetries` times, waiting `Retry-After` seconds when the server sends
//!   one (capped at [`MAX_RETRY_AFTER`]) and an exponential backoff otherwise.
//! - Any other HTTP status is a [`LlmError::Adapter`] carrying the status and the server's
//!   `error.message`. A malformed event, an error event or a connection that ends before the
//!   response finished ends the stream with `finish {kind: error, message}` after whatever was
//!   already streamed. Either way the agent loop logs the failure (`turn/end {kind: error}`).
//! - `timeout` bounds the wait for the response headers and every gap between two reads of the
//!   body (a stalled stream fails; a long, live one does not).
//!
//! Dropping the stream aborts the request.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::adapter::{Chunk, ChunkStream, FinishReason, LlmAdapter, LlmError, Usage};
use crate::request::{AssistantToolCall, FrozenRequest, LlmRequest, Message};

/// The longest `Retry-After` honoured; a longer one is waited for this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Settings of an [`OpenAiAdapter`].
#[derive(Clone)]
pub struct OpenAiSettings {
    /// The API base URL, e.g. `https://api.deepseek.com` or `https://api.openai.com/v1`.
    pub base_url: String,
    /// The bearer token; `None` sends no `Authorization` header (local servers).
    pub api_key: Option<String>,
    /// The model used when a request names none.
    pub default_model: Option<String>,
    /// Limit for the response headers and for every gap between body reads.
    pub timeout: Duration,
    /// Retries of 429/5xx/connection failures before anything was streamed.
    pub max_retries: u32,
    /// The first backoff delay (doubled per retry, capped at 16 times this).
    pub retry_base: Duration,
}

impl std::fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("default_model", &self.default_model)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base", &self.retry_base)
            .finish()
    }
}

impl OpenAiSettings {
    /// Settings for `base_url` with the defaults: no key, 60 s timeout, 3 retries from 500 ms.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiSettings {
            base_url: base_url.into(),
            api_key: None,
            default_model: None,
            timeout: Duration::from_secs(60),
            max_retries: 3,
            retry_base: Duration::from_millis(500),
        }
    }
}

/// The OpenAI-compatible chat-completions adapter.
#[derive(Debug, Clone)]
pub struct OpenAiAdapter {
    client: reqwest::Client,
    settings: OpenAiSettings,
}

impl OpenAiAdapter {
    /// An adapter with `settings`.
    ///
    /// # Errors
    /// The HTTP client could not be built (TLS initialisation).
    pub fn new(settings: OpenAiSettings) -> Result<Self, LlmError> {
        let client = reqwest::Client::builder()
            .connect_timeout(settings.timeout.min(Duration::from_secs(15)))
            .build()
            .map_err(|e| adapter_error(format!("building the HTTP client: {e}")))?;
        Ok(OpenAiAdapter { client, settings })
    }

    /// The settings.
    pub fn settings(&self) -> &OpenAiSettings {
        &self.settings
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> String {
        format!(
            "{}/chat/completions",
            self.settings.base_url.trim_end_matches('/')
        )
    }
}

fn adapter_error(message: String) -> LlmError {
    LlmError::Adapter {
        adapter: "openai".into(),
        message,
    }
}

/// The chat-completions request body for `request`.
pub fn request_body(request: &LlmRequest, default_model: Option<&str>) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for m in &request.messages {
        messages.push(match m {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut msg = json!({"role": "assistant", "content": content});
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
    if let Some(n) = request.config.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if let Some(stop) = &request.config.stop {
        body["stop"] = json!(stop);
    }
    body
}

/// Parses a `Retry-After` header value given in seconds (the HTTP-date form is not honoured).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs).min(MAX_RETRY_AFTER))
}

/// The error message of an error body: `error.message` when it is JSON, else the text.
fn error_message(body: &str) -> String {
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
            self.usage = Some(Usage {
                input_tokens: n("prompt_tokens"),
                output_tokens: n("completion_tokens"),
            });
        }
        let mut out = Vec::new();
        let choices = v.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            if let Some(delta) = choice.get("delta") {
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

type Tx = mpsc::Sender<Result<Chunk, LlmError>>;

/// Aborts the request task when the stream is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl LlmAdapter for OpenAiAdapter {
    fn name(&self) -> &str {
        "openai"
    }

    fn stream(&self, request: FrozenRequest) -> ChunkStream {
        let (tx, rx) = mpsc::channel(64);
        let this = self.clone();
        let task = tokio::spawn(async move {
            if let Err(e) = this.run(&request, &tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        let guard = AbortOnDrop(task);
        futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
            rx.recv().await.map(|item| (item, (rx, guard)))
        })
        .boxed()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl OpenAiAdapter {
    fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32 << retry.min(4);
        self.settings.retry_base.saturating_mul(factor)
    }

    /// Sends the request (with retries) and forwards the stream to `tx`.
    async fn run(&self, request: &LlmRequest, tx: &Tx) -> Result<(), LlmError> {
        let body = request_body(request, self.settings.default_model.as_deref()).to_string();
        let url = self.endpoint();
        let timeout = self.settings.timeout;
        let mut retry = 0;
        let response = loop {
            let mut builder = self
                .client
                .post(&url)
                .header("accept", "text/event-stream")
                .header("content-type", "application/json")
                .body(body.clone());
            if let Some(key) = &self.settings.api_key {
                builder = builder.bearer_auth(key);
            }
            let sent = tokio::time::timeout(timeout, builder.send()).await;
            let (wait, failure) = match sent {
                Err(_) => (
                    None,
                    format!("no response from {url} within {} ms", timeout.as_millis()),
                ),
                Ok(Err(e)) => (
                    None,
                    format!("request to {url} failed: {}", error_chain(&e)),
                ),
                Ok(Ok(resp)) if resp.status().is_success() => break resp,
                Ok(Ok(resp)) => {
                    let status = resp.status();
                    let wait = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_retry_after);
                    let text = tokio::time::timeout(timeout, resp.text())
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .unwrap_or_default();
                    let message = format!("HTTP {status}: {}", error_message(&text));
                    let retryable = status.as_u16() == 429 || status.is_server_error();
                    if !retryable {
                        return Err(adapter_error(message));
                    }
                    (wait, message)
                }
            };
            if retry >= self.settings.max_retries {
                let tries = retry + 1;
                return Err(adapter_error(format!(
                    "{failure} (gave up after {tries} attempt{})",
                    if tries == 1 { "" } else { "s" }
                )));
            }
            let delay = wait.unwrap_or_else(|| self.backoff(retry));
            tracing::warn!(%failure, retry = retry + 1, delay_ms = delay.as_millis() as u64, "llm request failed; retrying");
            tokio::time::sleep(delay).await;
            retry += 1;
        };

        let mut bytes = response.bytes_stream();
        let mut parser = SseParser::default();
        let mut assembler = DeltaAssembler::default();
        let ended_early: Option<String> = loop {
            let next = match tokio::time::timeout(timeout, bytes.next()).await {
                Err(_) => {
                    break Some(format!(
                        "no data for {} ms (stream timeout)",
                        timeout.as_millis()
                    ));
                }
                Ok(next) => next,
            };
            let events = match next {
                None => match parser.finish() {
                    Some(data) => vec![data],
                    None => {
                        break (!assembler.is_done()).then(|| "connection closed".to_owned());
                    }
                },
                Some(Err(e)) => break Some(error_chain(&e)),
                Some(Ok(b)) => parser.push(&b),
            };
            let mut failed = None;
            for data in events {
                match assembler.event(&data) {
                    Ok(chunks) => {
                        for c in chunks {
                            if tx.send(Ok(c)).await.is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Err(message) => {
                        failed = Some(message);
                        break;
                    }
                }
                if assembler.is_done() {
                    break;
                }
            }
            if let Some(message) = failed {
                let _ = tx
                    .send(Ok(Chunk::Finish {
                        reason: FinishReason::Error { message },
                    }))
                    .await;
                return Ok(());
            }
            if assembler.is_done() {
                break None;
            }
        };
        for c in assembler.close(ended_early.as_deref()) {
            if tx.send(Ok(c)).await.is_err() {
                break;
            }
        }
        Ok(())
    }
}

/// An error with its sources, `a: b: c`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::CallConfig;

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

    #[test]
    fn the_body_carries_system_tools_tool_results_and_stream_options() {
        let req = LlmRequest {
            config: CallConfig {
                model: "deepseek-chat".into(),
                temperature: Some(0.5),
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
                parameters: json!({"type": "object"}),
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
    }

    #[test]
    fn retry_after_is_parsed_and_capped() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.05"), Some(Duration::from_millis(50)));
        assert_eq!(parse_retry_after("99999"), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
