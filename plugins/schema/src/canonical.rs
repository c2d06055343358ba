//! The canonical JSON form: every object's keys sorted by their UTF-8 bytes, written by
//! `serde_json` with no whitespace.
//!
//! # Determinism
//! The form depends only on content, never on how a value was built: `serde_json` keeps insertion
//! order when its `preserve_order` feature is enabled anywhere in the build, so the sort is done
//! here rather than assumed. Strings and numbers keep `serde_json`'s own escaping and formatting.
//! Every canonical form in the tree (request headers, session logs, digests) comes from this
//! module, so they agree byte for byte.

use serde_json::Value;

/// Returns `value` with every object's keys in sorted order.
pub fn canonical_json(value: &Value) -> Value {
    let mut out = value.clone();
    canonicalize(&mut out);
    out
}

/// The canonical bytes of `value`: sorted keys, no whitespace. Copies the value only when it is
/// not canonical already.
pub fn canonical_bytes(value: &Value) -> Vec<u8> {
    let bytes = if is_canonical(value) {
        serde_json::to_vec(value)
    } else {
        serde_json::to_vec(&canonical_json(value))
    };
    // A `Value` always serializes: its keys are strings and its numbers finite.
    bytes.unwrap_or_default()
}

/// True when every object in `value` has its keys in sorted order (no allocation).
pub fn is_canonical(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.keys().zip(map.keys().skip(1)).all(|(a, b)| a <= b)
                && map.values().all(is_canonical)
        }
        Value::Array(items) => items.iter().all(is_canonical),
        _ => true,
    }
}

/// Puts `value` in the canonical form of [`canonical_json`] in place. Allocates nothing when the
/// value is canonical already — always the case while `serde_json` keeps maps sorted (without its
/// `preserve_order` feature), so this is a cheap guard rather than a rebuild.
pub fn canonicalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let sorted = map.keys().zip(map.keys().skip(1)).all(|(a, b)| a <= b);
            if !sorted {
                let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                map.extend(entries);
            }
            map.values_mut().for_each(canonicalize);
        }
        Value::Array(items) => items.iter_mut().for_each(canonicalize),
        _ => {}
    }
}

/// Strict JSON equality: true only when the two values serialize to the same bytes. Unlike
/// `Value`'s `==`, `0.0` and `-0.0` differ, `1` and `1.0` differ, and objects must list their
/// keys in the same order (stricter than needed for a memo key: equal values in another key
/// order only miss the memo).
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Number(a), Value::Number(b)) => {
            // `==` tells integers from floats and compares floats by value; the bits tell
            // `-0.0` apart.
            a == b && a.as_f64().map(f64::to_bits) == b.as_f64().map(f64::to_bits)
        }
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && same_json(va, vb))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A from-scratch rebuild, the reference the in-place version is checked against.
    fn rebuilt(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), rebuilt(&map[k]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(rebuilt).collect()),
            other => other.clone(),
        }
    }

    #[test]
    fn canonicalizing_in_place_matches_a_full_rebuild() {
        let v = json!({
            "type": "object",
            "properties": {"z": {"type": "string"}, "a": {"items": [{"y": 1, "b": 2}]}},
            "required": ["z"]
        });
        let mut in_place = v.clone();
        canonicalize(&mut in_place);
        assert_eq!(in_place, rebuilt(&v));
        assert_eq!(
            serde_json::to_string(&in_place).unwrap(),
            serde_json::to_string(&rebuilt(&v)).unwrap()
        );
        assert!(is_canonical(&in_place));
    }

    #[test]
    fn key_order_does_not_change_the_bytes() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[true,null,"x"]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":[true,null,"x"],"b":1}"#).unwrap();
        assert_eq!(canonical_bytes(&a), br#"{"a":[true,null,"x"],"b":1}"#);
        assert_eq!(canonical_bytes(&a), canonical_bytes(&b));
    }

    #[test]
    fn keys_sort_by_utf8_bytes_and_strings_keep_serde_escaping() {
        let v = json!({"é": "\u{1}", "z": 1.5, "A": -0});
        assert_eq!(
            String::from_utf8(canonical_bytes(&v)).unwrap(),
            r#"{"A":0,"z":1.5,"é":"\u0001"}"#
        );
    }

    #[test]
    fn strict_json_equality_tells_apart_what_serializes_differently() {
        assert!(same_json(
            &json!({"a": [1, 2.5, null, true, "x"]}),
            &json!({"a": [1, 2.5, null, true, "x"]})
        ));
        for (a, b) in [
            (json!(0.0), json!(-0.0)),
            (json!(1), json!(1.0)),
            (json!(-1), json!(1)),
            (json!("a"), json!("b")),
            (json!([1]), json!([1, 1])),
            (json!({"a": 1}), json!({"b": 1})),
            (json!({"a": 1}), json!({"a": 2})),
            (json!(null), json!(false)),
        ] {
            assert!(!same_json(&a, &b), "{a} vs {b}");
            assert_ne!(
                serde_json::to_vec(&a).unwrap(),
                serde_json::to_vec(&b).unwrap()
            );
        }
    }
}
