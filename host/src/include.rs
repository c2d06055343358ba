//! `cordis/include`: one composition file loaded into another as a group, with patches.
//!
//! Presets differ from a standard composition by a few entries; copying the whole file per
//! preset would let the copies drift apart. An include entry loads another file's entries as
//! the children of a group, then patches them:
//!
//! ```yaml
//! - id: code                      # optional; derived ids work as for groups
//!   name: cordis/include
//!   config:
//!     path: standard.cordis.yml   # relative to the directory of the file that says it
//!     patches:                    # applied in order; each names an entry of the included file
//!       - disable: shell          # the entry (and, for a group, its entries) does not load
//!       - merge: tools            # JSON Merge Patch (RFC 7396) into the entry's config
//!         config: {mode: code}
//!       - insert: [{id: runtime, name: code-runtime}]
//!         after: tools            # or `before: ID`; same list, same group as that entry
//! ```
//!
//! # Why a group
//! An include behaves exactly like a `cordis/group` whose `config` is the other file's entry
//! list: disabling the include disables everything in it, the loader opens one scope for it,
//! reload reconciles its entries by id like any others. So nothing past parsing knows includes
//! exist, except diagnostics, which name the file (below).
//!
//! # Ids
//! An id written in the included file stays as written, so a preset patches by the id the base
//! file shows and an entry keeps its id whether it is included or not. An entry without an id
//! gets one derived from its position under the include, as in a group: the third entry of a
//! file included by the second top-level entry is `debug/noop#1.2`. Entries inserted by patch
//! `k` are numbered under `p{k}`: `debug/noop#1.p0.0`. Ids are unique across the whole tree
//! after inclusion; a duplicate is an error naming both places.
//!
//! # Patches
//! Each patch is a mapping with one verb: `disable: ID`, `merge: ID` with `config: {…}`, or
//! `insert: [entries]` with exactly one of `before: ID` / `after: ID`. A patch names an entry
//! of the included file's tree (at any depth, including files it includes in turn, with their
//! own patches applied), never an entry another patch of the same include inserts: you wrote
//! those, so write them as you want them. An id the
//! tree lacks is an error that lists the ids it has.
//! - `disable` disables the entry before its config is read, so a disabled entry's
//!   `${{ env.X }}` variables need not be set (as for an entry written `disabled: true`). There
//!   is no `enable`: an entry the base disables stays disabled (write your own instead).
//! - `merge` is a JSON Merge Patch (RFC 7396): mappings merge key by key, recursively; any
//!   other value (a list, a string, a number) replaces the old one whole; `null` removes the
//!   key. An entry with no config merges into `{}`. A group or include has no config of its
//!   own: merging into one is an error (merge into its entries). Variables in the patch are
//!   interpolated where the patch is written, and a config error the plugin reports points at
//!   the patch when the bad value came from it.
//! - `insert` adds entries, read as if written in the including file (its positions, its
//!   variables), next to the named entry; inside a disabled group they are disabled too.
//!
//! # Files
//! `path` is literal (no `${{ }}`: the watcher must find the same files without an
//! environment), relative to the including file's directory as that file was reached (the
//! top-level file's directory for the first level). Symlinks are followed as for the top-level
//! file; the target must be a regular file: a directory, FIFO, socket or device is refused
//! without being opened for reading (a FIFO would hang the load). A missing file, an unreadable
//! one, one that is not UTF-8, an include cycle (`a.yml → b.yml → a.yml`) and exceeding
//! [`MAX_DEPTH`], [`MAX_NESTING`], [`MAX_FILES`] or [`MAX_BYTES`] are configuration errors at
//! the include's `path`. A disabled include is still read and checked (as a disabled group's entries are).
//! Shared-library (dylib) entries in an included file resolve against the top-level file's
//! directory, like every dylib path.
//!
//! # Diagnostics
//! A problem inside an included file is reported in that file, after the chain of include
//! entries that led there: `a.yml:3:3 → parts/b.yml:7:5: entry "fs": …` (each link is an
//! include entry's position). Diagnostics sort by that chain, so an included file's problems
//! come right after its include entry's.
//!
//! # Reading and watching
//! The parse reads files through [`IncludedFiles`]: from disk as it goes
//! ([`IncludedFiles::disk`], what [`crate::plan::load_plan`] does with the file name it is
//! given), or from files read ahead on a blocking thread ([`IncludedFiles::read_ahead`], what
//! the async reload does, so no file is read on a runtime thread). [`IncludedFiles::paths`]
//! lists every file a configuration reached, which [`crate::watch::ConfigWatcher`] watches.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::config::RawEntry;
use crate::diagnostic::{Pos, Shown};
use crate::yaml::Tree;

/// The plugin names that make an entry an include.
pub const INCLUDE_NAMES: &[&str] = &["cordis/include"];

/// How many files deep includes may nest (the top-level file is not counted).
pub const MAX_DEPTH: usize = 16;

/// How deep groups and includes may nest in all, across files (a single file cannot nest groups
/// deeper than its YAML nesting allows, about this much; includes must not multiply that).
pub const MAX_NESTING: usize = 128;

