//! The session picker: `cordis run --resume` without an id, and `/resume` without one, at a
//! terminal. Its rows are the sessions of this directory (its project) first, newest first,
//! then other directories' newest ones, [`RECENT_SESSIONS`] rows in all; each shows when it
//! was last written, its first message and its id (another directory's names it). Piped, the
//! listing is printed instead, as before.

use super::*;

use cordis_session::{ListQuery, SessionSummary};
use std::time::SystemTime;

/// The picker's title.
const TITLE: &str = "cordis: resume which session? (↑/↓ move, Enter resumes, Esc leaves)";

/// The sessions the picker offers: this directory's first, then the others', newest first.
async fn pickable(root: &Context, args: &RunArgs) -> Result<Vec<SessionSummary>, String> {
    let store = super::super::sessions::store_of(root, &args.config.file)?;
    let project = crate::session::open::project_dir().unwrap_or_default();
    let mut rows = store
        .list(ListQuery::first(RECENT_SESSIONS).cwd(&project))
        .await
        .map_err(|e| e.to_string())?
        .sessions;
    let others = store
        .recent(RECENT_SESSIONS * 2)
        .await
        .map_err(|e| e.to_string())?;
    for other in others {
        if rows.len() >= RECENT_SESSIONS {
            break;
        }
        if !rows.iter().any(|r| r.id == other.id) {
            rows.push(other);
        }
    }
    Ok(rows)
}

/// How long ago `then` was, in a few characters (`just now`, `5 min ago`, `3 h ago`, `2 d ago`).
fn ago(then: SystemTime, now: SystemTime) -> String {
    let secs = now.duration_since(then).map_or(0, |d| d.as_secs());
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86_400),
    }
}

/// One row of the picker.
fn row(summary: &SessionSummary, project: &str, now: SystemTime) -> String {
    let first = safe(summary.title.as_deref().unwrap_or("(no message)")).into_owned();
    let place = match summary.cwd.as_deref() {
        Some(cwd) if cwd != project => format!(" · {}", safe(cwd)),
        _ => String::new(),
    };
    format!(
        "{:<10}  {first}  ({}{place})",
        ago(summary.modified, now),
        safe(&summary.id)
    )
}

/// The picker's rows for `sessions`.
fn rows(sessions: &[SessionSummary]) -> Vec<String> {
    let project = crate::session::open::project_dir().unwrap_or_default();
    let now = SystemTime::now();
    sessions.iter().map(|s| row(s, &project, now)).collect()
}

/// Whether a picker can be shown: keys are read from a terminal and it is drawn on one.
pub(super) fn at_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdin())
        && std::io::IsTerminal::is_terminal(&std::io::stderr())
}

/// `cordis run --resume` at a terminal: the session chosen (`Ok(None)`: none to choose from
/// or Esc, already said), or the exit code of a failure to list them (already said).
pub(super) async fn pick_at_start(
    root: &Context,
    args: &RunArgs,
    color: bool,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<Option<String>, u8>> {
    let sessions = match pickable(root, args).await {
        Ok(sessions) => sessions,
        Err(why) => {
            writeln!(io.err, "cordis: {why}")?;
            return Ok(Err(EXIT_CONFIG));
        }
    };
    if sessions.is_empty() {
        return Ok(Ok(None));
    }
    io.err.flush()?;
    let shown = rows(&sessions);
    let chosen = tokio::task::spawn_blocking(move || {
        super::super::terminal::picker::pick(TITLE, shown, color)
    })
    .await??;
    Ok(Ok(chosen.map(|i| sessions[i].id.clone())))
}

impl Conversation<'_> {
    /// `/resume` without an id: a picker at a terminal (the session chosen is resumed), else
    /// the listing.
    pub(super) async fn pick_session(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
        if !matches!(self.input, Input::Terminal(_)) {
            return self.list_sessions(io).await;
        }
        let sessions = match pickable(&self.root, self.args).await {
            Ok(sessions) => sessions,
            Err(why) => {
                writeln!(io.err, "cordis: {why}")?;
                return Ok(());
            }
        };
        if sessions.is_empty() {
            writeln!(io.err, "cordis: no session to resume yet")?;
            return Ok(());
        }
        io.err.flush()?;
        let color = self.transcript.style().color;
        let Input::Terminal(terminal) = &mut self.input else {
            return Ok(());
        };
        let id = terminal.pick(TITLE.to_owned(), rows(&sessions), color);
        let choice = loop {
            match self.input.next().await {
                Some(Event::Picked { id: picked, choice }) if picked == id => break choice,
                Some(Event::Ahead(typed)) => self.queue_typed_ahead(typed, io)?,
                Some(Event::Eof) | None => {
                    self.exiting = true;
                    return Ok(());
                }
                Some(_) => {}
            }
        };
        match choice {
            Some(i) => {
                let choice = SessionChoice::Resume(sessions[i].id.clone());
                self.switch_session(choice, io).await
            }
            None => {
                writeln!(io.err, "cordis: no session chosen; staying on this one")?;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ages_read_in_the_largest_whole_unit() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |secs| now - Duration::from_secs(secs);
        assert_eq!(ago(at(5), now), "just now");
        assert_eq!(ago(at(300), now), "5 min ago");
        assert_eq!(ago(at(7200), now), "2 h ago");
        assert_eq!(ago(at(200_000), now), "2 d ago");
        assert_eq!(ago(now + Duration::from_secs(9), now), "just now");
    }
}
