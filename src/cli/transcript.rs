//! The stdio transcript: one agent's session events as text for a person. The assistant's text
//! streams to stdout; each tool call and result is one line; failures go to stderr, once each.

use std::io::Write;

use std::collections::BTreeMap;

use cordis_presenter::{Card, Presenters, ResultView, parse_arguments_text, render_card};
use cordis_session::{SessionEvent, TurnEndReason, kinds};
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
fn card_body(presenters: &Presenters, name: &str, args: &Value, content: &Value, is_error: bool) -> Option<String> {
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
        let d = &e.data;
        let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or_default();
        match e.kind.as_str() {
            kinds::ASSISTANT_CHUNK
                if d.pointer("/chunk/type").and_then(Value::as_str) == Some("text") =>
            {
                let delta = d
                    .pointer("/chunk/delta")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !delta.is_empty() {
                    write!(out, "{}", safe_lines(delta))?;
                    self.at_line_start = delta.ends_with('\n');
                    out.flush()?;
                }
            }
            kinds::TOOL_CALL => {
                self.newline(out)?;
                writeln!(out, "[call {} {}]", safe(s("name")), clip(s("arguments"), 160))?;
                self.pending
                    .insert(s("callId").to_owned(), parse_arguments_text(s("arguments")));
            }
            kinds::TOOL_RESULT => {
                self.newline(out)?;
                let content = match d.get("content") {
                    Some(Value::String(t)) => t.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                if d.get("isError").and_then(Value::as_bool) == Some(true) {
                    writeln!(
                        out,
                        "[error {} {}] {}",
                        safe(s("name")),
                        safe(s("code")),
                        clip(&content, 200)
                    )?;
                } else {
                    writeln!(out, "[result {}] {}", safe(s("name")), clip(&content, 200))?;
                }
                let args = self.pending.remove(s("callId")).unwrap_or(Value::Null);
                let is_error = d.get("isError").and_then(Value::as_bool) == Some(true);
                if let Some(presenters) = presenters
                    && let Some(body) = card_body(
                        presenters,
                        s("name"),
                        &args,
                        d.get("content").unwrap_or(&Value::Null),
                        is_error,
                    )
                {
                    for line in body.lines() {
                        writeln!(out, "  {}", safe(line))?;
                    }
                }
            }
            kinds::TURN_END => {
                self.newline(out)?;
                out.flush()?;
                let reason: Option<TurnEndReason> = d
                    .get("reason")
                    .and_then(|r| serde_json::from_value(r.clone()).ok());
                let turn = d.get("turn").and_then(Value::as_u64).unwrap_or(0);
                match reason {
                    Some(TurnEndReason::Completed) | None => {}
                    Some(TurnEndReason::Error { step, message }) => {
                        writeln!(
                            err,
                            "cordis: error: turn {turn} failed at step {step}: {}",
                            safe_lines(&message)
                        )?;
                    }
                    Some(TurnEndReason::MaxSteps { steps }) => {
                        writeln!(
                            err,
                            "cordis: turn {turn} stopped after {steps} steps (maxSteps)"
                        )?;
                    }
                    Some(other) => {
                        writeln!(
                            err,
                            "cordis: turn {turn} ended: {}",
                            serde_json::to_string(&other).unwrap_or_default()
                        )?;
                    }
                }
                err.flush()?;
            }
            _ => {}
        }
        Ok(())
    }
}

