//! JSON Schema to a TypeScript type, without recursion.
//!
//! The translation builds a tree of small documents in an arena, children before parents, on an
//! explicit stack of frames, then flattens the tree with a second explicit stack. Neither step
//! recurses, so a schema nested tens of thousands of levels deep renders without touching the
//! call stack, and the output is built in time linear in its length.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// The type of a node this translation does not support.
const UNKNOWN: &str = "unknown";
/// The type of a node that says nothing about its value.
const JSON_VALUE: &str = "JsonValue";

/// Translates a JSON Schema to a TypeScript type; nested object members are indented by
/// `indent + 1` levels of two spaces.
///
/// Total: anything it does not support becomes `unknown` (that node only; the rest of the schema
/// still renders). The mapping:
///
/// | schema | TypeScript |
/// |---|---|
/// | `string`, `number`, `boolean`, `null` | the same; `integer` is `number` |
/// | `const` / `enum` of scalars (matching `type` when given) | `"a" \| "b"`, `1 \| 2`, `true`; `const` wins |
/// | `oneOf` / `anyOf` `[A, B]` | `A \| B` (empty: `unknown`) |
/// | `type: [A, B]` | `A \| B`, each with the node's other keywords |
/// | array of `T` | `T[]`, `(A \| B)[]` when `T` has `\|` or `&`; no `items`: `JsonValue[]` |
/// | object without properties | `Record<string, JsonValue>`; closed: `Record<string, never>` |
/// | object with properties | `{ name: T; other?: U; }` (multi-line, `/** doc */` lines), then ` & Record<string, JsonValue>` unless `additionalProperties: false` |
/// | no `type` | `JsonValue` |
/// | `$ref`, a non-object node, malformed `properties`/`required`/`enum`/`items`, an unknown `type` | `unknown` |
///
/// # Examples
/// ```
/// use cordis_code_mode::json_schema_to_ts;
/// use serde_json::json;
///
/// assert_eq!(json_schema_to_ts(&json!({"enum": ["a", "b"]}), 0), r#""a" | "b""#);
/// assert_eq!(json_schema_to_ts(&json!({"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "null"}]}}), 0), "(string | null)[]");
/// assert_eq!(json_schema_to_ts(&json!({"$ref": "#/x"}), 0), "unknown");
/// ```
pub fn json_schema_to_ts(schema: &Value, indent: usize) -> String {
    let mut arena = Arena::default();
    let root = build(&mut arena, schema, indent);
    arena.flatten(root)
}

/// One piece of a document: text, or another document.
enum Part {
    Text(String),
    Doc(usize),
}

/// A rendered type: its parts, and whether it contains `|` or `&` anywhere (so that an array of
/// it needs parentheses).
struct Doc {
    parts: Vec<Part>,
    has_operator: bool,
}

#[derive(Default)]
struct Arena {
    docs: Vec<Doc>,
}

impl Arena {
    fn push(&mut self, parts: Vec<Part>) -> usize {
        let has_operator = parts.iter().any(|part| match part {
            Part::Text(text) => text.contains(['|', '&']),
            Part::Doc(index) => self.docs[*index].has_operator,
        });
        self.docs.push(Doc {
            parts,
            has_operator,
        });
        self.docs.len() - 1
    }

    fn text(&mut self, text: impl Into<String>) -> usize {
        self.push(vec![Part::Text(text.into())])
    }

    fn flatten(&self, root: usize) -> String {
        let mut out = String::new();
        let root = Part::Doc(root);
        let mut stack = vec![&root];
        while let Some(part) = stack.pop() {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Doc(index) => stack.extend(self.docs[*index].parts.iter().rev()),
            }
        }
        out
    }
}

/// A node still being rendered: its children are rendered first, one frame each.
struct Frame<'a> {
    kind: Kind<'a>,
    children: Vec<Child<'a>>,
    done: Vec<usize>,
    indent: usize,
}

#[derive(Clone, Copy)]
struct Child<'a> {
    node: &'a Value,
    /// Set when the child is one member of a `type: [..]` union: the node read as this type.
    as_type: Option<&'a str>,
    indent: usize,
}

enum Kind<'a> {
    Union,
    Array,
    Object {
        names: Vec<&'a str>,
        docs: Vec<Option<String>>,
        required: BTreeSet<&'a str>,
        open: bool,
    },
}

