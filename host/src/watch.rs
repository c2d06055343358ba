//! Watching a config file for `--watch`: filesystem events, debounced, checked against the
//! file's content.
//!
//! Editors save by writing a new file and renaming it over the old one, which ends a watch on
//! the old inode; a Kubernetes ConfigMap swaps a `..data` symlink, so the file's own name never
//! appears in an event; and a directory can be deleted and created again (or renamed away and
//! back), which silently ends a watch on it. So the watcher
//! - watches directories, not the file: the config's own directory and the directory of the
//!   file it resolves to through symlinks, and takes any event there as a hint;
//! - decides whether the config changed from a fingerprint of what the path resolves to
//!   (resolved path and content hash), never from event names;
//! - re-checks every [`POLL`] as well, re-establishes its watches when a watched directory is
//!   replaced or comes back, and says so ([`WatchNote::Interrupted`] / [`WatchNote::Resumed`])
//!   instead of silently following nothing.
//!
//! A config that includes other files (`cordis/include`, see [`crate::include`]) changes when
//! any of them does: the watcher finds the included files the way a load does (the same parse,
//! without an environment: include paths are literal), watches their directories too, and
//! fingerprints each. It finds them again whenever a fingerprint changes, so an include added
//! or removed by an edit is followed from that edit on. An included file that is missing or not
//! a regular file is part of the state (its appearance is a change; a reload then reports it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::config::dir_of;
use crate::include::IncludedFiles;

/// Quiet time after the last event before a burst of writes counts as one change.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// How often the watcher re-checks without an event (a missed or impossible event, a watched
/// directory that went away).
pub const POLL: Duration = Duration::from_millis(1000);

/// What [`ConfigWatcher::changed`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchNote {
    /// The file's content (or what its path resolves to) changed.
    Changed,
    /// Watching is interrupted, and why (the directory is gone, a watch could not be set).
    /// The watcher keeps re-checking and reports [`WatchNote::Resumed`] when it can again.
    Interrupted(String),
    /// Watching works again after an interruption.
    Resumed,
}

/// What the config path resolves to, to compare across events.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    resolved: PathBuf,
    /// Size, modification time and inode: when these are unchanged the content is not read
    /// again (the watcher re-checks every [`POLL`]).
    stamp: (u64, Option<std::time::SystemTime>, u64),
    sha256: [u8; 32],
}

/// The config file and every file it includes, as they are now.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    top: Fingerprint,
    /// Each included file as reached (sorted), and what it resolves to (`None`: missing or not
    /// a regular file).
    includes: Vec<(PathBuf, Option<Fingerprint>)>,
}

impl Snapshot {
    /// Whether the content differs: resolved paths and hashes, not timestamps.
    fn same_content(&self, other: &Snapshot) -> bool {
        let same =
            |a: &Fingerprint, b: &Fingerprint| a.resolved == b.resolved && a.sha256 == b.sha256;
        same(&self.top, &other.top)
            && self.includes.len() == other.includes.len()
            && self
                .includes
                .iter()
                .zip(&other.includes)
                .all(|((pa, a), (pb, b))| {
                    pa == pb
                        && match (a, b) {
                            (Some(a), Some(b)) => same(a, b),
                            (None, None) => true,
                            _ => false,
                        }
                })
    }
}

/// The identity of a watched directory, to notice it being replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DirId {
    path: PathBuf,
    dev_ino: Option<(u64, u64)>,
}

/// Reports changes of one file.
pub struct ConfigWatcher {
    path: PathBuf,
    tx: mpsc::UnboundedSender<()>,
    events: mpsc::UnboundedReceiver<()>,
    watcher: Option<RecommendedWatcher>,
    watched: Vec<DirId>,
    last: Option<Snapshot>,
    interrupted: bool,
}

/// `(dev, inode)` of a directory, when it exists.
fn dev_ino(path: &Path) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Some((0, 0))
    }
}

