//! `cordis sessions`: the sessions of a composition's `sessions` entry, newest first, and the
//! listing `cordis run --resume` (without an id) prints; `--grep` searches their messages,
//! `sessions check` proves a session's cache-prefix contract and `sessions export` turns a
//! session into an exercise script.

use clap::{Args, Subcommand};
use cordis_runtime::Schedule;
use cordis_session::index::{GrepQuery, GrepResult};
use cordis_session::{SessionError, SessionSource, SessionStore, SessionSummary};
use serde_json::json;

use super::render::{safe, safe_lines};
use super::{ConfigArgs, EXIT_CONFIG, EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_OK, Exit, Io};

/// Arguments of `cordis sessions`: `[FILE]`, or a subcommand.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SessionsArgs {
    /// Check or export one session instead of listing.
    #[command(subcommand)]
    pub action: Option<SessionsAction>,
    /// What to boot.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Only the sessions whose user or assistant messages contain TEXT (case-insensitive),
    /// newest first, each with its first match. At most --limit are shown; the output says when
    /// more match. Logs are read line by line (a message line over 4 MiB is not searched).
    #[arg(long, value_name = "TEXT")]
    pub grep: Option<String>,
    /// How many sessions to list, newest first.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Only the sessions started in this working directory (as their logs record it).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<std::path::PathBuf>,
    /// Print a JSON array (`[{id, cwd, created, modified, title, preset, model, turns}]`,
    /// times in UTC).
    #[arg(long)]
    pub json: bool,
}

/// What `cordis sessions` does with one session.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionsAction {
    /// Prove session ID's cache-prefix contract: each request's bytes extend the previous
    /// request's bytes, unless the log says why.
    ///
    /// Every request the log implies is rebuilt (one per step: the latest request/header's
    /// config, system prompt and tools, then the messages the log derives up to the step) and
    /// serialized in the order sent (config, system prompt, tools, messages, one JSON line
    /// each). A request that does not extend its predecessor holds the contract only when a
    /// request/header is logged for it with a reason that is true of the log: `initial` (the
    /// first request), `resume` (a new loop picked the log up), `change` (its header differs),
    /// `compaction` (a compaction event precedes it) or `fork` (the first request of a fork).
    ///
    /// Exits 0 when the contract holds (printing how many requests were checked), 1 naming the
    /// first request that breaks it (its number, step/start seq, turn and step) and the first
    /// differing byte with both sides, or a reason that explains nothing; 4 when the session
    /// does not exist; 2 on configuration errors.
    Check(SessionIdArgs),
    /// Write session ID as an exercise script, so `cordis stress FILE --exercise OUT` replays
    /// it deterministically (in CI, say).
    ///
    /// The script holds the user's turns and the model's responses in the scripted format
    /// (docs/scripted-model.md), one per model request in log order: each step's streamed
    /// text and reasoning deltas, its tool calls with their ids and arguments verbatim, its
    /// usage and how it finished, and each compaction's summary. The tools run again in the
    /// replay. Exits 0 when OUT is written, 4 when the session does not exist, 1 when it
    /// cannot be read or OUT cannot be written, 2 on configuration errors.
    Export(ExportArgs),
}

/// Arguments naming one session: `ID [FILE]`.
#[derive(Debug, Clone, Args)]
pub struct SessionIdArgs {
    /// The session id (as `cordis run` printed it).
    #[arg(value_name = "ID")]
    pub session: String,
    /// What to boot.
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// Arguments of `cordis sessions export`: `ID [FILE] --exercise OUT`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// The session.
    #[command(flatten)]
    pub session: SessionIdArgs,
    /// Where to write the exercise script (JSON, which exercise scripts read like YAML).
    #[arg(long, value_name = "OUT", required = true)]
    pub exercise: std::path::PathBuf,
}

pub(crate) use crate::session::id::{civil, iso8601};

