//! `cordis history`: one page of a session's history, read the way a client reads it.
//!
//! The command boots the composition (as `cordis call` does) and asks its `history` service
//! (one is built over the composition when no entry provides it): the live session if the
//! composition has it open, else the log on disk, read without resuming an agent or taking the
//! session's lock, so it works while `cordis run` is writing the session in another process.

use clap::Args;
use cordis_history::{History, HistoryEntry, HistoryError, HistoryPage, ViewFor};
use cordis_presenter::{Card, render_card};
use cordis_runtime::Schedule;
use cordis_session::{EventView, SessionStore, TurnEndReason};
use cordis_tool_todo::{Todo, TodoStatus};
use serde::Deserialize;
use serde_json::Value;

use super::render::{safe, safe_lines};
use super::{ConfigArgs, EXIT_CONFIG, EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_OK, Exit, Io};

/// Arguments of `cordis history`: `ID [FILE]`.
#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// The session id (as `cordis run` printed it).
    #[arg(value_name = "ID")]
    pub session: String,
    /// What to boot.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Page back: only events before this seq (the first seq of the page you have).
    #[arg(long = "before", value_name = "SEQ")]
    pub before: Option<u64>,
    /// How many user and assistant messages the page holds [default: 50].
    #[arg(long = "max", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max: Option<u64>,
    /// Print the page as one JSON object (`{events: [{event, view?}], hasMore, projections?}`).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(
    args: &HistoryArgs,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<u8> {
    let rt = cordis_host::shutdown::current_thread()?;
    let result = rt.block_on(async {
        let schedule = Schedule::new(cordis_runtime::Policy::Fifo, 0);
        let (live, _report) = super::boot_live(&args.config, schedule, io, builtins).await?;
        let root = live.root().clone();
        let Some(store) = root.get::<SessionStore>() else {
            let why = super::sessions::no_sessions_entry(&args.config.file);
            writeln!(io.err, "cordis: {why}")?;
            root.dispose();
            return Err(Exit(EXIT_CONFIG).into());
        };
        let where_ = store.root().map_or_else(
            || {
                " (the `sessions` entry keeps sessions in memory: remove its `memory: true`)"
                    .to_owned()
            },
            |dir| format!(" under {}", dir.display()),
        );
        let history = History::of(&root);
        let max = args.max.map(|m| usize::try_from(m).unwrap_or(usize::MAX));
        let page = history.history(&args.session, args.before, max).await;
        root.dispose();
        match page {
            Ok(page) => {
                if args.json {
                    writeln!(io.out, "{}", serde_json::to_string_pretty(&page)?)?;
                } else {
                    print_page(&args.session, &page, io)?;
                }
                Ok(EXIT_OK)
            }
            Err(HistoryError::NotFound { session }) => {
                writeln!(
                    io.err,
                    "cordis: no session \"{}\"{} (`cordis run` prints the id of each new session)",
                    safe(&session),
                    safe(&where_)
                )?;
                Ok(EXIT_NOT_FOUND)
            }
            Err(e @ HistoryError::Internal { .. }) => {
                writeln!(io.err, "cordis: {}", safe_lines(&e.to_string()))?;
                Ok(EXIT_FAILURE)
            }
        }
    });
    cordis_host::shutdown::end(rt);
    result
}