/// How many files one configuration may include in all (a file included twice counts twice).
/// Each file may expand YAML aliases up to its own budget ([`crate::yaml::alias_budget`]), so
/// this also bounds what aliases can add across files.
pub const MAX_FILES: usize = 64;

/// How many bytes the included files of one configuration may add up to.
pub const MAX_BYTES: u64 = 16 << 20;

/// What is wrong with an include or one of its patches.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IncludeProblem {
    /// The file could not be found or read.
    #[error("cannot include \"{}\": {}", Shown(path), Shown(reason))]
    Unreadable {
        /// The path, relative to where the user runs from.
        path: String,
        /// The system's reason.
        reason: String,
    },
    /// The path is a directory, FIFO, socket or device.
    #[error(
        "cannot include \"{}\": it is {what}; an include must be a regular file",
        Shown(path)
    )]
    NotAFile {
        /// The path.
        path: String,
        /// `a directory` or `not a regular file (a FIFO, socket or device)`.
        what: &'static str,
    },
    /// The file is not UTF-8 text.
    #[error("cannot include \"{}\": it is not UTF-8 text", Shown(path))]
    NotUtf8 {
        /// The path.
        path: String,
    },
    /// A file includes itself, directly or through others.
    #[error("include cycle: {}", Shown(&.chain.join(" → ")))]
    Cycle {
        /// The files from the first occurrence to its repetition.
        chain: Vec<String>,
    },
    /// Includes nest deeper than [`MAX_DEPTH`].
    #[error("includes nest deeper than {limit} files")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// Groups and includes nest deeper than [`MAX_NESTING`] across files.
    #[error("groups and includes nest deeper than {limit} levels across the included files")]
    NestedTooDeep {
        /// The limit.
        limit: usize,
    },
    /// More than [`MAX_FILES`] includes.
    #[error("more than {limit} files included in all")]
    TooMany {
        /// The limit.
        limit: usize,
    },
    /// The included files add up to more than [`MAX_BYTES`].
    #[error("included files add up to more than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// `path` is interpolated.
    #[error(
        "include paths are literal: `${{{{ … }}}}` is not interpolated in `path` (the watcher must find the same file without an environment)"
    )]
    InterpolatedPath,
    /// The include's config is not `{path, patches?}`.
    #[error(
        "an include's config must be a mapping `{{path: FILE, patches: [...]}}`, found {found}"
    )]
    NotAMapping {
        /// What was found.
        found: String,
    },
    /// No `path`.
    #[error("missing required key \"path\" (the file to include, relative to this file)")]
    MissingPath,
    /// A key other than `path` and `patches`.
    #[error("unknown include key \"{}\"; allowed keys: path, patches", Shown(key))]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// A patch of the wrong shape.
    #[error(
        "{what}; a patch is `{{disable: ID}}`, `{{merge: ID, config: {{…}}}}` or `{{insert: [entries], before: ID}}` (or `after: ID`)"
    )]
    BadPatch {
        /// What is wrong.
        what: String,
    },
    /// A patch names an id the included tree does not have.
    #[error(
        "patch names entry \"{}\", which \"{}\" does not have; its entries: {}",
        Shown(id), Shown(file), Shown(&listing(known))
    )]
    UnknownTarget {
        /// The id.
        id: String,
        /// The included file.
        file: String,
        /// The ids it has, in file order.
        known: Vec<String>,
    },
    /// A merge into a group or include.
    #[error(
        "cannot merge config into \"{}\": it is a group or include, which has no config of its own; merge into one of its entries",
        Shown(id)
    )]
    MergeIntoGroup {
        /// The id.
        id: String,
    },
}

/// At most 40 ids, then how many more.
fn listing(ids: &[String]) -> String {
    const SHOWN: usize = 40;
    if ids.is_empty() {
        return "none".to_owned();
    }
    let mut out = ids
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        out.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    out
}

/// One included file's text and where its path led.
#[derive(Debug, Clone)]
struct ReadFile {
    /// The path with symlinks and `..` resolved (to find cycles).
    canonical: PathBuf,
    text: Arc<str>,
}

/// The files a parse includes: read from disk as the parse reaches them, and remembered, so a
/// second parse of the same text reads nothing.
#[derive(Debug, Clone)]
pub struct IncludedFiles {
    /// The top-level file's directory.
    dir: PathBuf,
    /// By path as reached (directory joined with `path`): what reading it gave.
    read: BTreeMap<PathBuf, Result<ReadFile, IncludeProblem>>,
    /// The top-level file's name and canonical path, found at the first include.
    top: Option<(String, Option<PathBuf>)>,
}

impl IncludedFiles {
    /// Reads included files from disk when the parse reaches them; `dir` is the top-level
    /// file's directory.
    pub fn disk(dir: impl Into<PathBuf>) -> IncludedFiles {
        IncludedFiles {
            dir: dir.into(),
            read: BTreeMap::new(),
            top: None,
        }
    }