/// When a session was last written, as `YYYY-MM-DD HH:MM UTC`.
fn when(summary: &SessionSummary) -> String {
    let ms = summary
        .modified
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let (y, m, d, hh, mm, _) = civil(ms);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02} UTC")
}

/// The listing: one line per session (id, when, turns, title).
pub(crate) fn lines(sessions: &[SessionSummary]) -> String {
    let width = sessions
        .iter()
        .map(|s| s.id.len())
        .max()
        .unwrap_or(2)
        .max(2);
    let mut text = format!(
        "{:<width$}  {:<20}  TURNS  FIRST MESSAGE\n",
        "ID", "LAST WRITTEN"
    );
    for s in sessions {
        text.push_str(&format!(
            "{:<width$}  {:<20}  {:>5}  {}\n",
            safe(&s.id),
            when(s),
            s.turns,
            safe(s.title.as_deref().unwrap_or("(no message)"))
        ));
    }
    text
}

/// Why `file` has no session logs at all, and the row that gives it some.
pub(crate) fn no_sessions_entry(file: &std::path::Path) -> String {
    format!(
        "{} has no `sessions` entry, so it keeps no session logs: add {{id: sessions, name: sessions}} (logs go under the state directory)",
        file.display()
    )
}

/// The store of the booted composition, or a message saying why there is none.
pub(crate) fn store_of(
    root: &cordis_runtime::Context,
    file: &std::path::Path,
) -> Result<std::sync::Arc<SessionStore>, String> {
    let store = root
        .get::<SessionStore>()
        .ok_or_else(|| no_sessions_entry(file))?;
    if store.root().is_none() {
        return Err(format!(
            "the `sessions` entry of {} keeps sessions in memory (`memory: true`): remove it to keep them on disk",
            file.display()
        ));
    }
    Ok(store)
}

/// The `limit` sessions of the booted composition most recently written, newest first, or a
/// message saying why they cannot be listed.
pub(crate) async fn recent(
    root: &cordis_runtime::Context,
    file: &std::path::Path,
    limit: usize,
) -> Result<Vec<cordis_session::SessionSummary>, String> {
    store_of(root, file)?
        .recent(limit)
        .await
        .map_err(|e| e.to_string())
}

/// One session's log, as read.
struct Log {
    header: cordis_session::SessionHeader,
    events: Vec<cordis_session::SessionEvent>,
    /// Where WebAssembly tools' responses are kept for replays (`cordis_wasm::http`).
    kept: Option<std::path::PathBuf>,
}

