//! Entry kinds: plugin files (an entry whose `name` is a path to one) that the application
//! teaches the host to load, so the generic host links no plugin engine.
//!
//! An application registers a kind on its table ([`Builtins::insert_kind`]); resolution asks
//! the registered kinds, in registration order, before it takes a name for a shared library or
//! a built-in ([`crate::plan::EntrySource::lookup`]). A file a kind recognizes is found and
//! vetted exactly like a library (same directories, symlinks resolved, `sha256` pin) before
//! the kind builds its plugin from the vetted path.
//!
//! The `cordis` application registers `.wasm` (WebAssembly components, `cordis-wasm`). A name
//! of a [`WELL_KNOWN`] kind that no registered kind recognizes is a configuration error saying
//! that no such kind is registered; it is never loaded as a shared library.
//!
//! [`Builtins::insert_kind`]: crate::Builtins::insert_kind

use std::path::PathBuf;
use std::sync::Arc;

use cordis_runtime::ErasedPlugin;

/// A kind of plugin file the host loads through the application: recognizes entry names and
/// builds the plugin of a vetted file.
pub trait EntryKind: Send + Sync {
    /// What files of this kind are, for messages (`WebAssembly component`).
    fn label(&self) -> &str;

    /// Whether the entry name `name` (as written in the config) names a file of this kind.
    fn recognizes(&self, name: &str) -> bool;

    /// The plugin of the entry `name`, whose file was found and vetted at `path` (canonical,
    /// inside an allowed directory), pinned to `sha256` when the entry pins it.
    fn plugin(&self, name: &str, path: PathBuf, sha256: Option<[u8; 32]>) -> Arc<dyn ErasedPlugin>;
}

/// File kinds the host recognizes by name but loads only through a registered [`EntryKind`]:
/// (name suffix, what the files are).
pub const WELL_KNOWN: &[(&str, &str)] = &[(".wasm", "WebAssembly component")];

/// The suffix and label of the [`WELL_KNOWN`] kind `name` is a file of, if any.
pub fn well_known(name: &str) -> Option<(&'static str, &'static str)> {
    WELL_KNOWN
        .iter()
        .copied()
        .find(|(suffix, _)| name.ends_with(suffix))
}
