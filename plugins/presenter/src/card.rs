//! The presentation data and its terminal rendering.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What kind of action a tool call is (ACP's tool kinds, narrowed to the ones we use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    /// Reads without changing anything.
    Read,
    /// Changes files.
    Edit,
    /// Runs a command.
    Execute,
    /// Searches or lists.
    Search,
    /// Anything else.
    Other,
}

/// How the body of a call or result is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Card {
    /// Title, input and text only.
    Generic,
    /// A command's output and, once it ended, its exit code.
    Terminal {
        /// stdout then stderr.
        output: String,
        /// The exit code; `None` while running or when killed by a signal.
        exit_code: Option<i32>,
    },
    /// A file change.
    Diff {
        /// The file, as the tool was given it.
        path: String,
        /// The replaced text; `None` for a new file, or for a write whose file is not known
        /// (a transcript's card, made from the arguments alone: an approval's card comes from
        /// the tool's plan, with the file's text).
        old_text: Option<String>,
        /// The new text.
        new_text: String,
        /// The file line `old_text` starts at, when the texts are a part of the file (an edit's
        /// strings): a rendered diff numbers its lines from there. `None`: whole texts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_line: Option<u64>,
    },
}

/// A tool call or result as people see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Presentation {
    /// One line: `Read src/main.rs`, the command of a `bash` call.
    pub title: String,
    /// The kind of action.
    pub kind: ToolKind,
    /// The call's arguments.
    pub input: Value,
    /// The body.
    pub card: Card,
    /// Free text shown with the card: a command's description, a read's content, an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Files the call touches, for editors that follow along (ACP `locations`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<Location>,
}

/// A file (and line) a tool call touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// The path as the tool was given it.
    pub path: String,
    /// A 1-based line, when one is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// A tool result as presenters see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResultView<'a> {
    /// The result content (for failures, the error message as a string).
    pub content: &'a Value,
    /// True for failures.
    pub is_error: bool,
}

/// Arguments as logged (a JSON text) to a value: the raw string if it is not JSON, `{}` when
/// empty (the reference's `rawInput`).
pub fn parse_arguments_text(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// A unified diff of `old` → `new` for `path`, three lines of context; a new file (`old` is
/// `None`) is all additions.
pub fn unified_diff(path: &str, old: Option<&str>, new: &str) -> String {
    unified_diff_from(path, old, new, 1)
}

/// [`unified_diff`] of texts that start at line `first` of the file: hunk headers carry the
/// file's line numbers.
pub fn unified_diff_from(path: &str, old: Option<&str>, new: &str, first: u64) -> String {
    let diff = similar::TextDiff::from_lines(old.unwrap_or(""), new);
    let from = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_owned()
    };
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&from, &format!("b/{path}"))
        .missing_newline_hint(false)
        .to_string();
    if first <= 1 {
        return text;
    }
    text.lines()
        .map(|line| match line.strip_prefix("@@ ") {
            Some(rest) => shift_hunk(rest, first - 1),
            None => line.to_owned(),
        })
        .map(|line| line + "\n")
        .collect()
}

/// A hunk header (after its leading `@@ `) with both starts moved `by` lines down.
fn shift_hunk(rest: &str, by: u64) -> String {
    let shift = |range: &str, sign: char| -> Option<String> {
        let range = range.strip_prefix(sign)?;
        let (start, len) = match range.split_once(',') {
            Some((s, l)) => (s, Some(l)),
            None => (range, None),
        };
        let start: u64 = start.parse().ok()?;
        Some(match len {
            Some(len) => format!("{sign}{},{len}", start + by),
            None => format!("{sign}{}", start + by),
        })
    };
    let mut parts = rest.splitn(3, ' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(old), Some(new), Some(tail)) => match (shift(old, '-'), shift(new, '+')) {
            (Some(old), Some(new)) => format!("@@ {old} {new} {tail}"),
            _ => format!("@@ {rest}"),
        },
        _ => format!("@@ {rest}"),
    }
}

/// The card as plain text for a terminal: a diff as a unified diff, a terminal card as its
/// output and exit code, a generic card as nothing.
pub fn render_card(card: &Card) -> String {
    match card {
        Card::Generic => String::new(),
        Card::Terminal { output, exit_code } => {
            let mut out = output.clone();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if let Some(code) = exit_code {
                out.push_str(&format!("[exit code {code}]\n"));
            }
            out
        }
        Card::Diff {
            path,
            old_text,
            new_text,
            first_line,
        } => unified_diff_from(path, old_text.as_deref(), new_text, first_line.unwrap_or(1)),
    }
}
