//! The stdio transcript: one agent's session events as text for a person. The assistant's text
//! streams to stdout; each tool call is one readable line built from its presenter (`⏺ Read
//! notes.txt`, `⏺ $ cargo test`), and its result one summary under it (`⎿ 12 lines`, a diff
//! with its line numbers, a command's exit code and the first lines of its output); a
//! `run_code` sub-call is the same, indented. Failures go to stderr, once each. Colour only
//! when asked for (see [`Style`]).

use std::io::Write;

use std::collections::BTreeMap;

use cordis_llm::Chunk;
use cordis_presenter::{
    Card, Presentation, Presenters, ResultView, ToolKind, generic, parse_arguments_text,
    render_card,
};
use cordis_session::{EventView, SessionEvent, TurnEndData, TurnEndReason};
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

/// Lines of a command's output shown under its result; the rest is counted.
const SHOWN_OUTPUT_LINES: usize = 10;

/// How many lines of a diff a result shows (the approval question showed it whole).
const SHOWN_DIFF_LINES: usize = 40;

/// Whether the transcript is coloured: `--color always`, or `auto` on a terminal without
/// `NO_COLOR`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Style {
    /// ANSI colours on.
    pub color: bool,
    /// Answers rendered as markdown, wrapped to this many columns (a terminal with colours).
    pub width: Option<usize>,
}

impl Style {
    /// The style of output to stdout: colours when `color`, and then, on a terminal, answers
    /// rendered to its width.
    pub(crate) fn for_stdout(color: bool) -> Style {
        let width = color
            .then(|| rustix::termios::tcgetwinsize(std::io::stdout()).ok())
            .flatten()
            .map(|size| usize::from(size.ws_col))
            .filter(|&columns| columns > 0);
        Style { color, width }
    }
}

impl Style {
    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// A diff line in its colour: additions green, removals red, hunk headers cyan.
    pub(crate) fn diff_line(self, line: &str) -> String {
        match line.chars().next() {
            _ if line.starts_with("+++") || line.starts_with("---") => self.paint("1", line),
            Some('+') => self.paint("32", line),
            Some('-') => self.paint("31", line),
            Some('@') => self.paint("36", line),
            _ => line.to_owned(),
        }
    }
}

/// Writes the transcript of one agent's events.
pub(crate) struct Transcript {
    at_line_start: bool,
    /// Reasoning was written to stderr and its line is not ended yet.
    thinking: bool,
    /// The arguments of calls whose results have not come yet, by call id: presenters need
    /// them to describe a result (the path of an edit, the command of a run).
    pending: BTreeMap<String, Value>,
    style: Style,
    /// Calls a person was asked about here and allowed: their question showed the diff, so
    /// the result sums it up instead of showing it again.
    asked: std::collections::BTreeSet<String>,
    /// The answer's markdown renderer (a terminal with colours), and the text of its line not
    /// ended yet: lines are drawn once complete.
    markdown: Option<(super::markdown::Markdown, String)>,
    /// Per depth (a call, a `run_code` sub-call), the call whose line was written last while
    /// nothing else at that depth has been: its result then sits right under it; any other
    /// result names its tool (parallel calls print their lines first, then their results).
    last_call: [Option<String>; 2],
}

impl Default for Transcript {
    fn default() -> Self {
        Transcript::new(Style::default())
    }
}

