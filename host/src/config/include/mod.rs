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
//! given), or from files read ahead ([`IncludedFiles::read_ahead`]). A live reload runs its
//! whole load, includes and all, on one blocking thread, so no file is read on a runtime thread
//! and none twice. [`IncludedFiles::paths`] lists every file a configuration reached (what
//! [`crate::reload::LiveConfig::included_files`] reports and [`crate::watch::ConfigWatcher`]
//! watches).
//!
//! # Modules
//! [`problem`] what can go wrong; `files` reading the files (disk, limits, the include stack);
//! `patch` reading and applying patches; `entry` the include entry itself, which the config
//! reader hands each `cordis/include` entry to. None of them depends on the reader: it reaches
//! them through the `Reading` trait it implements.

mod entry;
mod files;
mod patch;
pub mod problem;

pub(in crate::config) use entry::{Reading, read};
pub(in crate::config) use files::{Entered, Session};
pub use files::{IncludedFiles, MAX_BYTES, MAX_DEPTH, MAX_FILES, join, open_regular, read_regular};
pub(in crate::config) use patch::Expand;
pub use patch::merge;
pub use problem::IncludeProblem;

/// The plugin names that make an entry an include.
pub const INCLUDE_NAMES: &[&str] = &["cordis/include"];

/// How deep groups and includes may nest in all, across files (a single file cannot nest groups
/// deeper than its YAML nesting allows, about this much; includes must not multiply that).
pub const MAX_NESTING: usize = 128;

#[cfg(test)]
mod tests;
