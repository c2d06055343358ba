//! The adapter trait and the chunks it streams.

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};

use crate::message::AssistantToolCall;
use crate::request::FrozenRequest;

/// Token usage of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Of the prompt tokens, how many the provider served from its prompt cache (OpenAI
    /// `prompt_tokens_details.cached_tokens`, DeepSeek `prompt_cache_hit_tokens`), when it
    /// says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

/// Why a response ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model stopped to have tools called.
    ToolCalls,
    /// The output token limit was reached.
    Length,
    /// The call failed.
    Error {
        /// What went wrong.
        message: String,
    },
    /// The call was aborted.
    Aborted,
}

/// One streamed piece of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Chunk {
    /// A piece of text.
    Text {
        /// The text delta.
        delta: String,
    },
    /// A piece of the model's reasoning (`reasoning_content` of DeepSeek and other
    /// OpenAI-compatible servers): logged, shown, and kept on the assistant's message, which
    /// sends it back (see [`crate::Message::Assistant`]).
    Reasoning {
        /// The reasoning delta.
        delta: String,
    },
    /// A complete tool call.
    ToolCall {
        /// The call.
        #[serde(flatten)]
        call: AssistantToolCall,
    },
    /// Token usage.
    Usage {
        /// The usage.
        #[serde(flatten)]
        usage: Usage,
    },
    /// The end of the response.
    Finish {
        /// Why it ended.
        reason: FinishReason,
    },
}

/// A model call failed outside the stream's own `finish` (transport, script exhausted, check).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The adapter failed.
    #[error("{adapter} adapter: {message}")]
    Adapter {
        /// The adapter name.
        adapter: String,
        /// What went wrong.
        message: String,
    },
    /// A request check (the reconstructability invariant) rejected the request.
    #[error("{0}")]
    Rejected(String),
    /// An `llm/request` listener panicked.
    #[error("{0}")]
    Hook(String),
}

/// The stream an adapter returns.
pub type ChunkStream = BoxStream<'static, Result<Chunk, LlmError>>;

/// A model backend.
pub trait LlmAdapter: Send + Sync + 'static {
    /// The adapter name (`scripted`, `openai`).
    fn name(&self) -> &str;

    /// Starts a call. The stream should end with a [`Chunk::Finish`]; dropping it cancels.
    fn stream(&self, request: FrozenRequest) -> ChunkStream;

    /// For downcasting to the concrete adapter (tests read the scripted adapter's records).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A whole response gathered from a stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    /// The concatenated text.
    pub text: String,
    /// The concatenated reasoning.
    pub reasoning: String,
    /// The tool calls in order.
    pub tool_calls: Vec<AssistantToolCall>,
    /// The last usage reported.
    pub usage: Option<Usage>,
    /// The finish reason (`None` if the stream ended without one).
    pub finish: Option<FinishReason>,
}

/// Drains a stream into a [`Collected`] response.
///
/// # Errors
/// The first error the stream yields.
///
/// # Cancel safety
/// Dropping the future drops the stream, which cancels the call.
pub async fn collect(mut stream: ChunkStream) -> Result<Collected, LlmError> {
    let mut out = Collected::default();
    while let Some(chunk) = stream.next().await {
        match chunk? {
            Chunk::Text { delta } => out.text.push_str(&delta),
            Chunk::Reasoning { delta } => out.reasoning.push_str(&delta),
            Chunk::ToolCall { call } => out.tool_calls.push(call),
            Chunk::Usage { usage } => out.usage = Some(usage),
            Chunk::Finish { reason } => out.finish = Some(reason),
        }
    }
    Ok(out)
}