/// The one line of a call: the presenter's title (`$ ` before a command), or the tool's name
/// and its arguments when nothing presents it.
fn call_line(presentation: &Presentation, name: &str, args: &Value) -> String {
    if presentation.title == name {
        let args = match args {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        return format!("{} {}", safe(name), clip(&args, 120));
    }
    let title = clip(&presentation.title, 160);
    match presentation.kind {
        ToolKind::Execute => format!("$ {title}"),
        _ => title,
    }
}

/// A result's lines under its call: the first after `⎿`, the rest indented. `failed` is the
/// error code of a failure (empty when it has none).
fn result_lines(
    p: &Presentation,
    content: &Value,
    failed: Option<&str>,
    style: Style,
) -> Vec<String> {
    let raw = || match content {
        Value::String(t) => t.clone(),
        v => v.to_string(),
    };
    let text = p.text.clone().unwrap_or_else(raw);
    if let Some(code) = failed {
        let label = if code.is_empty() {
            "error".to_owned()
        } else {
            format!("error {}", safe(code))
        };
        return vec![style.paint("31", &format!("{label}: {}", clip(&text, 200)))];
    }
    // A text of a presenter's own (not the result's JSON) is shown as it is.
    let mcp = p
        .text
        .as_ref()
        .is_none_or(|t| *t == raw())
        .then(|| crate::session::mcp_content::lines(content))
        .flatten();
    match &p.card {
        Card::Diff { .. } => {
            let diff = render_card(&p.card);
            let lines: Vec<&str> = diff.lines().collect();
            folded(&lines, SHOWN_DIFF_LINES, |l| style.diff_line(&safe(l)))
        }
        Card::Terminal { output, exit_code } => {
            let lines: Vec<&str> = output.lines().collect();
            let exit = exit_code.map_or_else(|| "killed".to_owned(), |c| format!("exit {c}"));
            let mut shown = vec![match lines.len() {
                0 => format!("{exit}, no output"),
                1 => format!("{exit}, 1 line"),
                n => format!("{exit}, {n} lines"),
            }];
            // The end of a long output is where the error usually is: first and last lines.
            shown.extend(head_and_tail(&lines, SHOWN_OUTPUT_LINES, |l| clip(l, 200)));
            shown
        }
        // A read is its size: the model has the text, the person knows the file.
        Card::Generic if p.kind == ToolKind::Read => {
            let lines = text.lines().count();
            vec![if lines == 1 {
                "1 line".to_owned()
            } else {
                format!("{lines} lines")
            }]
        }
        // An MCP tool's result: its blocks (a link as its URI and name, an image as its type
        // and size), unless a presenter described it.
        Card::Generic if mcp.is_some() => {
            let shown = mcp.unwrap_or_default();
            if shown.is_empty() {
                return vec!["done".to_owned()];
            }
            let lines: Vec<&str> = shown.iter().map(String::as_str).collect();
            folded(&lines, SHOWN_OUTPUT_LINES, |l| clip(l, 200))
        }
        Card::Generic => {
            let lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return vec!["done".to_owned()];
            }
            folded(&lines, SHOWN_OUTPUT_LINES, |l| clip(l, 200))
        }
    }
}

/// A diff's size in one line (`+3 −1 lines, as asked`).
fn diff_summary(old: Option<&str>, new: &str) -> String {
    let (mut added, mut removed) = (0, 0);
    for change in similar::TextDiff::from_lines(old.unwrap_or_default(), new).iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    format!("+{added} −{removed} lines, as asked")
}

/// At most `max` of `lines`, each shown by `show`: the first half and the last half of them
/// around how many were left out.
fn head_and_tail(lines: &[&str], max: usize, show: impl Fn(&str) -> String) -> Vec<String> {
    if lines.len() <= max {
        return lines.iter().map(|l| show(l)).collect();
    }
    let (head, tail) = (max / 2, max - max / 2);
    let mut shown: Vec<String> = lines[..head].iter().map(|l| show(l)).collect();
    shown.push(format!("… {} lines left out …", lines.len() - max));
    shown.extend(lines[lines.len() - tail..].iter().map(|l| show(l)));
    shown
}

/// The first `max` of `lines`, each shown by `show`, then how many more there are.
fn folded(lines: &[&str], max: usize, show: impl Fn(&str) -> String) -> Vec<String> {
    let mut shown: Vec<String> = lines.iter().take(max).map(|l| show(l)).collect();
    if lines.len() > max {
        shown.push(format!("… {} more lines", lines.len() - max));
    }
    shown
}

impl Transcript {
    /// A transcript in `style`.
    pub(crate) fn new(style: Style) -> Self {
        Transcript {
            at_line_start: true,
            asked: std::collections::BTreeSet::new(),
            markdown: style
                .width
                .map(|w| (super::markdown::Markdown::new(w), String::new())),
            thinking: false,
            pending: BTreeMap::new(),
            style,
            last_call: [None, None],
        }
    }

    /// Call `call_id`'s question showed its diff to the person, who allowed it: its result
    /// sums the diff up instead of showing it again.
    pub(crate) fn shown_when_asked(&mut self, call_id: &str) {
        self.asked.insert(call_id.to_owned());
    }

    /// The style it writes in.
    pub(crate) fn style(&self) -> Style {
        self.style
    }

