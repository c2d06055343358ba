//! An MCP server's question (`elicitation/create`) asked in `cordis run` at a terminal: the
//! server's message, then one line per field, in the order [`cordis_mcp::fields`] gives
//! (required first, then by name); or, in URL mode, the whole URL of the page it asks the
//! person to open and one yes/no/cancel line (nothing is opened for them).
//!
//! - Each field shows its type and what the form allows (choices, range, length, default);
//!   what is typed is checked at once ([`cordis_mcp::check_value`], the check the `mcp` plugin
//!   applies to the whole answer) and a value that does not fit is asked again, saying why.
//! - Enter alone takes the field's default, or leaves an optional field out; a required field
//!   without a default is asked again.
//! - `/decline` declines the form (the call goes on without the values), `/cancel` or Ctrl-C
//!   cancels it (Ctrl-C cancels the turn too); `//…` is a value starting with `/`.
//! - What was typed before the form was shown is kept as the next messages, never taken as a
//!   value (the same rule as an approval question).
//!
//! Only an interactive run asks; a piped run has no [`Elicitation`](cordis_mcp::Elicitation)
//! service and declines, saying so. A form arriving while no turn runs (the prompt owns the
//! terminal) is declined without asking.

use std::sync::{Arc, Mutex};

use cordis_mcp::{ElicitationAnswer, ElicitationRequest, Elicitor, FormChoice, FormField};
use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::render::{safe, safe_lines};

/// The longest value a field takes, in bytes (a longer one is asked again).
pub(crate) const MAX_FIELD_BYTES: usize = 64 << 10;

/// The most characters of a field's title or description shown.
const MAX_FIELD_TEXT: usize = 200;

/// The most choices a field's prompt lists (the line editor redraws it at each key).
const MAX_SHOWN_CHOICES: usize = 20;

/// A form for the person at the terminal, with where to send the answer.
pub(crate) struct Elicited {
    /// What the server asks.
    pub request: ElicitationRequest,
    /// The answer goes here.
    pub reply: oneshot::Sender<ElicitationAnswer>,
}

/// Hands forms to the conversation (which owns the terminal) while it can ask them.
pub(crate) struct TerminalElicitor {
    ask: mpsc::UnboundedSender<Elicited>,
    /// The conversation is running a turn (or waiting on a server between turns): a form can
    /// be shown. At the prompt it cannot: the line editor owns the terminal. Held while a form
    /// is handed over, so one never slips in as the conversation stops listening.
    listening: Arc<Mutex<bool>>,
}

impl Elicitor for TerminalElicitor {
    fn elicit(&self, request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer> {
        let listening = cordis_runtime::lock(&self.listening);
        if !*listening {
            return Box::pin(async {
                ElicitationAnswer::NotAsked(
                    "it came while no turn ran (at the prompt, cordis run asks no forms)"
                        .to_owned(),
                )
            });
        }
        let (reply, answer) = oneshot::channel();
        let sent = self.ask.send(Elicited { request, reply });
        drop(listening);
        Box::pin(async move {
            if sent.is_err() {
                return ElicitationAnswer::NotAsked("the run has ended".to_owned());
            }
            answer.await.unwrap_or_else(|_| {
                ElicitationAnswer::NotAsked("the form was dropped unanswered".to_owned())
            })
        })
    }
}

/// The elicitor for an interactive run, the forms it hands over, and the switch saying when
/// the conversation listens for them.
pub(crate) fn terminal_elicitor() -> (
    TerminalElicitor,
    mpsc::UnboundedReceiver<Elicited>,
    Arc<Mutex<bool>>,
) {
    let (ask, asked) = mpsc::unbounded_channel();
    let listening = Arc::new(Mutex::new(false));
    let elicitor = TerminalElicitor {
        ask,
        listening: Arc::clone(&listening),
    };
    (elicitor, asked, listening)
}

/// What one entered line does to a form being filled in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Ask the next field (its prompt: [`Filling::prompt`]).
    Next,
    /// The value does not fit: say this, then ask the same field again.
    Again(String),
    /// The form is answered.
    Done(ElicitationAnswer),
}