/// `s` on one line, made safe for a terminal, cut after `max` characters.
fn clip(s: &str, max: usize) -> String {
    let one_line = safe(s);
    if one_line.chars().count() > max {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    } else {
        one_line.into_owned()
    }
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The page for a person: messages as `cordis run` shows them, tool calls as cards, then
/// where the page sits and how to read further back.
fn print_page(session: &str, page: &HistoryPage, io: &mut Io<'_>) -> std::io::Result<()> {
    let (Some(first), Some(last)) = (page.events.first(), page.events.last()) else {
        writeln!(io.out, "session {}: no events", safe(session))?;
        return Ok(());
    };
    writeln!(
        io.out,
        "session {}: events {}..={}",
        safe(session),
        first.event.seq,
        last.event.seq
    )?;
    for entry in &page.events {
        print_entry(entry, io.out)?;
    }
    if let Some(p) = &page.projections {
        if let Some(preset) = p.values.get("agentPreset").and_then(Value::as_str) {
            writeln!(io.out, "preset: {}", safe(preset))?;
        }
        // A value that is not a todo list (another tool's `todo_write`) is not shown.
        if let Some(Ok(todos)) = p.values.get("todos").map(Vec::<Todo>::deserialize) {
            writeln!(io.out, "todos:")?;
            for todo in todos {
                let mark = match todo.status {
                    TodoStatus::Completed => "[x]",
                    TodoStatus::InProgress => "[~]",
                    TodoStatus::Pending => "[ ]",
                };
                writeln!(io.out, "  {mark} {}", clip(&todo.content, 200))?;
            }
        }
    }
    if page.has_more {
        writeln!(
            io.out,
            "older events: cordis history {} --before {}",
            safe(session),
            first.event.seq
        )?;
    }
    Ok(())
}

/// One event of a page, as `cordis run` shows it (events that are not messages, calls,
/// results, preset switches or failed turns print nothing).
pub(crate) fn print_entry(
    entry: &HistoryEntry,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match entry.event.view() {
        EventView::UserMessage(user) => {
            for line in user.content.lines() {
                writeln!(out, "> {}", safe(line))?;
            }
        }
        EventView::AssistantMessage(message) => {
            if !message.content.is_empty() {
                writeln!(out, "{}", safe_lines(message.content.trim_end()))?;
            }
        }
        EventView::ToolCall(call) => {
            match entry.view.as_ref().filter(|v| v.for_ == ViewFor::Call) {
                Some(view) => writeln!(
                    out,
                    "[call {}] {}",
                    safe(&call.name),
                    clip(&view.view.title, 160)
                )?,
                None => writeln!(
                    out,
                    "[call {} {}]",
                    safe(&call.name),
                    clip(&call.arguments, 160)
                )?,
            }
        }
        EventView::ToolResult(result) => {
            let content = text_of(&result.content);
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
            if let Some(view) = entry.view.as_ref().filter(|v| v.for_ == ViewFor::Result)
                && !matches!(view.view.card, Card::Generic)
            {
                for line in render_card(&view.view.card).lines() {
                    writeln!(out, "  {}", safe(line))?;
                }
            }
        }
        EventView::AgentPresetSelected(switch) => {
            writeln!(out, "(switched to preset {})", safe(&switch.agent_preset))?;
        }
        EventView::PermissionsMode(mode) => {
            writeln!(out, "(permission mode {})", safe(&mode.mode))?;
        }
        EventView::PermissionsRevoke(revoked) => {
            let grant = &revoked.grant;
            let command = grant
                .command
                .as_deref()
                .map(|c| format!(" `{c}`"))
                .unwrap_or_default();
            writeln!(
                out,
                "(revoked the grant {}{})",
                safe(&grant.tool),
                safe(&command)
            )?;
        }
        EventView::TurnEnd(end) => {
            let turn = end.turn;
            match end.reason {
                TurnEndReason::Completed => {}
                TurnEndReason::Error { step, message } => writeln!(
                    out,
                    "(turn {turn} failed at step {step}: {})",
                    safe_lines(&message)
                )?,
                TurnEndReason::MaxSteps { steps } => {
                    writeln!(out, "(turn {turn} stopped after {steps} steps)")?;
                }
                TurnEndReason::Aborted { reason } => writeln!(
                    out,
                    "(turn {turn} aborted{})",
                    reason
                        .map(|r| format!(": {}", safe(&r)))
                        .unwrap_or_default()
                )?,
                TurnEndReason::Disposed => writeln!(out, "(turn {turn} ended: agent disposed)")?,
                TurnEndReason::Interrupted => {
                    writeln!(out, "(turn {turn} interrupted: the process ended)")?;
                }
            }
        }
        // Not shown: the loop's bookkeeping, the stream (the message holds its text),
        // approvals and `run_code` sub-calls. Unknown kinds and payloads that do not fit their
        // kind are skipped too (the JSON output has them as logged).
        EventView::TurnStart(_)
        | EventView::StepStart(_)
        | EventView::RequestHeader(_)
        | EventView::AssistantChunk(_)
        | EventView::ToolApproval(_)
        | EventView::ToolCodeDispatchStart(_)
        | EventView::ToolCodeDispatch(_)
        | EventView::StepEnd(_)
        | EventView::Unknown { .. }
        | EventView::Malformed(_) => {}
    }
    Ok(())
}