/// What one node turns out to be at first look.
enum Shape<'a> {
    Leaf(String),
    Parent(Kind<'a>, Vec<Child<'a>>),
}

fn build(arena: &mut Arena, root: &Value, indent: usize) -> usize {
    let mut frames: Vec<Frame<'_>> = Vec::new();
    let mut next = Some(Child {
        node: root,
        as_type: None,
        indent,
    });
    loop {
        if let Some(child) = next.take() {
            match shape(child) {
                Shape::Leaf(text) => {
                    let doc = arena.text(text);
                    match frames.last_mut() {
                        Some(parent) => parent.done.push(doc),
                        None => return doc,
                    }
                }
                Shape::Parent(kind, children) => {
                    frames.push(Frame {
                        kind,
                        children,
                        done: Vec::new(),
                        indent: child.indent,
                    });
                }
            }
        }
        // Never empty here: a parent was just pushed or still waits for children.
        let Some(frame) = frames.last_mut() else {
            return arena.text(UNKNOWN);
        };
        if frame.done.len() < frame.children.len() {
            next = Some(frame.children[frame.done.len()]);
            continue;
        }
        let Some(frame) = frames.pop() else {
            return arena.text(UNKNOWN);
        };
        let doc = finish(arena, frame);
        match frames.last_mut() {
            Some(parent) => parent.done.push(doc),
            None => return doc,
        }
    }
}

fn finish(arena: &mut Arena, frame: Frame<'_>) -> usize {
    let Frame {
        kind, done, indent, ..
    } = frame;
    match kind {
        Kind::Union => {
            let mut parts = Vec::with_capacity(done.len() * 2);
            for (index, doc) in done.into_iter().enumerate() {
                if index > 0 {
                    parts.push(Part::Text(" | ".into()));
                }
                parts.push(Part::Doc(doc));
            }
            arena.push(parts)
        }
        Kind::Array => {
            let item = done[0];
            if arena.docs[item].has_operator {
                arena.push(vec![
                    Part::Text("(".into()),
                    Part::Doc(item),
                    Part::Text(")[]".into()),
                ])
            } else {
                arena.push(vec![Part::Doc(item), Part::Text("[]".into())])
            }
        }
        Kind::Object {
            names,
            docs,
            required,
            open,
        } => {
            let member_pad = pad(indent + 1);
            let mut parts = vec![Part::Text("{".into())];
            for ((name, doc), child) in names.into_iter().zip(docs).zip(done) {
                if let Some(doc) = doc {
                    parts.push(Part::Text(format!("\n{member_pad}{doc}")));
                }
                let optional = if required.contains(name) { "" } else { "?" };
                parts.push(Part::Text(format!(
                    "\n{member_pad}{}{optional}: ",
                    render_key(name)
                )));
                parts.push(Part::Doc(child));
                parts.push(Part::Text(";".into()));
            }
            parts.push(Part::Text(format!("\n{}}}", pad(indent))));
            let declared = arena.push(parts);
            if open {
                arena.push(vec![
                    Part::Doc(declared),
                    Part::Text(" & Record<string, JsonValue>".into()),
                ])
            } else {
                declared
            }
        }
    }
}

