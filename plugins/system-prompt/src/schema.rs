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
    let mut out = value.clone();
    canonicalize(&mut out);
    out
}

/// True when every object in `value` has its keys in sorted order (no allocation).
pub fn is_canonical(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Object(map) => {
            map.keys().zip(map.keys().skip(1)).all(|(a, b)| a <= b)
                && map.values().all(is_canonical)
        }
        serde_json::Value::Array(items) => items.iter().all(is_canonical),
        _ => true,
    }
}

/// Puts `value` in the canonical form of [`canonical_json`] in place. Allocates nothing when the
/// value is canonical already — always the case while `serde_json` keeps maps sorted (without its
/// `preserve_order` feature), so this is a cheap guard rather than a rebuild.
pub fn canonicalize(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            let sorted = map.keys().zip(map.keys().skip(1)).all(|(a, b)| a <= b);
            if !sorted {
                let mut entries: Vec<(String, serde_json::Value)> =
                    std::mem::take(map).into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                map.extend(entries);
            }
            map.values_mut().for_each(canonicalize);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(canonicalize),
        _ => {}
    }
}

/// The pre-in-place version, kept for the property test comparing both.
#[cfg(test)]
fn canonical_json_rebuilt(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), canonical_json_rebuilt(&map[k]));
            }
            serde_json::Value::Object(out)
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(canonical_json_rebuilt).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalizing_in_place_matches_a_full_rebuild() {
        let v = serde_json::json!({
            "type": "object",
            "properties": {"z": {"type": "string"}, "a": {"items": [{"y": 1, "b": 2}]}},
            "required": ["z"]
        });
        let mut in_place = v.clone();
        canonicalize(&mut in_place);
        assert_eq!(in_place, canonical_json_rebuilt(&v));
        assert_eq!(
            serde_json::to_string(&in_place).unwrap(),
            serde_json::to_string(&canonical_json_rebuilt(&v)).unwrap()
        );
    }
}
