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
//!
//! # Layout
//! - `wire`: the chat-completions request body and error bodies (pure JSON).
//! - `sse`: the stream decoder, bytes → server-sent events ([`SseParser`]) → [`Chunk`]s
//!   ([`DeltaAssembler`]); pure, fed by whatever reads the body.
//! - `sender`: the retrying sender (status classes, `Retry-After`, backoff).
//! - here: settings, the adapter, and the task that ties them together.

mod sender;
mod sse;
mod wire;

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;

use cordis_conversation::{Chunk, ChunkStream, FinishReason, LlmAdapter, LlmError};
use cordis_conversation::{FrozenRequest, LlmRequest};

pub use sender::{MAX_RETRY_AFTER, parse_retry_after};
pub use sse::{DeltaAssembler, SseParser};
pub use wire::{Inputs, MAX_TOOL_MEDIA, request_body};

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
    /// The model takes images: images in tool results are sent as a user message of image
    /// parts after the results (else each is named in the result's text).
    pub image_input: bool,
    /// The model takes audio: WAV and MP3 clips in tool results are sent as `input_audio`
    /// parts after the results (else each is named in the result's text).
    pub audio_input: bool,
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
            .field("image_input", &self.image_input)
            .field("audio_input", &self.audio_input)
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
            image_input: false,
            audio_input: false,
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
    /// Sends the request (with retries) and forwards the stream to `tx`.
    async fn run(&self, request: &LlmRequest, tx: &Tx) -> Result<(), LlmError> {
        let body = request_body(
            request,
            self.settings.default_model.as_deref(),
            Inputs {
                images: self.settings.image_input,
                audio: self.settings.audio_input,
            },
        )
        .to_string();
        let response = self.send(&body).await?;
        self.forward(response, tx).await;
        Ok(())
    }

    /// Decodes the response body into chunks on `tx`: text as it arrives, then the closing
    /// chunks; a failure mid-stream ends it with `finish {kind: error}`.
    async fn forward(&self, response: reqwest::Response, tx: &Tx) {
        let timeout = self.settings.timeout;
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
                                return;
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
                return;
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
