//! The `tool-fs` plugin: `read_file`, `write_file`, `edit_file` and `list_files`, every path
//! confined to the workspace root by [`cordis_workspace::Workspace`].
//!
//! Each tool is a plain function over a [`Workspace`](cordis_workspace::Workspace) and its JSON
//! arguments ([`ops`]), so tests and other front-ends can call it without a registry; the plugin
//! only registers them. File work runs on the blocking pool.

mod config;
pub mod ops;
mod plugin;
mod preflight;
mod routed;
mod shown;

pub use config::FsConfig;
pub use plugin::{FsPlugin, fs_tools};
pub use shown::{MAX_SHOWN_BYTES, MAX_SHOWN_LINES};

/// `read_file`.
pub const READ_FILE: &str = "read_file";
/// `write_file`.
pub const WRITE_FILE: &str = "write_file";
/// `edit_file`.
pub const EDIT_FILE: &str = "edit_file";
/// `list_files`.
pub const LIST_FILES: &str = "list_files";

/// The names of this crate's tools (what it claims); each tool's definition states its effect.
pub const TOOLS: &[&str] = &[EDIT_FILE, LIST_FILES, READ_FILE, WRITE_FILE];