    pub(crate) fn newline(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if let Some((markdown, partial)) = self.markdown.as_mut() {
            let mut lines = Vec::new();
            if !partial.is_empty() {
                lines = markdown.line(&std::mem::take(partial));
            }
            lines.extend(markdown.finish());
            for line in lines {
                writeln!(out, "{line}")?;
            }
        }
        if !self.at_line_start {
            writeln!(out)?;
            self.at_line_start = true;
        }
        Ok(())
    }

    /// Writes a call's line at `indent`.
    fn call(
        &mut self,
        out: &mut dyn Write,
        presenters: Option<&Presenters>,
        (indent, id): (&str, &str),
        name: &str,
        args: &Value,
    ) -> std::io::Result<()> {
        self.newline(out)?;
        let depth = usize::from(!indent.is_empty());
        self.last_call[depth] = Some(id.to_owned());
        if depth == 0 {
            self.last_call[1] = None;
        }
        let p = presenters.map_or_else(
            || generic(name, args),
            |presenters| presenters.present_call(name, args),
        );
        let line = call_line(&p, name, args);
        writeln!(
            out,
            "{indent}{} {}",
            self.style.paint("1", "⏺"),
            self.style.paint("1", &line)
        )
    }

    /// Writes a result's lines at `indent`.
    fn result(
        &mut self,
        out: &mut dyn Write,
        presenters: Option<&Presenters>,
        (indent, id): (&str, &str),
        (name, args): (&str, &Value),
        (content, is_error, code): (&Value, bool, Option<&str>),
    ) -> std::io::Result<()> {
        self.newline(out)?;
        let depth = usize::from(!indent.is_empty());
        let under_its_call = self.last_call[depth].take().is_some_and(|last| last == id);
        if depth == 0 {
            self.last_call[1] = None;
        }
        let view = ResultView { content, is_error };
        let p = presenters.map_or_else(
            || Presentation {
                text: None,
                ..generic(name, args)
            },
            |presenters| presenters.present_result(name, args, view),
        );
        let failed = is_error.then(|| code.unwrap_or_default());
        let asked = self.asked.remove(id);
        let mut lines = match &p.card {
            // The question showed this diff a moment ago.
            Card::Diff {
                old_text, new_text, ..
            } if asked && !is_error => vec![diff_summary(old_text.as_deref(), new_text)],
            _ => result_lines(&p, content, failed, self.style),
        };
        if !under_its_call && let Some(first) = lines.first_mut() {
            *first = format!("{}: {first}", safe(name));
        }
        for (i, line) in lines.iter().enumerate() {
            let lead = if i == 0 { "  ⎿ " } else { "    " };
            writeln!(out, "{indent}{}{line}", self.style.paint("2", lead))?;
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
        let view = e.view();
        // The model's reasoning goes to stderr, dimmed (stdout stays the answer); anything
        // else that follows starts on a line of its own.
        if let EventView::AssistantChunk(chunk) = &view
            && let Chunk::Reasoning { delta } = &chunk.chunk
        {
            if !delta.is_empty() {
                write!(err, "{}", self.style.paint("2", &safe_lines(delta)))?;
                self.thinking = !delta.ends_with('\n');
                err.flush()?;
            }
            return Ok(());
        }
        if std::mem::take(&mut self.thinking) {
            writeln!(err)?;
        }
        match view {
            EventView::AssistantChunk(chunk) => {
                if let Chunk::Text { delta } = chunk.chunk
                    && !delta.is_empty()
                {
                    self.last_call = [None, None];
                    if let Some((markdown, partial)) = self.markdown.as_mut() {
                        partial.push_str(&delta);
                        while let Some(end) = partial.find('\n') {
                            let line: String = partial.drain(..=end).collect();
                            for shown in markdown.line(line.trim_end_matches('\n')) {
                                writeln!(out, "{shown}")?;
                            }
                        }
                    } else {
                        write!(out, "{}", safe_lines(&delta))?;
                        self.at_line_start = delta.ends_with('\n');
                    }
                    out.flush()?;
                }
                Ok(())
            }
            EventView::ToolCall(call) => {
                let args = parse_arguments_text(&call.arguments);
                self.call(out, presenters, ("", &call.call_id), &call.name, &args)?;
                self.pending.insert(call.call_id, args);
                Ok(())
            }
            EventView::ToolCodeDispatchStart(sub) => self.call(
                out,
                presenters,
                ("  ", &sub.sub_call_id),
                &sub.name,
                &sub.arguments,
            ),
            EventView::ToolCodeDispatch(sub) => self.result(
                out,
                presenters,
                ("  ", &sub.sub_call_id),
                (&sub.name, &sub.arguments),
                (&sub.content, sub.is_error, None),
            ),
            EventView::ToolResult(result) => {
                let args = self.pending.remove(&result.call_id).unwrap_or(Value::Null);
                self.result(
                    out,
                    presenters,
                    ("", &result.call_id),
                    (&result.name, &args),
                    (&result.content, result.is_error, result.code.as_deref()),
                )
            }
            EventView::TurnEnd(end) => self.turn_end(end, out, err),
            EventView::Compaction(c) => {
                self.newline(out)?;
                write_compaction(c.trigger, c.messages, &c.summary, self.style, out)
            }
            // A hook that failed, timed out or was not trusted is told; its decisions are logged.
            EventView::HookRun(h)
                if matches!(h.decision.as_str(), "error" | "timeout" | "untrusted") =>
            {
                let why = h.reason.as_deref().unwrap_or(&h.decision);
                writeln!(
                    err,
                    "cordis: {} hook `{}`: {}",
                    h.event,
                    safe(&h.command),
                    safe(why)
                )
            }
            EventView::ToolApproval(_) | EventView::HookRun(_) => Ok(()),
            // Not shown: the user's own input, the loop's bookkeeping, the assembled message
            // (its chunks were streamed), approvals (asked on their own) and session settings.
            // Unknown kinds and payloads that do not fit their kind are skipped too (the log is
            // checked on its own; the transcript only shows it).
            EventView::TurnStart(_)
            | EventView::UserMessage(_)
            | EventView::StepStart(_)
            | EventView::RequestHeader(_)
            | EventView::AssistantMessage(_)
            | EventView::StepEnd(_)
            | EventView::AgentPresetSelected(_)
            | EventView::PermissionsMode(_)
            | EventView::PermissionsRevoke(_)
            | EventView::Unknown { .. }
            | EventView::Malformed(_) => Ok(()),
        }
    }

    /// Ends the turn's output; a turn that did not complete says why on `err`.
    fn turn_end(
        &mut self,
        end: TurnEndData,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> std::io::Result<()> {
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
            TurnEndReason::Budget { message } => {
                writeln!(err, "cordis: turn {turn} stopped: {}", safe_lines(&message))?;
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

/// Writes transcript items (a page of [`crate::session::transcript`]) as the live run showed
/// them: `> ` before the user's lines, the answers, each call's line with its result under it,
/// notices in parentheses. Thoughts are left out, as the live run keeps them off stdout.
pub(crate) fn write_items(
    items: &[crate::session::transcript::Item],
    style: Style,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    use crate::session::transcript::Item;
    for item in items {
        match item {
            Item::User { text, .. } => {
                for line in text.lines() {
                    writeln!(out, "> {}", safe(line))?;
                }
            }
            Item::Assistant { text, .. } if text.trim().is_empty() => {}
            Item::Assistant { text, .. } => match style.width {
                Some(width) => {
                    let mut markdown = super::markdown::Markdown::new(width);
                    for line in text.trim_end().lines() {
                        for shown in markdown.line(line) {
                            writeln!(out, "{shown}")?;
                        }
                    }
                    for shown in markdown.finish() {
                        writeln!(out, "{shown}")?;
                    }
                }
                None => writeln!(out, "{}", safe_lines(text.trim_end()))?,
            },
            Item::Thought { .. } | Item::Usage { .. } => {}
            Item::Call(call) => write_call(call, "", style, out)?,
            // The call's result shows the list (its presenter's checklist).
            Item::Plan { .. } => {}
            Item::Compaction {
                trigger,
                messages,
                summary,
                ..
            } => write_compaction(*trigger, *messages, summary, style, out)?,
            Item::Notice { text, .. } => writeln!(out, "({})", safe_lines(text))?,
        }
    }
    Ok(())
}

/// A compaction: its line, then the summary the conversation goes on from, dimmed.
fn write_compaction(
    trigger: cordis_session::CompactionTrigger,
    messages: u64,
    summary: &str,
    style: Style,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let line = crate::session::transcript::compaction_line(trigger, messages);
    writeln!(out, "({line})")?;
    for l in summary.trim_end().lines() {
        writeln!(out, "  {}", style.paint("2", &safe(l)))?;
    }
    Ok(())
}

/// One call's line, its sub-calls indented under it, then its result.
fn write_call(
    call: &crate::session::transcript::Call,
    indent: &str,
    style: Style,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let line = call_line(&call.view, &call.name, &call.arguments);
    writeln!(
        out,
        "{indent}{} {}",
        style.paint("1", "⏺"),
        style.paint("1", &line)
    )?;
    for sub in &call.sub_calls {
        write_call(sub, "  ", style, out)?;
    }
    if let Some(result) = &call.result {
        let failed = result
            .is_error
            .then(|| result.code.as_deref().unwrap_or_default());
        let lines = result_lines(&result.view, &result.content, failed, style);
        for (i, line) in lines.iter().enumerate() {
            let lead = if i == 0 { "  ⎿ " } else { "    " };
            writeln!(out, "{indent}{}{line}", style.paint("2", lead))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_diff_result_is_folded_like_long_output() {
        let content: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let p = Presentation {
            title: "Write big.txt".into(),
            kind: ToolKind::Edit,
            input: Value::Null,
            card: Card::Diff {
                path: "big.txt".into(),
                old_text: None,
                new_text: content,
                first_line: None,
            },
            text: None,
            locations: Vec::new(),
        };
        let lines = result_lines(
            &p,
            &Value::Null,
            None,
            Style {
                color: false,
                width: None,
            },
        );
        assert_eq!(lines.len(), SHOWN_DIFF_LINES + 1, "{lines:?}");
        // 3 header lines and 100 added ones.
        assert_eq!(lines.last().unwrap(), "… 63 more lines");
    }

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
            "  ⏺ read_file {\"path\":\"a.txt\"}\n    ⎿ hello\n"
        );
        assert!(err.is_empty());
    }

    #[test]
    fn calls_are_their_presenters_titles_and_results_summaries_in_colour_when_asked() {
        let presenters = Presenters::standard();
        let mut t = Transcript::new(Style {
            color: true,
            width: None,
        });
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let call = serde_json::json!({"turn": 1, "step": 1, "callId": "c1", "name": "bash",
            "arguments": "{\"command\":\"seq 12\"}"});
        let output: String = (1..=12).map(|i| format!("{i}\n")).collect();
        let result = serde_json::json!({"turn": 1, "step": 1, "callId": "c1", "name": "bash",
            "content": {"exit_code": 0, "stdout": output, "stderr": ""}, "isError": false});
        for e in [event("tool/call", call), event("tool/result", result)] {
            t.event(&e, Some(&presenters), &mut out, &mut err).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(
                "\x1b[1m⏺\x1b[0m \x1b[1m$ seq 12\x1b[0m\n\x1b[2m  ⎿ \x1b[0mexit 0, 12 lines\n"
            ),
            "{text:?}"
        );
        // The first five lines, how many were left out, the last five.
        assert!(
            text.contains(
                "\x1b[0m5\n\x1b[2m    \x1b[0m… 2 lines left out …\n\x1b[2m    \x1b[0m8\n"
            ),
            "{text:?}"
        );
        assert!(text.ends_with("\x1b[0m12\n"), "{text:?}");
    }

    #[test]
    fn an_mcp_results_link_and_image_are_drawn_as_such_not_as_json() {
        let presenters = Presenters::standard();
        let mut t = Transcript::default();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let call = serde_json::json!({"turn": 1, "step": 1, "callId": "m1",
            "name": "mcp__fixture__links", "arguments": "{}"});
        let result = serde_json::json!({"turn": 1, "step": 1, "callId": "m1",
            "name": "mcp__fixture__links", "isError": false, "content": {"content": [
                {"type": "text", "text": "two things"},
                {"type": "resource_link", "uri": "file:///w/notes.md", "name": "notes.md"},
                {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}]}});
        for e in [event("tool/call", call), event("tool/result", result)] {
            t.event(&e, Some(&presenters), &mut out, &mut err).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "⏺ mcp__fixture__links {}\n  ⎿ two things\n    [link] file:///w/notes.md (notes.md)\n    [image image/png, 8 bytes]\n"
        );
    }
}
