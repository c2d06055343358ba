//! Watching a config file for `--watch`: filesystem events on its directory, debounced.
//!
//! The directory is watched, not the file, because editors save by writing a new file and
//! renaming it over the old one, which ends a watch on the old inode.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// Quiet time after the last event before a burst of writes counts as one change.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// Reports changes of one file.
pub struct ConfigWatcher {
    _watcher: RecommendedWatcher,
    events: mpsc::UnboundedReceiver<()>,
}

impl ConfigWatcher {
    /// Starts watching `path`.
    ///
    /// # Errors
    /// When the directory cannot be watched (missing, or the system's watch limit is reached).
    pub fn new(path: &Path) -> notify::Result<ConfigWatcher> {
        let path: PathBuf = if path.is_absolute() {
            path.to_owned()
        } else {
            std::env::current_dir()?.join(path)
        };
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_owned);
        let name = path.file_name().map(ToOwned::to_owned);
        let (tx, events) = mpsc::unbounded_channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                if event.kind.is_access() {
                    return;
                }
                if event.paths.iter().any(|p| p.file_name() == name.as_deref()) {
                    let _ = tx.send(());
                }
            })?;
        watcher.watch(&dir, RecursiveMode::NonRecursive)?;
        Ok(ConfigWatcher {
            _watcher: watcher,
            events,
        })
    }

    /// Waits for the next change, then for [`DEBOUNCE`] of quiet; `None` if watching stopped.
    ///
    /// # Cancel safety
    /// Cancel safe: an event already received is not lost, the next call sees the change.
    pub async fn changed(&mut self) -> Option<()> {
        self.events.recv().await?;
        loop {
            match tokio::time::timeout(DEBOUNCE, self.events.recv()).await {
                Ok(Some(())) => continue,
                Ok(None) => return None,
                Err(_) => return Some(()),
            }
        }
    }
}
