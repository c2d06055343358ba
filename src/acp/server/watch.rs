//! `cordis acp --watch`: an edit of the config file reaches new sessions at once and open
//! ones between prompts.

use super::{Server, note};

impl<'c> Server<'c> {
    /// The file changed: a valid edit becomes the composition's text and every open session is
    /// marked to reload; an invalid one is reported and changes nothing.
    pub(super) async fn file_changed(&mut self) {
        let file = self.composition.file.clone();
        let source = match tokio::fs::read_to_string(&file).await {
            Ok(s) => s,
            Err(e) => {
                note(&format!(
                    "cannot read {file}: {e}; sessions keep the last good configuration"
                ));
                return;
            }
        };
        if source == self.composition.source() {
            return;
        }
        match self.composition.adopt(source).await {
            Ok(()) => {
                note(&format!(
                    "{file} changed: new sessions boot it; {} open session(s) reload it between prompts",
                    self.sessions.len()
                ));
                for live in self.sessions.values_mut() {
                    live.stale = true;
                }
            }
            Err(errors) => {
                let lines: Vec<String> =
                    errors.diagnostics().iter().map(|d| d.to_string()).collect();
                let widens = errors
                    .diagnostics()
                    .iter()
                    .all(|d| matches!(d.problem, cordis_host::diagnostic::Problem::Widens { .. }));
                let why = if widens {
                    "would let more run without a question; new and open sessions keep the last configuration"
                } else {
                    "does not load; sessions keep the last good configuration"
                };
                note(&format!("{file} changed but {why}:\n{}", lines.join("\n")));
            }
        }
    }

    /// Reloads every stale session that is idle (see [`Live::stale`]).
    pub(super) async fn refresh_stale(&mut self) {
        let ids: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, live)| live.stale && live.busy.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Some(live) = self.sessions.get_mut(&id) else {
                continue;
            };
            live.stale = false;
            match self.composition.refresh(&mut live.booted, &id).await {
                Ok(summary) => note(&format!("session {id}: {summary}")),
                Err(e) => note(&format!(
                    "session {id}: the reload failed ({}); it keeps running",
                    e.message
                )),
            }
        }
    }
}