/// A session's log as it is on disk (or in this process), or the exit code that says why not,
/// already explained on stderr.
async fn read_session(
    root: &cordis_runtime::Context,
    args: &SessionIdArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<Log, u8>> {
    let store = match store_of(root, &args.config.file) {
        Ok(store) => store,
        Err(why) => {
            writeln!(io.err, "cordis: {why}")?;
            return Ok(Err(EXIT_CONFIG));
        }
    };
    let kept = store.root().map(|r| r.join(cordis_wasm::http::KEPT_DIR));
    match store.source(&args.session).await {
        Ok(SessionSource::Detached(snapshot)) => Ok(Ok(Log {
            header: snapshot.header().clone(),
            events: snapshot.events().to_vec(),
            kept,
        })),
        Ok(SessionSource::Attached(session)) => Ok(Ok(Log {
            header: session.header().clone(),
            events: session.events(),
            kept,
        })),
        Err(SessionError::NotFound { .. }) => {
            let root = store
                .root()
                .map_or_else(String::new, |r| format!(" in {}", r.display()));
            writeln!(
                io.err,
                "cordis: no session {}{root} (`{} sessions {}` lists them)",
                safe(&args.session),
                super::program::name(),
                args.config.file.display()
            )?;
            Ok(Err(EXIT_NOT_FOUND))
        }
        Err(e) => {
            writeln!(
                io.err,
                "cordis: session {}: {}",
                safe(&args.session),
                safe_lines(&e.to_string())
            )?;
            Ok(Err(EXIT_FAILURE))
        }
    }
}

/// `cordis sessions check`: the contract of one session.
fn check(snapshot: &Log, id: &str, io: &mut Io<'_>) -> anyhow::Result<u8> {
    match cordis_session::contract::check_contract(&snapshot.header, &snapshot.events) {
        Ok(report) => {
            writeln!(
                io.out,
                "session {}: the cache-prefix contract holds: {} requests checked, {} prefix breaks explained by the log",
                safe(id),
                report.requests,
                report.explained
            )?;
            Ok(EXIT_OK)
        }
        Err(e) => {
            writeln!(
                io.err,
                "cordis: session {} breaks the cache-prefix contract: {}",
                safe(id),
                safe_lines(&e.to_string())
            )?;
            Ok(EXIT_FAILURE)
        }
    }
}

/// `cordis sessions export --exercise OUT`.
fn export(snapshot: &Log, args: &ExportArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let script =
        match crate::exercise::export_script_kept(&snapshot.events, snapshot.kept.as_deref()) {
            Ok(script) => script,
            Err(e) => {
                writeln!(
                    io.err,
                    "cordis: session {}: {}",
                    safe(&args.session.session),
                    safe_lines(&e.to_string())
                )?;
                return Ok(EXIT_FAILURE);
            }
        };
    let mut text = serde_json::to_string_pretty(&script)?;
    text.push('\n');
    if let Err(e) = std::fs::write(&args.exercise, text) {
        writeln!(
            io.err,
            "cordis: cannot write {}: {e}",
            args.exercise.display()
        )?;
        return Ok(EXIT_FAILURE);
    }
    let count = |key: &str| script[key].as_array().map_or(0, Vec::len);
    writeln!(
        io.out,
        "wrote {} turns and {} model responses to {}; replay: {} stress {} --exercise {}",
        count("turns"),
        count("responses"),
        args.exercise.display(),
        super::program::name(),
        args.session.config.file.display(),
        args.exercise.display()
    )?;
    Ok(EXIT_OK)
}

/// `cordis sessions check|export`.
fn run_action(
    action: &SessionsAction,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<u8> {
    let ids = match action {
        SessionsAction::Check(ids) => ids,
        SessionsAction::Export(args) => &args.session,
    };
    let rt = cordis_host::shutdown::current_thread()?;
    let result = rt.block_on(async {
        let schedule = Schedule::new(cordis_runtime::Policy::Fifo, 0);
        let (live, _report) = super::boot_live(&ids.config, schedule, io, builtins).await?;
        let root = live.root().clone();
        let read = read_session(&root, ids, io).await;
        root.dispose();
        let snapshot = match read? {
            Ok(snapshot) => snapshot,
            Err(code) => return Err(Exit(code).into()),
        };
        match action {
            SessionsAction::Check(ids) => check(&snapshot, &ids.session, io),
            SessionsAction::Export(args) => export(&snapshot, args, io),
        }
    });
    cordis_host::shutdown::end(rt);
    result
}

/// `cordis sessions --grep TEXT`: prints the sessions found (or says none was).
fn print_hits(
    found: &GrepResult,
    args: &SessionsArgs,
    text: &str,
    io: &mut Io<'_>,
) -> anyhow::Result<()> {
    if args.json {
        let rows: Vec<serde_json::Value> = found
            .hits
            .iter()
            .map(|h| {
                let mut row = row(&h.summary);
                row["match"] = json!({"seq": h.seq, "role": h.role, "excerpt": h.excerpt});
                row
            })
            .collect();
        writeln!(io.out, "{}", serde_json::Value::Array(rows))?;
    } else if found.hits.is_empty() {
        writeln!(
            io.err,
            "cordis: no session's messages contain {:?} ({} sessions searched)",
            safe(text),
            found.searched
        )?;
    } else {
        let summaries: Vec<SessionSummary> = found.hits.iter().map(|h| h.summary.clone()).collect();
        let table = lines(&summaries);
        let mut rows = table.lines();
        if let Some(head) = rows.next() {
            writeln!(io.out, "{head}")?;
        }
        for (line, hit) in rows.zip(&found.hits) {
            writeln!(io.out, "{line}")?;
            writeln!(
                io.out,
                "    {} (seq {}): {}",
                hit.role,
                hit.seq,
                safe(&hit.excerpt)
            )?;
        }
    }
    if found.cut {
        writeln!(
            io.err,
            "cordis: more sessions match: showing the newest {} (--limit N shows more)",
            found.hits.len()
        )?;
    }
    Ok(())
}

/// One session as a JSON row (`--json`).
fn row(s: &SessionSummary) -> serde_json::Value {
    let created = std::time::UNIX_EPOCH + std::time::Duration::from_millis(s.created_at);
    json!({
        "id": s.id,
        "cwd": s.cwd,
        "created": iso8601(created),
        "modified": iso8601(s.modified),
        "title": s.title,
        "preset": s.preset,
        "model": s.model,
        "turns": s.turns,
    })
}

/// `cordis sessions --grep TEXT` once the store is known.
async fn grep(
    store: &SessionStore,
    args: &SessionsArgs,
    text: &str,
    limit: usize,
) -> Result<GrepResult, String> {
    let Some(dir) = store.root().map(std::path::Path::to_path_buf) else {
        return Ok(GrepResult::default());
    };
    let mut query = GrepQuery::new(text, limit);
    if let Some(cwd) = args.cwd.as_deref() {
        query = query.cwd(crate::session::open::as_project(cwd));
    }
    tokio::task::spawn_blocking(move || cordis_session::index::grep(&dir, &query))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

pub(crate) fn run(
    args: &SessionsArgs,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<u8> {
    if let Some(action) = &args.action {
        return run_action(action, io, builtins);
    }
    if args.grep.as_deref().is_some_and(str::is_empty) {
        writeln!(io.err, "cordis: --grep needs a text to search for")?;
        return Err(Exit(EXIT_CONFIG).into());
    }
    let rt = cordis_host::shutdown::current_thread()?;
    let result = rt.block_on(async {
        let schedule = Schedule::new(cordis_runtime::Policy::Fifo, 0);
        let (live, _report) = super::boot_live(&args.config, schedule, io, builtins).await?;
        let root = live.root().clone();
        let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
        let store = store_of(&root, &args.config.file);
        let listed = match (&store, args.grep.as_deref()) {
            (Ok(store), Some(text)) => grep(store, args, text, limit).await.map(Err),
            (Ok(store), None) => {
                let mut query = cordis_session::ListQuery::first(limit);
                // As a session records it: absolute, as given (a relative DIR is taken from
                // here).
                query.cwd = args.cwd.as_deref().map(crate::session::open::as_project);
                store
                    .list(query)
                    .await
                    .map(|page| Ok(page.sessions))
                    .map_err(|e| e.to_string())
            }
            (Err(why), _) => Err(why.clone()),
        };
        root.dispose();
        let sessions = match listed {
            Ok(Ok(s)) => s,
            Ok(Err(found)) => {
                print_hits(&found, args, args.grep.as_deref().unwrap_or_default(), io)?;
                return Ok(EXIT_OK);
            }
            Err(why) => {
                writeln!(io.err, "cordis: {why}")?;
                return Err(Exit(EXIT_CONFIG).into());
            }
        };
        if args.json {
            let rows: Vec<serde_json::Value> = sessions.iter().map(row).collect();
            writeln!(io.out, "{}", serde_json::Value::Array(rows))?;
        } else if sessions.is_empty() {
            writeln!(
                io.err,
                "cordis: no sessions yet; `{} run` starts one",
                super::program::name()
            )?;
        } else {
            write!(io.out, "{}", lines(&sessions))?;
        }
        Ok(EXIT_OK)
    });
    cordis_host::shutdown::end(rt);
    result
}
