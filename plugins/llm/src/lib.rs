//! The `llm` service: what the agent loop sends a model and what comes back.
//!
//! A [`LlmRequest`] is built once and then *frozen* into a [`FrozenRequest`] (a shared `Arc`
//! with no mutable access): whoever wants a different request must build a new one, so the
//! request that was checked against the session log is the request the adapter receives.
//! An adapter ([`LlmAdapter`]) turns a request into a stream of [`Chunk`]s: text deltas, tool
//! calls, usage and one final `finish`.
//!
//! Adapters:
//! - [`ScriptedAdapter`]: replays responses from a fixture (YAML or JSON) and, when asked, keeps
//!   the last requests it received; deterministic and offline, for tests, benchmarks and demos.
//! - [`OpenAiAdapter`]: an OpenAI-compatible chat-completions endpoint, streamed (server-sent
//!   events), with tool calls assembled from deltas, usage, retries and timeouts.
//!
//! # Examples
//!
//! ```
//! use cordis_llm::{CallConfig, FrozenRequest, LlmRequest, Message, ScriptedAdapter, ScriptedResponse, collect};
//! use cordis_llm::LlmAdapter;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let adapter = ScriptedAdapter::new(vec![ScriptedResponse::text("hello")]).recording(8);
//! let request = FrozenRequest::new(LlmRequest {
//!     config: CallConfig::model("m"),
//!     messages: vec![Message::user("hi")].into(),
//!     system: None,
//!     tools: vec![],
//!     session_id: "s".into(),
//! });
//! let response = collect(adapter.stream(request)).await.unwrap();
//! assert_eq!(response.text, "hello");
//! assert_eq!(adapter.requests().len(), 1);
//! # }
//! ```

mod adapter;
mod history;
mod openai;
mod plugin;
mod request;
mod scripted;
mod service;

pub use adapter::{
    Chunk, ChunkStream, Collected, FinishReason, LlmAdapter, LlmError, Usage, collect,
};
pub use history::{CHUNK, History, HistoryIter};
pub use openai::{
    DeltaAssembler, MAX_RETRY_AFTER, OpenAiAdapter, OpenAiSettings, SseParser, parse_retry_after,
    request_body,
};
pub use plugin::{AdapterKind, DEFAULT_BASE_URL, LlmConfig, LlmConfigError, LlmPlugin};
pub use request::{AssistantToolCall, CallConfig, FrozenRequest, LlmRequest, Message};
pub use scripted::{ScriptError, ScriptedAdapter, ScriptedResponse, ScriptedToolCall};
pub use service::{Llm, LlmRequestHook, RequestCheck};
