//! `ToolSchema`: what a model sees of one tool.

use serde::{Deserialize, Serialize};

/// The model-facing description of one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The tool name the model calls.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// A JSON Schema object (`"type": "object"`) for the call arguments. Shared: a plugin that
    /// builds its schemas once per process hands the same allocation to every boot, and the
    /// registry and the request header recognise it by identity instead of walking it again
    /// (see [`crate::memo`]).
    pub parameters: std::sync::Arc<serde_json::Value>,
}
