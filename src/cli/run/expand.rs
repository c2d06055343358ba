//! `/expand [N]`: a call's whole output. Calls are numbered in the session's order (1 is its
//! first call); a result whose card left lines out says `/expand N` under it. At a terminal
//! the output goes through a pager (`$PAGER`, else `less -R`, else it is printed); piped, it
//! is printed on stdout.

use super::*;

use cordis_session::ToolResultData;
use serde_json::Value;

/// A card shows at most this many lines of an output (the transcript's head and tail): longer
/// ones get the `/expand N` hint.
const SHOWN_LINES: usize = 10;

/// `/expand` and its argument, when `line` is one.
pub(super) fn parse(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix("/expand")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

/// The text of a call's output: a command's stdout and stderr, a text result as it is,
/// anything else as JSON.
fn output_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Object(fields) if fields.contains_key("stdout") => {
            let part = |name: &str| fields.get(name).and_then(Value::as_str).unwrap_or("");
            let mut text = part("stdout").to_owned();
            let err = part("stderr");
            if !err.is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(err);
            }
            text
        }
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// The session's call results, in order: (name, content).
fn results(agent: &Agent) -> Vec<(String, Value)> {
    agent.session().with_events(|events| {
        events
            .iter()
            .filter_map(|e| e.data_as::<ToolResultData>().ok())
            .map(|r| (r.name, r.content))
            .collect()
    })
}

/// The hint under a result whose card left lines out (`None`: it showed them all): the call's
/// number counts the session's results through `seq`.
pub(super) fn hint(agent: &Agent, event: &cordis_session::SessionEvent) -> Option<String> {
    let result = event.data_as::<ToolResultData>().ok()?;
    if output_text(&result.content).lines().count() <= SHOWN_LINES {
        return None;
    }
    let number = agent.session().with_events(|events| {
        events
            .iter()
            .filter(|e| e.seq <= event.seq && e.kind == cordis_session::kinds::TOOL_RESULT)
            .count()
    });
    Some(format!("  ⎿ /expand {number} shows the whole output"))
}

/// What `/expand ARG` shows: (the call's number, its name, its output), or why nothing.
fn chosen(agent: &Agent, arg: &str) -> Result<(usize, String, String), String> {
    let results = results(agent);
    if results.is_empty() {
        return Err("no call has run in this session yet".to_owned());
    }
    let number = if arg.is_empty() {
        results.len()
    } else {
        match arg.parse::<usize>() {
            Ok(n) if (1..=results.len()).contains(&n) => n,
            _ => {
                return Err(format!(
                    "/expand N takes a call's number, 1 to {} (without N: the last call)",
                    results.len()
                ));
            }
        }
    };
    let (name, content) = &results[number - 1];
    Ok((number, name.clone(), output_text(content)))
}

/// The pager `/expand` runs at a terminal: `$PAGER` (through `sh -c`), else `less -R` when
/// it is installed; `None`: print instead.
fn pager(env: &(dyn Fn(&str) -> Option<String> + Sync)) -> Option<std::process::Command> {
    if let Some(pager) = env("PAGER").filter(|p| !p.trim().is_empty()) {
        let mut command = std::process::Command::new("sh");
        command.arg("-c").arg(pager);
        return Some(command);
    }
    let path = env("PATH")?;
    std::env::split_paths(&path)
        .any(|dir| dir.join("less").is_file())
        .then(|| {
            let mut command = std::process::Command::new("less");
            command.arg("-R");
            command
        })
}

/// A file holding `text`, read from its start, with no name left on disk (the pager's stdin).
fn unnamed_file(text: &str) -> std::io::Result<std::fs::File> {
    use std::io::{Seek, Write};
    let path = std::env::temp_dir().join(format!(
        "cordis-expand-{}-{}.txt",
        std::process::id(),
        crate::session::id::new_id()
    ));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    file.write_all(text.as_bytes())?;
    file.rewind()?;
    Ok(file)
}

impl Conversation<'_> {
    /// `/expand [N]`: call N's whole output (the last call's without N), through a pager at a
    /// terminal, else printed on stdout.
    pub(super) async fn expand(&mut self, arg: &str, io: &mut Io<'_>) -> anyhow::Result<()> {
        let (number, name, text) = match chosen(&self.agent, arg) {
            Ok(chosen) => chosen,
            Err(why) => {
                writeln!(io.err, "cordis: {why}")?;
                return Ok(());
            }
        };
        let text = safe_lines(&text).into_owned();
        let paged = match (&mut self.input, pager(io.env)) {
            (Input::Terminal(terminal), Some(mut command)) => {
                command.stdin(unnamed_file(&text)?);
                io.out.flush()?;
                io.err.flush()?;
                Some(terminal.hand_over(command))
            }
            _ => None,
        };
        let Some(id) = paged else {
            writeln!(io.out, "call {number} ({}), whole output:", safe(&name))?;
            write!(io.out, "{text}")?;
            if !text.ends_with('\n') {
                writeln!(io.out)?;
            }
            return Ok(());
        };
        // The pager has the terminal: Ctrl-C there is its own (not the run's) until it exits.
        loop {
            tokio::select! {
                event = self.input.next() => match event {
                    Some(Event::HandedBack { id: back }) if back == id => break,
                    Some(Event::Ahead(typed)) => self.queue_typed_ahead(typed, io)?,
                    Some(Event::Eof) | None => {
                        self.exiting = true;
                        break;
                    }
                    Some(_) => {}
                },
                stop = self.signals.next() => {
                    if stop == Stop::Terminate {
                        self.exiting = true;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_expand_word_is_the_command() {
        assert_eq!(parse("/expand"), Some(""));
        assert_eq!(parse(" /expand 3 "), Some("3"));
        assert_eq!(parse("/expanded"), None);
        assert_eq!(parse("expand"), None);
    }

    #[test]
    fn a_commands_output_is_its_stdout_then_its_stderr() {
        let content = json!({"exit_code": 1, "stdout": "a\nb", "stderr": "oops\n"});
        assert_eq!(output_text(&content), "a\nb\noops\n");
        assert_eq!(output_text(&json!("plain")), "plain");
        assert_eq!(output_text(&json!({"x": 1})), "{\n  \"x\": 1\n}");
    }
}
