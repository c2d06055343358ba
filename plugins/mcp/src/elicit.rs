//! Elicitation (form mode): a server asks the user for a few values during a call.
//!
//! # The seam
//! Front ends answer through [`Elicitation`], a runtime service holding an [`Elicitor`] (the
//! terminal, ACP and the web page each implement one, like an approver). Without one — CI, piped
//! runs, `cordis check` — every request is declined, and the reason is traced
//! ([`TRACE_ELICITATION`]) and logged.
//!
//! # URL mode
//! A server may instead ask the user to open a page ([`ElicitationUrl`]: to sign in
//! elsewhere, to pay, to enter what must not pass through the client). Only `https` pages (or
//! `http` on this machine) of at most [`MAX_URI_BYTES`](crate::MAX_URI_BYTES) are shown; others
//! are declined without asking. The front end shows the whole URL and opens nothing before
//! the user says yes; an accepted answer carries no content.
//! While the user is asked, the server's requests wait without `callTimeoutMs` running
//! (`maxCallMs` still bounds a call).
//!
//! # Validation
//! A form is a flat object of primitive properties (string, number, integer, boolean), choices
//! (a string `enum`, titled `oneOf: [{const, title}]`, or the legacy `enumNames`) and
//! multi-selects (`type: array` whose `items` are such choices, `minItems`/`maxItems`): the
//! shapes of MCP's form mode, read once here ([`FormField::choices`]) for every front end. An
//! accepted answer is checked against it ([`check_answer`]): required properties present, each
//! of its type and among its choices, `minimum`/`maximum`, `minLength`/`maxLength`, a
//! multi-select's count and no repeated choice, no property the form did not ask for; a
//! missing optional property takes the form's `default`. An answer that does not fit is not sent: the request is declined, saying why. A
//! form that is not of this shape, or larger than [`MAX_FORM_PROPERTIES`], is declined
//! without asking anyone.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value};

/// The trace kind of each elicitation's outcome: `<server>: accepted`, `declined (…)`, …
pub const TRACE_ELICITATION: &str = "mcp-elicitation";

/// The most properties a form may ask for.
pub const MAX_FORM_PROPERTIES: usize = 64;

/// The longest message shown to the user, in bytes (the rest is cut).
pub const MAX_ELICITATION_MESSAGE: usize = 4 << 10;

/// What a server asks the user.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationRequest {
    /// The entry's `server` name.
    pub server: String,
    /// The server's message, cut to [`MAX_ELICITATION_MESSAGE`] bytes.
    pub message: String,
    /// The form: `{"type": "object", "properties": {...}, "required": [...]}` (`null` in URL
    /// mode).
    pub schema: Value,
    /// URL mode: the page the server asks the user to open (then there is no form).
    pub url: Option<ElicitationUrl>,
}

/// A page a server asks the user to open (URL mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElicitationUrl {
    /// The page (checked: `https`, or `http` on this machine).
    pub url: String,
    /// The server's id of this request (its `notifications/elicitation/complete` names it).
    pub id: String,
}

/// What the user answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// The values, one per property.
    Accept(Map<String, Value>),
    /// The user would not give them; the call goes on.
    Decline,
    /// The user stopped the whole operation.
    Cancel,
    /// Nobody could be asked (the front end says why, e.g. "asked between turns"): declined.
    NotAsked(String),
}

/// `mcp/page-done`: a server says a page it asked the user to open is done with
/// (`notifications/elicitation/complete`), for front ends to tell the user. Not logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPageDone {
    /// The entry's `server`.
    pub server: String,
    /// The server's id of the request ([`ElicitationUrl::id`]), at most 256 bytes.
    pub id: String,
}

impl cordis_runtime::Event for McpPageDone {
    const NAME: &'static str = "mcp/page-done";
    type Output = ();
}

/// Asks the user (implemented by front ends).
pub trait Elicitor: Send + Sync + 'static {
    /// Shows `request` and returns the user's answer.
    fn elicit(&self, request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer>;
}

/// The service front ends provide to answer elicitations (`mcp-elicitation`).
#[derive(Clone)]
pub struct Elicitation(pub Arc<dyn Elicitor>);

impl cordis_runtime::Service for Elicitation {
    const NAME: &'static str = "mcp-elicitation";
}

