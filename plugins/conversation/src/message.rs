//! Messages: what the conversation is made of, as derived from the session log.

use serde::{Deserialize, Serialize};

/// A tool call the assistant made, as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantToolCall {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The raw JSON arguments text.
    pub arguments: String,
}

/// One conversation message, as derived from the session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// What the user said.
    User {
        /// The text.
        content: String,
        /// The images that came with it (for models that take them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageInput>,
    },
    /// What the model answered.
    #[serde(rename_all = "camelCase")]
    Assistant {
        /// The text.
        content: String,
        /// The tool calls it made, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<AssistantToolCall>,
        /// The reasoning that came with it, sent back with it: DeepSeek's thinking mode refuses
        /// a conversation whose tool-calling turns lost theirs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    /// The result of one tool call.
    #[serde(rename_all = "camelCase")]
    Tool {
        /// The call id it answers.
        call_id: String,
        /// The tool name.
        name: String,
        /// The result content.
        content: serde_json::Value,
        /// True for failures.
        is_error: bool,
    },
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
            images: Vec::new(),
        }
    }
}

/// An image a user message carries, as its client sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageInput {
    /// Its media type (`image/png`).
    pub mime_type: String,
    /// Its bytes, base64.
    pub data: String,
}
