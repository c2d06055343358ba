//! The one result a `run_code` call gives the model.

use serde_json::Value;

use crate::schema_ts::js_number;

/// The text of a run that printed and returned nothing.
pub const NO_OUTPUT: &str = "(run_code completed with no output)";

/// Indentation per level in a rendered result.
const INDENT: &str = "  ";
/// Total indentation never exceeds this many characters; deeper subtrees render compact, so the
/// text stays linear in the value's size.
const MAX_INDENT: usize = 10;

/// Renders a successful run: the log lines joined by newlines, then the completion (a string
/// as is, anything else as [`render_json`]), the two joined by a newline; [`NO_OUTPUT`] when
/// both are empty.
///
/// # Examples
/// ```
/// use cordis_code_mode::render_run_result;
/// use serde_json::json;
///
/// let logs = ["captured output".to_owned()];
/// assert_eq!(render_run_result(&logs, Some(&json!("CODE_ONE+CODE_TWO"))), "captured output\nCODE_ONE+CODE_TWO");
/// assert_eq!(render_run_result(&[], Some(&json!({"a": [1]}))), "{\n  \"a\": [\n    1\n  ]\n}");
/// ```
pub fn render_run_result(logs: &[String], result: Option<&Value>) -> String {
    let logs = logs.join("\n");
    let rendered = match result {
        None => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(value) => render_json(value),
    };
    let parts: Vec<&str> = [logs.as_str(), rendered.as_str()]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect();
    if parts.is_empty() {
        NO_OUTPUT.to_owned()
    } else {
        parts.join("\n")
    }
}

/// Renders a failed run: `code run failed (<kind>): <message>`, then `Captured output:` and the
/// log lines when there are any. The registry shows it as the failed call's error message.
pub fn render_run_failure(kind: &str, message: &str, logs: &[String]) -> String {
    let mut text = format!("code run failed ({kind}): {message}");
    if !logs.is_empty() {
        text.push_str("\nCaptured output:\n");
        text.push_str(&logs.join("\n"));
    }
    text
}

enum Task<'a> {
    Value {
        value: &'a Value,
        depth: usize,
        compact: bool,
    },
    Text(String),
}

/// JSON with two-space indentation, compact below five levels, without recursion.
pub fn render_json(value: &Value) -> String {
    let mut out = String::new();
    let mut tasks = vec![Task::Value {
        value,
        depth: 0,
        compact: false,
    }];
    while let Some(task) = tasks.pop() {
        let (value, depth, compact) = match task {
            Task::Text(text) => {
                out.push_str(&text);
                continue;
            }
            Task::Value {
                value,
                depth,
                compact,
            } => (value, depth, compact),
        };
        let children = match value {
            Value::Null | Value::Bool(_) | Value::String(_) => {
                out.push_str(&value.to_string());
                continue;
            }
            Value::Number(number) => {
                out.push_str(&js_number(number));
                continue;
            }
            Value::Array(items) => items.len(),
            Value::Object(members) => members.len(),
        };
        let (open, close) = if value.is_array() {
            ('[', ']')
        } else {
            ('{', '}')
        };
        out.push(open);
        if children == 0 {
            out.push(close);
            continue;
        }
        let compact = compact || (depth + 1) * INDENT.len() > MAX_INDENT;
        let child_depth = depth + 1;
        tasks.push(Task::Text(if compact {
            close.to_string()
        } else {
            format!("\n{}{close}", INDENT.repeat(depth))
        }));
        let separator = |first: bool| {
            if compact {
                if first { String::new() } else { ",".to_owned() }
            } else {
                format!(
                    "{}{}",
                    if first { "\n" } else { ",\n" },
                    INDENT.repeat(child_depth)
                )
            }
        };
        match value {
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate().rev() {
                    tasks.push(Task::Value {
                        value: item,
                        depth: child_depth,
                        compact,
                    });
                    tasks.push(Task::Text(separator(index == 0)));
                }
            }
            Value::Object(members) => {
                for (index, (key, item)) in members.iter().enumerate().rev() {
                    tasks.push(Task::Value {
                        value: item,
                        depth: child_depth,
                        compact,
                    });
                    let key = Value::from(key.as_str()).to_string();
                    let colon = if compact { ":" } else { ": " };
                    tasks.push(Task::Text(format!("{}{key}{colon}", separator(index == 0))));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn logs_come_before_the_result_and_strings_are_raw() {
        let logs = vec!["captured output".to_owned()];
        assert_eq!(
            render_run_result(&logs, Some(&json!("CODE_ONE+CODE_TWO"))),
            "captured output\nCODE_ONE+CODE_TWO"
        );
        assert_eq!(render_run_result(&logs, None), "captured output");
        assert_eq!(render_run_result(&[], Some(&json!(3))), "3");
        assert_eq!(
            render_run_result(&["a".into(), "b".into()], Some(&json!(null))),
            "a\nb\nnull"
        );
    }

    #[test]
    fn nothing_printed_or_returned_says_so() {
        assert_eq!(render_run_result(&[], None), NO_OUTPUT);
        assert_eq!(render_run_result(&[], Some(&json!(""))), NO_OUTPUT);
    }

    #[test]
    fn json_is_pretty_until_ten_characters_of_indent_then_compact() {
        assert_eq!(
            render_json(&json!({"a": 1, "b": [true, null], "c": {}, "d": []})),
            "{\n  \"a\": 1,\n  \"b\": [\n    true,\n    null\n  ],\n  \"c\": {},\n  \"d\": []\n}"
        );
        let deep = json!([[[[[[1, {"k": [2]}]]]]]]);
        assert_eq!(
            render_json(&deep),
            "[\n  [\n    [\n      [\n        [\n          [1,{\"k\":[2]}]\n        ]\n      ]\n    ]\n  ]\n]"
        );
        assert_eq!(render_json(&json!(1.0)), "1");
    }

    #[test]
    fn a_failure_carries_its_kind_and_the_captured_output() {
        assert_eq!(
            render_run_failure("timeout", "wall-clock ceiling reached (300ms)", &[]),
            "code run failed (timeout): wall-clock ceiling reached (300ms)"
        );
        assert_eq!(
            render_run_failure("exception", "Error: x", &["one".into(), "two".into()]),
            "code run failed (exception): Error: x\nCaptured output:\none\ntwo"
        );
    }

    #[test]
    fn a_deep_value_renders_without_recursion() {
        let mut value = json!(0);
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let text = render_json(&value);
        // Take it apart iteratively before asserting: the default drop of this value (also
        // during a failed assertion's unwinding) would recurse.
        let mut next = Some(value);
        while let Some(Value::Array(mut items)) = next.take() {
            next = items.pop();
        }
        assert!(text.contains(&format!("[{}0{}", "[".repeat(10), "]".repeat(10))));
        assert!(text.ends_with("\n  ]\n]"));
    }
}
