//! The project's plugin directory, putting a plugin file there (and taking it back), and
//! writing `cordis.yml` atomically.
//!
//! # Which directory
//! `plugins/` next to the config file, as the docs' entries write it (`./plugins/weather.wasm`),
//! unless that name is taken by something else: when `plugins/` exists and holds anything but
//! plugin files (a source tree, as in this repository), or `.cordis/plugins/` exists already,
//! `.cordis/plugins/` is used. Both lie inside the config's directory, where the host loads
//! plugin files from without any `--plugin-dir`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The extensions of plugin files.
pub const PLUGIN_EXTENSIONS: [&str; 4] = [".wasm", ".so", ".dylib", ".dll"];

/// The two places a project's plugin directory can be, relative to the config's directory.
pub const CANDIDATES: [&str; 2] = ["plugins", ".cordis/plugins"];

/// The plugin directory of the config in `config_dir` (see the module docs).
pub fn plugin_dir(config_dir: &Path) -> PathBuf {
    let hidden = config_dir.join(CANDIDATES[1]);
    let plain = config_dir.join(CANDIDATES[0]);
    if hidden.is_dir() {
        return hidden;
    }
    match std::fs::symlink_metadata(&plain) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => plain,
        Ok(meta) if meta.is_dir() && only_plugin_files(&plain) => plain,
        _ => hidden,
    }
}

/// Whether every entry of `dir` is a regular file with a plugin extension.
fn only_plugin_files(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.into_iter().all(|entry| {
        entry.is_ok_and(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            e.file_type().is_ok_and(|t| t.is_file())
                && PLUGIN_EXTENSIONS.iter().any(|x| name.ends_with(x))
        })
    })
}

/// A plugin file put in place, and what to take back if the change is refused.
#[derive(Debug, Default)]
pub struct Placed {
    /// The file, when this run created it (an identical file already there is left alone).
    pub created: Option<PathBuf>,
    /// Directories this run created, outermost first.
    pub dirs: Vec<PathBuf>,
}

impl Placed {
    /// Removes what this run created: the file, then its directories if they are empty.
    pub fn undo(&self) {
        if let Some(file) = &self.created {
            let _ = std::fs::remove_file(file);
        }
        for dir in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Why a file could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    /// Another file is already there.
    #[error(
        "{path} already exists with other bytes (sha256 {sha256}); remove it, or keep it and pin it with `cordis plugin update ID`"
    )]
    Exists {
        /// The path.
        path: PathBuf,
        /// Its bytes' sha256.
        sha256: String,
    },
    /// Something there is not a regular file we can read.
    #[error(transparent)]
    Source(#[from] super::source::SourceError),
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Puts `bytes` at `dir/name`, creating `dir` (and its missing parents): a new file is written
/// under a temporary name, synced, and linked into place (never over another file).
///
/// # Errors
/// A [`PlaceError`]; nothing this call created is left behind.
pub fn place(dir: &Path, name: &str, bytes: &[u8]) -> Result<Placed, PlaceError> {
    let mut placed = Placed::default();
    let result = place_into(dir, name, bytes, &mut placed);
    if result.is_err() {
        placed.undo();
    }
    result.map(|()| placed)
}

fn place_into(dir: &Path, name: &str, bytes: &[u8], placed: &mut Placed) -> Result<(), PlaceError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| PlaceError::Io { path, source }
    };
    let mut missing: Vec<&Path> = dir.ancestors().take_while(|a| !a.exists()).collect();
    missing.reverse();
    for d in missing {
        std::fs::create_dir(d).map_err(io(d))?;
        placed.dirs.push(d.to_owned());
    }
    let target = dir.join(name);
    if std::fs::symlink_metadata(&target).is_ok() {
        let there = super::source::read_file(&target, false)?;
        if there == bytes {
            return Ok(());
        }
        return Err(PlaceError::Exists {
            sha256: super::source::sha256_hex(&there),
            path: target,
        });
    }
    let staging = dir.join(format!(".{name}.cordis-{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staging)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::hard_link(&staging, &target)
    };
    let linked = write();
    let _ = std::fs::remove_file(&staging);
    linked.map_err(io(&target))?;
    placed.created = Some(target);
    Ok(())
}

/// Replaces the config at `path` with `new`, atomically (a synced temporary file in the same
/// directory, with the old file's permissions, renamed over it), if it still holds `old`. A
/// symlinked config is written where the link points.
///
/// # Errors
/// When the file changed since it was read, or on any I/O failure; the file is then unchanged.
pub fn write_config(path: &Path, old: &str, new: &str) -> std::io::Result<()> {
    let real = std::fs::canonicalize(path)?;
    if std::fs::read(&real)? != old.as_bytes() {
        return Err(std::io::Error::other(
            "it changed while cordis was working on it; nothing was written, run the command again",
        ));
    }
    let dir = real.parent().unwrap_or(Path::new("."));
    let name = real
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let staging = dir.join(format!(".{name}.cordis-{}.tmp", std::process::id()));
    let permissions = std::fs::metadata(&real)?.permissions();
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staging)?;
        file.write_all(new.as_bytes())?;
        file.set_permissions(permissions)?;
        file.sync_all()?;
        std::fs::rename(&staging, &real)
    };
    let written = write();
    if written.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugins_next_to_the_config_unless_it_holds_other_things() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(plugin_dir(dir.path()), dir.path().join("plugins"));
        std::fs::create_dir(dir.path().join("plugins")).unwrap();
        std::fs::write(dir.path().join("plugins/a.wasm"), b"x").unwrap();
        assert_eq!(plugin_dir(dir.path()), dir.path().join("plugins"));
        std::fs::create_dir(dir.path().join("plugins/sdk")).unwrap();
        assert_eq!(plugin_dir(dir.path()), dir.path().join(".cordis/plugins"));
    }

    #[test]
    fn a_refused_placement_takes_back_the_file_and_the_directories_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join(".cordis/plugins");
        let placed = place(&target, "a.wasm", b"bytes").unwrap();
        assert_eq!(std::fs::read(target.join("a.wasm")).unwrap(), b"bytes");
        assert_eq!(placed.dirs.len(), 2);
        placed.undo();
        assert!(!dir.path().join(".cordis").exists());
        // An identical file is reused (and left alone by undo); another one is refused.
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("a.wasm"), b"bytes").unwrap();
        place(&target, "a.wasm", b"bytes").unwrap().undo();
        assert!(target.join("a.wasm").exists());
        assert!(matches!(
            place(&target, "a.wasm", b"other"),
            Err(PlaceError::Exists { .. })
        ));
    }
}