/// A form being filled in, one field at a time; or a page (URL mode), asked in one line.
pub(crate) struct Filling {
    server: String,
    message: String,
    /// URL mode: the page the server asks the person to open (then there are no fields).
    page: Option<String>,
    fields: Vec<FormField>,
    values: Map<String, Value>,
    at: usize,
}

impl Filling {
    /// The form of `request`.
    ///
    /// # Errors
    /// The form is not of the shape form mode allows (the `mcp` plugin refuses those before
    /// asking, so this is a guard).
    pub(crate) fn new(request: &ElicitationRequest) -> Result<Filling, String> {
        let (page, fields) = match &request.url {
            Some(page) => (Some(page.url.clone()), Vec::new()),
            None => (None, cordis_mcp::fields(&request.schema)?),
        };
        Ok(Filling {
            server: request.server.clone(),
            message: request.message.clone(),
            page,
            fields,
            values: Map::new(),
            at: 0,
        })
    }

    /// What is shown before the first field: who asks, what, and how to answer.
    pub(crate) fn intro(&self) -> String {
        if let Some(url) = &self.page {
            return format!(
                "cordis: MCP server {} asks you to open a page:\n{}\n  {}\ncordis: nothing is opened for you; say yes and open it yourself\n",
                safe(&self.server),
                indent(&safe_lines(&self.message)),
                safe(url),
            );
        }
        let how = if self.fields.is_empty() {
            "Enter accepts (nothing is asked), /decline declines, /cancel or Ctrl-C cancels"
        } else {
            "type each value and press Enter (Enter alone: the default, or leave an optional field out); /decline declines, /cancel or Ctrl-C cancels"
        };
        format!(
            "cordis: MCP server {} asks:\n{}\ncordis: {how}\n",
            safe(&self.server),
            indent(&safe_lines(&self.message)),
        )
    }

    /// The prompt of the field to fill in now (`None` once every field is done: then one
    /// empty line accepts a form without fields).
    pub(crate) fn prompt(&self) -> String {
        if self.page.is_some() {
            return "  will you open it? (yes, no or cancel): ".to_owned();
        }
        match self.fields.get(self.at) {
            Some(field) => format!("  {}: ", describe(field)),
            None => "  (Enter) ".to_owned(),
        }
    }

