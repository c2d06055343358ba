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

/// `ms` since the Unix epoch as a UTC civil time: (year, month, day, hour, minute, second).
pub(crate) fn civil(ms: u128) -> (i64, i64, i64, i64, i64, i64) {
    let secs = (ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A new session id no other process or call picks: `PREFIX-MS-PID-N` (milliseconds since the
/// epoch, this process, a counter), so two front ends sharing a sessions root never collide.
pub(crate) fn unique_session_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{ms}-{}-{n}", std::process::id())
}

/// A time as ISO 8601 in UTC, to the millisecond (`2026-12-02T15:51:16.123Z`).
pub(crate) fn iso8601(time: std::time::SystemTime) -> String {
    let ms = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let (y, m, d, hh, mm, ss) = civil(ms);
    format!(
        "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:03}Z",
        ms % 1000
    )
}

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
                query.cwd = args.cwd.as_ref().map(|dir| {
                    // As a session records it: absolute, as given (a relative DIR is taken
                    // from here).
                    std::path::absolute(dir)
                        .unwrap_or_else(|_| dir.clone())
                        .display()
                        .to_string()
                });
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
