//! `cordis sessions`: the sessions of a composition's `sessions` entry, newest first, and the
//! listing `cordis run --resume` (without an id) prints.

use clap::Args;
use cordis_runtime::Schedule;
use cordis_session::{SessionStore, SessionSummary};
use serde_json::json;

use super::render::safe;
use super::{ConfigArgs, EXIT_CONFIG, EXIT_OK, Exit, Io};

/// Arguments of `cordis sessions`: `[FILE]`.
#[derive(Debug, Clone, Args)]
pub struct SessionsArgs {
    /// What to boot.
    #[command(flatten)]
    pub config: ConfigArgs,
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

pub(crate) fn run(
    args: &SessionsArgs,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<u8> {
    let rt = cordis_host::shutdown::current_thread()?;
    let result = rt.block_on(async {
        let schedule = Schedule::new(cordis_runtime::Policy::Fifo, 0);
        let (live, _report) = super::boot_live(&args.config, schedule, io, builtins).await?;
        let root = live.root().clone();
        let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
        let listed = match store_of(&root, &args.config.file) {
            Ok(store) => {
                let mut query = cordis_session::ListQuery::first(limit);
                // As a session records it: absolute, as given (a relative DIR is taken from
                // here).
                query.cwd = args.cwd.as_deref().map(crate::session::open::as_project);
                store
                    .list(query)
                    .await
                    .map(|page| page.sessions)
                    .map_err(|e| e.to_string())
            }
            Err(why) => Err(why),
        };
        root.dispose();
        let sessions = match listed {
            Ok(s) => s,
            Err(why) => {
                writeln!(io.err, "cordis: {why}")?;
                return Err(Exit(EXIT_CONFIG).into());
            }
        };
        if args.json {
            let rows: Vec<serde_json::Value> = sessions
                .iter()
                .map(|s| {
                    let created =
                        std::time::UNIX_EPOCH + std::time::Duration::from_millis(s.created_at);
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
                })
                .collect();
            writeln!(io.out, "{}", serde_json::Value::Array(rows))?;
        } else if sessions.is_empty() {
            writeln!(io.err, "cordis: no sessions yet; `cordis run` starts one")?;
        } else {
            write!(io.out, "{}", lines(&sessions))?;
        }
        Ok(EXIT_OK)
    });
    cordis_host::shutdown::end(rt);
    result
}
