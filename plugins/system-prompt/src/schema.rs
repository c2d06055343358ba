//! `ToolSchema`: what a model sees of one tool, and the scope key assemblies are made for.

use serde::{Deserialize, Serialize};

/// The model-facing description of one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The tool name the model calls.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// A JSON Schema object (`"type": "object"`) for the call arguments.
    pub parameters: serde_json::Value,
}

/// Identifies one registry scope (an agent's scope, a preset's standing scope).
///
/// Usually made from the runtime [`cordis_runtime::ScopeId`] of the scope that owns the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ScopeKey(pub u64);

impl From<cordis_runtime::ScopeId> for ScopeKey {
    fn from(id: cordis_runtime::ScopeId) -> Self {
        ScopeKey(id.0)
    }
}

impl std::fmt::Display for ScopeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "scope {}", self.0)
    }
}

/// Returns `value` with every object's keys in sorted order, so its JSON text does not depend on
/// how the value was built (serde_json keeps insertion order when `preserve_order` is enabled
/// anywhere in the build).
pub fn canonical_json(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), canonical_json(&map[k]));
            }
            serde_json::Value::Object(out)
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(canonical_json).collect())
        }
        other => other.clone(),
    }
}
