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
//! stress seed; so compiled schemas are shared process-wide, keyed by their content (at most
//! [`CACHE_LIMIT`] of them; the cache starts over when full). The key is a hash of the value that
//! ignores object key order, and a hit is confirmed by comparing the values (which ignores key
//! order too): looking a schema up allocates nothing, where serializing it to canonical bytes
//! for a key cost more than the rest of a registration.
//!
//! # Determinism
//! The validator's nested errors come from hash maps, so the reported violations are sorted by
//! instance path and message: the same bad call gives the same error text on every run.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use boon::{CompileError, Compiler, ErrorKind, SchemaIndex, Schemas, UrlLoader, ValidationError};
use cordis_schema::IdentityMemo;
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
    compiled: Arc<Compiled>,
}

/// Compiled schemas: the parameters value and its compiled form, by [`content_hash`].
#[derive(Default)]
struct Cache {
    by_hash: HashMap<u64, Vec<(Value, Arc<Compiled>)>>,
    len: usize,
}

impl Cache {
    fn get(&self, hash: u64, parameters: &Value) -> Option<Arc<Compiled>> {
        let same = self
            .by_hash
            .get(&hash)?
            .iter()
            .find(|(v, _)| same_json(v, parameters));
        same.map(|(_, compiled)| compiled.clone())
    }

    fn insert(&mut self, hash: u64, parameters: &Value, compiled: Arc<Compiled>) {
        if self.get(hash, parameters).is_some() {
            return;
        }
        if self.len >= CACHE_LIMIT {
            *self = Cache::default();
        }
        self.len += 1;
        let slot = self.by_hash.entry(hash).or_default();
        slot.push((parameters.clone(), compiled));
    }
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// A hash of `value` that ignores the key order of its objects (each member is hashed on its
/// own and the members' hashes are summed), so values equal as JSON hash alike.
fn content_hash(value: &Value) -> u64 {
    let mut hasher = Fold::default();
    hash_value(value, &mut hasher);
    hasher.finish()
}

fn hash_value(value: &Value, hasher: &mut Fold) {
    match value {
        Value::Null => hasher.add(0),
        Value::Bool(b) => hasher.add(1 + u64::from(*b)),
        Value::Number(n) => {
            hasher.add(3);
            n.hash(hasher);
        }
        Value::String(s) => {
            hasher.add(4);
            s.hash(hasher);
        }
        Value::Array(items) => {
            hasher.add(5);
            hasher.add(items.len() as u64);
            for item in items {
                hash_value(item, hasher);
            }
        }
        Value::Object(map) => {
            let mut sum = 0u64;
            for (key, member) in map {
                let mut one = Fold::default();
                key.hash(&mut one);
                hash_value(member, &mut one);
                sum = sum.wrapping_add(one.finish());
            }
            hasher.add(6);
            hasher.add(map.len() as u64);
            hasher.add(sum);
        }
    }
}

/// A word-at-a-time hasher (the multiply-rotate step of rustc's `FxHasher`, with a final mix):
/// cache keys need speed, not resistance to crafted collisions (a collision costs one more
/// comparison of values).
#[derive(Default)]
struct Fold(u64);

impl Fold {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fold {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(word);
            self.add(u64::from_le_bytes(buf));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_i64(&mut self, n: i64) {
        self.add(n as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // murmur3's fmix64, so that sums of member hashes stay spread.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// JSON equality, like `Value`'s `==` (object key order ignored), comparing objects member by
/// member in order first: the same schema registered again has its keys in the same order, and
/// then no key is looked up.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            if a.len() != b.len() {
                return false;
            }
            if a.keys().zip(b.keys()).all(|(x, y)| x == y) {
                a.values().zip(b.values()).all(|(x, y)| same_json(x, y))
            } else {
                a.iter()
                    .all(|(k, x)| b.get(k).is_some_and(|y| same_json(x, y)))
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_json(x, y))
        }
        _ => a == b,
    }
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
    pub(crate) fn compile_shared(
        tool: &str,
        parameters: &Arc<Value>,
    ) -> Result<Self, RegisterError> {
        // A schema shared across boots (built once per process) is known by its allocation;
        // only a miss walks the value to find its compiled form by content.
        static BY_IDENTITY: IdentityMemo<Arc<Compiled>> = IdentityMemo::new(CACHE_LIMIT);
        if let Some(compiled) = BY_IDENTITY.get(parameters) {
            return Ok(ArgumentSchema { compiled });
        }
        let schema = Self::compile(tool, parameters)?;
        BY_IDENTITY.insert(parameters, schema.compiled.clone());
        Ok(schema)
    }