fn shape(child: Child<'_>) -> Shape<'_> {
    let leaf = |text: &str| Shape::Leaf(text.to_owned());
    let Some(node) = child.node.as_object() else {
        return leaf(UNKNOWN);
    };
    if node.contains_key("$ref") {
        return leaf(UNKNOWN);
    }
    let as_type = match child.as_type {
        Some(as_type) => Some(as_type),
        None => {
            for keyword in ["oneOf", "anyOf"] {
                if let Some(members) = node.get(keyword) {
                    return match members.as_array() {
                        Some(members) if !members.is_empty() => Shape::Parent(
                            Kind::Union,
                            members
                                .iter()
                                .map(|node| Child {
                                    node,
                                    as_type: None,
                                    indent: child.indent,
                                })
                                .collect(),
                        ),
                        _ => leaf(UNKNOWN),
                    };
                }
            }
            match node.get("type") {
                None => None,
                Some(Value::String(name)) => Some(name.as_str()),
                Some(Value::Array(names)) => {
                    let names: Option<Vec<&str>> = names.iter().map(Value::as_str).collect();
                    return match names {
                        Some(names) if !names.is_empty() => Shape::Parent(
                            Kind::Union,
                            names
                                .into_iter()
                                .map(|name| Child {
                                    node: child.node,
                                    as_type: Some(name),
                                    indent: child.indent,
                                })
                                .collect(),
                        ),
                        _ => leaf(UNKNOWN),
                    };
                }
                Some(_) => return leaf(UNKNOWN),
            }
        }
    };
    if let Some(value) = node.get("const") {
        return Shape::Leaf(literal(value, as_type).unwrap_or_else(|| UNKNOWN.to_owned()));
    }
    if let Some(values) = node.get("enum") {
        let rendered = match values.as_array() {
            Some(values) if !values.is_empty() => values
                .iter()
                .map(|value| literal(value, as_type))
                .collect::<Option<Vec<_>>>(),
            _ => None,
        };
        return Shape::Leaf(
            rendered.map_or_else(|| UNKNOWN.to_owned(), |literals| literals.join(" | ")),
        );
    }
    match as_type {
        None => leaf(JSON_VALUE),
        Some("string" | "boolean" | "null") => Shape::Leaf(as_type.unwrap_or_default().to_owned()),
        Some("number" | "integer") => leaf("number"),
        Some("array") => match node.get("items") {
            None => leaf("JsonValue[]"),
            Some(items) => Shape::Parent(
                Kind::Array,
                vec![Child {
                    node: items,
                    as_type: None,
                    indent: child.indent,
                }],
            ),
        },
        Some("object") => object_shape(node, child.indent),
        Some(_) => leaf(UNKNOWN),
    }
}

fn object_shape(node: &Map<String, Value>, indent: usize) -> Shape<'_> {
    let unknown = || Shape::Leaf(UNKNOWN.to_owned());
    let open = node.get("additionalProperties") != Some(&Value::Bool(false));
    let properties = match node.get("properties") {
        None => None,
        Some(Value::Object(properties)) => Some(properties),
        Some(_) => return unknown(),
    };
    let required = match node.get("required") {
        None => BTreeSet::new(),
        Some(Value::Array(names)) => match names
            .iter()
            .map(Value::as_str)
            .collect::<Option<BTreeSet<_>>>()
        {
            Some(names) => names,
            None => return unknown(),
        },
        Some(_) => return unknown(),
    };
    let properties = match properties {
        Some(properties) if !properties.is_empty() => properties,
        _ => {
            let record = if open {
                "Record<string, JsonValue>"
            } else {
                "Record<string, never>"
            };
            return Shape::Leaf(record.to_owned());
        }
    };
    let mut names = Vec::with_capacity(properties.len());
    let mut docs = Vec::with_capacity(properties.len());
    let mut children = Vec::with_capacity(properties.len());
    for (name, property) in properties {
        names.push(name.as_str());
        docs.push(doc_comment(property.get("description")));
        children.push(Child {
            node: property,
            as_type: None,
            indent: indent + 1,
        });
    }
    Shape::Parent(
        Kind::Object {
            names,
            docs,
            required,
            open,
        },
        children,
    )
}

/// A scalar as a TypeScript literal type, if it is a scalar of the declared type.
fn literal(value: &Value, as_type: Option<&str>) -> Option<String> {
    let fits = match as_type {
        None => !value.is_array() && !value.is_object(),
        Some("string") => value.is_string(),
        Some("number") => value.is_number(),
        Some("integer") => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        Some("boolean") => value.is_boolean(),
        Some("null") => value.is_null(),
        Some(_) => false,
    };
    if !fits {
        return None;
    }
    Some(match value {
        Value::Number(number) => js_number(number),
        other => other.to_string(),
    })
}

/// A JSON number as JavaScript prints it (`1`, not `1.0`; `1e+21`, not `1e21`).
pub(crate) fn js_number(number: &serde_json::Number) -> String {
    if number.is_i64() || number.is_u64() {
        return number.to_string();
    }
    let Some(value) = number.as_f64() else {
        return number.to_string();
    };
    let magnitude = value.abs();
    if value == 0.0 {
        "0".to_owned()
    } else if (1e-6..1e21).contains(&magnitude) {
        // Rust's shortest round-trip form matches JavaScript's in this range, minus a `.0`.
        let text = value.to_string();
        text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
    } else {
        let text = format!("{value:e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) if !exponent.starts_with('-') => {
                format!("{mantissa}e+{exponent}")
            }
            _ => text,
        }
    }
}

