//! The JSONL file: the ids that can name one, atomic creation, reading with torn-tail repair, and
//! the writer thread.
//!
//! Everything here but [`check_id`] blocks; callers run it on `spawn_blocking` or the writer
//! thread.
//!
//! # Torn tails
//! The writer appends whole lines, so the only damage a crash leaves is at the end: a final
//! line without its newline. When that line is a complete event (it parses, its seq is the next
//! one) only the newline was lost, and the event is kept and the newline written; anything else
//! is a torn write and is cut off.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::error::SessionError;
use crate::event::{SESSION_VERSION, SessionEvent, SessionHeader};
use crate::lock::WriterLock;

/// How the writer makes appends durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// `fsync` (data) after every batch.
    Data,
    /// Leave it to the OS (benchmarks, throwaway sessions).
    Never,
}

pub(crate) enum Cmd {
    Line(Vec<u8>),
    Flush(tokio::sync::oneshot::Sender<Result<(), String>>),
}

/// Whether `id` can name a session file: letters, digits, `.`, `_` and `-`, not starting with `.`.
///
/// # Errors
/// [`SessionError::InvalidId`] otherwise.
pub fn check_id(id: &str) -> Result<(), SessionError> {
    let ok = !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(SessionError::InvalidId { id: id.to_owned() })
    }
}

/// What a session root this store creates holds first: it keeps the logs out of `git status`
/// and out of the workspace tools' listings and searches, which honour `.gitignore`.
pub(crate) const ROOT_GITIGNORE: &str =
    "# cordis session logs: ignored by git and by the workspace tools\n*\n";

