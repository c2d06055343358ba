//! The small data types the agent crates share, kept below all of them so that a crate which
//! only carries tool descriptions (`llm`, `session`) does not depend on the prompt assembler.
//!
//! - [`ToolSchema`]: what a model sees of one tool.
//! - [`ScopeKey`]: which registry scope an assembly or a call belongs to.
//! - [`canonical_json`] and [`canonical_bytes`]: the one canonical JSON form in the tree (object
//!   keys sorted by their UTF-8 bytes, no whitespace), used for request headers, session logs and
//!   digests alike.
//! - [`hex`]: lowercase hex of bytes, for hashes.
//! - [`Envelope`]: what a JSON-RPC message too large to hold says of itself (its id, whether it
//!   answers).
//! - [`compare_utf16`]: the one name order (UTF-16 code units, as JavaScript sorts).
//! - [`RequestConfig`]: the default call configuration of a model request, as a service.
//! - [`IdentityMemo`] and [`shared_canonical_bytes`]: what is derived from a shared schema,
//!   remembered by the schema's allocation (see [`memo`]).
//!
//! # Examples
//!
//! ```
//! let v = serde_json::json!({"b": 1, "a": {"d": true, "c": null}});
//! assert_eq!(cordis_schema::canonical_bytes(&v), br#"{"a":{"c":null,"d":true},"b":1}"#);
//! assert_eq!(cordis_schema::hex(&[0, 171]), "00ab");
//! ```

mod canonical;
pub mod envelope;
mod hex;
pub mod memo;
mod order;
mod request;
mod scope;
mod tool;

pub use canonical::{canonical_bytes, canonical_json, canonicalize, is_canonical, same_json};
pub use envelope::{Envelope, is_valid_id};
pub use hex::hex;
pub use memo::{IdentityMemo, shared_canonical_bytes};
pub use order::compare_utf16;
pub use request::RequestConfig;
pub use scope::ScopeKey;
pub use tool::ToolSchema;