/// What the session's front end can show of servers' questions (`mcp-elicitation-modes`),
/// provided on the composition's root before it boots, so each server's handshake declares
/// only what will be shown. Without it, a handshake declares both modes when an
/// [`Elicitation`] service is there to answer them, and neither otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ElicitationModes {
    /// Forms are shown (form mode).
    pub forms: bool,
    /// Pages to open are shown (URL mode).
    pub pages: bool,
}

impl cordis_runtime::Service for ElicitationModes {
    const NAME: &'static str = "mcp-elicitation-modes";
}

/// The form's properties, when it has the shape form mode allows.
fn form(schema: &Value) -> Result<&Map<String, Value>, String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the form is not an object schema".to_owned());
    }
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    let properties = match schema.get("properties") {
        None => &*EMPTY,
        Some(Value::Object(p)) => p,
        Some(_) => return Err("the form's `properties` is not an object".to_owned()),
    };
    if properties.len() > MAX_FORM_PROPERTIES {
        return Err(format!(
            "the form asks for {} properties, over the {MAX_FORM_PROPERTIES}-property limit",
            properties.len()
        ));
    }
    let offered = |schema: &Value| {
        ["enum", "oneOf", "anyOf"]
            .iter()
            .filter_map(|key| schema.get(key).and_then(Value::as_array))
            .map(Vec::len)
            .max()
            .unwrap_or(0)
    };
    for (name, property) in properties {
        let choices = offered(property).max(property.get("items").map_or(0, offered));
        if choices > MAX_FORM_CHOICES {
            return Err(format!(
                "property {name:?} offers {choices} choices, over the {MAX_FORM_CHOICES}-choice limit"
            ));
        }
        match property.get("type").and_then(Value::as_str) {
            Some("string" | "number" | "integer" | "boolean") => {}
            Some("array") if property.get("items").and_then(choices_of).is_some() => {}
            Some("array") => {
                return Err(format!(
                    "property {name:?} is a list whose items are not choices (`enum` or `anyOf` of `const`s); a form's lists are multi-selects"
                ));
            }
            other => {
                return Err(format!(
                    "property {name:?} is of type {other:?}; a form holds strings, numbers, integers, booleans and multi-selects"
                ));
            }
        }
    }
    Ok(properties)
}

/// The most choices one field may offer (a larger field is refused with its form).
pub const MAX_FORM_CHOICES: usize = 1000;

/// One option of a choice field: the value an answer holds, and what a person reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FormChoice {
    /// The value (a string for the shapes MCP defines).
    pub value: Value,
    /// Its title, else the value as text.
    pub label: String,
}

/// The options `schema` offers, in its order: `enum` (with `enumNames` as labels), or
/// `oneOf`/`anyOf` of `{const, title}`; `None` when it offers none (or over
/// [`MAX_FORM_CHOICES`]).
fn choices_of(schema: &Value) -> Option<Vec<FormChoice>> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let choices: Vec<FormChoice> =
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let names = schema.get("enumNames").and_then(Value::as_array);
            values
                .iter()
                .enumerate()
                .map(|(i, value)| FormChoice {
                    value: value.clone(),
                    label: names
                        .and_then(|n| n.get(i))
                        .and_then(Value::as_str)
                        .map_or_else(|| text(value), str::to_owned),
                })
                .collect()
        } else {
            let titled = schema
                .get("oneOf")
                .or_else(|| schema.get("anyOf"))
                .and_then(Value::as_array)?;
            titled
                .iter()
                .map(|option| {
                    let value = option.get("const")?.clone();
                    let label = option
                        .get("title")
                        .and_then(Value::as_str)
                        .map_or_else(|| text(&value), str::to_owned);
                    Some(FormChoice { value, label })
                })
                .collect::<Option<_>>()?
        };
    (!choices.is_empty() && choices.len() <= MAX_FORM_CHOICES).then_some(choices)
}

/// One property of a form, as a front end asks it.
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    /// The property's name (the answer's key).
    pub name: String,
    /// Its schema: `type`, and optionally `title`, `description`, choices, `default`, bounds.
    pub property: Value,
    /// The form lists it in `required`.
    pub required: bool,
}

impl FormField {
    /// A multi-select: the answer is a list of some of [`FormField::choices`].
    pub fn is_multi(&self) -> bool {
        self.property.get("type").and_then(Value::as_str) == Some("array")
    }

