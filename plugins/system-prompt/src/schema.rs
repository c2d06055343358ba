//! The shared data types, re-exported from the bottom crate `cordis-schema` for compatibility:
//! `llm` and `session` use them without depending on the prompt assembler.

pub use cordis_schema::{ScopeKey, ToolSchema, canonical_json, canonicalize, is_canonical};
