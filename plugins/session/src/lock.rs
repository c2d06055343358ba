//! One writer per session file, across processes: an exclusive advisory lock on `<id>.lock`.
//!
//! Two writers on one log assign the same seqs and corrupt it for good, so the writer of a
//! session holds an exclusive `flock` on the sidecar `<id>.lock` for its whole lifetime; the
//! file also records the holder's pid, so a second opener can name it
//! ([`SessionError::SessionLocked`]). An advisory lock dies with its process: a lock file left by
//! a dead process (a stale pid included) does not block anyone.
//!
//! `flock` locks belong to an open file description, so two opens in one process conflict too.
//! A writer that is shutting down in this process (its last handle dropped, its thread still
//! writing the queued lines) is waited for instead of reported: it releases the lock as soon as
//! its queue is on disk.
//!
//! The lock file is opened without following symlinks and must be a regular file, since the pid
//! is written into it. A writer that ends removes it (so a workspace is not left with `.lock`
//! files), while still holding the lock. That is safe because a lock only counts when the
//! locked file is still the one at the path: an opener that locked a file since unlinked (it
//! opened it before the holder removed it) sees another file, or none, at the path and tries
//! again, so two writers can never both hold the session. A lock file a crashed writer left
//! behind blocks nobody; its pid only means something while the lock is held.

use cordis_runtime::lock;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::error::SessionError;

/// How long an opener waits for a writer of this process that is shutting down.
const CLOSING_WAIT: Duration = Duration::from_secs(10);

/// Signalled once a writer released its lock.
#[derive(Default)]
struct Released {
    done: Mutex<bool>,
    cv: Condvar,
}

/// A lock held in this process: whether its session still has handles, and its release signal.
struct Held {
    alive: Weak<()>,
    released: Arc<Released>,
}

/// Locks held by this process, by canonical lock-file path.
static HELD: Mutex<BTreeMap<PathBuf, Held>> = Mutex::new(BTreeMap::new());

/// The exclusive lock of one session writer; dropping it releases the lock.
pub(crate) struct WriterLock {
    file: Option<File>,
    key: PathBuf,
    released: Arc<Released>,
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Removed while held (see the module docs), then closing the descriptor releases it.
        // Only where an opener can tell a removed file from the one at the path (the inode
        // check); elsewhere the file stays.
        if cfg!(unix)
            && let Some(file) = &self.file
            && same_file(file, &self.key)
        {
            let _ = std::fs::remove_file(&self.key);
        }
        drop(self.file.take());
        {
            let mut held = lock(&HELD);
            if held
                .get(&self.key)
                .is_some_and(|h| Arc::ptr_eq(&h.released, &self.released))
            {
                held.remove(&self.key);
            }
        }
        *lock(&self.released.done) = true;
        self.released.cv.notify_all();
    }
}

/// Waits, at most `limit`, until every writer of this process whose session has no handle left
/// has written its queue and released its lock (removing the lock file); returns whether all
/// did. A process calls it before it exits: the writer threads are detached, and an exit that
/// outruns one loses its last lines' sync and leaves its `.lock` file behind. Writers of
/// sessions still held are not waited for (they end only when their handles go).
pub fn settle(limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let closing: Vec<Arc<Released>> = lock(&HELD)
        .values()
        .filter(|h| h.alive.strong_count() == 0)
        .map(|h| h.released.clone())
        .collect();
    closing.iter().all(|released| {
        let done = lock(&released.done);
        let wait = deadline.saturating_duration_since(Instant::now());
        *released
            .cv
            .wait_timeout_while(done, wait, |done| !*done)
            .unwrap_or_else(|e| e.into_inner())
            .0
    })
}

/// Whether `file` is the file now at `path` (not one unlinked or replaced since it was opened).
fn same_file(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

/// How often an opener tries again after locking a file that was no longer at the path.
const MAX_STALE_LOCKS: u32 = 100;

/// The sidecar lock file of the session file `path`.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    path.with_extension("lock")
}