    /// Takes one entered line.
    pub(crate) fn enter(&mut self, line: &str) -> Step {
        if self.page.is_some() {
            return match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => Step::Done(ElicitationAnswer::Accept(Map::new())),
                "" | "n" | "no" | "/decline" => Step::Done(ElicitationAnswer::Decline),
                "c" | "cancel" | "/cancel" => Step::Done(ElicitationAnswer::Cancel),
                _ => Step::Again("yes, no or cancel".to_owned()),
            };
        }
        let trimmed = line.trim();
        match trimmed {
            "/decline" => return Step::Done(ElicitationAnswer::Decline),
            "/cancel" => return Step::Done(ElicitationAnswer::Cancel),
            _ => {}
        }
        let Some(field) = self.fields.get(self.at) else {
            return Step::Done(ElicitationAnswer::Accept(std::mem::take(&mut self.values)));
        };
        match parse(field, line) {
            Ok(Some(value)) => {
                if let Err(why) = cordis_mcp::check_value(&field.name, &field.property, &value) {
                    return Step::Again(why);
                }
                self.values.insert(field.name.clone(), value);
            }
            Ok(None) => {
                if field.required && field.property.get("default").is_none() {
                    return Step::Again(format!("{} is required", field.name));
                }
                // The default (if any) is applied by the `mcp` plugin's check of the whole
                // answer: one place states what a missing property becomes.
            }
            Err(why) => return Step::Again(why),
        }
        self.at += 1;
        if self.at == self.fields.len() {
            Step::Done(ElicitationAnswer::Accept(std::mem::take(&mut self.values)))
        } else {
            Step::Next
        }
    }

    /// The line said once the question is answered with `answer`.
    pub(crate) fn outcome(&self, answer: &ElicitationAnswer) -> String {
        let server = safe(&self.server);
        let what = if self.page.is_some() { "page" } else { "form" };
        match (answer, &self.page) {
            (ElicitationAnswer::Accept(_), Some(url)) => {
                format!("cordis: told {server} you will open {}", safe(url))
            }
            (ElicitationAnswer::Accept(values), None)
                if values.is_empty() && !self.fields.is_empty() =>
            {
                format!("cordis: answered {server}'s form, all fields left at their defaults")
            }
            (ElicitationAnswer::Accept(values), None) => format!(
                "cordis: answered {server}'s form ({})",
                values
                    .keys()
                    .map(|k| safe(k).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (ElicitationAnswer::Cancel, _) => format!("cordis: cancelled {server}'s {what}"),
            (ElicitationAnswer::Decline | ElicitationAnswer::NotAsked(_), _) => {
                format!("cordis: declined {server}'s {what}")
            }
        }
    }
}

/// A field as prompted: its name, title or description, type and what the form allows.
fn describe(field: &FormField) -> String {
    let p = &field.property;
    let text = |key: &str| {
        p.get(key)
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .map(|t| cut(t.trim()))
    };
    let mut notes: Vec<String> = Vec::new();
    let kind = p.get("type").and_then(Value::as_str).unwrap_or_default();
    let choices = field.choices();
    let numbered = |choices: &[FormChoice]| {
        let mut shown: Vec<String> = choices
            .iter()
            .take(MAX_SHOWN_CHOICES)
            .enumerate()
            .map(|(i, c)| format!("{} {}", i + 1, cut(&c.label)))
            .collect();
        if choices.len() > MAX_SHOWN_CHOICES {
            shown.push(format!(
                "… {} more (type a name, or a number up to {})",
                choices.len() - MAX_SHOWN_CHOICES,
                choices.len()
            ));
        }
        shown.join(", ")
    };
    match (kind, &choices) {
        ("array", Some(choices)) => notes.push(format!(
            "some of {}; numbers or names, comma-separated",
            numbered(choices)
        )),
        (_, Some(choices)) => notes.push(format!("one of {}", numbered(choices))),
        ("boolean", None) => notes.push("yes or no".to_owned()),
        ("integer", None) => notes.push("a whole number".to_owned()),
        ("number", None) => notes.push("a number".to_owned()),
        _ => notes.push("text".to_owned()),
    }
    let bound = |key: &str| p.get(key).and_then(Value::as_f64);
    let (low, high) = match kind {
        "string" => (bound("minLength"), bound("maxLength")),
        "array" => (bound("minItems"), bound("maxItems")),
        _ => (bound("minimum"), bound("maximum")),
    };
    let unit = |n: f64| match kind {
        "string" if n == 1.0 => " character",
        "string" => " characters",
        "array" if n == 1.0 => " choice",
        "array" => " choices",
        _ => "",
    };
    match (low, high) {
        (Some(l), Some(h)) => notes.push(format!("{l} to {h}{}", unit(h))),
        (Some(l), None) => notes.push(format!("at least {l}{}", unit(l))),
        (None, Some(h)) => notes.push(format!("at most {h}{}", unit(h))),
        (None, None) => {}
    }
    if let Some(format) = text("format") {
        notes.push(format);
    }
    match p.get("default") {
        Some(default) => notes.push(format!("Enter: {}", shown_in(default, choices.as_deref()))),
        None if field.required => notes.push("required".to_owned()),
        None => notes.push("optional".to_owned()),
    }
    let label = match (text("title"), text("description")) {
        (Some(title), Some(about)) => format!("{} — {title}: {about}", field.name),
        (Some(title), None) => format!("{} — {title}", field.name),
        (None, Some(about)) => format!("{} — {about}", field.name),
        (None, None) => field.name.clone(),
    };
    safe(&format!("{label} ({})", notes.join(", "))).into_owned()
}

/// A value as the person reads and types it (strings unquoted, booleans yes/no).
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => cut(s),
        Value::Bool(true) => "yes".to_owned(),
        Value::Bool(false) => "no".to_owned(),
        other => cut(&other.to_string()),
    }
}

