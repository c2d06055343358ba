//! The per-user artifact cache: where plugin files are copied (or compiled artifacts stored)
//! before the host maps and runs them. Both loaders share it: `cordis-dylib` loads a verified
//! copy of a library ([`Cache::materialize`]), `cordis-wasm` stores and reads compiled
//! components ([`Cache::store`], [`Cache::read`]); both read the configured file with
//! [`read_library`] (no symlink, no FIFO).
//!
//! # Why a copy, and why this way
//! A library is never unloaded, and a second `dlopen` of the same path returns the old code, so
//! the host loads a content-addressed copy (`<sha256>-<file name>`): changed bytes are a new
//! name. The copy is also what is verified, so it must be a file nobody else can change between
//! the check and the load:
//!
//! - the directory is the user's own: created with mode 0700, and refused unless it is a real
//!   directory (not a symlink) owned by this user and not writable by group or others; every
//!   file operation is relative to that opened directory, so renaming a parent afterwards
//!   changes nothing;
//! - a new copy is written to a random name created exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`,
//!   mode 0600) and renamed into place; nothing is ever opened through a planted symlink;
//! - the bytes are hashed from the open descriptor, and the library is loaded from that same
//!   descriptor (`/proc/self/fd/N`), never by looking the name up again;
//! - an existing copy is reused only if it is a regular file (opened non-blocking, so a FIFO
//!   cannot hang the host) whose bytes, read from the descriptor, have the expected hash;
//!   anything else at that name is replaced by a fresh copy.
//!
//! # Location
//! `CORDIS_DYLIB_CACHE` if set, else `$XDG_CACHE_HOME/cordis/dylib` (an absolute
//! `XDG_CACHE_HOME`), else `$HOME/.cache/cordis/dylib`. The same checks apply to all three.
#![cfg(unix)]

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use sha2::{Digest, Sha256};

/// Why the cache directory cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// No variable says where the user's cache is.
    #[error(
        "no library cache directory: set CORDIS_DYLIB_CACHE, XDG_CACHE_HOME or HOME to say where it goes"
    )]
    NoLocation,
    /// Creating or opening the directory failed.
    #[error("cannot use the library cache {path}: {reason}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The directory is a symlink.
    #[error(
        "the library cache {path} is a symlink; refusing it (it must be a directory of your own)"
    )]
    Symlink {
        /// The directory.
        path: PathBuf,
    },
    /// Something else than a directory is there.
    #[error("the library cache {path} is not a directory")]
    NotDirectory {
        /// The path.
        path: PathBuf,
    },
    /// Another user owns the directory.
    #[error(
        "the library cache {path} is owned by uid {owner}, not by this user (uid {uid}); refusing it (another user could replace the libraries this host loads)"
    )]
    Owner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The effective uid of this process.
        uid: u32,
    },
    /// Group or others may write the directory.
    #[error(
        "the library cache {path} is writable by its group or by others (mode {mode:03o}); refusing it (chmod 700 it)"
    )]
    Writable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// What [`Cache::prune`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneOutcome {
    /// Files removed.
    pub removed: u64,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Cache files kept because they are newer than the limit.
    pub kept: u64,
    /// Files that could not be removed, with why.
    pub failed: Vec<String>,
}

/// Whether `name` is one the cache writes: `<64 hex>-<library name>` or `.<hex>.partial`.
fn is_cache_name(name: &str) -> bool {
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some(inner) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".partial"))
    {
        return hex(inner);
    }
    name.len() > 65 && name.as_bytes()[64] == b'-' && hex(&name[..64])
}

/// An opened, verified cache directory.
#[derive(Debug)]
pub struct Cache {
    path: PathBuf,
    dir: OwnedFd,
}

/// Where the cache goes for this environment (see the module docs), from `var`.
///
/// # Errors
/// [`CacheError::NoLocation`] when none of the variables is usable.
pub fn default_dir(var: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, CacheError> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("CORDIS_DYLIB_CACHE") {
        return Ok(dir);
    }
    if let Some(xdg) = set("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return Ok(xdg.join("cordis").join("dylib"));
    }
    set("HOME")
        .filter(|p| p.is_absolute())
        .map(|home| home.join(".cache").join("cordis").join("dylib"))
        .ok_or(CacheError::NoLocation)
}

impl Cache {
    /// The cache of this process's environment ([`default_dir`] of `std::env`), created and
    /// verified.
    ///
    /// # Errors
    /// See [`Cache::open`].
    pub fn from_env() -> Result<Cache, CacheError> {
        Cache::open(&default_dir(|name| std::env::var_os(name))?)
    }

