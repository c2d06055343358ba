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
//! is written into it. It stays after the writer ends: unlinking it would let a concurrent
//! opener lock an orphaned inode while a third creates a fresh file, and two writers could both
//! "hold" the session. Its pid only means something while the lock is held.

use cordis_runtime::lock;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::session::SessionError;

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
        // Closing the descriptor releases the flock.
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

/// The sidecar lock file of the session file `path`.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    path.with_extension("lock")
}

fn open_lock_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
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
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let deadline = Instant::now() + CLOSING_WAIT;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut file = open_lock_file(&lock_file).map_err(io)?;
        let key = std::fs::canonicalize(&lock_file).map_err(io)?;
        match file.try_lock() {
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