/// The directories to watch for `path`: its own, and its resolved target's when different.
fn dirs_for(path: &Path) -> Vec<PathBuf> {
    let own = path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned);
    let mut dirs = vec![own];
    if let Ok(resolved) = std::fs::canonicalize(path)
        && let Some(parent) = resolved.parent()
        && !dirs.iter().any(|d| d == parent)
    {
        dirs.push(parent.to_owned());
    }
    dirs
}

/// What `path` resolves to now; `None` when it is not a readable regular file (a FIFO planted
/// there is never opened, so it cannot hang the watcher). The content is read only when the
/// resolved path or its size, time or inode changed since `last`.
fn fingerprint(path: &Path, last: Option<&Fingerprint>) -> Option<Fingerprint> {
    let resolved = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&resolved).ok()?;
    if !meta.is_file() {
        return None;
    }
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    let stamp = (meta.len(), meta.modified().ok(), inode);
    if let Some(last) = last
        && last.resolved == resolved
        && last.stamp == stamp
    {
        return Some(last.clone());
    }
    let bytes = std::fs::read(&resolved).ok()?;
    Some(Fingerprint {
        resolved,
        stamp,
        sha256: Sha256::digest(&bytes).into(),
    })
}

/// The config at `path` and the files it includes, now; `None` when the config itself is not
/// a readable regular file. Included files are found again only when something changed since
/// `last`.
fn snapshot(path: &Path, last: Option<&Snapshot>) -> Option<Snapshot> {
    let top = fingerprint(path, last.map(|l| &l.top))?;
    let find = |old: &[(PathBuf, Option<Fingerprint>)], p: &Path| {
        old.iter()
            .find(|(q, _)| q == p)
            .and_then(|(_, f)| f.clone())
    };
    if let Some(last) = last {
        let again = Snapshot {
            top: top.clone(),
            includes: last
                .includes
                .iter()
                .map(|(p, f)| (p.clone(), fingerprint(p, f.as_ref())))
                .collect(),
        };
        if again.same_content(last) {
            return Some(again);
        }
    }
    let includes = match std::fs::read_to_string(&top.resolved) {
        Ok(text) => {
            let file = path.display().to_string();
            let files = IncludedFiles::read_ahead(&text, &file, dir_of(&file));
            let old = last.map_or(&[][..], |l| &l.includes[..]);
            files
                .paths()
                .into_iter()
                .map(|p| {
                    let f = fingerprint(&p, find(old, &p).as_ref());
                    (p, f)
                })
                .collect()
        }
        Err(_) => Vec::new(),
    };
    Some(Snapshot { top, includes })
}

impl ConfigWatcher {
    /// Starts watching `path`.
    ///
    /// # Errors
    /// When the file's directory cannot be watched now (missing, or the system's watch limit is
    /// reached): a watch that cannot start is a usage error, unlike one interrupted later.
    pub fn new(path: &Path) -> notify::Result<ConfigWatcher> {
        let path: PathBuf = if path.is_absolute() {
            path.to_owned()
        } else {
            std::env::current_dir()?.join(path)
        };
        let (tx, events) = mpsc::unbounded_channel();
        let mut watcher = ConfigWatcher {
            last: snapshot(&path, None),
            path,
            tx,
            events,
            watcher: None,
            watched: Vec::new(),
            interrupted: false,
        };
        watcher.establish()?;
        Ok(watcher)
    }

