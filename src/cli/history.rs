//! `cordis history`: one page of a session's history, read the way a client reads it.
//!
//! The command boots the composition (as `cordis call` does) and asks its `history` service
//! (one is built over the composition when no entry provides it): the live session if the
//! composition has it open, else the log on disk, read without resuming an agent or taking the
//! session's lock, so it works while `cordis run` is writing the session in another process.

use clap::Args;
use cordis_history::{History, HistoryError, HistoryPage};
use cordis_presenter::Presenters;
use cordis_runtime::Schedule;
use cordis_session::SessionStore;
use cordis_tool_todo::{Todo, TodoStatus};
use serde::Deserialize;
use serde_json::Value;

use super::render::{safe, safe_lines};
use super::transcript::{Style, write_items};
use super::{ConfigArgs, EXIT_CONFIG, EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_OK, Exit, Io};
use crate::session::transcript::TranscriptPage;

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
    /// Colour the transcript: auto (a terminal without NO_COLOR), always or never.
    #[arg(long, value_enum, default_value_t = super::ColorChoice::Auto)]
    pub color: super::ColorChoice,
}

pub(crate) fn run(
    args: &HistoryArgs,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<u8> {
    let style = Style::for_stdout(match args.color {
        super::ColorChoice::Always => true,
        super::ColorChoice::Never => false,
        super::ColorChoice::Auto => {
            std::io::IsTerminal::is_terminal(&std::io::stdout()) && !super::no_color(io.env)
        }
    });
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
        let presenters = root.get::<Presenters>();
        root.dispose();
        match page {
            Ok(page) => {
                if args.json {
                    writeln!(io.out, "{}", serde_json::to_string_pretty(&page)?)?;
                } else {
                    print_page(&args.session, &page, presenters.as_deref(), style, io)?;
                }
                Ok(EXIT_OK)
            }
            Err(HistoryError::NotFound { session }) => {
                writeln!(
                    io.err,
                    "cordis: no session \"{}\"{} (`{} run` prints the id of each new session)",
                    safe(&session),
                    safe(&where_),
                    super::program::name()
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

/// The page for a person: its transcript as `cordis run` showed it live (messages, each call's
/// line with its result under it), then where the page sits and how to read further back.
fn print_page(
    session: &str,
    page: &HistoryPage,
    presenters: Option<&Presenters>,
    style: Style,
    io: &mut Io<'_>,
) -> std::io::Result<()> {
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
    let transcript = TranscriptPage::of(page, presenters);
    write_items(&transcript.items, style, io.out)?;
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
            "older events: {} history {} --before {}",
            super::program::name(),
            safe(session),
            first.event.seq
        )?;
    }
    Ok(())
}
