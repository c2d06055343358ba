//! Canonical bytes and sha256 digests of JSON views, so two boots can be compared byte for byte.
//!
//! # Determinism
//! The bytes are `cordis-schema`'s one canonical JSON form (object keys sorted by their UTF-8
//! bytes whatever map type `serde_json` was built with, no whitespace), the same form the request
//! header and the session log use.

use serde_json::Value;
use sha2::{Digest, Sha256};

pub use cordis_schema::canonical_bytes;

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    cordis_schema::hex(&Sha256::digest(bytes))
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
    fn key_order_does_not_change_the_digest() {
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
