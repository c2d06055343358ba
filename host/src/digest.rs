//! Canonical bytes and sha256 digests of JSON views, so two boots can be compared byte for byte.
//!
//! # Determinism
//! Object keys are written sorted by their UTF-8 bytes whatever map type `serde_json` was built
//! with (its `preserve_order` feature keeps insertion order; this writer does not care), with no
//! whitespace. Strings and numbers use `serde_json`'s own escaping and formatting.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical byte form of `value`: sorted keys, no whitespace.
pub fn canonical_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(&Value::String(key.clone()), out);
                out.push(b':');
                write(&map[key], out);
            }
            out.push(b'}');
        }
        scalar => out.extend_from_slice(scalar.to_string().as_bytes()),
    }
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Lowercase hex sha256 of the canonical bytes of `value`.
pub fn digest(value: &Value) -> String {
    sha256_hex(&canonical_bytes(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_bytes() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[true,null,"x"]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":[true,null,"x"],"b":1}"#).unwrap();
        assert_eq!(canonical_bytes(&a), br#"{"a":[true,null,"x"],"b":1}"#);
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&json!({"a": [], "b": 1})));
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
