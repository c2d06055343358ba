//! A bounded, cached reader for prompt source files (instructions, skills).
//!
//! Each read opens the file without blocking (`O_NONBLOCK`: a FIFO cannot hang it), checks it
//! is a regular file on the opened descriptor, and reads at most the bound. A file inside the
//! workspace is opened beneath the workspace root ([`Workspace::open_file`]), so a symlink that
//! leaves the root is refused by the kernel; a file outside it (a parent directory's) must
//! resolve beneath the directory it was found under (`within`), the user's own files may point
//! anywhere.
//!
//! The text is kept with the file's identity (device, inode, size, modification and change
//! times): a later read whose `fstat` matches takes the kept text without reading again,
//! unless the file changed so recently (within [`RACY_WINDOW`] of the read) that a write in the
//! same clock tick could hide behind equal times (git's "racily clean" entries).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cordis_workspace::{Workspace, WorkspaceError};
use rustix::fs::{FileType, Mode, OFlags};

/// A kept text is trusted only for files last changed at least this long before it was read.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// How many files one [`Reader`] keeps the text of (the oldest half is let go past it).
pub const MAX_KEPT: usize = 512;

/// Where a source file lives, which decides how it may be opened.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// Relative to the workspace root, opened beneath it.
    Workspace(PathBuf),
    /// Outside the workspace; when `within` is given, the file must resolve beneath it.
    Outside {
        /// The file's path.
        path: PathBuf,
        /// The directory it must stay in after symlinks are resolved.
        within: Option<PathBuf>,
    },
}

/// A file's text, bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The text (invalid UTF-8 replaced), at most the bound.
    pub text: String,
    /// The file's size in bytes.
    pub size: u64,
    /// True when the file was longer than the bound and `text` is its cut start.
    pub cut: bool,
}

/// Why a source file could not be used (the caller names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// A symlink that resolves outside the directory the file must stay in.
    #[error("it is a symlink that leaves {within}; left out")]
    Escapes {
        /// The directory, as shown.
        within: String,
    },
    /// Not a regular file (a directory, FIFO, socket or device).
    #[error("it is not a regular file ({kind}); left out")]
    NotAFile {
        /// What it is.
        kind: &'static str,
    },
    /// An I/O error (permissions, say).
    #[error("it cannot be read ({message}); left out")]
    Io {
        /// The OS error.
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

#[derive(Debug, Clone)]
struct Kept {
    id: Identity,
    max: usize,
    read_at: SystemTime,
    loaded: Loaded,
}

/// Reads source files with a bound and keeps their text (see the module docs).
#[derive(Debug, Default)]
pub struct Reader {
    kept: Mutex<BTreeMap<PathBuf, Kept>>,
}

fn read_flags() -> OFlags {
    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY
}

fn kind_name(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "named pipe",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "unknown file type",
    }
}

fn io(e: impl std::fmt::Display) -> FileError {
    FileError::Io {
        message: e.to_string(),
    }
}

