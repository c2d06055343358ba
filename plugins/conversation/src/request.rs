//! Requests: call config and the frozen request the adapter receives.

use std::ops::Deref;
use std::sync::Arc;

use cordis_schema::ToolSchema;
use serde::{Deserialize, Serialize};

use crate::history::History;

/// The per-call model configuration (the `config` part of a request header).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallConfig {
    /// The model name.
    pub model: String,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// How hard a reasoning model thinks (`low`, `medium`, `high`: OpenAI-compatible
    /// `reasoning_effort`); none, the model's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
}

impl CallConfig {
    /// A config naming only the model.
    pub fn model(model: impl Into<String>) -> Self {
        CallConfig {
            model: model.into(),
            ..Default::default()
        }
    }
}

/// Everything one model call needs. Build it, then freeze it with [`FrozenRequest::new`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRequest {
    /// Model and sampling configuration.
    pub config: CallConfig,
    /// The conversation so far, shared with the session and earlier requests (not copied).
    pub messages: History,
    /// The rendered system prompt; `None` when empty.
    pub system: Option<String>,
    /// The model-facing tools in canonical order.
    pub tools: Vec<ToolSchema>,
    /// The session the request belongs to.
    pub session_id: String,
}

/// An immutable, shared request: cloning shares it, nothing can change it.
///
/// To send something else, clone the inner value and freeze a new request.
#[derive(Debug, Clone, PartialEq)]
pub struct FrozenRequest(Arc<LlmRequest>);

impl FrozenRequest {
    /// Freezes `request`.
    pub fn new(request: LlmRequest) -> Self {
        FrozenRequest(Arc::new(request))
    }

    /// True when both handles share one frozen request (not merely equal ones).
    pub fn same(&self, other: &FrozenRequest) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for FrozenRequest {
    type Target = LlmRequest;
    fn deref(&self) -> &LlmRequest {
        &self.0
    }
}