    /// Reads every file `source` (the top-level file `file`, in `dir`) includes, transitively,
    /// as a parse would; a later parse of the same `source` with these files does no I/O.
    /// Blocking: call it off the async threads.
    pub fn read_ahead(source: &str, file: &str, dir: impl Into<PathBuf>) -> IncludedFiles {
        let mut files = IncludedFiles::disk(dir);
        // Include paths are literal, so the environment cannot change which files are read.
        let _ = crate::config::parse_with(source, file, &|_| None, &mut files);
        files
    }

    /// Every file the parses reached, as reached (the directory joined with each `path`),
    /// including those that could not be read; sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.read.keys().cloned().collect()
    }

    /// The top-level file's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The canonical path of the top-level file `file` (to find a cycle back to it).
    fn top_canonical(&mut self, file: &str) -> Option<PathBuf> {
        match &self.top {
            Some((name, canonical)) if name == file => canonical.clone(),
            _ => {
                let canonical = std::fs::canonicalize(file).ok();
                self.top = Some((file.to_owned(), canonical.clone()));
                canonical
            }
        }
    }

    fn get(&mut self, reached: &Path, shown: &str) -> Result<ReadFile, IncludeProblem> {
        if let Some(done) = self.read.get(reached) {
            return done.clone();
        }
        let result = read_disk(reached, shown);
        self.read.insert(reached.to_owned(), result.clone());
        result
    }
}

/// Opens `path` for reading without blocking on a FIFO (opening one for reading waits for a
/// writer); the caller checks what was opened with `metadata()` on the file itself, so there
/// is no window between a check by path and the use.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK changes nothing for a regular file's reads; it only keeps the open from
    // waiting when the path is (or was swapped for) a FIFO.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Reads the regular file `path` (after symlinks) as UTF-8 text of at most `limit` bytes:
/// a directory, FIFO, socket or device is refused without blocking.
///
/// # Errors
/// The file cannot be opened or read, is not a regular file, is larger than `limit`, or is not
/// UTF-8 (each as a sentence for a person).
pub fn read_regular(path: &Path, limit: u64) -> std::io::Result<String> {
    let file = open_regular(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a directory, FIFO, socket or device)",
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!("larger than {limit} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("not UTF-8 text"))
}

/// Reads one included file: a regular file (after symlinks), at most [`MAX_BYTES`], UTF-8.
fn read_disk(reached: &Path, shown: &str) -> Result<ReadFile, IncludeProblem> {
    let unreadable = |e: std::io::Error| IncludeProblem::Unreadable {
        path: shown.to_owned(),
        reason: e.to_string(),
    };
    let canonical = std::fs::canonicalize(reached).map_err(unreadable)?;
    let not_a_file = |meta: &std::fs::Metadata| {
        (!meta.is_file()).then(|| IncludeProblem::NotAFile {
            path: shown.to_owned(),
            what: if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file (a FIFO, socket or device)"
            },
        })
    };
    let file = open_regular(&canonical).map_err(unreadable)?;
    if let Some(problem) = not_a_file(&file.metadata().map_err(unreadable)?) {
        return Err(problem);
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(IncludeProblem::TooLarge { limit: MAX_BYTES });
    }
    let text = String::from_utf8(bytes).map_err(|_| IncludeProblem::NotUtf8 {
        path: shown.to_owned(),
    })?;
    Ok(ReadFile {
        canonical,
        text: text.into(),
    })
}