/// Creates the session root `dir` if it does not exist, with its `.gitignore`
/// ([`ROOT_GITIGNORE`]); a directory that exists is left as it is. What it creates is the
/// user's alone (0700): transcripts hold whatever the agent read.
pub(crate) fn create_root(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    // `create_new`: never through a link someone put there, never over a file of theirs.
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(".gitignore"))
    {
        Ok(mut file) => file.write_all(ROOT_GITIGNORE.as_bytes()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` as `dir/name`, the user's alone: `dir` is created (0700) and refused when it
/// is a link (whoever can write near the sessions must not aim the write elsewhere), the bytes
/// are written aside under a name no other writer uses, created new (never through a link put
/// there) with mode 0600, then renamed over `name` (which replaces a link, never follows it).
///
/// # Errors
/// When `dir` is not a directory, or creating, writing or renaming fails (the aside file is
/// removed then).
pub fn write_private(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// Aside names unique in the process: two writers at once never share one.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    if !std::fs::symlink_metadata(dir)?.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory (a link?): nothing is written through it",
            dir.display()
        )));
    }
    let aside = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = private(OpenOptions::new().write(true).create_new(true))
        .open(&aside)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&aside, dir.join(name)));
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written
}

/// A new log file's mode where there are modes: the user's alone.
fn private(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, 0o600);
    options
}

/// Creates `path` holding `header` and then `events` (a fork's copy of its parent's first
/// events; none for a new session): written to a temporary file, synced, renamed.
pub(crate) fn create(
    path: &Path,
    header: &SessionHeader,
    events: &[SessionEvent],
) -> Result<(), SessionError> {
    if path.exists() {
        return Err(SessionError::AlreadyExists {
            path: path.display().to_string(),
        });
    }
    let io = |source| SessionError::Io {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        create_root(dir).map_err(io)?;
    }
    let tmp = path.with_extension("jsonl.tmp");
    let mut line = serde_json::to_vec(header).map_err(|e| io(io::Error::other(e)))?;
    line.push(b'\n');
    for event in events {
        serde_json::to_writer(&mut line, event).map_err(|e| io(io::Error::other(e)))?;
        line.push(b'\n');
    }
    let mut f = private(
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true),
    )
    .open(&tmp)
    .map_err(io)?;
    f.write_all(&line).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// What reading a file found.
pub(crate) struct ReadLog {
    pub(crate) header: SessionHeader,
    pub(crate) events: Vec<SessionEvent>,
    /// Bytes of a torn final line that were cut off.
    pub(crate) truncated: Option<u64>,
    /// True when the final line was a complete event missing only its newline (now written).
    pub(crate) newline_repaired: bool,
    /// The id the header names when it is not the file's (a copied or renamed log).
    pub(crate) header_id: Option<String>,
}

/// What parsing a file's bytes found: its complete lines, and the final line without a newline.
struct Parsed {
    header: SessionHeader,
    events: Vec<SessionEvent>,
    /// Length of the complete lines.
    complete: usize,
    /// The final line without a newline, when it is a complete event (the next seq).
    whole_tail: Option<SessionEvent>,
    /// The id the header names when it is not the file's.
    header_id: Option<String>,
}

/// Reads `path` as it is, repairing nothing and locking nothing: the view of a reader that must
/// not disturb a writer (in this process or another). A final line without its newline is kept
/// when it is a complete event and ignored otherwise (a writer may be in the middle of it).
pub(crate) fn read_only(path: &Path) -> Result<(SessionHeader, Vec<SessionEvent>), SessionError> {
    let bytes = read_bytes(path)?;
    let mut parsed = parse(path, &bytes)?;
    parsed.events.extend(parsed.whole_tail);
    Ok((parsed.header, parsed.events))
}

/// Opens `path` for `options`, refusing (without waiting) anything but a regular file: a FIFO
/// in place of a log would otherwise hang the open, and then the reader forever.
fn open_log(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK changes nothing for a regular file; it keeps a FIFO's open from waiting.
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(
            "not a regular file (a directory, FIFO, socket or device)",
        ));
    }
    Ok(file)
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, SessionError> {
    let mut bytes = Vec::new();
    open_log(path, OpenOptions::new().read(true))
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => SessionError::NotFound {
                path: path.display().to_string(),
            },
            _ => SessionError::Io {
                path: path.display().to_string(),
                source,
            },
        })?;
    Ok(bytes)
}

/// Reads `path`, repairing its end in place: a complete final event missing only its newline
/// gets it, a torn final line is truncated.
pub(crate) fn read(path: &Path) -> Result<ReadLog, SessionError> {
    let shown = path.display().to_string();
    let io = |source| SessionError::Io {
        path: shown.clone(),
        source,
    };
    let bytes = read_bytes(path)?;
    let Parsed {
        header,
        mut events,
        complete,
        whole_tail,
        header_id,
    } = parse(path, &bytes)?;
    let tail = &bytes[complete..];
    let (mut truncated, mut newline_repaired) = (None, false);
    if !tail.is_empty() {
        let mut f = OpenOptions::new().write(true).open(path).map_err(io)?;
        match whole_tail {
            Some(event) => {
                f.seek(SeekFrom::End(0))
                    .and_then(|_| f.write_all(b"\n"))
                    .map_err(io)?;
                events.push(event);
                newline_repaired = true;
            }
            None => {
                f.set_len(complete as u64).map_err(io)?;
                truncated = Some(tail.len() as u64);
            }
        }
        f.sync_all().map_err(io)?;
    }
    Ok(ReadLog {
        header,
        events,
        truncated,
        newline_repaired,
        header_id,
    })
}

/// Parses a log's first line (without its newline) as its header, named by the file's name: a
/// header naming another id (a copied or renamed log) keeps the file's name, and its own id is
/// returned beside it.
pub(crate) fn parse_header(
    path: &Path,
    first: &[u8],
) -> Result<(SessionHeader, Option<String>), SessionError> {
    let shown = path.display().to_string();
    let corrupt = |line: usize, message: String| SessionError::Corrupt {
        path: shown.clone(),
        line,
        message,
    };
    let raw: serde_json::Value =
        serde_json::from_slice(first).map_err(|e| corrupt(1, e.to_string()))?;
    if raw.get("type").and_then(|t| t.as_str()) != Some("session") {
        return Err(corrupt(1, "the first line is not a session header".into()));
    }
    match raw.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(SESSION_VERSION) => {}
        found => {
            return Err(SessionError::UnsupportedVersion {
                path: shown.clone(),
                found: found.map_or_else(|| raw["version"].to_string(), |v| v.to_string()),
            });
        }
    }
    let mut header: SessionHeader =
        serde_json::from_value(raw).map_err(|e| corrupt(1, e.to_string()))?;
    // The file's name is the session's id: it is what the user typed to reach it, and what
    // the next `--resume` must find. A header naming another id is a copied or renamed log.
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".jsonl"));
    let header_id = match named {
        Some(named) if named != header.id => {
            Some(std::mem::replace(&mut header.id, named.to_owned()))
        }
        _ => None,
    };
    Ok((header, header_id))
}

/// Opens a log for reading: a regular file only (never waits on a FIFO).
pub(crate) fn open_for_reading(path: &Path) -> io::Result<File> {
    open_log(path, OpenOptions::new().read(true))
}

/// Parses a file's bytes: the header, every complete line, and whether the final unterminated
/// line is a whole event.
fn parse(path: &Path, bytes: &[u8]) -> Result<Parsed, SessionError> {
    let shown = path.display().to_string();
    let corrupt = |line: usize, message: String| SessionError::Corrupt {
        path: shown.clone(),
        line,
        message,
    };
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut lines = bytes[..complete].split(|b| *b == b'\n');
    let first = lines
        .next()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| corrupt(1, "missing the session header line".into()))?;
    let (header, header_id) = parse_header(path, first)?;
    let mut events = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.is_empty() {
            continue; // the split after the final newline
        }
        let event: SessionEvent =
            serde_json::from_slice(line).map_err(|e| corrupt(i + 2, e.to_string()))?;
        if event.seq != events.len() as u64 {
            return Err(corrupt(
                i + 2,
                format!("seq {} where {} was expected", event.seq, events.len()),
            ));
        }
        events.push(event);
    }
    let tail = &bytes[complete..];
    let whole_tail = (!tail.is_empty())
        .then(|| serde_json::from_slice::<SessionEvent>(tail).ok())
        .flatten()
        .filter(|e| e.seq == events.len() as u64);
    Ok(Parsed {
        header,
        events,
        complete,
        whole_tail,
        header_id,
    })
}

/// Starts the writer thread appending to `path`; it holds `lock` until its last line is written.
pub(crate) fn writer(
    path: PathBuf,
    sync: Sync,
    lock: WriterLock,
) -> Result<mpsc::Sender<Cmd>, SessionError> {
    let file =
        open_log(&path, OpenOptions::new().append(true)).map_err(|source| SessionError::Io {
            path: path.display().to_string(),
            source,
        })?;
    let (tx, rx) = mpsc::channel::<Cmd>();
    std::thread::Builder::new()
        .name("session-writer".into())
        .spawn(move || {
            run(file, sync, rx, path);
            // Released only now: everything queued before the last handle went is on disk.
            drop(lock);
        })
        .map_err(|source| SessionError::Io {
            path: String::new(),
            source,
        })?;
    Ok(tx)
}

/// The writer loop: block for one command, drain the rest, write once, sync once, answer flushes.
fn run(mut file: File, sync: Sync, rx: mpsc::Receiver<Cmd>, path: PathBuf) {
    let mut failed: Option<String> = None;
    let mut buf = Vec::new();
    let mut waiters = Vec::new();
    while let Ok(first) = rx.recv() {
        for cmd in std::iter::once(first).chain(rx.try_iter()) {
            match cmd {
                Cmd::Line(line) => buf.extend_from_slice(&line),
                Cmd::Flush(w) => waiters.push(w),
            }
        }
        if failed.is_none() && !buf.is_empty() {
            let written = file.write_all(&buf).and_then(|()| match sync {
                Sync::Data => file.sync_data(),
                Sync::Never => Ok(()),
            });
            if let Err(e) = written {
                failed = Some(format!("writing {}: {e}", path.display()));
            }
        }
        buf.clear();
        for w in waiters.drain(..) {
            let _ = w.send(failed.clone().map_or(Ok(()), Err));
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Regression (issue 24, medium 7): a FIFO in place of a session log hung `cordis history`,
    /// `run --resume` and ACP `session/load` in the open. It is refused at once now.
    #[test]
    fn a_fifo_in_place_of_a_log_is_refused_without_waiting() {
        let dir = std::env::temp_dir().join(format!("cordis-fifo-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("s.jsonl");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send((
                read_only(&path).err().map(|e| e.to_string()),
                read(&path).err().map(|e| e.to_string()),
            ));
        });
        let (only, repair) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("reading a FIFO log must not block");
        for message in [only, repair] {
            let message = message.expect("a FIFO is not a log");
            assert!(message.contains("not a regular file"), "{message}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
