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

pub use config::FsConfig;
pub use plugin::{FsPlugin, fs_tools};

/// `read_file`: read-only.
pub const READ_FILE: &str = "read_file";
/// `write_file`: mutating.
pub const WRITE_FILE: &str = "write_file";
/// `edit_file`: mutating.
pub const EDIT_FILE: &str = "edit_file";
/// `list_files`: read-only.
pub const LIST_FILES: &str = "list_files";

/// Every tool of this crate with whether it only reads (the approvals default follows it).
pub const TOOLS: &[(&str, bool)] = &[
    (EDIT_FILE, false),
    (LIST_FILES, true),
    (READ_FILE, true),
    (WRITE_FILE, false),
];
