//! `structuredContent` checked against the tool's `outputSchema` (the protocol says a client
//! should): a server that declares a schema and answers outside it fails the call, naming what
//! does not fit, instead of handing the model data its schema promised otherwise.
//!
//! Compiled once per tool, with the `boon` validator the registry uses for arguments, and
//! references outside the schema are never loaded. A schema that does not compile leaves the
//! tool unchecked, with a warning at registration (the tool itself may still work).
//!
//! # Determinism
//! The validator's nested errors come from hash maps; the violations are sorted by instance
//! path and message, so one bad answer gives one error text.

use boon::{Compiler, SchemaIndex, Schemas, UrlLoader, ValidationError};
use serde_json::Value;

/// The location the output schema is compiled under (never fetched).
const SCHEMA_URL: &str = "urn:cordis:mcp-output";

/// At most this many violations are named in one error.
const MAX_LISTED: usize = 8;

struct NoRemote;

impl UrlLoader for NoRemote {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(format!("external schema references are not loaded ({url})").into())
    }
}

/// A tool's compiled `outputSchema`.
pub(crate) struct OutputSchema {
    schemas: Schemas,
    index: SchemaIndex,
}

impl OutputSchema {
    /// Compiles `schema`.
    ///
    /// # Errors
    /// Why it is not a schema this client can check with.
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        let mut compiler = Compiler::new();
        compiler.use_loader(Box::new(NoRemote));
        compiler
            .add_resource(SCHEMA_URL, schema.clone())
            .map_err(|e| e.to_string())?;
        let mut schemas = Schemas::new();
        let index = compiler
            .compile(SCHEMA_URL, &mut schemas)
            .map_err(|e| e.to_string())?;
        Ok(OutputSchema { schemas, index })
    }

    /// Checks `value`.
    ///
    /// # Errors
    /// The violations as `path: rule`, sorted, at most [`MAX_LISTED`] named.
    pub(crate) fn check(&self, value: &Value) -> Result<(), String> {
        let Err(error) = self.schemas.validate(value, self.index) else {
            return Ok(());
        };
        let mut found = Vec::new();
        leaves(&error, &mut found);
        found.sort();
        found.dedup();
        let more = found.len().saturating_sub(MAX_LISTED);
        found.truncate(MAX_LISTED);
        let mut text = found.join("; ");
        if more > 0 {
            text.push_str(&format!("; and {more} more"));
        }
        Err(text)
    }
}

/// The innermost violations of `error`, as `path: rule` (`/` for the root).
fn leaves(error: &ValidationError<'_, '_>, found: &mut Vec<String>) {
    if error.causes.is_empty() {
        let path = error.instance_location.to_string();
        let path = if path.is_empty() {
            "/".to_owned()
        } else {
            path
        };
        found.push(format!("{path}: {}", error.kind));
    }
    for cause in &error.causes {
        leaves(cause, found);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn structured_content_is_checked_with_sorted_violations() {
        let schema = OutputSchema::compile(&json!({
            "type": "object",
            "properties": {"sum": {"type": "number"}, "unit": {"type": "string"}},
            "required": ["sum"]
        }))
        .unwrap();
        assert!(schema.check(&json!({"sum": 3})).is_ok());
        let one = schema.check(&json!({"sum": "3", "unit": 1})).unwrap_err();
        assert_eq!(
            one,
            schema.check(&json!({"unit": 1, "sum": "3"})).unwrap_err()
        );
        assert!(
            one.starts_with("/sum: ") && one.contains("; /unit: "),
            "{one}"
        );
        assert!(schema.check(&json!({})).unwrap_err().contains("sum"));
        assert!(OutputSchema::compile(&json!({"$ref": "https://example.test/s.json"})).is_err());
    }
}