    /// The options of a choice field or a multi-select, in the form's order; `None` for a
    /// free field.
    pub fn choices(&self) -> Option<Vec<FormChoice>> {
        if self.is_multi() {
            self.property.get("items").and_then(choices_of)
        } else {
            choices_of(&self.property)
        }
    }
}

/// The form's fields in the order to ask them: the required ones, then the others, each by
/// name (a schema's key order does not survive parsing, so no front end can keep it).
///
/// # Errors
/// The form is not of the shape form mode allows (see the module docs).
pub fn fields(schema: &Value) -> Result<Vec<FormField>, String> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields: Vec<FormField> = form(schema)?
        .iter()
        .map(|(name, property)| FormField {
            name: name.clone(),
            property: property.clone(),
            required: required.contains(&name.as_str()),
        })
        .collect();
    fields.sort_by(|a, b| {
        b.required
            .cmp(&a.required)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(fields)
}

/// Checks `answer` against `schema` and applies the form's defaults (see the module docs).
///
/// # Errors
/// What does not fit, naming the property.
pub fn check_answer(
    schema: &Value,
    mut answer: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let properties = form(schema)?;
    if let Some(extra) = answer.keys().find(|k| !properties.contains_key(*k)) {
        return Err(format!("the form does not ask for {extra:?}"));
    }
    for (name, property) in properties {
        if !answer.contains_key(name)
            && let Some(default) = property.get("default")
        {
            answer.insert(name.clone(), default.clone());
        }
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(missing) = required.iter().find(|r| !answer.contains_key(**r)) {
        return Err(format!("required property {missing:?} is missing"));
    }
    for (name, value) in &answer {
        check_value(name, &properties[name], value)?;
    }
    Ok(answer)
}

/// Checks one property's `value` against its schema `property` (type, `enum`, range, length).
///
/// # Errors
/// What does not fit, naming the property.
pub fn check_value(name: &str, property: &Value, value: &Value) -> Result<(), String> {
    let kind = property
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let fits = match kind {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        _ => false,
    };
    if !fits {
        return Err(format!("property {name:?} must be a {kind}, not {value}"));
    }
    let listed =
        |choices: &[FormChoice]| Value::Array(choices.iter().map(|c| c.value.clone()).collect());
    if let Some(items) = value.as_array() {
        let choices = property
            .get("items")
            .and_then(choices_of)
            .unwrap_or_default();
        // More items than choices repeat one (and would make the checks below long).
        if items.len() > choices.len() {
            return Err(format!("property {name:?} names a choice twice"));
        }
        if let Some(stray) = items
            .iter()
            .find(|i| !choices.iter().any(|c| c.value == **i))
        {
            return Err(format!(
                "property {name:?} may hold only {}, not {stray}",
                listed(&choices)
            ));
        }
        if items
            .iter()
            .enumerate()
            .any(|(i, v)| items[..i].contains(v))
        {
            return Err(format!("property {name:?} names a choice twice"));
        }
        let count = |key: &str| property.get(key).and_then(Value::as_u64);
        let n = items.len() as u64;
        if count("minItems").is_some_and(|min| n < min)
            || count("maxItems").is_some_and(|max| n > max)
        {
            return Err(format!(
                "property {name:?} holds {n} choices, out of its range"
            ));
        }
        return Ok(());
    }
    if let Some(choices) = choices_of(property)
        && !choices.iter().any(|c| c.value == *value)
    {
        return Err(format!(
            "property {name:?} must be one of {}",
            listed(&choices)
        ));
    }
    let bound = |key: &str| property.get(key).and_then(Value::as_f64);
    let outside = |n: f64, low: &str, high: &str| {
        bound(low).is_some_and(|min| n < min) || bound(high).is_some_and(|max| n > max)
    };
    if value
        .as_f64()
        .is_some_and(|n| outside(n, "minimum", "maximum"))
    {
        return Err(format!("property {name:?} is out of its range"));
    }
    if value
        .as_str()
        .is_some_and(|s| outside(s.chars().count() as f64, "minLength", "maxLength"))
    {
        return Err(format!("property {name:?} has a length out of its range"));
    }
    Ok(())
}

/// Why a URL-mode page is not shown: not a URL, not `https` (or `http` on this machine), or
/// too long.
fn page_problem(url: &str) -> Result<(), String> {
    if url.len() > crate::MAX_URI_BYTES {
        return Err(format!(
            "the page's URL is {} bytes, over the {}-byte limit",
            url.len(),
            crate::MAX_URI_BYTES
        ));
    }
    match url::Url::parse(url) {
        Ok(parsed) if crate::auth::is_safe(&parsed) => Ok(()),
        Ok(_) => Err(format!(
            "the page {url:?} is not https (plain http only on this machine)"
        )),
        Err(e) => Err(format!("the page {url:?} is not a URL: {e}")),
    }
}

/// Answers a server's `elicitation/create` through the entry's [`Elicitation`] service, if
/// any: the result to send and the outcome to trace.
pub(crate) async fn answer(
    ctx: &cordis_runtime::Context,
    server: &str,
    params: rmcp::model::ElicitRequestParams,
) -> (rmcp::model::ElicitResult, String) {
    use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
    let decline = |why: String| {
        (
            ElicitResult::new(ElicitationAction::Decline),
            format!("declined ({why})"),
        )
    };
    let (message, schema, url) = match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => (
            message,
            serde_json::to_value(&requested_schema).unwrap_or(Value::Null),
            None,
        ),
        ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } => (
            message,
            Value::Null,
            Some(ElicitationUrl {
                url,
                id: elicitation_id,
            }),
        ),
        _ => return decline("a mode this client does not know".to_owned()),
    };
    match &url {
        Some(page) => {
            if let Err(why) = page_problem(&page.url) {
                return decline(why);
            }
        }
        None => {
            if let Err(why) = form(&schema) {
                return decline(why);
            }
        }
    }
    let Some(Elicitation(elicitor)) = ctx.get::<Elicitation>().map(|e| (*e).clone()) else {
        return decline("no one to ask: no front end answers elicitations here".to_owned());
    };
    let page = url.is_some();
    let request = ElicitationRequest {
        server: server.to_owned(),
        message: crate::progress::cut(message, MAX_ELICITATION_MESSAGE),
        schema: schema.clone(),
        url,
    };
    match elicitor.elicit(request).await {
        // The page is the user's to use; nothing comes back through the client.
        ElicitationAnswer::Accept(_) if page => (
            ElicitResult::new(ElicitationAction::Accept),
            "accepted (the user opens the page)".to_owned(),
        ),
        ElicitationAnswer::Accept(values) => match check_answer(&schema, values) {
            Ok(values) => (
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(values)),
                "accepted".to_owned(),
            ),
            Err(why) => decline(format!("the answer does not fit the form: {why}")),
        },
        ElicitationAnswer::Decline => decline("the user declined".to_owned()),
        ElicitationAnswer::NotAsked(why) => decline(format!("not asked: {why}")),
        ElicitationAnswer::Cancel => (
            ElicitResult::new(ElicitationAction::Cancel),
            "cancelled by the user".to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 8},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "ok": {"type": "boolean"}
        }, "required": ["name"]})
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn an_answer_is_checked_against_the_form_and_takes_its_defaults() {
        let ok = check_answer(&schema(), obj(json!({"name": "Ada", "age": 36}))).unwrap();
        assert_eq!(
            Value::Object(ok),
            json!({"name": "Ada", "age": 36, "color": "red"})
        );
        let cases = [
            (json!({"age": 1}), "required property \"name\" is missing"),
            (
                json!({"name": 3}),
                "property \"name\" must be a string, not 3",
            ),
            (
                json!({"name": "Ada", "age": 1.5}),
                "property \"age\" must be a integer, not 1.5",
            ),
            (
                json!({"name": "Ada", "age": 151}),
                "property \"age\" is out of its range",
            ),
            (
                json!({"name": "much too long"}),
                "property \"name\" has a length out of its range",
            ),
            (
                json!({"name": "Ada", "color": "green"}),
                "property \"color\" must be one of [\"red\",\"blue\"]",
            ),
            (
                json!({"name": "Ada", "admin": true}),
                "the form does not ask for \"admin\"",
            ),
        ];
        for (answer, why) in cases {
            assert_eq!(
                check_answer(&schema(), obj(answer.clone())).unwrap_err(),
                why,
                "{answer}"
            );
        }
    }

    #[test]
    fn titled_legacy_and_multi_select_choices_are_read_and_checked() {
        let form = json!({"type": "object", "properties": {
            "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
            "tone": {"type": "string", "enum": ["a", "b"], "enumNames": ["Alpha", "Beta"]},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}, {"const": "y", "title": "Why"}]}, "minItems": 1, "maxItems": 2},
            "plain": {"type": "array", "items": {"type": "string", "enum": ["p", "q"]}}
        }});
        let fields = fields(&form).unwrap();
        let labels = |name: &str| -> Vec<(Value, String)> {
            let f = fields.iter().find(|f| f.name == name).unwrap();
            f.choices()
                .unwrap()
                .into_iter()
                .map(|c| (c.value, c.label))
                .collect()
        };
        assert_eq!(
            labels("size"),
            [
                (json!("s"), "Small".to_owned()),
                (json!("l"), "Large".to_owned())
            ]
        );
        assert_eq!(labels("tone")[1], (json!("b"), "Beta".to_owned()));
        assert_eq!(labels("tags")[0], (json!("x"), "Ex".to_owned()));
        assert_eq!(labels("plain")[1], (json!("q"), "q".to_owned()));
        let multi: Vec<bool> = fields.iter().map(FormField::is_multi).collect();
        assert_eq!(
            multi,
            [true, false, true, false],
            "plain, size, tags, tone by name"
        );
        let ok = check_answer(
            &form,
            obj(json!({"size": "l", "tone": "a", "tags": ["y", "x"], "plain": []})),
        );
        assert!(ok.is_ok(), "{ok:?}");
        let cases = [
            (
                json!({"size": "Large"}),
                "property \"size\" must be one of [\"s\",\"l\"]",
            ),
            (
                json!({"tags": []}),
                "property \"tags\" holds 0 choices, out of its range",
            ),
            (
                json!({"tags": ["x", "x"]}),
                "property \"tags\" names a choice twice",
            ),
            (
                json!({"tags": ["z"]}),
                "property \"tags\" may hold only [\"x\",\"y\"], not \"z\"",
            ),
            (
                json!({"plain": "p"}),
                "property \"plain\" must be a array, not \"p\"",
            ),
        ];
        for (answer, why) in cases {
            assert_eq!(
                check_answer(&form, obj(answer.clone())).unwrap_err(),
                why,
                "{answer}"
            );
        }
        let free_list = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}});
        assert!(form_err(&free_list).contains("items are not choices"));
        let many: Vec<String> = (0..=MAX_FORM_CHOICES).map(|i| format!("c{i}")).collect();
        for property in [
            json!({"type": "string", "enum": many}),
            json!({"type": "array", "items": {"type": "string", "enum": many}}),
        ] {
            let big = json!({"type": "object", "properties": {"a": property}});
            assert!(
                form_err(&big).contains("offers 1001 choices, over the 1000-choice limit"),
                "{}",
                form_err(&big)
            );
        }
    }

    fn form_err(schema: &Value) -> String {
        form(schema).unwrap_err()
    }

    #[test]
    fn fields_are_asked_required_first_then_by_name() {
        let order: Vec<(String, bool)> = fields(&schema())
            .unwrap()
            .into_iter()
            .map(|f| (f.name, f.required))
            .collect();
        let expected = [
            ("name", true),
            ("age", false),
            ("color", false),
            ("ok", false),
        ];
        assert_eq!(
            order,
            expected.map(|(n, r)| (n.to_owned(), r)),
            "required first, then by name"
        );
    }

    #[test]
    fn a_form_of_another_shape_or_too_large_is_refused() {
        let nested = json!({"type": "object", "properties": {"a": {"type": "object"}}});
        assert!(
            form(&nested)
                .unwrap_err()
                .contains("property \"a\" is of type Some(\"object\")")
        );
        let props: Map<String, Value> = (0..65)
            .map(|i| (format!("p{i}"), json!({"type": "boolean"})))
            .collect();
        let big = json!({"type": "object", "properties": props});
        assert!(
            form(&big)
                .unwrap_err()
                .contains("65 properties, over the 64-property limit")
        );
        assert!(form(&json!({"type": "array"})).is_err());
    }
}