/// `base` joined with `written`, without `.` components (`./b.yml` reads as `b.yml`).
pub fn join(base: &Path, written: &str) -> PathBuf {
    let mut out = if base == Path::new(".") {
        PathBuf::new()
    } else {
        base.to_owned()
    };
    for part in Path::new(written).components() {
        match part {
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// One file of a parse: the top-level file (index 0) or an included one.
#[derive(Debug)]
pub(crate) struct Source {
    /// What diagnostics print before `:line:column`: the file name, after its include chain.
    pub origin: String,
    /// The positions of the include entries that led here (sorts diagnostics by chain).
    pub chain: Vec<Pos>,
    /// Its marked tree.
    pub tree: Arc<Tree>,
}

/// An include being read: where it was reached from.
struct Frame {
    /// As reached (its directory is where its own includes resolve).
    reached: PathBuf,
    /// For messages.
    shown: String,
    canonical: Option<PathBuf>,
}

/// The state of one parse across its files: the include stack, the budgets, the sources.
pub(crate) struct Session<'f> {
    files: &'f mut IncludedFiles,
    stack: Vec<Frame>,
    reads: usize,
    bytes: u64,
    /// Every file of the parse; index 0 is the top-level file.
    pub sources: Vec<Source>,
}

/// A file entered by [`Session::enter`].
pub(crate) struct Entered {
    /// Its index in [`Session::sources`].
    pub index: usize,
    /// Its text.
    pub text: Arc<str>,
    /// Its name for messages.
    pub shown: String,
}

impl<'f> Session<'f> {
    /// A parse of the top-level file `file`.
    pub fn new(files: &'f mut IncludedFiles, file: &str) -> Session<'f> {
        Session {
            stack: vec![Frame {
                reached: PathBuf::from(file),
                shown: file.to_owned(),
                // Found at the first include: a file without includes costs no system call.
                canonical: None,
            }],
            files,
            reads: 0,
            bytes: 0,
            sources: vec![Source {
                origin: file.to_owned(),
                chain: Vec::new(),
                tree: Arc::default(),
            }],
        }
    }

    /// Reads the file `written` names from the file being read (source `from`, whose include
    /// entry is at `at`) and makes it the file being read; [`Session::leave`] ends it.
    ///
    /// # Errors
    /// A problem to report at the include's `path`; nothing was entered then.
    pub fn enter(
        &mut self,
        from: usize,
        at: Pos,
        written: &str,
    ) -> Result<Entered, IncludeProblem> {
        let dir = match self.stack.len() {
            1 => self.files.dir.clone(),
            _ => {
                let top = &self.stack[self.stack.len() - 1].reached;
                top.parent().map(Path::to_owned).unwrap_or_default()
            }
        };
        let reached = join(&dir, written);
        let shown = reached.display().to_string();
        if self.stack.len() > MAX_DEPTH {
            return Err(IncludeProblem::TooDeep { limit: MAX_DEPTH });
        }
        if self.reads >= MAX_FILES {
            return Err(IncludeProblem::TooMany { limit: MAX_FILES });
        }
        self.reads += 1;
        if self.stack.len() == 1 && self.stack[0].canonical.is_none() {
            self.stack[0].canonical = self.files.top_canonical(&self.stack[0].shown);
        }
        let read = self.files.get(&reached, &shown)?;
        if let Some(at) = self
            .stack
            .iter()
            .position(|f| f.canonical.as_ref() == Some(&read.canonical))
        {
            let mut chain: Vec<String> = self.stack[at..].iter().map(|f| f.shown.clone()).collect();
            chain.push(shown);
            return Err(IncludeProblem::Cycle { chain });
        }
        self.bytes += read.text.len() as u64;
        if self.bytes > MAX_BYTES {
            return Err(IncludeProblem::TooLarge { limit: MAX_BYTES });
        }
        let parent = &self.sources[from];
        let origin = format!("{}:{at} → {shown}", parent.origin);
        let mut chain = parent.chain.clone();
        chain.push(at);
        self.sources.push(Source {
            origin,
            chain,
            tree: Arc::default(),
        });
        self.stack.push(Frame {
            reached,
            shown: shown.clone(),
            canonical: Some(read.canonical),
        });
        Ok(Entered {
            index: self.sources.len() - 1,
            text: read.text,
            shown,
        })
    }

    /// Ends the file [`Session::enter`] entered.
    pub fn leave(&mut self) {
        if self.stack.len() > 1 {
            self.stack.pop();
        }
    }
}

/// The path (indices through `children`) of the first entry called `id`, in file order.
pub(crate) fn find(list: &[RawEntry], id: &str) -> Option<Vec<usize>> {
    for (i, entry) in list.iter().enumerate() {
        if entry.id == id {
            return Some(vec![i]);
        }
        if let Some(mut rest) = find(&entry.children, id) {
            rest.insert(0, i);
            return Some(rest);
        }
    }
    None
}

/// The entry at `path` (from [`find`]).
pub(crate) fn entry_at<'l>(list: &'l mut [RawEntry], path: &[usize]) -> &'l mut RawEntry {
    let (first, rest) = path.split_first().expect("a path from find is never empty");
    rest.iter()
        .fold(&mut list[*first], |entry, i| &mut entry.children[*i])
}

/// The list the entries at `parent` (a path without its last index) hold.
pub(crate) fn list_of<'l>(list: &'l mut Vec<RawEntry>, parent: &[usize]) -> &'l mut Vec<RawEntry> {
    match parent.split_first() {
        None => list,
        Some((first, rest)) => {
            &mut rest
                .iter()
                .fold(&mut list[*first], |entry, i| &mut entry.children[*i])
                .children
        }
    }
}

/// Every id of a tree, in file order.
pub(crate) fn ids(list: &[RawEntry]) -> Vec<String> {
    let mut out = Vec::new();
    for entry in list {
        out.push(entry.id.clone());
        out.extend(ids(&entry.children));
    }
    out
}

/// Disables an entry and everything in it.
pub(crate) fn disable_tree(entry: &mut RawEntry) {
    entry.disabled = true;
    for child in &mut entry.children {
        disable_tree(child);
    }
}

