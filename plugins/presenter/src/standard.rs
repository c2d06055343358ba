//! Presenters of the standard workspace tools (`tool-fs`, `tool-search`, `tool-shell`), of
//! `todo_write` (a checklist) and of `run_code` (its description as the title, the program as
//! the text).
//!
//! They live here rather than in the tool crates so that which presenter a tool has never
//! depends on load order: the service starts with all of them.

use std::sync::Arc;

use serde_json::Value;

use crate::card::{Card, Location, Presentation, ResultView, ToolKind};
use crate::presenters::{PresentError, ToolPresenter, content_text};

fn str_arg<'a>(args: &'a Value, name: &'static str) -> Result<&'a str, PresentError> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or(PresentError::Argument(name, "string"))
}

fn opt_str<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

/// An error result: the message as text, no card.
fn failed(call: Presentation, result: ResultView<'_>) -> Presentation {
    Presentation {
        card: Card::Generic,
        text: Some(content_text(result.content)),
        ..call
    }
}

struct ReadFile;
impl ToolPresenter for ReadFile {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let path = str_arg(args, "path")?;
        let range = match (args.get("start_line"), args.get("end_line")) {
            (Some(s), Some(e)) => format!(" (lines {s}–{e})"),
            (Some(s), None) => format!(" (from line {s})"),
            (None, Some(e)) => format!(" (to line {e})"),
            (None, None) => String::new(),
        };
        Ok(Presentation {
            title: format!("Read {path}{range}"),
            kind: ToolKind::Read,
            input: args.clone(),
            card: Card::Generic,
            text: None,
            locations: vec![Location {
                path: path.to_owned(),
                line: Some(args.get("start_line").and_then(Value::as_u64).unwrap_or(1)),
            }],
        })
    }
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        let call = self.present_call(args)?;
        if result.is_error {
            return Ok(failed(call, result));
        }
        let mut text = opt_str(result.content, "content")
            .unwrap_or_default()
            .to_owned();
        if let Some(note) = opt_str(result.content, "note") {
            text.push_str(&format!("[{note}]\n"));
        }
        Ok(Presentation {
            text: Some(text),
            ..call
        })
    }
}

/// `write_file` from its arguments alone (a transcript, replayed): the content, as a new file.
/// The question before a write shows `tool-fs`'s presenter instead: the change against the
/// file's current text, worked out before it asks.
struct WriteFile;
impl ToolPresenter for WriteFile {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let path = str_arg(args, "path")?;
        Ok(Presentation {
            title: format!("Write {path}"),
            kind: ToolKind::Edit,
            input: args.clone(),
            card: Card::Diff {
                path: path.to_owned(),
                old_text: None,
                new_text: str_arg(args, "content")?.to_owned(),
                first_line: None,
            },
            text: None,
            locations: vec![Location {
                path: path.to_owned(),
                line: None,
            }],
        })
    }
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        let call = self.present_call(args)?;
        Ok(if result.is_error {
            failed(call, result)
        } else {
            call
        })
    }
}

struct EditFile;
impl ToolPresenter for EditFile {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let path = str_arg(args, "path")?;
        let all = args.get("replace_all").and_then(Value::as_bool) == Some(true);
        Ok(Presentation {
            title: format!(
                "Edit {path}{}",
                if all { " (every occurrence)" } else { "" }
            ),
            kind: ToolKind::Edit,
            input: args.clone(),
            card: Card::Diff {
                path: path.to_owned(),
                old_text: Some(str_arg(args, "old_string")?.to_owned()),
                new_text: str_arg(args, "new_string")?.to_owned(),
                first_line: None,
            },
            text: None,
            locations: vec![Location {
                path: path.to_owned(),
                line: None,
            }],
        })
    }
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        let call = self.present_call(args)?;
        if result.is_error {
            return Ok(failed(call, result));
        }
        // One replacement: the strings sit at the line the edit reports, so the diff can say
        // where (with several, the strings alone stand for all of them).
        let at = result
            .content
            .get("lines")
            .and_then(Value::as_array)
            .filter(|lines| {
                lines.len() == 1 && result.content.get("replacements") == Some(&Value::from(1))
            })
            .and_then(|lines| lines[0].as_u64());
        Ok(match (call.card, at) {
            (
                Card::Diff {
                    path,
                    old_text,
                    new_text,
                    ..
                },
                Some(line),
            ) => Presentation {
                card: Card::Diff {
                    path: path.clone(),
                    old_text,
                    new_text,
                    first_line: Some(line),
                },
                locations: vec![Location {
                    path,
                    line: Some(line),
                }],
                ..call
            },
            (card, _) => Presentation { card, ..call },
        })
    }
}

