//! Errors of workspace paths and file operations.

use std::fmt;
use std::path::PathBuf;

/// Why a path was refused as outside the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// A `..` climbs above the root.
    ParentDir,
    /// An absolute path that is not under the root.
    Absolute,
    /// A symbolic link on the way leads outside the root (or, where links are not followed,
    /// is a link at all).
    Symlink,
}

impl fmt::Display for Escape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Escape::ParentDir => "`..` climbs above the workspace root",
            Escape::Absolute => "absolute paths must be inside the workspace root",
            Escape::Symlink => "a symbolic link on the path leads outside the workspace root or is not followed here",
        })
    }
}

/// A workspace operation failed; every variant names the path as the model gave it.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The path leaves the workspace.
    #[error("path \"{path}\" is outside the workspace root {}: {reason}", root.display())]
    Outside {
        /// The path as given.
        path: String,
        /// The workspace root.
        root: PathBuf,
        /// Why.
        reason: Escape,
    },
    /// Nothing exists at the path.
    #[error("\"{path}\" does not exist in the workspace")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A regular file was needed.
    #[error("\"{path}\" is not a regular file ({kind})")]
    NotAFile {
        /// The path as given.
        path: String,
        /// What it is instead.
        kind: &'static str,
    },
    /// A directory was needed.
    #[error("\"{path}\": a component of the path is not a directory")]
    NotADirectory {
        /// The path as given.
        path: String,
    },
    /// The file exceeds the size the caller accepts.
    #[error("\"{path}\" is {size} bytes, more than the {limit}-byte limit")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The root itself could not be opened.
    #[error("cannot open workspace root {}: {source}", root.display())]
    Root {
        /// The root as configured.
        root: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// More additional roots than a workspace takes.
    #[error("{count} additional workspace roots, more than the {limit} a workspace takes")]
    TooManyRoots {
        /// How many were given.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// Any other I/O failure.
    #[error("\"{path}\": {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl WorkspaceError {
    /// True for a refused escape attempt.
    pub fn is_escape(&self) -> bool {
        matches!(self, WorkspaceError::Outside { .. })
    }
}