fn is_missing(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Opens `place`: `None` when nothing is there.
fn open(ws: Option<&Workspace>, place: &Place) -> Result<Option<(File, PathBuf)>, FileError> {
    match place {
        Place::Workspace(rel) => {
            let Some(ws) = ws else {
                return Err(io("no workspace"));
            };
            let given = rel.to_string_lossy();
            let path = ws.resolve(&given).map_err(io)?;
            match ws.open_file(&path) {
                Ok((file, _)) => Ok(Some((file, ws.root().join(rel)))),
                Err(WorkspaceError::NotFound { .. } | WorkspaceError::NotADirectory { .. }) => {
                    Ok(None)
                }
                Err(WorkspaceError::Outside { .. }) => Err(FileError::Escapes {
                    within: "the workspace".to_owned(),
                }),
                Err(WorkspaceError::NotAFile { kind, .. }) => Err(FileError::NotAFile { kind }),
                Err(e) => Err(io(e)),
            }
        }
        Place::Outside { path, within: None } => {
            // No bound to check (the user's own files): one open following links, instead of
            // resolving every component first (a `readlink` each, even for a missing file).
            match rustix::fs::open(path, read_flags(), Mode::empty()) {
                Ok(fd) => Ok(Some((File::from(fd), path.clone()))),
                Err(e) if e == rustix::io::Errno::NOENT || e == rustix::io::Errno::NOTDIR => {
                    Ok(None)
                }
                Err(e) => Err(io(std::io::Error::from(e))),
            }
        }
        Place::Outside { path, within } => {
            let real = match std::fs::canonicalize(path) {
                Ok(real) => real,
                Err(e) if is_missing(&e) => return Ok(None),
                Err(e) => return Err(io(e)),
            };
            if let Some(within) = within {
                let bound = std::fs::canonicalize(within).unwrap_or_else(|_| within.clone());
                if !real.starts_with(&bound) {
                    return Err(FileError::Escapes {
                        within: within.display().to_string(),
                    });
                }
            }
            // The resolved path, not followed again: a link swapped in meanwhile fails.
            match rustix::fs::open(&real, read_flags() | OFlags::NOFOLLOW, Mode::empty()) {
                Ok(fd) => Ok(Some((File::from(fd), path.clone()))),
                Err(e) if e == rustix::io::Errno::NOENT => Ok(None),
                Err(e) => Err(io(std::io::Error::from(e))),
            }
        }
    }
}

fn identity(file: &File) -> Result<(Identity, FileType), FileError> {
    let st = rustix::fs::fstat(file).map_err(|e| io(std::io::Error::from(e)))?;
    let ft = FileType::from_raw_mode(st.st_mode);
    // `as`: the stat field types differ between targets; the values fit.
    let id = Identity {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        size: u64::try_from(st.st_size).unwrap_or(0),
        mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
        ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
    };
    Ok((id, ft))
}

/// The longest prefix of `bytes` of at most `max` bytes that ends at a character boundary
/// (of valid UTF-8; invalid bytes are replaced afterwards).
fn cut_at_char(bytes: &[u8], max: usize) -> &[u8] {
    if bytes.len() <= max {
        return bytes;
    }
    let mut end = max;
    // A continuation byte right after the cut: the character started before it.
    while end > 0 && bytes[end] & 0xC0 == 0x80 && max - end < 4 {
        end -= 1;
    }
    &bytes[..end]
}

impl Reader {
    /// A reader keeping nothing yet.
    pub fn new() -> Self {
        Reader::default()
    }

    /// Reads `place` with at most `max` bytes of text: `Ok(None)` when there is no file. Inside
    /// a run's [`Snapshot`](crate::Snapshot), once per snapshot.
    ///
    /// Blocks on file I/O: a few system calls when the file is unchanged (open, fstat,
    /// close), a bounded read otherwise.
    ///
    /// # Errors
    /// A [`FileError`] for a symlink leaving its directory, a non-file, or an I/O error.
    pub fn read(
        &self,
        ws: Option<&Workspace>,
        place: &Place,
        max: usize,
    ) -> Result<Option<Loaded>, FileError> {
        crate::snapshot::once(
            || {
                let key = crate::snapshot::Key::new("read").opt_path(ws.map(Workspace::root));
                match place {
                    Place::Workspace(path) => key.tag(0).path(path),
                    Place::Outside { path, within } => {
                        key.tag(1).path(path).opt_path(within.as_deref())
                    }
                }
                .num(max as u64)
            },
            || self.read_now(ws, place, max),
        )
    }

    /// [`Reader::read`] outside a run's snapshot.
    fn read_now(
        &self,
        ws: Option<&Workspace>,
        place: &Place,
        max: usize,
    ) -> Result<Option<Loaded>, FileError> {
        let Some((file, key)) = open(ws, place)? else {
            return Ok(None);
        };
        let (id, ft) = identity(&file)?;
        if ft != FileType::RegularFile {
            return Err(FileError::NotAFile {
                kind: kind_name(ft),
            });
        }
        if let Some(kept) = cordis_runtime::lock(&self.kept).get(&key)
            && kept.id == id
            && kept.max == max
            && settled(id, kept.read_at)
        {
            return Ok(Some(kept.loaded.clone()));
        }
        let read_at = SystemTime::now();
        let mut bytes = Vec::with_capacity(usize::try_from(id.size).unwrap_or(0).min(max + 1));
        file.take(u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let cut = bytes.len() > max;
        let text = String::from_utf8_lossy(cut_at_char(&bytes, max)).into_owned();
        let loaded = Loaded {
            text,
            size: id.size.max(bytes.len() as u64),
            cut,
        };
        let mut kept = cordis_runtime::lock(&self.kept);
        if kept.len() >= MAX_KEPT {
            let drop: Vec<PathBuf> = kept.keys().take(MAX_KEPT / 2).cloned().collect();
            for k in drop {
                kept.remove(&k);
            }
        }
        kept.insert(
            key,
            Kept {
                id,
                max,
                read_at,
                loaded: loaded.clone(),
            },
        );
        Ok(Some(loaded))
    }

    /// How many files' text is kept.
    pub fn kept(&self) -> usize {
        cordis_runtime::lock(&self.kept).len()
    }
}

/// True when the file's last change is old enough before `read_at` that equal times prove it
/// unchanged.
fn settled(id: Identity, read_at: SystemTime) -> bool {
    let latest = id.mtime.max(id.ctime);
    let Ok(secs) = u64::try_from(latest.0) else {
        return false;
    };
    let nanos = u32::try_from(latest.1).unwrap_or(0);
    let changed = UNIX_EPOCH + Duration::new(secs, nanos);
    changed + RACY_WINDOW <= read_at
}

/// `path` as shown: relative to `base` when beneath it.
pub fn shown(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outside(path: PathBuf, within: Option<PathBuf>) -> Place {
        Place::Outside { path, within }
    }

    #[test]
    fn a_long_file_is_cut_at_a_character_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("A.md");
        // "é" is two bytes: a cut at 5 would split the third one.
        std::fs::write(&file, "ééééé").unwrap();
        let reader = Reader::new();
        let got = reader
            .read(None, &outside(file.clone(), None), 5)
            .unwrap()
            .unwrap();
        assert_eq!((got.text.as_str(), got.cut, got.size), ("éé", true, 10));
        let whole = reader
            .read(None, &outside(file, None), 10)
            .unwrap()
            .unwrap();
        assert_eq!((whole.text.as_str(), whole.cut), ("ééééé", false));
    }

    #[test]
    fn a_missing_file_is_none_and_a_directory_or_fifo_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let reader = Reader::new();
        let missing = outside(dir.path().join("nope.md"), None);
        assert_eq!(reader.read(None, &missing, 10), Ok(None));
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert_eq!(
            reader.read(None, &outside(sub, None), 10),
            Err(FileError::NotAFile { kind: "directory" })
        );
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        // Nobody writes to it: a blocking open would never return.
        assert_eq!(
            reader.read(None, &outside(fifo, None), 10),
            Err(FileError::NotAFile { kind: "named pipe" })
        );
        let ws = Workspace::open(dir.path()).unwrap();
        assert_eq!(
            reader.read(Some(&ws), &Place::Workspace("fifo".into()), 10),
            Err(FileError::NotAFile { kind: "named pipe" })
        );
    }

    #[test]
    fn a_symlink_leaving_its_directory_is_refused_and_one_staying_in_is_read() {
        let outer = tempfile::tempdir().unwrap();
        let secret = outer.path().join("secret.txt");
        std::fs::write(&secret, "secret").unwrap();
        let root = outer.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("real.md"), "real").unwrap();
        std::os::unix::fs::symlink(&secret, root.join("AGENTS.md")).unwrap();
        std::os::unix::fs::symlink("real.md", root.join("CLAUDE.md")).unwrap();
        let reader = Reader::new();
        let within = Some(root.clone());
        let err = reader
            .read(None, &outside(root.join("AGENTS.md"), within.clone()), 99)
            .unwrap_err();
        assert!(matches!(err, FileError::Escapes { .. }), "{err}");
        let ok = reader
            .read(None, &outside(root.join("CLAUDE.md"), within), 99)
            .unwrap()
            .unwrap();
        assert_eq!(ok.text, "real");
        // Inside the workspace the kernel refuses the escape.
        let ws = Workspace::open(&root).unwrap();
        let err = reader
            .read(Some(&ws), &Place::Workspace("AGENTS.md".into()), 99)
            .unwrap_err();
        assert!(matches!(err, FileError::Escapes { .. }), "{err}");
        let ok = reader
            .read(Some(&ws), &Place::Workspace("CLAUDE.md".into()), 99)
            .unwrap()
            .unwrap();
        assert_eq!(ok.text, "real");
    }

    #[test]
    fn an_unchanged_old_file_is_not_read_again_and_a_fresh_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("A.md");
        std::fs::write(&file, "one").unwrap();
        let reader = Reader::new();
        let place = outside(file.clone(), None);
        assert_eq!(reader.read(None, &place, 99).unwrap().unwrap().text, "one");
        // Same size, written right away: times may be equal, yet the fresh file is read again.
        std::fs::write(&file, "two").unwrap();
        assert_eq!(reader.read(None, &place, 99).unwrap().unwrap().text, "two");
        // Age the kept read: an equal identity now means the kept text is used, not the file.
        {
            let mut kept = cordis_runtime::lock(&reader.kept);
            let entry = kept.get_mut(&file).unwrap();
            entry.read_at = SystemTime::now() + RACY_WINDOW * 2;
            entry.loaded.text = "kept".into();
        }
        assert_eq!(reader.read(None, &place, 99).unwrap().unwrap().text, "kept");
        assert_eq!(reader.kept(), 1);
    }
}
