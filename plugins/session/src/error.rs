//! `SessionError`: how any session operation fails (the file, its lock, the index, the store).

use crate::event::ProjectionError;

/// A session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// File I/O failed.
    #[error("session file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A session with this id already exists.
    #[error("session file {path} already exists")]
    AlreadyExists {
        /// The file.
        path: String,
    },
    /// No session with this id.
    #[error("session file {path} does not exist")]
    NotFound {
        /// The file.
        path: String,
    },
    /// The header names a format version this build does not read.
    #[error(
        "session file {path} has format version {found}; this build reads version {} only (no migration exists)",
        crate::event::SESSION_VERSION
    )]
    UnsupportedVersion {
        /// The file.
        path: String,
        /// The version found.
        found: String,
    },
    /// A complete line does not parse, or seqs are not contiguous.
    #[error("session file {path}, line {line}: {message}")]
    Corrupt {
        /// The file.
        path: String,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An id that cannot be a file name.
    #[error("invalid session id \"{id}\" (use letters, digits, '.', '_' and '-')")]
    InvalidId {
        /// The id.
        id: String,
    },
    /// An event payload does not fit its kind.
    #[error(transparent)]
    Projection(#[from] ProjectionError),
    /// Another writer holds the session (in this process or another one).
    #[error("session {id} is open in {}", held_by(*pid))]
    SessionLocked {
        /// The session id.
        id: String,
        /// The holder's pid, when its lock file names one.
        pid: Option<u32>,
    },
    /// A listing's cursor that no listing gave out.
    #[error(
        "invalid session list cursor \"{cursor}\": pass back a `nextCursor` a listing returned, or none for the first page"
    )]
    BadCursor {
        /// The cursor (its first 80 characters).
        cursor: String,
    },
    /// The writer failed; the session accepts no more appends.
    #[error("session writer: {0}")]
    Writer(String),
}

fn held_by(pid: Option<u32>) -> String {
    pid.map_or_else(|| "another process".to_owned(), |p| format!("process {p}"))
}
