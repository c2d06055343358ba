//! The model adapters and the `llm` plugin that provides the [`Llm`] service with one of them.
//!
//! The conversation model (messages, history, frozen requests, chunks, the adapter trait and the
//! service) is `cordis-conversation`'s; it is re-exported here so that code choosing an adapter
//! needs one crate. Code that only reads or builds conversations (the session log, the agent
//! loop) depends on `cordis-conversation` and never compiles the HTTP client.
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

mod openai;
mod plugin;
mod scripted;
mod shared;

pub use cordis_conversation::{
    AssistantToolCall, CHUNK, CallConfig, Chunk, ChunkStream, Collected, FinishReason,
    FrozenRequest, History, HistoryIter, Llm, LlmAdapter, LlmError, LlmRequest, LlmRequestHook,
    Message, Price, RequestCheck, Usage, collect,
};
pub use openai::{
    DeltaAssembler, Inputs, MAX_RETRY_AFTER, MAX_TOOL_MEDIA, OpenAiAdapter, OpenAiSettings,
    SseParser, parse_retry_after, request_body,
};
pub use plugin::{AdapterKind, DEFAULT_BASE_URL, LlmConfig, LlmConfigError, LlmPlugin};
pub use scripted::{ScriptError, ScriptedAdapter, ScriptedResponse, ScriptedToolCall};
