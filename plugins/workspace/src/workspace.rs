//! The opened root and the operations that stay beneath it.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

#[cfg(any(target_os = "linux", target_os = "android"))]
use rustix::fs::ResolveFlags;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Escape, WorkspaceError};
use crate::path::WorkspacePath;

/// How paths are opened beneath the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resolution {
    /// `openat2(RESOLVE_BENEATH)` when the kernel has it (symlinks inside the root are
    /// followed), else [`Resolution::Walk`].
    #[default]
    Auto,
    /// One `openat(O_NOFOLLOW)` per component: no symlink is followed.
    Walk,
}

/// What a successful [`Workspace::write_atomic`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// True when no file existed before.
    pub created: bool,
    /// Bytes written.
    pub bytes: u64,
}

/// Size and kind of an opened file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// Size in bytes.
    pub size: u64,
}

/// An opened workspace root; cheap to clone, `Send + Sync`.
///
/// Every method blocks on file I/O: call it from `spawn_blocking` in async code.
#[derive(Debug, Clone)]
pub struct Workspace {
    inner: Arc<Inner>,
    resolution: Resolution,
}

#[derive(Debug)]
struct Inner {
    /// The canonical root.
    root: PathBuf,
    /// The root as configured (made absolute), also accepted as a prefix of absolute paths.
    configured: PathBuf,
    dir: OwnedFd,
    /// More roots (a front end's additional directories), each its own boundary: a path
    /// beneath one of them is opened relative to its handle, as a path beneath the root is.
    more: Vec<Root>,
}

/// One additional root: as [`Inner`]'s root, canonical and configured, and its handle.
#[derive(Debug)]
struct Root {
    root: PathBuf,
    configured: PathBuf,
    dir: OwnedFd,
}

/// The most roots a workspace has besides its own.
pub const MAX_MORE_ROOTS: usize = 32;

/// Opens `given` as a root: made absolute, canonicalized, opened as a directory.
fn open_root(given: &Path) -> Result<Root, WorkspaceError> {
    let root_err = |source| WorkspaceError::Root {
        root: given.to_path_buf(),
        source,
    };
    let configured = std::path::absolute(given).map_err(root_err)?;
    let canonical = std::fs::canonicalize(&configured).map_err(root_err)?;
    let dir = rustix::fs::open(
        &canonical,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| root_err(e.into()))?;
    Ok(Root {
        root: canonical,
        configured,
        dir,
    })
}

/// 0 unknown, 1 openat2 works, 2 it does not (old kernel or a seccomp filter).
static OPENAT2: AtomicU8 = AtomicU8::new(0);
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW
}

fn read_flags() -> OFlags {
    // NONBLOCK: opening a FIFO for reading must not hang the tool; NOCTTY: never adopt a tty.
    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY
}

fn kind_name(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "named pipe",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "unknown file type",
    }
}

