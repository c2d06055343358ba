//! The stdio transcript: one agent's session events as text for a person. The assistant's text
//! streams to stdout; each tool call and result is one line (a `run_code` sub-call and its
//! outcome are indented lines between them); failures go to stderr, once each.

use std::io::Write;

use std::collections::BTreeMap;

use cordis_llm::Chunk;
use cordis_presenter::{Card, Presenters, ResultView, parse_arguments_text, render_card};
use cordis_session::{
    AssistantChunkData, SessionEvent, ToolCallData, ToolCodeDispatchData,
    ToolCodeDispatchStartData, ToolResultData, TurnEndData, TurnEndReason,
};
use serde_json::Value;

use super::render::{safe, safe_lines};

/// `s` on one line, made safe for a terminal, cut after `max` characters.
fn clip(s: &str, max: usize) -> String {
    let one_line = safe(s);
    if one_line.chars().count() > max {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    } else {
        one_line.into_owned()
    }
}

/// Writes the transcript of one agent's events.
pub(crate) struct Transcript {
    at_line_start: bool,
    /// The arguments of calls whose results have not come yet, by call id: presenters need
    /// them to describe a result (the path of an edit, the command of a run).
    pending: BTreeMap<String, Value>,
}

impl Default for Transcript {
    fn default() -> Self {
        Transcript {
            at_line_start: true,
            pending: BTreeMap::new(),
        }
    }
}

/// The body of a result's card for the terminal: a unified diff for an edit, the output and
/// exit code of a command; nothing for a generic card (its one line says it all).
fn card_body(
    presenters: &Presenters,
    name: &str,
    args: &Value,
    content: &Value,
    is_error: bool,
) -> Option<String> {
    let p = presenters.present_result(name, args, ResultView { content, is_error });
    match p.card {
        Card::Generic => None,
        card => Some(render_card(&card)),
    }
}

impl Transcript {
    pub(crate) fn newline(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if !self.at_line_start {
            writeln!(out)?;
            self.at_line_start = true;
        }
        Ok(())
    }

    pub(crate) fn event(
        &mut self,
        e: &SessionEvent,
        presenters: Option<&Presenters>,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> std::io::Result<()> {
        // Typed reads: an event that does not parse as its kind's payload is skipped (the log
        // is checked on its own; the transcript only shows it).
        if let Ok(chunk) = e.data_as::<AssistantChunkData>() {
            if let Chunk::Text { delta } = chunk.chunk
                && !delta.is_empty()
            {
                write!(out, "{}", safe_lines(&delta))?;
                self.at_line_start = delta.ends_with('\n');
                out.flush()?;
            }
            return Ok(());
        }
        if let Ok(call) = e.data_as::<ToolCallData>() {
            self.newline(out)?;
            writeln!(
                out,
                "[call {} {}]",
                safe(&call.name),
                clip(&call.arguments, 160)
            )?;
            self.pending
                .insert(call.call_id, parse_arguments_text(&call.arguments));
            return Ok(());
        }
        if let Ok(sub) = e.data_as::<ToolCodeDispatchStartData>() {
            self.newline(out)?;
            writeln!(
                out,
                "  [sub-call {} {}]",
                safe(&sub.name),
                clip(&sub.arguments.to_string(), 160)
            )?;
            return Ok(());
        }
        if let Ok(sub) = e.data_as::<ToolCodeDispatchData>() {
            self.newline(out)?;
            let content = match &sub.content {
                Value::String(t) => t.clone(),
                v => v.to_string(),
            };
            let label = if sub.is_error {
                "sub-error"
            } else {
                "sub-result"
            };
            writeln!(
                out,
                "  [{label} {}] {}",
                safe(&sub.name),
                clip(&content, 160)
            )?;
            return Ok(());
        }
        if let Ok(result) = e.data_as::<ToolResultData>() {
            self.newline(out)?;
            let content = match &result.content {
                Value::String(t) => t.clone(),
                v => v.to_string(),
            };
            if result.is_error {
                writeln!(
                    out,
                    "[error {} {}] {}",
                    safe(&result.name),
                    safe(result.code.as_deref().unwrap_or_default()),
                    clip(&content, 200)
                )?;
            } else {
                writeln!(
                    out,
                    "[result {}] {}",
                    safe(&result.name),
                    clip(&content, 200)
                )?;
            }
            let args = self.pending.remove(&result.call_id).unwrap_or(Value::Null);
            if let Some(presenters) = presenters
                && let Some(body) = card_body(
                    presenters,
                    &result.name,
                    &args,
                    &result.content,
                    result.is_error,
                )
            {
                for line in body.lines() {
                    writeln!(out, "  {}", safe(line))?;
                }
            }
            return Ok(());
        }
        let Ok(end) = e.data_as::<TurnEndData>() else {
            return Ok(());
        };
        let turn = end.turn;
        self.newline(out)?;
        out.flush()?;
        match end.reason {
            TurnEndReason::Completed => {}
            TurnEndReason::Error { step, message } => {
                writeln!(
                    err,
                    "cordis: error: turn {turn} failed at step {step}: {}",
                    safe_lines(&message)
                )?;
            }
            TurnEndReason::MaxSteps { steps } => {
                writeln!(
                    err,
                    "cordis: turn {turn} stopped after {steps} steps (maxSteps)"
                )?;
            }
            other => {
                writeln!(
                    err,
                    "cordis: turn {turn} ended: {}",
                    serde_json::to_string(&other).unwrap_or_default()
                )?;
            }
        }
        err.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, data: Value) -> SessionEvent {
        SessionEvent {
            kind: kind.to_owned(),
            seq: 0,
            time: 0,
            data,
            source_event_seqs: None,
        }
    }

    #[test]
    fn run_code_sub_calls_show_as_indented_lines() {
        let mut t = Transcript::default();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let common = serde_json::json!({
            "turn": 1, "step": 1, "parentCallId": "c1", "subCallId": "c1:code:1",
            "name": "read_file", "arguments": {"path": "a.txt"}
        });
        let mut done = common.clone();
        done["isError"] = Value::Bool(false);
        done["content"] = Value::String("hello".into());
        for e in [
            event("tool/code-dispatch-start", common),
            event("tool/code-dispatch", done),
        ] {
            t.event(&e, None, &mut out, &mut err).unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "  [sub-call read_file {\"path\":\"a.txt\"}]\n  [sub-result read_file] hello\n"
        );
        assert!(err.is_empty());
    }
}
