//! Checking call arguments against a tool's declared JSON Schema, before any handler runs.
//!
//! Each schema is compiled once, at registration, with [`boon`] (drafts 4 to 2020-12, 2020-12 when
//! a schema names none). Chosen over `jsonschema` for weight: with `jsonschema`'s HTTP resolver
//! off, `boon` still builds in about half the time and adds fewer crates. A schema that does not
//! compile (not a valid schema, or a `$ref` outside itself) is refused at registration; no
//! reference is ever fetched from a file or the network.
//!
//! Compiling is the largest cost of registering a tool (it was over a third of a seeded boot of
//! the bundled composition), and the same schemas are registered again on every boot, reload and
//! stress seed; so compiled schemas are shared process-wide, keyed by their canonical JSON bytes
//! (at most [`CACHE_LIMIT`] of them; the cache starts over when full).
//!
//! # Determinism
//! The validator's nested errors come from hash maps, so the reported violations are sorted by
//! instance path and message: the same bad call gives the same error text on every run.

use std::fmt::Write as _;

use boon::{CompileError, Compiler, ErrorKind, SchemaIndex, Schemas, UrlLoader, ValidationError};
use serde_json::Value;

use crate::error::RegisterError;

/// The location a tool's schema is compiled under (never fetched; only the schema's own
/// `$id`-less references resolve against it).
const SCHEMA_URL: &str = "urn:cordis:tool-parameters";

/// At most this many violations are listed in one error; the rest are counted.
const MAX_LISTED: usize = 8;

/// How many compiled schemas the process keeps for reuse.
pub(crate) const CACHE_LIMIT: usize = 1024;

/// A compiled schema: boon's set and the index of the root.
struct Compiled {
    schemas: Schemas,
    index: SchemaIndex,
}

/// A tool's parameters schema, compiled (shared by every tool with the same schema).
pub(crate) struct ArgumentSchema {
    compiled: std::sync::Arc<Compiled>,
}

/// Compiled schemas by canonical bytes.
fn cache()
-> &'static std::sync::Mutex<std::collections::BTreeMap<Vec<u8>, std::sync::Arc<Compiled>>> {
    static CACHE: std::sync::OnceLock<
        std::sync::Mutex<std::collections::BTreeMap<Vec<u8>, std::sync::Arc<Compiled>>>,
    > = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Refuses every external reference: a tool schema must be self-contained.
struct NoRemote;

impl UrlLoader for NoRemote {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(format!("external schema references are not loaded ({url})").into())
    }
}

impl ArgumentSchema {
    /// Compiles `parameters` as the schema of tool `tool`.
    ///
    /// # Errors
    /// [`RegisterError::InvalidSchema`] when it is not a valid JSON Schema or refers outside
    /// itself.
    pub(crate) fn compile(tool: &str, parameters: &Value) -> Result<Self, RegisterError> {
        let key = cordis_schema::canonical_bytes(parameters);
        if let Some(compiled) = cordis_runtime::lock(cache()).get(&key) {
            return Ok(ArgumentSchema {
                compiled: compiled.clone(),
            });
        }
        // Compiled outside the lock: another thread compiling the same schema meanwhile only
        // wastes work (either result is the same).
        let compiled = std::sync::Arc::new(Self::compile_uncached(tool, parameters)?);
        let mut cache = cordis_runtime::lock(cache());
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, compiled.clone());
        Ok(ArgumentSchema { compiled })
    }

    fn compile_uncached(tool: &str, parameters: &Value) -> Result<Compiled, RegisterError> {
        let invalid = |e: &CompileError| RegisterError::InvalidSchema {
            name: tool.to_owned(),
            reason: compile_reason(e, parameters),
        };
        let mut compiler = Compiler::new();
        compiler.use_loader(Box::new(NoRemote));
        compiler
            .add_resource(SCHEMA_URL, parameters.clone())
            .map_err(|e| invalid(&e))?;
        let mut schemas = Schemas::new();
        let index = compiler
            .compile(SCHEMA_URL, &mut schemas)
            .map_err(|e| invalid(&e))?;
        Ok(Compiled { schemas, index })
    }

    /// Checks the arguments of one call of tool `tool`.
    ///
    /// # Errors
    /// The message for the error result: not JSON, not an object, or every violation as
    /// `path: rule`.
    pub(crate) fn check(&self, tool: &str, arguments: &Value) -> Result<(), String> {
        match arguments {
            Value::Object(_) => {}
            // The loop passes argument text that does not parse as the raw string.
            Value::String(text) => {
                return Err(match serde_json::from_str::<Value>(text) {
                    Err(e) => format!("arguments of \"{tool}\" are not valid JSON: {e}"),
                    Ok(_) => format!("arguments of \"{tool}\" must be a JSON object, got a string"),
                });
            }
            other => {
                return Err(format!(
                    "arguments of \"{tool}\" must be a JSON object, got {}",
                    kind_of(other)
                ));
            }
        }
        let Err(error) = self
            .compiled
            .schemas
            .validate(arguments, self.compiled.index)
        else {
            return Ok(());
        };
        let mut found = Vec::new();
        leaves(&error, arguments, &mut found);
        Err(format!(
            "arguments of \"{tool}\" are invalid: {}",
            listed(found)
        ))
    }
}

/// Why a schema did not compile, with paths into the schema rather than the validator's URLs.
fn compile_reason(error: &CompileError, parameters: &Value) -> String {
    if let CompileError::ValidationError { src, .. } = error {
        let mut found = Vec::new();
        leaves(src, parameters, &mut found);
        return format!("against its meta-schema, {}", listed(found));
    }
    flatten(&error.to_string()).replace(&format!("{SCHEMA_URL}#"), "#")
}