    /// [`Self::compile_shared`] for a value without identity: by content only.
    pub(crate) fn compile(tool: &str, parameters: &Value) -> Result<Self, RegisterError> {
        let hash = content_hash(parameters);
        if let Some(compiled) = cordis_runtime::lock(cache()).get(hash, parameters) {
            return Ok(ArgumentSchema { compiled });
        }
        // Compiled outside the lock: another thread compiling the same schema meanwhile only
        // wastes work (either result is the same).
        let compiled = Arc::new(Self::compile_uncached(tool, parameters)?);
        cordis_runtime::lock(cache()).insert(hash, parameters, compiled.clone());
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
    fn a_shared_schema_is_found_by_identity_and_an_equal_copy_by_content() {
        let shared = Arc::new(
            json!({"type": "object", "properties": {"identity_probe": {"type": "string"}}}),
        );
        let first = ArgumentSchema::compile_shared("t", &shared).unwrap();
        let again = ArgumentSchema::compile_shared("t", &shared.clone()).unwrap();
        assert!(Arc::ptr_eq(&first.compiled, &again.compiled));
        // Another allocation with equal content misses the identity memo and finds the same
        // compiled form by content.
        let copy = Arc::new((*shared).clone());
        let by_content = ArgumentSchema::compile_shared("t", &copy).unwrap();
        assert!(Arc::ptr_eq(&first.compiled, &by_content.compiled));
        // Another schema is another validator, whatever the memo holds.
        let other = Arc::new(
            json!({"type": "object", "properties": {"identity_probe": {"type": "integer"}}}),
        );
        let other = ArgumentSchema::compile_shared("t", &other).unwrap();
        assert!(first.check("t", &json!({"identity_probe": "x"})).is_ok());
        assert!(other.check("t", &json!({"identity_probe": "x"})).is_err());
        // An invalid shared schema is refused every time (errors are not remembered).
        let bad = Arc::new(json!({"type": "object", "properties": {"x": {"type": 7}}}));
        assert!(ArgumentSchema::compile_shared("t", &bad).is_err());
        assert!(ArgumentSchema::compile_shared("t", &bad).is_err());
    }

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
    fn the_content_hash_ignores_key_order_only() {
        // Key order survives parsing only when serde_json keeps insertion order (its
        // `preserve_order` feature, on in the workspace build through the ACP crate); with sorted
        // maps the two orders below are one value and this part is trivially true.
        let a: Value =
            serde_json::from_str(r#"{"a": {"x": 1, "y": [2, "z"]}, "b": null}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"b": null, "a": {"y": [2, "z"], "x": 1}}"#).unwrap();
        assert_eq!(content_hash(&a), content_hash(&b));
        // Members swapped between objects, array order, and a key turned value all differ.
        for other in [
            r#"{"a": {"x": 1}, "b": {"y": [2, "z"]}}"#,
            r#"{"a": {"x": 1, "y": ["z", 2]}, "b": null}"#,
            r#"{"a": {"x": 1, "y": [2, "z"]}, "null": "b"}"#,
        ] {
            let other: Value = serde_json::from_str(other).unwrap();
            assert_ne!(content_hash(&a), content_hash(&other), "{other}");
        }
    }

    #[test]
    fn same_json_is_json_equality_whatever_the_key_order() {
        let cases = [
            (
                r#"{"a": 1, "b": [1, {"c": 2, "d": 3}]}"#,
                r#"{"b": [1, {"d": 3, "c": 2}], "a": 1}"#,
            ),
            (r#"{"a": 1, "b": 2}"#, r#"{"a": 1, "c": 2}"#),
            (r#"{"a": 1, "b": 2}"#, r#"{"b": 1, "a": 2}"#),
            (r#"{"a": 1}"#, r#"{"a": 1, "b": 2}"#),
            (r#"[1, 2]"#, r#"[2, 1]"#),
            (r#"{"a": 1.0}"#, r#"{"a": 1}"#),
            (r#"{"a": [null]}"#, r#"{"a": [null]}"#),
        ];
        for (a, b) in cases {
            let (a, b): (Value, Value) = (
                serde_json::from_str(a).unwrap(),
                serde_json::from_str(b).unwrap(),
            );
            assert_eq!(same_json(&a, &b), a == b, "{a} vs {b}");
            assert_eq!(same_json(&b, &a), a == b, "{b} vs {a}");
        }
    }

    #[test]
    fn a_cache_hit_needs_an_equal_value_not_just_an_equal_hash() {
        let one = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let two = json!({"type": "object", "properties": {"n": {"type": "string"}}});
        let compiled = Arc::new(ArgumentSchema::compile_uncached("t", &one).unwrap());
        let mut cache = Cache::default();
        // The same (forced) hash for both: only the value decides.
        cache.insert(7, &one, compiled.clone());
        assert!(cache.get(7, &two).is_none());
        assert!(cache.get(8, &one).is_none());
        assert!(Arc::ptr_eq(&cache.get(7, &one).unwrap(), &compiled));
        let other = Arc::new(ArgumentSchema::compile_uncached("t", &two).unwrap());
        cache.insert(7, &two, other.clone());
        assert!(Arc::ptr_eq(&cache.get(7, &two).unwrap(), &other));
        assert!(Arc::ptr_eq(&cache.get(7, &one).unwrap(), &compiled));
        assert_eq!(cache.len, 2);
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