    /// Creates `path` (mode 0700, with missing parents) unless it exists, then opens it and
    /// checks that it is a directory, not a symlink, owned by this user and not writable by
    /// group or others.
    ///
    /// # Errors
    /// Any [`CacheError`] but `NoLocation`.
    pub fn open(path: &Path) -> Result<Cache, CacheError> {
        let io = |e: &dyn std::fmt::Display| CacheError::Io {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(CacheError::Symlink {
                    path: path.to_owned(),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| io(&e))?,
            Err(e) => return Err(io(&e)),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = match rustix::fs::open(path, flags, Mode::empty()) {
            Ok(fd) => fd,
            // Swapped for a symlink since the check above.
            Err(rustix::io::Errno::LOOP) => {
                return Err(CacheError::Symlink {
                    path: path.to_owned(),
                });
            }
            Err(rustix::io::Errno::NOTDIR) => {
                return Err(CacheError::NotDirectory {
                    path: path.to_owned(),
                });
            }
            Err(e) => return Err(io(&e)),
        };
        // Checked on the opened directory itself: what we verify is what we use.
        let meta = File::from(dir.try_clone().map_err(|e| io(&e))?)
            .metadata()
            .map_err(|e| io(&e))?;
        let uid = rustix::process::geteuid().as_raw();
        if meta.uid() != uid {
            return Err(CacheError::Owner {
                path: path.to_owned(),
                owner: meta.uid(),
                uid,
            });
        }
        if meta.mode() & 0o022 != 0 {
            return Err(CacheError::Writable {
                path: path.to_owned(),
                mode: meta.mode() & 0o7777,
            });
        }
        Ok(Cache {
            path: path.to_owned(),
            dir,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes cached copies (`<sha256>-<name>`) and leftover staging files (`.<hex>.partial`)
    /// not modified within `keep` (all of them when `keep` is zero), working on the opened,
    /// verified directory so a swapped path cannot redirect it. Anything else in the directory
    /// is left alone. A process that has a removed copy loaded keeps using it; the next load
    /// copies the library again.
    ///
    /// # Errors
    /// When the directory cannot be listed; a file that cannot be removed is reported in the
    /// outcome, not as an error.
    pub fn prune(&self, keep: std::time::Duration) -> Result<PruneOutcome, CacheError> {
        let io = |e: &dyn std::fmt::Display| CacheError::Io {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        let mut outcome = PruneOutcome::default();
        let now = std::time::SystemTime::now();
        let mut names = Vec::new();
        let dir = rustix::fs::Dir::read_from(&self.dir).map_err(|e| io(&e))?;
        for entry in dir {
            let entry = entry.map_err(|e| io(&e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_cache_name(&name) {
                names.push(name);
            }
        }
        names.sort();
        for name in names {
            let Ok(stat) = rustix::fs::statat(
                &self.dir,
                name.as_str(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            ) else {
                continue;
            };
            let modified = std::time::UNIX_EPOCH
                + std::time::Duration::from_secs(u64::try_from(stat.st_mtime).unwrap_or(0));
            let age = now.duration_since(modified).unwrap_or_default();
            if !keep.is_zero() && age < keep {
                outcome.kept += 1;
                continue;
            }
            match rustix::fs::unlinkat(&self.dir, name.as_str(), rustix::fs::AtFlags::empty()) {
                Ok(()) => {
                    outcome.removed += 1;
                    outcome.bytes += u64::try_from(stat.st_size).unwrap_or(0);
                }
                Err(e) => outcome.failed.push(format!("{name}: {e}")),
            }
        }
        Ok(outcome)
    }

    /// A readable descriptor of a cache file holding exactly `bytes` (whose sha256 is `hash`),
    /// named `<sha256>-<file_name>`: the existing copy if it checks out, else a fresh one.
    ///
    /// # Errors
    /// The copy cannot be created or written, or its bytes changed while it was written.
    pub fn materialize(
        &self,
        bytes: &[u8],
        hash: &[u8; 32],
        file_name: &str,
    ) -> Result<File, CacheError> {
        let io = |what: &str, e: &dyn std::fmt::Display| CacheError::Io {
            path: self.path.clone(),
            reason: format!("{what}: {e}"),
        };
        let name = format!("{}-{file_name}", hex(hash));
        if let Some(file) = self.reuse(&name, hash) {
            return Ok(file);
        }
        for _ in 0..16 {
            let staging = format!(".{}.partial", random_hex());
            let flags =
                OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd =
                match rustix::fs::openat(&self.dir, &staging, flags, Mode::from_raw_mode(0o600)) {
                    Ok(fd) => fd,
                    // Someone holds that name (whatever it is, it is not followed): draw again.
                    Err(rustix::io::Errno::EXIST) => continue,
                    Err(e) => return Err(io("cannot create a copy", &e)),
                };
            let mut file = File::from(fd);
            let written = file.write_all(bytes).and_then(|()| sha256_of(&file));
            match written {
                Ok(h) if &h == hash => {}
                Ok(_) => {
                    let _ = rustix::fs::unlinkat(&self.dir, &staging, rustix::fs::AtFlags::empty());
                    return Err(io(
                        "cannot copy the library",
                        &"the copy's bytes changed while it was written",
                    ));
                }
                Err(e) => {
                    let _ = rustix::fs::unlinkat(&self.dir, &staging, rustix::fs::AtFlags::empty());
                    return Err(io("cannot write a copy", &e));
                }
            }
            // Publish for later runs; whatever sits at the name (a stale copy, a symlink) is
            // replaced, not followed. If that fails (say, a directory is there), this process
            // still loads from the descriptor it verified.
            if rustix::fs::renameat(&self.dir, &staging, &self.dir, &name).is_err() {
                let _ = rustix::fs::unlinkat(&self.dir, &staging, rustix::fs::AtFlags::empty());
            }
            return Ok(file);
        }
        Err(io(
            "cannot create a copy",
            &"every random name drawn was taken",
        ))
    }

    /// Publishes `bytes` as the file `name` of the cache (mode 0600, written to an exclusive
    /// staging name and renamed into place, never through a planted symlink): how other
    /// content-addressed artifacts (compiled wasm components) share this directory and its
    /// checks. `name` must be a plain file name.
    ///
    /// # Errors
    /// The file cannot be created or written; a failed rename only skips publishing.
    pub fn store(&self, name: &str, bytes: &[u8]) -> Result<(), CacheError> {
        let io = |what: &str, e: &dyn std::fmt::Display| CacheError::Io {
            path: self.path.clone(),
            reason: format!("{what}: {e}"),
        };
        if name.contains('/') || name.starts_with('.') || name.is_empty() {
            return Err(io(
                "cannot store",
                &format!("{name:?} is not a plain file name"),
            ));
        }
        for _ in 0..16 {
            let staging = format!(".{}.partial", random_hex());
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd =
                match rustix::fs::openat(&self.dir, &staging, flags, Mode::from_raw_mode(0o600)) {
                    Ok(fd) => fd,
                    Err(rustix::io::Errno::EXIST) => continue,
                    Err(e) => return Err(io("cannot create a file", &e)),
                };
            if let Err(e) = File::from(fd).write_all(bytes) {
                let _ = rustix::fs::unlinkat(&self.dir, &staging, rustix::fs::AtFlags::empty());
                return Err(io("cannot write a file", &e));
            }
            if rustix::fs::renameat(&self.dir, &staging, &self.dir, name).is_err() {
                let _ = rustix::fs::unlinkat(&self.dir, &staging, rustix::fs::AtFlags::empty());
            }
            return Ok(());
        }
        Err(io(
            "cannot create a file",
            &"every random name drawn was taken",
        ))
    }

    /// The bytes of the cache file `name`, if it is a regular file (opened without following a
    /// symlink and without blocking, relative to the verified directory). The caller verifies
    /// the bytes before trusting them.
    pub fn read(&self, name: &str) -> Option<Vec<u8>> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let mut file = File::from(rustix::fs::openat(&self.dir, name, flags, Mode::empty()).ok()?);
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() {
            return None;
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// The existing copy at `name`, if it is a regular file with the expected bytes.
    fn reuse(&self, name: &str, hash: &[u8; 32]) -> Option<File> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = File::from(rustix::fs::openat(&self.dir, name, flags, Mode::empty()).ok()?);
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() {
            tracing::warn!(
                cache = %self.path.display(),
                "replacing {name} in the library cache: it is not a regular file"
            );
            return None;
        }
        match sha256_of(&file) {
            Ok(h) if &h == hash => Some(file),
            _ => {
                tracing::warn!(
                    cache = %self.path.display(),
                    "replacing {name} in the library cache: its bytes are not the library's"
                );
                None
            }
        }
    }
}

/// Reads a library file: opened without following a symlink and without blocking (a FIFO is
/// refused, not waited on), then read to the end from that descriptor.
///
/// # Errors
/// Opening or reading failed, or it is not a regular file.
pub fn read_library(path: &Path) -> std::io::Result<(Vec<u8>, std::fs::Metadata)> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let mut file = File::from(rustix::fs::open(path, flags, Mode::empty()).map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            std::io::Error::other(
                "it is a symlink (it was resolved when the configuration was read)",
            )
        } else {
            std::io::Error::from(e)
        }
    })?);
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other(
            "it is not a regular file (a FIFO, socket or device is never opened)",
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok((bytes, meta))
}

/// The sha256 of a library file, read as [`read_library`] does.
///
/// # Errors
/// Opening or reading failed, or it is not a regular file.
pub fn file_sha256(path: &Path) -> std::io::Result<[u8; 32]> {
    read_library(path).map(|(bytes, _)| Sha256::digest(&bytes).into())
}

/// The sha256 of everything in `file`, read through its descriptor from offset 0.
fn sha256_of(file: &File) -> std::io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    loop {
        let n = file.read_at(&mut buf, offset)?;
        if n == 0 {
            return Ok(hasher.finalize().into());
        }
        hasher.update(&buf[..n]);
        offset += n as u64;
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 128 unpredictable bits as hex: keyed SipHash (the keys come from the OS's entropy source)
/// over a counter. The name needs no secrecy (the exclusive create never follows anything at
/// it), only to be unguessable enough that planting names is pointless.
fn random_hex() -> String {
    use std::hash::{BuildHasher, Hasher};
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let half = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn prune_removes_only_cache_files_and_keeps_recent_ones_when_asked() {
        let dir = std::env::temp_dir().join(format!("cordis-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = Cache::open(&dir).unwrap();
        let copy = format!("{}-libx.so", "ab".repeat(32));
        std::fs::write(dir.join(&copy), b"lib").unwrap();
        std::fs::write(dir.join(".0123abcd.partial"), b"half").unwrap();
        std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
        let recent = cache.prune(std::time::Duration::from_secs(3600)).unwrap();
        assert_eq!((recent.removed, recent.kept), (0, 2));
        let all = cache.prune(std::time::Duration::ZERO).unwrap();
        assert_eq!((all.removed, all.bytes), (2, 7));
        assert!(
            dir.join("notes.txt").exists(),
            "a file the cache did not write stays"
        );
        assert!(!dir.join(&copy).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "cordis-dylib-cache-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_location_follows_the_override_then_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let dir = |pairs| default_dir(env(pairs)).unwrap();
        assert_eq!(
            dir(&[("CORDIS_DYLIB_CACHE", "/c"), ("HOME", "/h")]),
            Path::new("/c")
        );
        assert_eq!(
            dir(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]),
            Path::new("/x/cordis/dylib")
        );
        assert_eq!(
            dir(&[("XDG_CACHE_HOME", "relative"), ("HOME", "/h")]),
            Path::new("/h/.cache/cordis/dylib")
        );
        assert_eq!(default_dir(env(&[])), Err(CacheError::NoLocation));
    }

    #[test]
    fn a_new_cache_directory_is_private_and_a_shared_one_is_refused() {
        let base = scratch("modes");
        let dir = base.join("a/b");
        let cache = Cache::open(&dir).unwrap();
        let mode = std::fs::metadata(cache.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        let err = Cache::open(&dir).unwrap_err();
        assert!(
            matches!(err, CacheError::Writable { mode: 0o770, .. }),
            "{err}"
        );
        let link = base.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(matches!(
            Cache::open(&link),
            Err(CacheError::Symlink { .. })
        ));
        std::fs::write(base.join("file"), "x").unwrap();
        assert!(matches!(
            Cache::open(&base.join("file")),
            Err(CacheError::NotDirectory { .. })
        ));
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn staging_names_are_random_and_a_planted_copy_is_replaced_not_followed() {
        assert_ne!(random_hex(), random_hex());
        let base = scratch("planted");
        let cache = Cache::open(&base.join("cache")).unwrap();
        let victim = base.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let bytes = b"library bytes".to_vec();
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        let name = format!("{}-lib.so", hex(&hash));
        std::os::unix::fs::symlink(&victim, cache.path().join(&name)).unwrap();
        let file = cache.materialize(&bytes, &hash, "lib.so").unwrap();
        assert_eq!(sha256_of(&file).unwrap(), hash);
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let placed = cache.path().join(&name);
        assert!(
            !std::fs::symlink_metadata(&placed)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&placed).unwrap(), bytes);
        // The copy checks out now and is reused; wrong bytes there are replaced.
        assert!(cache.reuse(&name, &hash).is_some());
        std::fs::write(&placed, "other bytes").unwrap();
        assert!(cache.reuse(&name, &hash).is_none());
        let file = cache.materialize(&bytes, &hash, "lib.so").unwrap();
        assert_eq!(sha256_of(&file).unwrap(), hash);
        assert_eq!(std::fs::read(&placed).unwrap(), bytes);
        let leftovers: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".partial"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let base = scratch("fifo");
        let fifo = base.join("lib.so");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = read_library(&fifo).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