struct ListFiles;
impl ToolPresenter for ListFiles {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let target = match (opt_str(args, "pattern"), opt_str(args, "path")) {
            (Some(p), Some(dir)) => format!("{p} in {dir}"),
            (Some(p), None) => p.to_owned(),
            (None, Some(dir)) => dir.to_owned(),
            (None, None) => ".".to_owned(),
        };
        Ok(Presentation {
            title: format!("List {target}"),
            kind: ToolKind::Search,
            input: args.clone(),
            card: Card::Generic,
            text: None,
            locations: Vec::new(),
        })
    }
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        let call = self.present_call(args)?;
        if result.is_error {
            return Ok(failed(call, result));
        }
        let files = result
            .content
            .get("files")
            .and_then(Value::as_array)
            .ok_or(PresentError::Argument("files", "list"))?;
        let mut text: String = files
            .iter()
            .filter_map(Value::as_str)
            .map(|f| format!("{f}\n"))
            .collect();
        if let Some(note) = opt_str(result.content, "note") {
            text.push_str(&format!("[{note}]\n"));
        }
        Ok(Presentation {
            text: Some(text),
            ..call
        })
    }
}

struct Grep;
impl ToolPresenter for Grep {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let pattern = str_arg(args, "pattern")?;
        let place = opt_str(args, "path")
            .map(|p| format!(" in {p}"))
            .unwrap_or_default();
        Ok(Presentation {
            title: format!("Grep {pattern}{place}"),
            kind: ToolKind::Search,
            input: args.clone(),
            card: Card::Generic,
            text: None,
            locations: Vec::new(),
        })
    }
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        let call = self.present_call(args)?;
        if result.is_error {
            return Ok(failed(call, result));
        }
        let mut text = opt_str(result.content, "content")
            .unwrap_or_default()
            .to_owned();
        if let Some(note) = opt_str(result.content, "note") {
            text.push_str(&format!("[{note}]\n"));
        }
        Ok(Presentation {
            text: Some(text),
            ..call
        })
    }
}

struct Bash;
impl ToolPresenter for Bash {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let command = str_arg(args, "command")?;
        Ok(Presentation {
            title: command.to_owned(),
            kind: ToolKind::Execute,
            input: args.clone(),
            card: Card::Terminal {
                output: String::new(),
                exit_code: None,
            },
            text: opt_str(args, "description").map(str::to_owned),
            locations: Vec::new(),
        })
    }
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        let call = self.present_call(args)?;
        if result.is_error {
            return Ok(failed(call, result));
        }
        let c = result.content;
        let mut output = opt_str(c, "stdout").unwrap_or_default().to_owned();
        output.push_str(opt_str(c, "stderr").unwrap_or_default());
        if let Some(note) = opt_str(c, "note") {
            output.push_str(&format!("[{note}]\n"));
        }
        let exit_code = c
            .get("exit_code")
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok());
        Ok(Presentation {
            card: Card::Terminal { output, exit_code },
            ..call
        })
    }
}

/// The standard presenters, sorted by tool name.
struct RunCode;
impl ToolPresenter for RunCode {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let code = str_arg(args, "code")?;
        Ok(Presentation {
            // The model's own one-line description of the program, else its first line.
            title: opt_str(args, "description").map_or_else(
                || code.lines().next().unwrap_or_default().to_owned(),
                str::to_owned,
            ),
            kind: ToolKind::Other,
            input: args.clone(),
            card: Card::Generic,
            text: Some(code.to_owned()),
            locations: Vec::new(),
        })
    }
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        let call = self.present_call(args)?;
        Ok(Presentation {
            text: Some(content_text(result.content)),
            ..call
        })
    }
}

/// `todo_write` (the `tool-todo` plugin): the list as a checklist, `[x]` done, `[~]` in
/// progress, `[ ]` pending; the title counts what is left.
struct TodoWrite;
impl ToolPresenter for TodoWrite {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let todos = args
            .get("todos")
            .and_then(Value::as_array)
            .ok_or(PresentError::Argument("todos", "array"))?;
        let mut lines = Vec::with_capacity(todos.len());
        let (mut done, mut doing) = (0, 0);
        for todo in todos {
            let content = opt_str(todo, "content").unwrap_or_default();
            let mark = match opt_str(todo, "status") {
                Some("completed") => {
                    done += 1;
                    "[x]"
                }
                Some("in_progress") => {
                    doing += 1;
                    "[~]"
                }
                _ => "[ ]",
            };
            lines.push(format!("{mark} {content}"));
        }
        let title = match todos.len() {
            0 => "Clear the todo list".to_owned(),
            n => format!(
                "Todos: {done} of {n} done{}",
                if doing > 0 {
                    format!(", {doing} in progress")
                } else {
                    String::new()
                }
            ),
        };
        Ok(Presentation {
            title,
            kind: ToolKind::Other,
            input: args.clone(),
            card: Card::Generic,
            text: Some(lines.join("\n")),
            locations: Vec::new(),
        })
    }
    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        let call = self.present_call(args)?;
        Ok(if result.is_error {
            failed(call, result)
        } else {
            call
        })
    }
}

pub(crate) fn presenters() -> Vec<(&'static str, Arc<dyn ToolPresenter>)> {
    vec![
        ("bash", Arc::new(Bash)),
        ("edit_file", Arc::new(EditFile)),
        ("grep", Arc::new(Grep)),
        ("list_files", Arc::new(ListFiles)),
        ("read_file", Arc::new(ReadFile)),
        ("run_code", Arc::new(RunCode)),
        ("todo_write", Arc::new(TodoWrite)),
        ("write_file", Arc::new(WriteFile)),
    ]
}