impl Workspace {
    /// Opens `root` (made absolute against the current directory, symlinks in it resolved).
    ///
    /// # Errors
    /// [`WorkspaceError::Root`] when it does not exist or is not a directory.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, WorkspaceError> {
        Self::open_with(root, &[])
    }

    /// Opens `root` and the additional roots `more` (each made absolute and canonical; one
    /// that is the root or beneath an earlier one adds nothing). A path beneath any of them
    /// is in the workspace; relative paths resolve against `root`.
    ///
    /// # Errors
    /// [`WorkspaceError::Root`] when one does not exist or is not a directory;
    /// [`WorkspaceError::TooManyRoots`] past [`MAX_MORE_ROOTS`].
    pub fn open_with(root: impl AsRef<Path>, more: &[PathBuf]) -> Result<Self, WorkspaceError> {
        if more.len() > MAX_MORE_ROOTS {
            return Err(WorkspaceError::TooManyRoots {
                count: more.len(),
                limit: MAX_MORE_ROOTS,
            });
        }
        let Root {
            root,
            configured,
            dir,
        } = open_root(root.as_ref())?;
        let mut opened: Vec<Root> = Vec::with_capacity(more.len());
        for given in more {
            let extra = open_root(given)?;
            let covered = extra.root.starts_with(&root)
                || opened.iter().any(|r| extra.root.starts_with(&r.root));
            if !covered {
                opened.push(extra);
            }
        }
        Ok(Workspace {
            inner: Arc::new(Inner {
                root,
                configured,
                dir,
                more: opened,
            }),
            resolution: Resolution::Auto,
        })
    }

    /// The additional roots (canonical), in the order they were given.
    pub fn more_roots(&self) -> impl Iterator<Item = &Path> {
        self.inner.more.iter().map(|r| r.root.as_path())
    }

    /// The canonical directory of root `base` (0: the root, then the additional ones).
    fn base_root(&self, base: usize) -> &Path {
        match base.checked_sub(1).and_then(|i| self.inner.more.get(i)) {
            Some(more) => &more.root,
            None => &self.inner.root,
        }
    }

    /// The same root, opened with `resolution`.
    pub fn with_resolution(mut self, resolution: Resolution) -> Self {
        self.resolution = resolution;
        self
    }

    /// Whether `other` is this very open of the root (a clone of it), not another open.
    #[cfg(test)]
    pub(crate) fn same_open(&self, other: &Workspace) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The handle of the root `path` is beneath.
    fn root_fd(&self, path: &WorkspacePath) -> BorrowedFd<'_> {
        match path
            .base
            .checked_sub(1)
            .and_then(|i| self.inner.more.get(i))
        {
            Some(more) => more.dir.as_fd(),
            None => self.inner.dir.as_fd(),
        }
    }

    /// Resolves `input` lexically: relative to the root, or absolute under it or under one
    /// of the additional roots.
    ///
    /// # Errors
    /// [`WorkspaceError::Outside`] for `..` above the root or an absolute path elsewhere.
    pub fn resolve(&self, input: &str) -> Result<WorkspacePath, WorkspaceError> {
        let outside = |reason| WorkspaceError::Outside {
            path: input.to_owned(),
            root: self.inner.root.clone(),
            reason,
        };
        let path = Path::new(input);
        let mut base = 0;
        let rest = if path.is_absolute() {
            let beneath = |root: &Path, configured: &Path| {
                path.strip_prefix(root)
                    .or_else(|_| path.strip_prefix(configured))
                    .ok()
            };
            match beneath(&self.inner.root, &self.inner.configured) {
                Some(rest) => rest,
                None => {
                    let (i, rest) = self
                        .inner
                        .more
                        .iter()
                        .enumerate()
                        .find_map(|(i, r)| beneath(&r.root, &r.configured).map(|rest| (i, rest)))
                        .ok_or_else(|| outside(Escape::Absolute))?;
                    base = i + 1;
                    rest
                }
            }
        } else {
            path
        };
        let mut rel = PathBuf::new();
        for component in rest.components() {
            match component {
                Component::Normal(c) => rel.push(c),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !rel.pop() {
                        return Err(outside(Escape::ParentDir));
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(outside(Escape::Absolute)),
            }
        }
        let shown = (base > 0).then(|| self.base_root(base).to_path_buf());
        Ok(WorkspacePath {
            rel,
            given: input.to_owned(),
            base,
            shown,
        })
    }

    /// The workspace path of `abs`, a path a directory walk under [`Workspace::root`] (or
    /// under an additional root) produced.
    pub fn relativize(&self, abs: &Path) -> Option<WorkspacePath> {
        if let Ok(rel) = abs.strip_prefix(&self.inner.root) {
            let given = rel.to_string_lossy().into_owned();
            return self
                .resolve(if given.is_empty() { "." } else { &given })
                .ok();
        }
        self.resolve(abs.to_str()?).ok()
    }

    fn map_errno(&self, path: &WorkspacePath, e: Errno) -> WorkspaceError {
        match e {
            Errno::NOENT => WorkspaceError::NotFound {
                path: path.given.clone(),
            },
            Errno::XDEV | Errno::LOOP => WorkspaceError::Outside {
                path: path.given.clone(),
                root: self.base_root(path.base).to_path_buf(),
                reason: Escape::Symlink,
            },
            e => WorkspaceError::Io {
                path: path.given.clone(),
                source: e.into(),
            },
        }
    }

    /// Opens `path` beneath the root with `flags` (the last component; directories on the way
    /// are always searched without following links in walk mode).
    fn open_beneath(&self, path: &WorkspacePath, flags: OFlags) -> Result<OwnedFd, WorkspaceError> {
        let rel: &Path = if path.is_root() {
            Path::new(".")
        } else {
            &path.rel
        };
        // openat2 is Linux-only; elsewhere every open is the no-follow walk.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if self.resolution == Resolution::Auto && OPENAT2.load(Ordering::Relaxed) != 2 {
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            // EAGAIN: a concurrent rename raced the lookup; the kernel asks for a retry.
            for _ in 0..16 {
                match rustix::fs::openat2(self.root_fd(path), rel, flags, Mode::empty(), resolve) {
                    Ok(fd) => {
                        OPENAT2.store(1, Ordering::Relaxed);
                        return Ok(fd);
                    }
                    Err(Errno::AGAIN) => continue,
                    Err(Errno::NOSYS | Errno::PERM) if OPENAT2.load(Ordering::Relaxed) == 0 => {
                        OPENAT2.store(2, Ordering::Relaxed);
                        break;
                    }
                    Err(e) => return Err(self.map_errno(path, e)),
                }
            }
            if OPENAT2.load(Ordering::Relaxed) != 2 {
                return Err(self.map_errno(path, Errno::AGAIN));
            }
        }
        self.walk(path, flags | OFlags::NOFOLLOW)
    }

    /// Opens each directory on the way with `O_NOFOLLOW`, then the last component with `last`.
    fn walk(&self, path: &WorkspacePath, last: OFlags) -> Result<OwnedFd, WorkspaceError> {
        let components = path.components();
        let Some((name, dirs)) = components.split_last() else {
            return rustix::fs::openat(self.root_fd(path), ".", last, Mode::empty())
                .map_err(|e| self.map_errno(path, e));
        };
        let parent = self.walk_dirs(path, dirs, false)?;
        let parent_fd = parent.as_ref().map_or(self.root_fd(path), |fd| fd.as_fd());
        rustix::fs::openat(parent_fd, *name, last, Mode::empty())
            .map_err(|e| self.classify(path, parent_fd, name, e))
    }

    /// Opens the directories `dirs` one by one, creating missing ones when `create`; `None`
    /// means the root itself.
    fn walk_dirs(
        &self,
        path: &WorkspacePath,
        dirs: &[&OsStr],
        create: bool,
    ) -> Result<Option<OwnedFd>, WorkspaceError> {
        let mut current: Option<OwnedFd> = None;
        for dir in dirs {
            let at = current.as_ref().map_or(self.root_fd(path), |fd| fd.as_fd());
            let next = match rustix::fs::openat(at, *dir, dir_flags(), Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(at, *dir, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(self.map_errno(path, e)),
                    }
                    rustix::fs::openat(at, *dir, dir_flags(), Mode::empty())
                        .map_err(|e| self.classify(path, at, dir, e))?
                }
                Err(e) => return Err(self.classify(path, at, dir, e)),
            };
            current = Some(next);
        }
        Ok(current)
    }

    /// Names a failed no-follow open: a link where none may be followed is an escape.
    fn classify(
        &self,
        path: &WorkspacePath,
        at: BorrowedFd<'_>,
        name: &OsStr,
        e: Errno,
    ) -> WorkspaceError {
        if e != Errno::NOTDIR && e != Errno::LOOP {
            return self.map_errno(path, e);
        }
        match rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st)
                if !matches!(
                    FileType::from_raw_mode(st.st_mode),
                    FileType::Symlink | FileType::Directory
                ) =>
            {
                WorkspaceError::NotADirectory {
                    path: path.given.clone(),
                }
            }
            // A link, or (a directory or nothing) because it was swapped after the failed open.
            _ => WorkspaceError::Outside {
                path: path.given.clone(),
                root: self.base_root(path.base).to_path_buf(),
                reason: Escape::Symlink,
            },
        }
    }

    /// Opens a regular file for reading.
    ///
    /// # Errors
    /// Escapes, a missing file, or anything but a regular file (directories, FIFOs, devices).
    pub fn open_file(&self, path: &WorkspacePath) -> Result<(File, FileInfo), WorkspaceError> {
        let fd = self.open_beneath(path, read_flags())?;
        let st = rustix::fs::fstat(&fd).map_err(|e| self.map_errno(path, e))?;
        let ft = FileType::from_raw_mode(st.st_mode);
        if ft != FileType::RegularFile {
            return Err(WorkspaceError::NotAFile {
                path: path.given.clone(),
                kind: kind_name(ft),
            });
        }
        Ok((
            File::from(fd),
            FileInfo {
                size: u64::try_from(st.st_size).unwrap_or(0),
            },
        ))
    }

    /// Reads a whole regular file.
    ///
    /// # Errors
    /// As [`Workspace::open_file`], plus read failures.
    pub fn read(&self, path: &WorkspacePath) -> Result<Vec<u8>, WorkspaceError> {
        self.read_limited(path, u64::MAX)
    }

    /// Reads a whole regular file of at most `limit` bytes.
    ///
    /// # Errors
    /// As [`Workspace::open_file`]; [`WorkspaceError::TooLarge`] past `limit`.
    pub fn read_limited(
        &self,
        path: &WorkspacePath,
        limit: u64,
    ) -> Result<Vec<u8>, WorkspaceError> {
        let (file, info) = self.open_file(path)?;
        if info.size > limit {
            return Err(WorkspaceError::TooLarge {
                path: path.given.clone(),
                size: info.size,
                limit,
            });
        }
        let mut buf = Vec::with_capacity(usize::try_from(info.size).unwrap_or(0));
        // A file growing after fstat must not blow the limit either.
        file.take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|source| WorkspaceError::Io {
                path: path.given.clone(),
                source,
            })?;
        if buf.len() as u64 > limit {
            return Err(WorkspaceError::TooLarge {
                path: path.given.clone(),
                size: buf.len() as u64,
                limit,
            });
        }
        Ok(buf)
    }

    /// True when `path` names an existing directory beneath the root.
    pub fn is_dir(&self, path: &WorkspacePath) -> Result<bool, WorkspaceError> {
        match self.open_beneath(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC) {
            Ok(_) => Ok(true),
            Err(WorkspaceError::NotADirectory { .. }) => Ok(false),
            Err(WorkspaceError::Io { source, .. })
                if source.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Gets `path` ready for a write that another party makes (a [`crate::FileRoute`]): its
    /// parent directories are created (never through a symlink) and the target is checked as
    /// [`Workspace::write_atomic`] checks it. Returns the absolute path and whether a file is
    /// there already.
    ///
    /// # Errors
    /// As [`Workspace::write_atomic`] before it writes.
    pub fn prepare_write(
        &self,
        path: &WorkspacePath,
    ) -> Result<(std::path::PathBuf, bool), WorkspaceError> {
        let (_, _, mode) = self.write_target(path)?;
        Ok((self.absolute(path), mode.is_some()))
    }

    /// What a write of `path` writes into: its parent directory (made, never through a
    /// symlink; `None`: the root), its file name, and the mode of the regular file there
    /// (`None`: there is none). A symlink or anything but a regular file at the target is
    /// refused.
    fn write_target<'p>(
        &self,
        path: &'p WorkspacePath,
    ) -> Result<(Option<OwnedFd>, &'p OsStr, Option<Mode>), WorkspaceError> {
        let components = path.components();
        let Some((name, dirs)) = components.split_last() else {
            return Err(WorkspaceError::NotAFile {
                path: path.given.clone(),
                kind: "directory",
            });
        };
        let parent = self.walk_dirs(path, dirs, true)?;
        let dir = parent.as_ref().map_or(self.root_fd(path), |fd| fd.as_fd());
        let mode = match rustix::fs::statat(dir, *name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => Some(Mode::from_raw_mode(st.st_mode & 0o7777)),
                FileType::Symlink => {
                    return Err(WorkspaceError::Outside {
                        path: path.given.clone(),
                        root: self.base_root(path.base).to_path_buf(),
                        reason: Escape::Symlink,
                    });
                }
                ft => {
                    return Err(WorkspaceError::NotAFile {
                        path: path.given.clone(),
                        kind: kind_name(ft),
                    });
                }
            },
            Err(Errno::NOENT) => None,
            Err(e) => return Err(self.map_errno(path, e)),
        };
        Ok((parent, *name, mode))
    }

    /// The absolute path of `path` (lexical: open it through the workspace to check it).
    pub fn absolute(&self, path: &WorkspacePath) -> std::path::PathBuf {
        crate::route::absolute(self.base_root(path.base), &path.rel)
    }

    /// The canonical directory of the root `path` is beneath (the root, or an additional one).
    pub fn root_of(&self, path: &WorkspacePath) -> &Path {
        self.base_root(path.base)
    }

    /// Writes `bytes` to `path` atomically: parent directories are created (never through a
    /// symlink), the data goes to a temporary file in the same directory, which is synced and
    /// renamed over the target. A reader sees the old file or the new one, never a mix; a
    /// symlink at the target is refused, never followed. An existing file keeps its mode.
    ///
    /// # Errors
    /// Escapes, a directory or symlink at the target, or I/O failures (the temporary file is
    /// removed).
    pub fn write_atomic(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
    ) -> Result<WriteOutcome, WorkspaceError> {
        let io = |source: std::io::Error| WorkspaceError::Io {
            path: path.given.clone(),
            source,
        };
        let (parent, name, existing_mode) = self.write_target(path)?;
        let dir = parent.as_ref().map_or(self.root_fd(path), |fd| fd.as_fd());
        let (temp_name, fd) = loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            // A fixed-length name: the target's own name may already be as long as a name can be.
            let temp = format!(".cordis-tmp.{}.{n}", std::process::id());
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            // Replacing a file: the copy is private until it has the old file's mode, so a
            // 0600 file's new content is never readable by others while it is written.
            let create_mode = if existing_mode.is_some() {
                0o600
            } else {
                0o666
            };
            match rustix::fs::openat(dir, temp.as_str(), flags, Mode::from_raw_mode(create_mode)) {
                Ok(fd) => break (temp, fd),
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(self.map_errno(path, e)),
            }
        };
        let written = (|| -> std::io::Result<()> {
            let mut file = File::from(fd);
            file.write_all(bytes)?;
            if let Some(mode) = existing_mode {
                rustix::fs::fchmod(&file, mode)?;
            }
            file.sync_all()?;
            rustix::fs::renameat(dir, temp_name.as_str(), dir, name)?;
            Ok(())
        })();
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(dir, temp_name.as_str(), AtFlags::empty());
            return Err(io(e));
        }
        // The rename is durable once the directory is synced; a failure here loses nothing.
        let _ = rustix::fs::fsync(dir);
        Ok(WriteOutcome {
            created: existing_mode.is_none(),
            bytes: bytes.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests;