/// The process that holds session file `path` open for writing, as its lock file records it:
/// `None` when no lock file names a live process. Read without taking the lock (a reader must
/// never make a writer's open fail), so it is a hint for people, not a decision.
pub fn holder(path: &Path) -> Option<u32> {
    let mut file = open_lock_file(&lock_path(path), false).ok()?;
    let pid = recorded_pid(&mut file)?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

/// Opens a lock file: no symlink followed, a FIFO never blocks; `write` to take it (created
/// when missing), else only to read its pid.
fn open_lock_file(path: &Path, write: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(write)
        .create(write)
        .truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // No symlink is followed (the pid is written into the file) and a FIFO cannot block.
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        options.custom_flags(flags.bits() as i32);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// The pid recorded in a lock file (`None` when unreadable or not yet written).
fn recorded_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Takes the exclusive lock of session `id` stored at `path`; `alive` is the token the
/// session holds while it has handles.
///
/// Blocking: call from a blocking task.
///
/// # Errors
/// [`SessionError::SessionLocked`] when another writer holds it, or I/O.
pub(crate) fn acquire(path: &Path, id: &str, alive: &Arc<()>) -> Result<WriterLock, SessionError> {
    let lock_file = lock_path(path);
    let io = |source| SessionError::Io {
        path: lock_file.display().to_string(),
        source,
    };
    if let Some(dir) = lock_file.parent() {
        crate::file::create_root(dir).map_err(io)?;
    }
    // The directory's canonical path and the file's name: the file itself may be removed by a
    // writer that ends at any moment.
    let key = match (lock_file.parent(), lock_file.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            std::fs::canonicalize(dir).map_err(io)?.join(name)
        }
        _ => lock_file.clone(),
    };
    let deadline = Instant::now() + CLOSING_WAIT;
    let (mut attempts, mut stale) = (0, 0);
    loop {
        attempts += 1;
        let mut file = open_lock_file(&lock_file, true).map_err(io)?;
        let key = key.clone();
        match file.try_lock() {
            // Locked a file its last holder removed (or replaced) since it was opened here.
            Ok(()) if !same_file(&file, &lock_file) => {
                stale += 1;
                if stale > MAX_STALE_LOCKS {
                    return Err(io(io::Error::other(
                        "the lock file keeps being replaced while it is locked",
                    )));
                }
                continue;
            }
            Ok(()) => {
                let pid = std::process::id().to_string();
                file.set_len(0)
                    .and_then(|()| file.rewind())
                    .and_then(|()| file.write_all(pid.as_bytes()))
                    .map_err(io)?;
                let released = Arc::new(Released::default());
                lock(&HELD).insert(
                    key.clone(),
                    Held {
                        alive: Arc::downgrade(alive),
                        released: released.clone(),
                    },
                );
                return Ok(WriterLock {
                    file: Some(file),
                    key,
                    released,
                });
            }
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        let closing = lock(&HELD)
            .get(&key)
            .filter(|h| h.alive.strong_count() == 0)
            .map(|h| h.released.clone());
        match closing {
            Some(released) if Instant::now() < deadline => {
                let done = lock(&released.done);
                let wait = deadline.saturating_duration_since(Instant::now());
                drop(
                    released
                        .cv
                        .wait_timeout_while(done, wait, |done| !*done)
                        .unwrap_or_else(|e| e.into_inner()),
                );
            }
            // A holder of this process may have let go between the lock and the lookup.
            None if attempts < 3 => {}
            _ => {
                // The holder writes its pid right after locking: give it a moment.
                let mut pid = recorded_pid(&mut file);
                for _ in 0..20 {
                    if pid.is_some() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    pid = recorded_pid(&mut file);
                }
                return Err(SessionError::SessionLocked {
                    id: id.to_owned(),
                    pid,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn settle_waits_for_a_closing_writer_to_remove_its_lock_and_gives_up_at_its_limit() {
        let dir = std::env::temp_dir().join(format!("cordis-lock-settle-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let lock_file = lock_path(&path);
        let finish_writer = |hold: Duration| {
            let alive = Arc::new(());
            let held = acquire(&path, "s", &alive).unwrap();
            // The session's last handle is gone; its writer still has lines to write.
            drop(alive);
            std::thread::spawn(move || {
                std::thread::sleep(hold);
                drop(held);
            })
        };
        // Regression: `cordis run` exited before its writer thread removed the lock file.
        let writer = finish_writer(Duration::from_millis(300));
        assert!(lock_file.exists());
        assert!(settle(Duration::from_secs(30)));
        assert!(
            !lock_file.exists(),
            "settle returned before the writer let go"
        );
        writer.join().unwrap();
        // A writer that outlives the limit is reported, not waited for.
        let writer = finish_writer(Duration::from_secs(2));
        assert!(!settle(Duration::from_millis(10)));
        writer.join().unwrap();
        assert!(settle(Duration::ZERO), "nothing is closing any more");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn writers_that_remove_their_lock_file_never_hold_one_session_together() {
        let dir = std::env::temp_dir().join(format!("cordis-lock-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = Arc::new(dir.join("s.jsonl"));
        let holders = Arc::new(AtomicUsize::new(0));
        let (won, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, holders, won, most) =
                    (path.clone(), holders.clone(), won.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..300 {
                        // Each attempt is its own "process": its own token, no in-process wait.
                        let alive = Arc::new(());
                        if let Ok(held) = acquire(&path, "s", &alive) {
                            let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            won.fetch_add(1, Ordering::SeqCst);
                            std::thread::yield_now();
                            holders.fetch_sub(1, Ordering::SeqCst);
                            drop(held);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            most.load(Ordering::SeqCst),
            1,
            "two writers held the session"
        );
        assert!(won.load(Ordering::SeqCst) > 0);
        assert!(
            !lock_path(&path).exists(),
            "the last writer removed its lock file"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
