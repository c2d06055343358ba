//! The conversation model and the `llm` seam: what the agent loop sends a model and what comes
//! back, without any way of sending it.
//!
//! A [`LlmRequest`] is built once and then *frozen* into a [`FrozenRequest`] (a shared `Arc`
//! with no mutable access): whoever wants a different request must build a new one, so the
//! request that was checked against the session log is the request the adapter receives.
//! An adapter ([`LlmAdapter`]) turns a request into a stream of [`Chunk`]s: text deltas, tool
//! calls, usage and one final `finish`. The [`Llm`] service holds the composition's adapter and
//! the `llm/request` hook.
//!
//! This crate is the interface only: the session log, the agent loop and the front ends name it
//! without compiling an HTTP client. The adapters (scripted, OpenAI-compatible) and the `llm`
//! plugin that picks one live in `cordis-llm`.

mod adapter;
mod history;
mod message;
mod request;
mod service;

pub use adapter::{
    Chunk, ChunkStream, Collected, FinishReason, LlmAdapter, LlmError, Usage, collect,
};
pub use history::{CHUNK, History, HistoryIter};
pub use message::{AssistantToolCall, ImageInput, Message};
pub use request::{CallConfig, FrozenRequest, LlmRequest};
pub use service::{Llm, LlmRequestHook, Price, RequestCheck};