/// `path: rule` pairs sorted, deduplicated, joined, and capped at [`MAX_LISTED`].
fn listed(mut found: Vec<(String, String)>) -> String {
    found.sort();
    found.dedup();
    let mut message = String::new();
    for (i, (path, rule)) in found.iter().take(MAX_LISTED).enumerate() {
        if i > 0 {
            message.push_str("; ");
        }
        let _ = write!(message, "{path}: {rule}");
    }
    if found.len() > MAX_LISTED {
        let _ = write!(message, "; and {} more", found.len() - MAX_LISTED);
    }
    message
}

/// Collects `(instance path, rule)` for every leaf violation under `error`.
fn leaves(error: &ValidationError<'_, '_>, arguments: &Value, out: &mut Vec<(String, String)>) {
    if !error.causes.is_empty() {
        for cause in &error.causes {
            leaves(cause, arguments, out);
        }
        return;
    }
    let at = error.instance_location.to_string();
    let path = |at: &str| {
        if at.is_empty() {
            "/".to_owned()
        } else {
            at.to_owned()
        }
    };
    match &error.kind {
        ErrorKind::Required { want } => {
            for prop in want {
                out.push((format!("{at}/{}", escape(prop)), "is required".to_owned()));
            }
        }
        ErrorKind::AdditionalProperties { got } => {
            for prop in got {
                out.push((
                    format!("{at}/{}", escape(prop)),
                    "is not allowed (additionalProperties is false)".to_owned(),
                ));
            }
        }
        ErrorKind::Type { got, want } => {
            let want: Vec<String> = want.iter().map(|t| t.to_string()).collect();
            out.push((
                path(&at),
                format!("expected {}, got {got}", want.join(" or ")),
            ));
        }
        ErrorKind::Enum { want } => {
            let got = value_at(arguments, &at);
            out.push((
                path(&at),
                format!("{got} is not one of {}", Value::Array((*want).clone())),
            ));
        }
        ErrorKind::Const { want } => {
            let got = value_at(arguments, &at);
            out.push((path(&at), format!("{got} is not {want}")));
        }
        other => out.push((path(&at), other.to_string())),
    }
}

/// The offending value as compact JSON (long values shortened), found by its JSON Pointer.
fn value_at(arguments: &Value, pointer: &str) -> String {
    const LONGEST: usize = 80;
    let text = arguments
        .pointer(pointer)
        .map_or_else(|| "the value".to_owned(), Value::to_string);
    if text.len() <= LONGEST {
        return text;
    }
    let mut end = LONGEST;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Escapes a property name as a JSON Pointer token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One line: compile errors of nested schemas span several.
fn flatten(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_same_schema_is_compiled_once_and_shared() {
        let schema = serde_json::json!({"type": "object", "properties": {"shared_cache_probe": {"type": "integer"}}});
        let a = ArgumentSchema::compile("a", &schema).unwrap();
        // Same canonical bytes, other key order: the compiled schema is reused.
        let reordered: Value = serde_json::from_str(
            r#"{"properties": {"shared_cache_probe": {"type": "integer"}}, "type": "object"}"#,
        )
        .unwrap();
        let b = ArgumentSchema::compile("b", &reordered).unwrap();
        assert!(std::sync::Arc::ptr_eq(&a.compiled, &b.compiled));
        assert!(
            b.check("b", &serde_json::json!({"shared_cache_probe": "x"}))
                .is_err()
        );
    }

    #[test]
    fn a_declared_draft_is_honoured_without_fetching_its_meta_schema() {
        let draft7 = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"n": {"type": "integer", "format": "uint8"}},
            "additionalProperties": false
        });
        let schema = ArgumentSchema::compile("t", &draft7).unwrap();
        assert!(
            schema.check("t", &json!({"n": 300})).is_ok(),
            "format is an annotation"
        );
        assert_eq!(
            schema.check("t", &json!({"n": 1.5, "x": 0})).unwrap_err(),
            "arguments of \"t\" are invalid: /n: expected integer, got number; \
             /x: is not allowed (additionalProperties is false)"
        );
        let err = |schema: Value| {
            ArgumentSchema::compile("t", &schema)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            err(json!({"type": "object", "required": "a"})),
            "tool \"t\" parameters are not a valid JSON Schema: against its meta-schema, \
             /required: expected array, got string"
        );
        assert_eq!(
            err(json!({"type": "object", "properties": {"a": {"$ref": "#/nope"}}})),
            "tool \"t\" parameters are not a valid JSON Schema: json-pointer in #/nope not found"
        );
        let unknown = json!({"$schema": "https://example.com/my-draft", "type": "object"});
        assert!(ArgumentSchema::compile("t", &unknown).is_err());
    }

    #[test]
    fn long_values_are_shortened_and_many_violations_counted() {
        let schema = ArgumentSchema::compile(
            "t",
            &json!({"type": "object", "additionalProperties": {"enum": [1]}}),
        )
        .unwrap();
        let long = "x".repeat(200);
        let err = schema.check("t", &json!({"a": long})).unwrap_err();
        assert!(
            err.starts_with("arguments of \"t\" are invalid: /a: \"xxx"),
            "{err}"
        );
        assert!(err.ends_with("… is not one of [1]"), "{err}");
        let many: serde_json::Map<String, Value> =
            (0..10).map(|i| (format!("k{i}"), json!(0))).collect();
        let err = schema.check("t", &Value::Object(many)).unwrap_err();
        assert!(err.ends_with("; and 2 more"), "{err}");
    }
}
