//! Following sessions live, whichever process writes them. The log is the source of truth:
//! a session open in another process (a terminal run, an editor) is watched by watching its
//! log file, so a page shows its new turns, and new sessions, as they are written.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::Notify;

/// How often the sessions written meanwhile are told, at most: a turn writes many events in a
/// burst, and a page redraws once per tick.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// The sessions whose logs changed since the last [`Follower::changed`], by id; a set, so
/// however fast logs are written it holds one entry per session.
#[derive(Default)]
struct Pending {
    ids: Mutex<BTreeSet<String>>,
    wake: Notify,
}

/// Watches a sessions root (`<root>/<id>.jsonl`); dropping it stops the watch.
pub struct Follower {
    _watcher: RecommendedWatcher,
    pending: Arc<Pending>,
    root: PathBuf,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// The session a path under the root is the log of.
fn session_of(path: &Path) -> Option<String> {
    if path.extension()? != "jsonl" {
        return None;
    }
    let id = path.file_stem()?.to_str()?;
    cordis_session::check_id(id).ok()?;
    Some(id.to_owned())
}

impl Follower {
    /// Starts watching `root` (created, owner-only, when it does not exist yet: the store
    /// creates it on its first session anyway).
    ///
    /// # Errors
    /// The directory cannot be created or watched (the system's watch limit, say).
    pub fn start(root: &Path) -> notify::Result<Follower> {
        if !root.is_dir() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(root)
                .map_err(notify::Error::io)?;
        }
        let pending = Arc::new(Pending::default());
        let told = pending.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                if event.kind.is_access() {
                    return;
                }
                let ids: Vec<String> = event.paths.iter().filter_map(|p| session_of(p)).collect();
                if ids.is_empty() {
                    return;
                }
                cordis_runtime::lock(&told.ids).extend(ids);
                told.wake.notify_one();
            })?;
        watcher.watch(root, RecursiveMode::NonRecursive)?;
        Ok(Follower {
            _watcher: watcher,
            pending,
            root: root.to_owned(),
        })
    }

    /// The sessions written since the last call, in id order, once there is at least one; at
    /// most once per [`TICK`].
    ///
    /// # Cancel safety
    /// Cancel safe: ids are taken only after the last await.
    pub async fn changed(&self) -> Vec<String> {
        loop {
            self.pending.wake.notified().await;
            tokio::time::sleep(TICK).await;
            let ids = std::mem::take(&mut *cordis_runtime::lock(&self.pending.ids));
            if !ids.is_empty() {
                return ids.into_iter().collect();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_log_written_by_anyone_is_told_once_per_tick_by_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        let follower = Follower::start(&root).unwrap();
        std::fs::write(root.join("s1.jsonl"), "{}\n").unwrap();
        std::fs::write(root.join("s1.jsonl.lock"), "").unwrap();
        std::fs::write(root.join("notes.txt"), "").unwrap();
        for _ in 0..50 {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(root.join("s1.jsonl"))
                .unwrap();
            writeln!(f, "{{}}").unwrap();
        }
        let changed = tokio::time::timeout(std::time::Duration::from_secs(10), follower.changed())
            .await
            .expect("the write is told");
        assert_eq!(changed, vec!["s1".to_owned()]);
    }
}