    /// (Re)creates the OS watches on the current directory set.
    fn establish(&mut self) -> notify::Result<()> {
        self.watcher = None;
        self.watched.clear();
        let tx = self.tx.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Any event, or an error of the watch itself, is a hint to re-check.
                if let Ok(event) = &event
                    && event.kind.is_access()
                {
                    return;
                }
                let _ = tx.send(());
            })?;
        let own = dirs_for(&self.path);
        for dir in self.wanted_dirs() {
            if own.contains(&dir) {
                watcher.watch(&dir, RecursiveMode::NonRecursive)?;
            } else if watcher.watch(&dir, RecursiveMode::NonRecursive).is_err() {
                // An included file's directory that cannot be watched is still re-checked
                // every POLL.
                continue;
            }
            self.watched.push(DirId {
                dev_ino: dev_ino(&dir),
                path: dir,
            });
        }
        self.watcher = Some(watcher);
        Ok(())
    }

    /// The directories to watch: the config's (see [`dirs_for`]), then those of the included
    /// files that exist.
    fn wanted_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = dirs_for(&self.path);
        for (file, _) in self.last.iter().flat_map(|l| &l.includes) {
            for dir in dirs_for(file) {
                if !dirs.contains(&dir) && dir.is_dir() {
                    dirs.push(dir);
                }
            }
        }
        dirs
    }

    /// Whether the watched directories are still the ones the path needs, unreplaced.
    fn watches_are_current(&self) -> bool {
        let wanted = self.wanted_dirs();
        wanted.len() == self.watched.len()
            && wanted.iter().zip(&self.watched).all(|(dir, id)| {
                *dir == id.path && id.dev_ino.is_some() && dev_ino(dir) == id.dev_ino
            })
    }

    /// One re-check: repairs the watches if needed, then compares the fingerprint.
    async fn check(&mut self) -> Option<WatchNote> {
        if !self.watches_are_current() {
            match self.establish() {
                Ok(()) if self.interrupted => {
                    self.interrupted = false;
                    // The file may have changed while nothing was watched.
                    self.last = None;
                    return Some(WatchNote::Resumed);
                }
                Ok(()) => {}
                Err(e) if !self.interrupted => {
                    self.interrupted = true;
                    self.watcher = None;
                    self.watched.clear();
                    let dir = self
                        .path
                        .parent()
                        .map_or_else(|| ".".to_owned(), |d| d.display().to_string());
                    return Some(WatchNote::Interrupted(format!(
                        "cannot watch {dir}: {e}; re-checking every {} ms until it is back",
                        POLL.as_millis()
                    )));
                }
                Err(_) => return None,
            }
        }
        let (path, last) = (self.path.clone(), self.last.clone());
        let now = tokio::task::spawn_blocking(move || snapshot(&path, last.as_ref()))
            .await
            .ok()
            .flatten()?;
        // Content, not timestamps, decides: a touch that rewrites the same bytes is no change.
        let changed = self.last.as_ref().is_none_or(|l| !now.same_content(l));
        let includes_moved = self.last.as_ref().is_none_or(|l| {
            l.includes
                .iter()
                .map(|i| &i.0)
                .ne(now.includes.iter().map(|i| &i.0))
        });
        self.last = Some(now);
        if includes_moved && !self.watches_are_current() {
            // Watch the directories of included files as soon as they are known; a failure is
            // noticed (and reported) by the next check.
            let _ = self.establish();
        }
        changed.then_some(WatchNote::Changed)
    }

    /// Waits for the next change or watch note; `None` if watching stopped for good.
    ///
    /// # Cancel safety
    /// Cancel safe: a change not yet reported is still seen by the next call, because changes
    /// are decided by comparing fingerprints, not by counting events.
    pub async fn changed(&mut self) -> Option<WatchNote> {
        loop {
            match tokio::time::timeout(POLL, self.events.recv()).await {
                Ok(None) => return None,
                Ok(Some(())) => {
                    // Debounce: wait for quiet.
                    while let Ok(Some(())) =
                        tokio::time::timeout(DEBOUNCE, self.events.recv()).await
                    {
                    }
                }
                Err(_) => {}
            }
            if let Some(note) = self.check().await {
                return Some(note);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cordis-watch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    async fn next(w: &mut ConfigWatcher) -> WatchNote {
        tokio::time::timeout(Duration::from_secs(20), w.changed())
            .await
            .expect("no watch note within 20 s")
            .expect("watching stopped")
    }

    #[tokio::test]
    async fn an_edit_in_place_and_a_rename_over_are_changes() {
        let dir = temp("edit");
        let file = dir.join("cordis.yml");
        std::fs::write(&file, "a").unwrap();
        let mut w = ConfigWatcher::new(&file).unwrap();
        std::fs::write(&file, "b").unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        std::fs::write(dir.join("new.yml"), "c").unwrap();
        std::fs::rename(dir.join("new.yml"), &file).unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_configmap_style_symlink_swap_is_a_change() {
        // /cfg/cordis.yml -> ..data/cordis.yml, ..data -> ..v1; the update makes ..v2 and
        // renames a new ..data symlink over the old one.
        let dir = temp("configmap");
        std::fs::create_dir(dir.join("..v1")).unwrap();
        std::fs::write(dir.join("..v1/cordis.yml"), "one").unwrap();
        std::os::unix::fs::symlink("..v1", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/cordis.yml", dir.join("cordis.yml")).unwrap();
        let mut w = ConfigWatcher::new(&dir.join("cordis.yml")).unwrap();
        std::fs::create_dir(dir.join("..v2")).unwrap();
        std::fs::write(dir.join("..v2/cordis.yml"), "two").unwrap();
        std::os::unix::fs::symlink("..v2", dir.join("..data_tmp")).unwrap();
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
        std::fs::remove_dir_all(dir.join("..v1")).unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_replaced_directory_interrupts_then_resumes_and_sees_the_new_file() {
        let base = temp("replaced");
        let dir = base.join("conf");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("cordis.yml");
        std::fs::write(&file, "a").unwrap();
        let mut w = ConfigWatcher::new(&file).unwrap();
        // Renamed away: the watch now follows a directory that is no longer at the path.
        std::fs::rename(&dir, base.join("away")).unwrap();
        assert!(matches!(next(&mut w).await, WatchNote::Interrupted(_)));
        // Back, with new content.
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(&file, "b").unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Resumed);
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        // And it keeps following edits after that.
        std::fs::write(&file, "c").unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_fifo_at_the_config_path_is_never_opened_and_a_file_replacing_it_is_a_change() {
        let dir = temp("fifo");
        let file = dir.join("cordis.yml");
        let made = std::process::Command::new("mkfifo")
            .arg(&file)
            .status()
            .unwrap();
        assert!(made.success());
        // Opening the FIFO for reading would block until a writer comes: new() must not.
        let mut w = ConfigWatcher::new(&file).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, "real").unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn an_edit_of_an_included_file_is_a_change_and_an_include_added_later_is_followed() {
        let dir = temp("include");
        std::fs::create_dir_all(dir.join("parts")).unwrap();
        std::fs::create_dir_all(dir.join("other")).unwrap();
        let file = dir.join("cordis.yml");
        let include = |path: &str| format!("- name: cordis/include\n  config: {{path: {path}}}\n");
        std::fs::write(dir.join("parts/b.yml"), "- id: b\n  name: debug/noop\n").unwrap();
        std::fs::write(dir.join("other/c.yml"), "- id: c\n  name: debug/noop\n").unwrap();
        std::fs::write(&file, include("parts/b.yml")).unwrap();
        let mut w = ConfigWatcher::new(&file).unwrap();
        // Only the included file changes (in another directory than the config).
        std::fs::write(dir.join("parts/b.yml"), "- id: b2\n  name: debug/noop\n").unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        // An include added by an edit is watched from then on.
        std::fs::write(&file, include("parts/b.yml") + &include("other/c.yml")).unwrap();
        std::fs::write(dir.join("parts/b.yml"), "- id: b2\n  name: debug/noop\n").unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        std::fs::write(dir.join("other/c.yml"), "- id: c2\n  name: debug/noop\n").unwrap();
        assert_eq!(next(&mut w).await, WatchNote::Changed);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
