//! What can be wrong with an include or one of its patches.

use crate::hidden::Shown;

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
    /// Includes nest deeper than [`MAX_DEPTH`](super::MAX_DEPTH).
    #[error("includes nest deeper than {limit} files")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// Groups and includes nest deeper than [`MAX_NESTING`](super::MAX_NESTING) across files.
    #[error("groups and includes nest deeper than {limit} levels across the included files")]
    NestedTooDeep {
        /// The limit.
        limit: usize,
    },
    /// More than [`MAX_FILES`](super::MAX_FILES) includes.
    #[error("more than {limit} files included in all")]
    TooMany {
        /// The limit.
        limit: usize,
    },
    /// The included files add up to more than [`MAX_BYTES`](super::MAX_BYTES).
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
