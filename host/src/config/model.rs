//! The raw entry model: what a `cordis.yml` says, entry by entry, with the files it came from.

use std::sync::Arc;

use super::yaml::{NodeId, Tree};
use crate::diagnostic::{Diagnostic, Pos};

/// The plugin names that make an entry a group.
pub const GROUP_NAMES: &[&str] = &["cordis/group", "@cordisjs/plugin-group"];

/// A parsed config file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawConfig {
    /// The file name, as the user gave it (used in every message).
    pub file: String,
    /// The top-level entries, in file order.
    pub entries: Vec<RawEntry>,
    /// The files the entries were read from, with their marked trees (for positions inside
    /// `config`): the top-level file first, then every included one.
    pub(super) sources: Sources,
}

/// The parsed files behind a [`RawConfig`], shared; equal when it is the same parse.
#[derive(Clone)]
pub(super) struct Sources(pub(super) Arc<Vec<Source>>);

impl PartialEq for Sources {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sources")
    }
}

/// Where an entry's keys' values were written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryMarks {
    /// The `id` value.
    pub id: Option<Pos>,
    /// The `name` value.
    pub name: Option<Pos>,
    /// The `config` value.
    pub config: Option<Pos>,
    /// The `sha256` value.
    pub sha256: Option<Pos>,
}

/// One entry as written.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEntry {
    /// The entry id: as written, or derived from name and position.
    pub id: String,
    /// True when `id` was written in the file.
    pub explicit_id: bool,
    /// The plugin name (`None` if missing or not a string; a diagnostic says so).
    pub name: Option<String>,
    /// The config value after interpolation (`null` when absent; `None` when it had errors).
    pub config: Option<serde_json::Value>,
    /// Disabled by itself or by an enclosing group.
    pub disabled: bool,
    /// Extra required services.
    pub inject: Vec<String>,
    /// Apply timeout in milliseconds, if set.
    pub timeout_ms: Option<u64>,
    /// The pinned SHA-256 of a dylib entry's file (lowercase hex, 64 digits), if set.
    pub sha256: Option<String>,
    /// Child entries, for a group (for an include: the included file's entries, patched).
    pub children: Vec<RawEntry>,
    /// True for a group entry (an include is a group).
    pub is_group: bool,
    /// For an include: the included file, as reached from the current directory.
    pub included: Option<String>,
    /// Where the entry starts (its dash).
    pub pos: Pos,
    /// Where its values were written.
    pub marks: EntryMarks,
    /// The `config` node in the tree, for [`RawConfig::config_pos`].
    pub(super) config_node: Option<NodeId>,
    /// The file it is written in: an index into the parse's sources.
    pub(super) source: usize,
    /// The merge patches applied to its config, in order: (source, `config` node of the patch).
    pub(super) merges: Vec<(usize, NodeId)>,
}

/// One file of a parse: the top-level file (index 0) or an included one.
#[derive(Debug)]
pub(super) struct Source {
    /// What diagnostics print before `:line:column`: the file name, after its include chain.
    pub origin: String,
    /// The positions of the include entries that led here (sorts diagnostics by chain).
    pub chain: Vec<Pos>,
    /// Its marked tree.
    pub tree: Arc<Tree>,
}

impl RawConfig {
    /// What diagnostics about `entry` print before `:line:column`: its file, after the chain
    /// of includes that led there (`a.yml:3:3 → b.yml`).
    pub fn origin(&self, entry: &RawEntry) -> &str {
        self.sources
            .0
            .get(entry.source)
            .map_or(self.file.as_str(), |s| s.origin.as_str())
    }

    /// Sorts diagnostics of this parse in file order, an included file's right after its
    /// include entry's (stable: problems at one position keep the order they were found in).
    pub fn sort_diagnostics(&self, errors: &mut [Diagnostic]) {
        let sources = &self.sources.0;
        if sources.len() <= 1 {
            errors.sort_by_key(|d| d.pos);
            return;
        }
        errors.sort_by_cached_key(|d| {
            let mut key = sources
                .iter()
                .find(|s| s.origin == d.file)
                .map(|s| s.chain.clone())
                .unwrap_or_default();
            key.push(d.pos);
            key
        });
    }
}