/// A value of a field with `choices` as the person reads it: each choice by its label.
fn shown_in(value: &Value, choices: Option<&[FormChoice]>) -> String {
    let label = |v: &Value| {
        choices
            .and_then(|cs| cs.iter().find(|c| c.value == *v))
            .map_or_else(|| shown(v), |c| cut(&c.label))
    };
    match value {
        Value::Array(items) => items.iter().map(label).collect::<Vec<_>>().join(", "),
        other => label(other),
    }
}

/// The choice `text` names: its value, its label (any case) or its number in the list.
fn choose<'c>(choices: &'c [FormChoice], text: &str) -> Option<&'c FormChoice> {
    choices
        .iter()
        .find(|c| shown(&c.value) == text)
        .or_else(|| choices.iter().find(|c| c.label.eq_ignore_ascii_case(text)))
        .or_else(|| {
            text.parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| choices.get(i))
        })
}

/// `text`, at most [`MAX_FIELD_TEXT`] characters of it.
fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_FIELD_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Each line of `text`, indented.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value `line` gives `field`: `None` when it is empty; an error saying what the field
/// takes. A choice is its value or its number in the list.
pub(crate) fn parse(field: &FormField, line: &str) -> Result<Option<Value>, String> {
    if line.len() > MAX_FIELD_BYTES {
        return Err(format!(
            "{} bytes is over the {MAX_FIELD_BYTES}-byte limit of a value",
            line.len()
        ));
    }
    let text = line.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let p = &field.property;
    let kind = p.get("type").and_then(Value::as_str).unwrap_or_default();
    if let Some(choices) = field.choices() {
        let names = || {
            choices
                .iter()
                .map(|c| cut(&c.label))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if field.is_multi() {
            let mut chosen = Vec::new();
            for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
                match choose(&choices, word) {
                    Some(choice) => chosen.push(choice.value.clone()),
                    None => {
                        return Err(format!(
                            "{} holds some of {} (or their numbers), not {word:?}",
                            field.name,
                            names()
                        ));
                    }
                }
            }
            return Ok(Some(Value::Array(chosen)));
        }
        return match choose(&choices, text) {
            Some(choice) => Ok(Some(choice.value.clone())),
            None => Err(format!(
                "{} is one of {} (or its number)",
                field.name,
                names()
            )),
        };
    }
    let value = match kind {
        "boolean" => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return Err(format!("{} is yes or no", field.name)),
        },
        "integer" => text
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{} is a whole number, like 42", field.name))?,
        "number" => match text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            Some(n) => Value::Number(n),
            None => return Err(format!("{} is a number, like 4.2", field.name)),
        },
        // A value that starts with `/` is typed `//…` (one `/` is dropped), so it is never
        // taken for `/decline` or `/cancel`.
        _ => Value::String(match line.strip_prefix("//") {
            Some(rest) => format!("/{rest}"),
            None => line.to_owned(),
        }),
    };
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(schema: Value) -> ElicitationRequest {
        ElicitationRequest {
            server: "fx".to_owned(),
            message: "Who are you?".to_owned(),
            schema,
            url: None,
        }
    }

    fn form() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 8, "title": "Your name"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "ok": {"type": "boolean", "description": "All good?"}
        }, "required": ["name"]})
    }

    #[test]
    fn fields_are_asked_in_order_and_bad_values_asked_again() {
        let mut f = Filling::new(&request(form())).unwrap();
        assert_eq!(
            f.prompt(),
            "  name — Your name (text, 1 to 8 characters, required): "
        );
        assert_eq!(f.enter(""), Step::Again("name is required".to_owned()));
        assert_eq!(
            f.enter("much too long"),
            Step::Again("property \"name\" has a length out of its range".to_owned())
        );
        assert_eq!(f.enter("Ada"), Step::Next);
        assert_eq!(f.prompt(), "  age (a whole number, 0 to 150, optional): ");
        assert_eq!(
            f.enter("old"),
            Step::Again("age is a whole number, like 42".to_owned())
        );
        assert_eq!(
            f.enter("151"),
            Step::Again("property \"age\" is out of its range".to_owned())
        );
        assert_eq!(f.enter(" 36 "), Step::Next);
        assert_eq!(f.prompt(), "  color (one of 1 red, 2 blue, Enter: red): ");
        assert_eq!(
            f.enter("green"),
            Step::Again("color is one of red, blue (or its number)".to_owned())
        );
        assert_eq!(f.enter("2"), Step::Next);
        assert_eq!(f.prompt(), "  ok — All good? (yes or no, optional): ");
        assert_eq!(f.enter("maybe"), Step::Again("ok is yes or no".to_owned()));
        let Step::Done(ElicitationAnswer::Accept(values)) = f.enter("Y") else {
            panic!("the last field ends the form")
        };
        assert_eq!(
            Value::Object(values),
            json!({"name": "Ada", "age": 36, "color": "blue", "ok": true})
        );
    }

    #[test]
    fn titled_choices_and_multi_selects_take_labels_values_or_numbers() {
        let form = json!({"type": "object", "properties": {
            "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}], "default": "l"},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}, {"const": "y", "title": "Why"}]}, "minItems": 1, "maxItems": 2}
        }, "required": ["tags"]});
        let mut f = Filling::new(&request(form)).unwrap();
        assert_eq!(
            f.prompt(),
            "  tags (some of 1 Ex, 2 Why; numbers or names, comma-separated, 1 to 2 choices, required): "
        );
        assert_eq!(
            f.enter("ex, zed"),
            Step::Again("tags holds some of Ex, Why (or their numbers), not \"zed\"".to_owned())
        );
        assert_eq!(
            f.enter("1, 1"),
            Step::Again("property \"tags\" names a choice twice".to_owned())
        );
        assert_eq!(f.enter("why, 1"), Step::Next);
        assert_eq!(
            f.prompt(),
            "  size (one of 1 Small, 2 Large, Enter: Large): "
        );
        assert_eq!(
            f.enter("medium"),
            Step::Again("size is one of Small, Large (or its number)".to_owned())
        );
        let Step::Done(ElicitationAnswer::Accept(values)) = f.enter("small") else {
            panic!("the last field ends the form")
        };
        assert_eq!(
            Value::Object(values),
            json!({"size": "s", "tags": ["y", "x"]})
        );
    }

    #[test]
    fn enter_leaves_optional_fields_out_and_the_words_decline_or_cancel() {
        let mut f = Filling::new(&request(form())).unwrap();
        assert_eq!(f.enter("//decline"), Step::Next, "a value starting with /");
        for _ in 0..2 {
            assert_eq!(f.enter(""), Step::Next);
        }
        let Step::Done(ElicitationAnswer::Accept(values)) = f.enter("") else {
            panic!("the last field ends the form")
        };
        assert_eq!(Value::Object(values), json!({"name": "/decline"}));
        let mut f = Filling::new(&request(form())).unwrap();
        assert_eq!(f.enter("Ada"), Step::Next);
        assert_eq!(
            f.enter(" /decline "),
            Step::Done(ElicitationAnswer::Decline)
        );
        let mut f = Filling::new(&request(form())).unwrap();
        assert_eq!(f.enter("/cancel"), Step::Done(ElicitationAnswer::Cancel));
    }

    #[test]
    fn a_form_without_fields_takes_one_enter_and_hostile_text_is_escaped_and_cut() {
        let mut f = Filling::new(&request(json!({"type": "object"}))).unwrap();
        assert!(f.fields.is_empty());
        assert_eq!(f.prompt(), "  (Enter) ");
        assert_eq!(
            f.enter(""),
            Step::Done(ElicitationAnswer::Accept(Map::new()))
        );
        let long = "x".repeat(1000);
        let hostile = json!({"type": "object", "properties": {
            "a": {"type": "string", "title": "\u{1b}[2Jgone", "description": long}
        }});
        let many: Vec<String> = (0..1000).map(|i| format!("choice number {i}")).collect();
        let wide = json!({"type": "object", "properties": {"c": {"type": "string", "enum": many}}});
        let prompt = Filling::new(&request(wide)).unwrap().prompt();
        assert!(
            prompt
                .contains("20 choice number 19, … 980 more (type a name, or a number up to 1000)"),
            "{prompt}"
        );
        assert!(prompt.len() < 1000, "{} bytes", prompt.len());
        let f = Filling::new(&request(hostile)).unwrap();
        let prompt = f.prompt();
        assert!(!prompt.contains('\u{1b}'), "{prompt}");
        assert!(prompt.contains("\\u{001B}[2Jgone"), "{prompt}");
        assert!(prompt.len() < 400, "{} bytes", prompt.len());
        let field = &f.fields[0];
        let huge = "y".repeat(MAX_FIELD_BYTES + 1);
        assert!(
            parse(field, &huge)
                .unwrap_err()
                .contains("over the 65536-byte limit")
        );
    }

    #[test]
    fn a_page_is_shown_whole_and_escaped_and_answered_yes_no_or_cancel() {
        let mut asked = request(Value::Null);
        asked.message = "Sign in\u{1b}[2J".to_owned();
        asked.url = Some(cordis_mcp::ElicitationUrl {
            url: "https://example.test/x?a=1".to_owned(),
            id: "e1".to_owned(),
        });
        let mut page = Filling::new(&asked).unwrap();
        assert_eq!(
            page.intro(),
            "cordis: MCP server fx asks you to open a page:\n  Sign in\\u{001B}[2J\n  https://example.test/x?a=1\ncordis: nothing is opened for you; say yes and open it yourself\n"
        );
        assert_eq!(page.prompt(), "  will you open it? (yes, no or cancel): ");
        assert_eq!(
            page.enter("maybe"),
            Step::Again("yes, no or cancel".to_owned())
        );
        let yes = ElicitationAnswer::Accept(Map::new());
        assert_eq!(page.enter(" Yes "), Step::Done(yes.clone()));
        assert_eq!(page.enter(""), Step::Done(ElicitationAnswer::Decline));
        assert_eq!(page.enter("c"), Step::Done(ElicitationAnswer::Cancel));
        assert_eq!(
            page.outcome(&yes),
            "cordis: told fx you will open https://example.test/x?a=1"
        );
        assert_eq!(
            page.outcome(&ElicitationAnswer::Cancel),
            "cordis: cancelled fx's page"
        );
    }

    #[tokio::test]
    async fn a_form_at_the_prompt_is_declined_without_asking() {
        let (elicitor, mut asked, listening) = terminal_elicitor();
        let answer = elicitor.elicit(request(form())).await;
        assert!(
            matches!(&answer, ElicitationAnswer::NotAsked(why) if why.contains("no turn ran")),
            "{answer:?}"
        );
        assert!(asked.try_recv().is_err());
        *listening.lock().unwrap() = true;
        let waiting = elicitor.elicit(request(form()));
        let form = asked.try_recv().expect("handed to the conversation");
        form.reply.send(ElicitationAnswer::Cancel).unwrap();
        assert_eq!(waiting.await, ElicitationAnswer::Cancel);
    }
}
