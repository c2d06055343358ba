//! The `tool-search` plugin: `grep`, a regular-expression search over the workspace with
//! ripgrep's own crates (`ignore` for the walk and `.gitignore`, `regex` for matching), confined
//! to the workspace root.
//!
//! # Determinism
//! Files are searched in sorted path order and matches are reported in line order, so the same
//! tree always gives the same result, whatever the file system's listing order.

mod grep;
mod plugin;

pub use grep::{GrepError, SearchConfig, grep};
pub use plugin::{SearchPlugin, grep_tool};

/// `grep`.
pub const GREP: &str = "grep";

/// The names of this crate's tools (what it claims).
pub const TOOLS: &[&str] = &[GREP];