/// RFC 7396 JSON Merge Patch: `patch` merged into `target`.
pub fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RawConfig, parse_lenient, parse_with};
    use serde_json::json;

    /// A fresh directory holding `files` (name, text).
    fn dir(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cordis-include-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (file, text) in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn env(name: &str) -> Option<String> {
        (name == "SET").then(|| "from-env".to_owned())
    }

    /// Parses `dir/file` as the CLI does: its text, named by its path.
    fn parse(dir: &Path, file: &str) -> (RawConfig, Vec<String>) {
        let path = dir.join(file).display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let (raw, errors) = parse_lenient(&text, &path, &env);
        let prefix = format!("{}/", dir.display());
        let errors = errors
            .iter()
            .map(|d| d.to_string().replace(&prefix, ""))
            .collect();
        (raw, errors)
    }

    fn ids(raw: &RawConfig) -> Vec<(String, bool)> {
        fn walk(list: &[RawEntry], out: &mut Vec<(String, bool)>) {
            for e in list {
                out.push((e.id.clone(), e.disabled));
                walk(&e.children, out);
            }
        }
        let mut out = Vec::new();
        walk(&raw.entries, &mut out);
        out
    }

    const BASE: &str = "- id: keep\n  name: debug/noop\n- name: debug/noop\n- id: grp\n  name: cordis/group\n  config:\n  - id: inner\n    name: debug/noop\n    config: {a: {b: 1, c: [1, 2]}, d: x, e: \"${{ env.SET }}\"}\n  - name: debug/noop\n- id: secret\n  name: debug/noop\n  config: {key: \"${{ env.UNSET }}\"}\n";

    #[test]
    fn an_include_is_a_group_of_the_files_entries_with_their_own_ids() {
        let d = dir(
            "group",
            &[
                (
                    "a.yml",
                    "- id: top\n  name: debug/noop\n- name: cordis/include\n  config: {path: ./parts/b.yml}\n",
                ),
                (
                    "parts/b.yml",
                    "- id: keep\n  name: debug/noop\n- name: debug/noop\n  config: {x: \"${{ env.SET }}\"}\n",
                ),
            ],
        );
        let (raw, errors) = parse(&d, "a.yml");
        assert_eq!(errors, Vec::<String>::new());
        let inc = &raw.entries[1];
        assert!(inc.is_group);
        assert_eq!(inc.id, "cordis/include#1");
        assert_eq!(
            inc.included.as_deref(),
            Some(d.join("parts/b.yml").display().to_string().as_str())
        );
        // Written ids stay; derived ones are numbered under the include, like a group's.
        let children: Vec<&str> = inc.children.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(children, ["keep", "debug/noop#1.1"]);
        assert_eq!(inc.children[1].config, Some(json!({"x": "from-env"})));
        // Disabling the include disables its entries.
        std::fs::write(
            d.join("a.yml"),
            "- name: cordis/include\n  disabled: true\n  config: {path: parts/b.yml}\n",
        )
        .unwrap();
        let (raw, _) = parse(&d, "a.yml");
        assert!(raw.entries[0].children.iter().all(|e| e.disabled));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn patches_disable_merge_and_insert_in_the_included_tree() {
        let d = dir(
            "patches",
            &[
                ("b.yml", BASE),
                (
                    "a.yml",
                    "- id: inc\n  name: cordis/include\n  config:\n    path: b.yml\n    patches:\n    - disable: secret\n    - merge: inner\n      config: {a: {c: [9], n: {m: \"${{ env.SET }}\"}}, d: null}\n    - insert: [{id: first, name: debug/noop}]\n      before: keep\n    - insert: [{name: debug/noop}, {id: last, name: debug/noop}]\n      after: inner\n    - insert: [{id: second, name: debug/noop}]\n      before: keep\n",
                ),
            ],
        );
        let (raw, errors) = parse(&d, "a.yml");
        // `secret`'s unset variable is not read: the patch disabled it first.
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(
            ids(&raw),
            [
                ("inc", false),
                ("first", false),
                ("second", false),
                ("keep", false),
                ("debug/noop#0.1", false),
                ("grp", false),
                ("inner", false),
                ("debug/noop#0.p3.0", false),
                ("last", false),
                ("debug/noop#0.2.1", false),
                ("secret", true),
            ]
            .map(|(i, d)| (i.to_owned(), d))
        );
        let inner = &raw.entries[0].children[4].children[0];
        assert_eq!(inner.id, "inner");
        assert_eq!(
            inner.config,
            Some(json!({"a": {"b": 1, "c": [9], "n": {"m": "from-env"}}, "e": "from-env"}))
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn entries_inserted_into_a_disabled_group_are_disabled_like_its_own() {
        let d = dir(
            "insert-disabled",
            &[
                ("b.yml", BASE),
                (
                    "a.yml",
                    "- name: cordis/include\n  config:\n    path: b.yml\n    patches:\n    - insert: [{id: new, name: debug/noop, config: {k: \"${{ env.UNSET }}\"}}]\n      after: inner\n    - disable: grp\n    - disable: secret\n",
                ),
            ],
        );
        let (raw, errors) = parse(&d, "a.yml");
        assert_eq!(errors, Vec::<String>::new());
        let grp = &raw.entries[0].children[2];
        assert_eq!(grp.id, "grp");
        let inside: Vec<(&str, bool)> = grp
            .children
            .iter()
            .map(|e| (e.id.as_str(), e.disabled))
            .collect();
        assert_eq!(
            inside,
            [("inner", true), ("new", true), ("debug/noop#0.2.1", true)]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_patch_naming_a_missing_id_lists_the_files_ids_and_a_merge_into_a_group_is_refused() {
        let d = dir(
            "unknown",
            &[
                ("b.yml", BASE),
                (
                    "a.yml",
                    "- name: cordis/include\n  config:\n    path: b.yml\n    patches:\n    - disable: nope\n    - merge: grp\n      config: {x: 1}\n    - insert: [{name: debug/noop}]\n    - {disable: keep, merge: keep}\n    - {disable: keep, colour: red}\n",
                ),
            ],
        );
        let (_, errors) = parse(&d, "a.yml");
        assert_eq!(
            errors,
            [
                "a.yml:1:1 → b.yml:13:22: entry \"secret\": environment variable \"UNSET\" is not set (use `${{ env.UNSET ?? 'default' }}` to give a default)",
                "a.yml:5:16: entry \"cordis/include#0\": patch names entry \"nope\", which \"b.yml\" does not have; its entries: keep, debug/noop#0.1, grp, inner, debug/noop#0.2.1, secret",
                "a.yml:6:14: entry \"cordis/include#0\": cannot merge config into \"grp\": it is a group or include, which has no config of its own; merge into one of its entries",
                "a.yml:8:5: entry \"cordis/include#0\": an `insert` patch needs exactly one of `before: ID` or `after: ID`; a patch is `{disable: ID}`, `{merge: ID, config: {…}}` or `{insert: [entries], before: ID}` (or `after: ID`)",
                "a.yml:9:5: entry \"cordis/include#0\": patch 3 has both `disable` and `merge`; a patch does one thing; a patch is `{disable: ID}`, `{merge: ID, config: {…}}` or `{insert: [entries], before: ID}` (or `after: ID`)",
                "a.yml:10:23: entry \"cordis/include#0\": unknown key \"colour\" in a `disable` patch; a patch is `{disable: ID}`, `{merge: ID, config: {…}}` or `{insert: [entries], before: ID}` (or `after: ID`)",
            ]
            .map(str::to_owned)
            .into_iter()
            .map(|e| e.replace("\"b.yml\"", &format!("\"{}\"", d.join("b.yml").display())))
            .map(|e| e.replace(&format!("{}/", d.display()), ""))
            .collect::<Vec<_>>()
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn problems_inside_included_files_name_the_file_after_the_include_chain() {
        let d = dir(
            "chain",
            &[
                (
                    "a.yml",
                    "- id: one\n  name: debug/noop\n  colour: red\n- id: inc\n  name: cordis/include\n  config: {path: sub/b.yml}\n- id: two\n  name: debug/noop\n  colour: blue\n",
                ),
                // Relative to b.yml's directory: sub/c.yml.
                (
                    "sub/b.yml",
                    "- id: b1\n  name: debug/noop\n  config: {x: \"${{ env.NOPE }}\"}\n- id: deeper\n  name: cordis/include\n  config: {path: c.yml}\n",
                ),
                (
                    "sub/c.yml",
                    "- id: c1\n  name: debug/noop\n  timeout: soon\n",
                ),
            ],
        );
        let (_, errors) = parse(&d, "a.yml");
        assert_eq!(
            errors,
            [
                "a.yml:3:3: entry \"one\": unknown key \"colour\"; allowed keys: id, name, config, disabled, inject, timeout, sha256",
                "a.yml:4:1 → sub/b.yml:3:20: entry \"b1\": environment variable \"NOPE\" is not set (use `${{ env.NOPE ?? 'default' }}` to give a default)",
                "a.yml:4:1 → sub/b.yml:4:1 → sub/c.yml:3:12: entry \"c1\": key \"timeout\" must be a positive number of milliseconds, found \"soon\"",
                "a.yml:9:3: entry \"two\": unknown key \"colour\"; allowed keys: id, name, config, disabled, inject, timeout, sha256",
            ]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn include_cycles_missing_files_and_directories_are_errors_with_the_chain() {
        let include = |path: &str| format!("- name: cordis/include\n  config: {{path: {path}}}\n");
        let d = dir(
            "cycle",
            &[
                (
                    "a.yml",
                    &format!(
                        "{}{}{}",
                        include("b.yml"),
                        include("missing.yml"),
                        include("sub")
                    ),
                ),
                ("b.yml", &include("a.yml")),
                ("self.yml", &include("self.yml")),
                ("sub/x", ""),
            ],
        );
        let (_, errors) = parse(&d, "a.yml");
        assert_eq!(errors.len(), 3, "{errors:#?}");
        assert_eq!(
            errors[0],
            "a.yml:1:1 → b.yml:2:18: entry \"cordis/include#0.0\": include cycle: a.yml → b.yml → a.yml"
        );
        assert!(
            errors[1].starts_with("a.yml:4:18: entry \"cordis/include#1\": cannot include \"missing.yml\": No such file"),
            "{}",
            errors[1]
        );
        assert_eq!(
            errors[2],
            "a.yml:6:18: entry \"cordis/include#2\": cannot include \"sub\": it is a directory; an include must be a regular file"
        );
        // A file that cannot be read as YAML reports that, not every patch as unknown.
        std::fs::write(d.join("b.yml"), "- id: [broken\n").unwrap();
        std::fs::write(
            d.join("a.yml"),
            "- name: cordis/include\n  config: {path: b.yml, patches: [{disable: x}, {disable: y}]}\n",
        )
        .unwrap();
        let (_, errors) = parse(&d, "a.yml");
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].starts_with("a.yml:1:1 → b.yml:2:1: YAML syntax error"),
            "{}",
            errors[0]
        );
        let (_, errors) = parse(&d, "self.yml");
        assert_eq!(
            errors,
            ["self.yml:2:18: entry \"cordis/include#0\": include cycle: self.yml → self.yml"]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking_and_a_symlink_is_followed() {
        let d = dir(
            "fifo",
            &[
                (
                    "a.yml",
                    "- name: cordis/include\n  config: {path: pipe}\n- name: cordis/include\n  config: {path: link.yml}\n",
                ),
                ("real/b.yml", "- id: via-link\n  name: debug/noop\n"),
            ],
        );
        let made = std::process::Command::new("mkfifo")
            .arg(d.join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        std::os::unix::fs::symlink("real/b.yml", d.join("link.yml")).unwrap();
        // Opening the FIFO would block until a writer comes: the parse must return (a generous
        // deadline turns a hang into a failure).
        let (tx, rx) = std::sync::mpsc::channel();
        let at = d.clone();
        std::thread::spawn(move || tx.send(parse(&at, "a.yml")));
        let (raw, errors) = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the parse blocked on the FIFO");
        assert_eq!(
            errors,
            [
                "a.yml:2:18: entry \"cordis/include#0\": cannot include \"pipe\": it is not a regular file (a FIFO, socket or device); an include must be a regular file"
            ]
        );
        assert_eq!(raw.entries[1].children[0].id, "via-link");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn depth_count_and_size_are_bounded() {
        // a0 → a1 → … → a20: deeper than MAX_DEPTH.
        let files: Vec<(String, String)> = (0..=20)
            .map(|i| {
                (
                    format!("a{i}.yml"),
                    format!(
                        "- name: cordis/include\n  config: {{path: a{}.yml}}\n",
                        i + 1
                    ),
                )
            })
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let d = dir("depth", &refs);
        let (_, errors) = parse(&d, "a0.yml");
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].ends_with(&format!("includes nest deeper than {MAX_DEPTH} files")),
            "{}",
            errors[0]
        );
        assert_eq!(errors[0].matches(" → ").count(), MAX_DEPTH);
        let _ = std::fs::remove_dir_all(&d);

        // Each file includes the next one 4 times: 4^5 includes, refused after MAX_FILES.
        let files: Vec<(String, String)> = (0..5)
            .map(|i| {
                let one = format!(
                    "- name: cordis/include\n  config: {{path: w{}.yml}}\n",
                    i + 1
                );
                (format!("w{i}.yml"), one.repeat(4))
            })
            .chain([("w5.yml".to_owned(), "- name: debug/noop\n".to_owned())])
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let d = dir("wide", &refs);
        let (_, errors) = parse(&d, "w0.yml");
        assert!(!errors.is_empty());
        assert!(
            errors
                .iter()
                .all(|e| e.ends_with(&format!("more than {MAX_FILES} files included in all"))),
            "{errors:#?}"
        );

        let big = format!("# {}\n", "x".repeat(usize::try_from(MAX_BYTES).unwrap()));
        let d2 = dir(
            "big",
            &[
                ("big.yml", &big),
                (
                    "a.yml",
                    "- name: cordis/include\n  config: {path: big.yml}\n",
                ),
            ],
        );
        let (_, errors) = parse(&d2, "a.yml");
        assert_eq!(
            errors,
            [format!(
                "a.yml:2:18: entry \"cordis/include#0\": included files add up to more than {MAX_BYTES} bytes"
            )]
        );
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&d2);
    }

    /// Each file nests groups as deep as YAML lets one file; stacked by includes they
    /// overflowed the stack (17 files: a crash, not an error).
    #[test]
    fn groups_nested_across_included_files_are_bounded() {
        let nested = |inner: String| {
            (0..100).fold(inner, |s, _| {
                format!("[{{name: cordis/group, config: {s}}}]")
            })
        };
        let files: Vec<(String, String)> = (0..17)
            .map(|i| {
                let inner = format!(
                    "[{{name: cordis/include, config: {{path: f{}.yml}}}}]",
                    i + 1
                );
                (format!("f{i}.yml"), nested(inner) + "\n")
            })
            .chain([("f17.yml".to_owned(), "- name: debug/noop\n".to_owned())])
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let d = dir("nesting", &refs);
        let (_, errors) = parse(&d, "f0.yml");
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].starts_with("f0.yml:1:") && errors[0].contains(" → f1.yml:1:"),
            "{}",
            errors[0]
        );
        assert!(
            errors[0].ends_with(&format!(
                "groups and includes nest deeper than {MAX_NESTING} levels across the included files"
            )),
            "{}",
            errors[0]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn files_read_ahead_are_parsed_again_without_the_disk() {
        let d = dir(
            "ahead",
            &[
                (
                    "a.yml",
                    "- name: cordis/include\n  config: {path: b.yml}\n- name: cordis/include\n  config: {path: gone.yml}\n",
                ),
                ("b.yml", "- id: b1\n  name: debug/noop\n"),
            ],
        );
        let file = d.join("a.yml").display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut files = IncludedFiles::read_ahead(&text, &file, &d);
        assert_eq!(files.paths(), [d.join("b.yml"), d.join("gone.yml")]);
        std::fs::remove_file(d.join("b.yml")).unwrap();
        let (raw, errors) = parse_with(&text, &file, &env, &mut files);
        assert_eq!(raw.entries[0].children[0].id, "b1");
        assert_eq!(errors.len(), 1, "{errors:?}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn include_config_shape_errors_are_reported() {
        let d = dir(
            "shape",
            &[(
                "a.yml",
                "- name: cordis/include\n- name: cordis/include\n  config: [x]\n- name: cordis/include\n  config: {patches: [], extra: 1}\n- name: cordis/include\n  config: {path: \"${{ env.SET }}.yml\"}\n- name: cordis/include\n  config: {path: 5}\n",
            )],
        );
        let (_, errors) = parse(&d, "a.yml");
        assert_eq!(
            errors,
            [
                "a.yml:1:1: entry \"cordis/include#0\": missing required key \"path\" (the file to include, relative to this file)",
                "a.yml:3:11: entry \"cordis/include#1\": an include's config must be a mapping `{path: FILE, patches: [...]}`, found a list",
                "a.yml:5:11: entry \"cordis/include#2\": missing required key \"path\" (the file to include, relative to this file)",
                "a.yml:5:25: entry \"cordis/include#2\": unknown include key \"extra\"; allowed keys: path, patches",
                "a.yml:7:18: entry \"cordis/include#3\": include paths are literal: `${{ … }}` is not interpolated in `path` (the watcher must find the same file without an environment)",
                "a.yml:9:18: entry \"cordis/include#4\": key \"path\" must be a file path relative to this file, found 5",
            ]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Any list of patches over the base file's ids (and unknown ones) parses without a
        /// panic, and every inserted entry lands exactly once.
        #[test]
        fn any_patch_list_applies_without_a_panic(
            patches in proptest::collection::vec((0..4usize, 0..8usize, proptest::bool::ANY), 0..12)
        ) {
            let targets = ["keep", "debug/noop#0.1", "grp", "inner", "debug/noop#0.2.1", "secret", "nope", "first0"];
            let mut yaml = String::from("- name: cordis/include\n  config:\n    path: b.yml\n    patches:\n");
            for (k, (verb, target, before)) in patches.iter().enumerate() {
                let t = targets[*target];
                yaml.push_str(&match verb {
                    0 => format!("    - disable: \"{t}\"\n"),
                    1 => format!("    - merge: \"{t}\"\n      config: {{a: null, z: {k}}}\n"),
                    _ => format!(
                        "    - insert: [{{id: first{k}, name: debug/noop}}]\n      {}: \"{t}\"\n",
                        if *before { "before" } else { "after" }
                    ),
                });
            }
            let d = dir("prop", &[("b.yml", BASE), ("a.yml", &yaml)]);
            let (raw, _) = parse(&d, "a.yml");
            let all = ids(&raw);
            for (k, (verb, target, _)) in patches.iter().enumerate() {
                let count = all.iter().filter(|(i, _)| *i == format!("first{k}")).count();
                let expected = usize::from(*verb >= 2 && targets[*target] != "nope" && targets[*target] != "first0");
                proptest::prop_assert_eq!(count, expected, "{}", yaml);
            }
            let _ = std::fs::remove_dir_all(&d);
        }
    }

    #[test]
    fn merge_is_json_merge_patch() {
        let mut v = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": 1});
        merge(
            &mut v,
            &json!({"a": {"c": [3], "n": {"k": null, "m": 2}}, "d": null, "f": true}),
        );
        assert_eq!(
            v,
            json!({"a": {"b": 1, "c": [3], "n": {"m": 2}}, "e": 1, "f": true})
        );
        let mut null = serde_json::Value::Null;
        merge(&mut null, &json!({"x": 1, "y": null}));
        assert_eq!(null, json!({"x": 1}));
    }

    #[test]
    fn joined_paths_drop_dot_components_only() {
        assert_eq!(join(Path::new("."), "./b.yml"), PathBuf::from("b.yml"));
        assert_eq!(join(Path::new(""), "b.yml"), PathBuf::from("b.yml"));
        assert_eq!(
            join(Path::new("conf"), "./parts/../b.yml"),
            PathBuf::from("conf/parts/../b.yml")
        );
        assert_eq!(
            join(Path::new("conf"), "/abs/b.yml"),
            PathBuf::from("/abs/b.yml")
        );
    }

    #[test]
    fn unknown_targets_list_at_most_forty_ids() {
        let known: Vec<String> = (0..45).map(|i| format!("e{i}")).collect();
        let text = IncludeProblem::UnknownTarget {
            id: "x".into(),
            file: "b.yml".into(),
            known,
        }
        .to_string();
        assert!(text.ends_with("e38, e39 and 5 more"), "{text}");
    }
}
