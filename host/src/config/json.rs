//! YAML to JSON: a marked config value as the `serde_json::Value` a plugin receives.
//!
//! Strings are interpolated here (`${{ env.NAME }}`, see [`crate::env`]); keys become strings
//! the way serde_yaml would print them, and a problem is reported at the node (or, for an unset
//! variable, at `env.NAME` inside the string) instead of stopping the conversion.

use serde_json::Value as Json;

use super::position::Text;
use super::yaml::{Kind, NodeId, duplicate_keys, key_text, short};
use crate::diagnostic::{Pos, Problem};
use crate::env::{interpolate, needle};

/// Converts the config value at `id` to JSON, interpolating `${{ env.X }}` in strings; every
/// problem found (an unset variable, a duplicate or non-scalar key) is added to `problems`,
/// in document order, and its value left out.
pub(super) fn to_json(
    text: Text<'_>,
    id: NodeId,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<(Pos, Problem)>,
) -> Json {
    let tree = text.tree;
    match &tree.node(id).kind {
        Kind::Null => Json::Null,
        Kind::Bool(b) => Json::Bool(*b),
        Kind::Int(i) => Json::from(*i),
        Kind::UInt(u) => Json::from(*u),
        Kind::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Kind::Str(..) => {
            let s = tree.str(id).unwrap_or_default();
            match interpolate(s, env) {
                Ok(out) => Json::String(out),
                Err(problem) => {
                    problems.push((text.find_in(id, &needle(&problem)), problem));
                    Json::Null
                }
            }
        }
        Kind::Seq(items) => Json::Array(
            items
                .iter()
                .map(|i| to_json(text, *i, env, problems))
                .collect(),
        ),
        Kind::Map(pairs) => {
            let mut out = serde_json::Map::new();
            if pairs.len() > 1 {
                for k in duplicate_keys(tree, pairs) {
                    let key = key_text(tree, k).unwrap_or_default();
                    problems.push((tree.node(k).pos, Problem::DuplicateKey { key }));
                }
            }
            for (k, v) in pairs {
                let key = match &tree.node(*k).kind {
                    Kind::Str(..) | Kind::Int(_) | Kind::UInt(_) | Kind::Bool(_) => {
                        key_text(tree, *k).unwrap_or_default()
                    }
                    Kind::Float(f) => f.to_string(),
                    _ => {
                        let found = short(tree, *k);
                        problems.push((tree.node(*k).pos, Problem::NonStringKey { found }));
                        continue;
                    }
                };
                let value = to_json(text, *v, env, problems);
                out.insert(key, value);
            }
            Json::Object(out)
        }
    }
}
