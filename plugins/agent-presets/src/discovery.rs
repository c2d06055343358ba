//! Finding presets: read every root each time (discovery is not memoized, so an added, edited
//! or removed preset shows at the next listing).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::composer::Composer;
use crate::config::{Root, Trust};

/// The composition file of a preset directory.
pub const COMPOSITION_FILE: &str = "agent.cordis.yml";
/// The optional display file of a preset directory.
pub const METADATA_FILE: &str = "preset.yml";

/// True for a valid preset id: `^[a-z0-9][a-z0-9-]*$` (the id names a directory, so it must
/// not be able to leave its root).
pub fn is_preset_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// One preset as discovered.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetInfo {
    /// Its id (the directory name).
    pub id: String,
    /// Display name from `preset.yml`.
    pub name: Option<String>,
    /// Display description from `preset.yml`.
    pub description: Option<String>,
    /// Listing order from `preset.yml` (lower first; presets without one come after, by id).
    pub order: Option<i64>,
    /// The root it was found in, and that root's trust.
    pub root: PathBuf,
    /// The root's trust.
    pub trust: Trust,
    /// Its composition file.
    pub composition: PathBuf,
    /// Why it cannot be mounted, if it cannot.
    pub broken: Option<String>,
}

#[derive(Deserialize, Default)]
struct Metadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    order: Option<i64>,
}

/// Display metadata of a preset directory; any read or parse failure means none (the file is
/// display only, and must never make a preset unusable).
fn metadata(dir: &Path) -> Metadata {
    let Ok(text) = read_small(&dir.join(METADATA_FILE)) else {
        return Metadata::default();
    };
    serde_yaml_ng::from_str(&text).unwrap_or_default()
}

/// Reads a regular file of at most 1 MiB (a FIFO or a device at a preset path must not hang or
/// flood a listing). The file is opened first and checked through the open handle, so one
/// swapped in between a check and the read cannot make the read block.
pub(crate) fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    const LIMIT: u64 = 1 << 20;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK changes nothing for a regular file; it keeps a FIFO's open from waiting.
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > LIMIT {
        return Err(std::io::Error::other("larger than 1 MiB"));
    }
    let mut bytes = Vec::new();
    file.take(LIMIT + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > LIMIT {
        return Err(std::io::Error::other("larger than 1 MiB"));
    }
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("not UTF-8 text"))
}

/// Every preset under `roots`, resolved through `composer` (a composition it refuses is listed
/// as broken with its reason), sorted by `order` then id. An absent root has no presets; an
/// earlier root wins an id.
///
/// Reads the file system: call it from a blocking context.
pub fn discover(roots: &[Root], composer: &dyn Composer) -> Vec<PresetInfo> {
    let mut found: Vec<PresetInfo> = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(&root.path) else {
            continue;
        };
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|id| is_preset_id(id))
            .filter(|id| root.path.join(id).is_dir())
            .collect();
        ids.sort();
        for id in ids {
            if found.iter().any(|p| p.id == id) {
                continue;
            }
            found.push(inspect(root, &id, composer));
        }
    }
    found.sort_by(|a, b| match (a.order, b.order) {
        (Some(x), Some(y)) => x.cmp(&y).then_with(|| a.id.cmp(&b.id)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.id.cmp(&b.id),
    });
    found
}

/// Why the composition file `path` cannot be a preset's, from a look at its metadata (a
/// missing file, or one that is not a regular file); `None` when it is worth reading. The
/// composer reads it without blocking on a FIFO, so this is for the message, not the safety.
pub(crate) fn composition_problem(path: &Path) -> Option<String> {
    let dir = path
        .parent()
        .map_or_else(|| ".".to_owned(), |p| p.display().to_string());
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => None,
        Ok(_) => Some(format!(
            "{} is not a regular file (a directory, FIFO, socket or device)",
            path.display()
        )),
        Err(_) => Some(format!("no {COMPOSITION_FILE} in {dir}")),
    }
}

/// One preset directory: its metadata, and whether its composition resolves.
fn inspect(root: &Root, id: &str, composer: &dyn Composer) -> PresetInfo {
    let dir = root.path.join(id);
    let meta = metadata(&dir);
    let composition = dir.join(COMPOSITION_FILE);
    let broken = composition_problem(&composition).or_else(|| composer.prepare(&composition).err());
    PresetInfo {
        id: id.to_owned(),
        name: meta.name,
        description: meta.description,
        order: meta.order,
        root: root.path.clone(),
        trust: root.trust,
        composition,
        broken,
    }
}

/// The preset `id` under `roots` (the first root holding it), without looking at the others.
pub(crate) fn find(roots: &[Root], id: &str, composer: &dyn Composer) -> Option<PresetInfo> {
    if !is_preset_id(id) {
        return None;
    }
    roots
        .iter()
        .find(|r| r.path.join(id).is_dir())
        .map(|root| inspect(root, id, composer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_lowercase_words_that_cannot_leave_their_root() {
        for ok in ["standard", "code", "a", "0", "my-preset-2"] {
            assert!(is_preset_id(ok), "{ok}");
        }
        for bad in ["", "-x", "Code", "a_b", "..", "a/b", "a.b", " x", "é"] {
            assert!(!is_preset_id(bad), "{bad}");
        }
    }
}

#[cfg(all(test, unix))]
mod read_tests {
    use super::read_small;

    /// Regression (issue 24, low 15): `preset.yml` was checked by path, then read by path, so a
    /// FIFO swapped in between hung the listing. The check is now of the opened file.
    #[test]
    fn a_fifo_is_refused_through_the_open_handle_and_a_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("preset.yml");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let err = read_small(&fifo).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file");
        let file = dir.path().join("ok.yml");
        std::fs::write(&file, "name: Ok\n").unwrap();
        assert_eq!(read_small(&file).unwrap(), "name: Ok\n");
    }
}