/// A one-line `/** … */` from a description: whitespace collapsed, `*/` escaped.
pub(crate) fn doc_comment(description: Option<&Value>) -> Option<String> {
    let description = description?.as_str()?;
    let collapsed = description.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return None;
    }
    Some(format!("/** {} */", collapsed.replace("*/", "*\\/")))
}

/// An object key: bare when it is a plain identifier, else a JSON string.
pub(crate) fn render_key(name: &str) -> String {
    let mut chars = name.chars();
    let bare = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if bare {
        name.to_owned()
    } else {
        Value::from(name).to_string()
    }
}

pub(crate) fn pad(indent: usize) -> String {
    "  ".repeat(indent)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ts(schema: Value) -> String {
        json_schema_to_ts(&schema, 0)
    }

    #[test]
    fn scalars_map_to_their_typescript_names() {
        assert_eq!(ts(json!({"type": "string"})), "string");
        assert_eq!(ts(json!({"type": "number"})), "number");
        assert_eq!(ts(json!({"type": "integer"})), "number");
        assert_eq!(ts(json!({"type": "boolean"})), "boolean");
        assert_eq!(ts(json!({"type": "null"})), "null");
    }

    #[test]
    fn enums_and_consts_are_literal_unions_and_const_wins() {
        assert_eq!(
            ts(json!({"type": "string", "enum": ["a", "b"]})),
            r#""a" | "b""#
        );
        assert_eq!(ts(json!({"type": "integer", "enum": [1, 2]})), "1 | 2");
        assert_eq!(ts(json!({"type": "number", "const": 2})), "2");
        assert_eq!(ts(json!({"type": "boolean", "const": true})), "true");
        assert_eq!(
            ts(json!({"type": "string", "const": "x", "enum": ["a"]})),
            r#""x""#
        );
        assert_eq!(ts(json!({"type": "number", "enum": [1.5, 2.0]})), "1.5 | 2");
    }

    #[test]
    fn one_of_is_a_union_and_an_empty_one_is_unknown() {
        assert_eq!(
            ts(json!({"oneOf": [{"type": "string"}, {"type": "number"}]})),
            "string | number"
        );
        assert_eq!(ts(json!({"oneOf": []})), "unknown");
        assert_eq!(
            ts(json!({"anyOf": [{"type": "string"}, {"type": "null"}]})),
            "string | null"
        );
        assert_eq!(ts(json!({"type": ["string", "null"]})), "string | null");
    }

    #[test]
    fn arrays_parenthesize_unions_and_default_to_json_values() {
        assert_eq!(
            ts(json!({"type": "array", "items": {"type": "string"}})),
            "string[]"
        );
        assert_eq!(
            ts(
                json!({"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "number"}]}})
            ),
            "(string | number)[]"
        );
        assert_eq!(ts(json!({"type": "array"})), "JsonValue[]");
        assert_eq!(
            ts(
                json!({"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}})
            ),
            "({\n  a?: string;\n} & Record<string, JsonValue>)[]"
        );
    }

    #[test]
    fn objects_without_properties_are_records() {
        assert_eq!(ts(json!({"type": "object"})), "Record<string, JsonValue>");
        assert_eq!(
            ts(json!({"type": "object", "additionalProperties": false})),
            "Record<string, never>"
        );
        assert_eq!(
            ts(json!({"type": "object", "properties": {}})),
            "Record<string, JsonValue>"
        );
    }

    #[test]
    fn objects_with_properties_list_members_with_docs_and_optionality() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "  The file\n to read. */ "},
                "limit": {"type": "integer"},
                "my-key": {"type": "boolean"}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        assert_eq!(
            json_schema_to_ts(&schema, 1),
            "{\n    limit?: number;\n    \"my-key\"?: boolean;\n    /** The file to read. *\\/ */\n    path: string;\n  }"
        );
        let open = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}});
        assert_eq!(
            ts(open),
            "{\n  a?: {\n    b?: JsonValue;\n  } & Record<string, JsonValue>;\n} & Record<string, JsonValue>"
        );
    }

    #[test]
    fn unsupported_nodes_become_unknown_and_nothing_else_does() {
        assert_eq!(ts(json!({})), "JsonValue");
        assert_eq!(ts(json!({"$ref": "#/definitions/x"})), "unknown");
        assert_eq!(ts(json!({"type": "object", "properties": []})), "unknown");
        assert_eq!(ts(json!({"type": "string", "enum": [1]})), "unknown");
        assert_eq!(ts(json!({"type": "string", "enum": []})), "unknown");
        assert_eq!(
            ts(json!({"type": "object", "properties": {"a": {}}, "required": [1]})),
            "unknown"
        );
        assert_eq!(ts(json!({"type": "tuple"})), "unknown");
        assert_eq!(ts(json!(true)), "unknown");
        assert_eq!(ts(json!({"enum": [{"a": 1}]})), "unknown");
        // Only the unsupported node degrades.
        assert_eq!(
            ts(
                json!({"type": "object", "properties": {"a": {"$ref": "#"}}, "additionalProperties": false})
            ),
            "{\n  a?: unknown;\n}"
        );
    }

    /// An object from members, moving them in (`json!` would serialize, i.e. deep-copy with
    /// recursion, any value it interpolates).
    fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
        Value::Object(
            members
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
        )
    }

    /// Builds `levels` nested copies of `wrap` around a string schema, without recursion.
    fn nested(levels: usize, wrap: impl Fn(Value) -> Value) -> Value {
        let mut schema = json!({"type": "string"});
        for _ in 0..levels {
            schema = wrap(schema);
        }
        schema
    }

    /// Takes a deep value apart level by level: its default drop would recurse.
    fn dismantle(mut value: Value) {
        let mut stack = Vec::new();
        loop {
            match &mut value {
                Value::Array(items) => stack.append(items),
                Value::Object(map) => {
                    let keys: Vec<String> = map.keys().cloned().collect();
                    for key in keys {
                        if let Some(child) = map.remove(&key) {
                            stack.push(child);
                        }
                    }
                }
                _ => {}
            }
            match stack.pop() {
                Some(next) => value = next,
                None => break,
            }
        }
    }

    #[test]
    fn ten_thousand_nested_levels_render_without_recursion() {
        // Each deep value is taken apart before the assertions: its default drop (also during a
        // failed assertion's unwinding) would recurse.
        const LEVELS: usize = 10_000;
        let one_of = nested(LEVELS, |inner| {
            object([("oneOf", Value::Array(vec![inner, json!({"type": "null"})]))])
        });
        let unions = json_schema_to_ts(&one_of, 0);
        dismantle(one_of);

        let arrays = nested(LEVELS, |inner| {
            object([("type", json!("array")), ("items", inner)])
        });
        let array_text = json_schema_to_ts(&arrays, 0);
        dismantle(arrays);

        let mixed = nested(LEVELS, |inner| {
            let any_of = object([("anyOf", Value::Array(vec![inner]))]);
            object([("type", json!(["array", "null"])), ("items", any_of)])
        });
        let mixed_text = json_schema_to_ts(&mixed, 0);
        dismantle(mixed);

        // Objects indent every level, so their text grows with the square of the depth: a
        // thousand levels is already two megabytes.
        const OBJECT_LEVELS: usize = 1_000;
        let objects = nested(OBJECT_LEVELS, |inner| {
            object([
                ("type", json!("object")),
                ("properties", object([("a", inner)])),
                ("required", json!(["a"])),
                ("additionalProperties", json!(false)),
            ])
        });
        let object_text = json_schema_to_ts(&objects, 0);
        dismantle(objects);

        assert!(
            unions.starts_with("string | null | null"),
            "{}",
            &unions[..40]
        );
        assert_eq!(unions.matches("| null").count(), LEVELS);
        assert_eq!(array_text, format!("string{}", "[]".repeat(LEVELS)));
        assert_eq!(mixed_text.matches("| null").count(), LEVELS);
        assert_eq!(object_text.matches("a: ").count(), OBJECT_LEVELS);
    }
}
