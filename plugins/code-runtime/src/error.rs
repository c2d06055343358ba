//! Errors for misuse of a runtime; a program's own failures are outcomes, not errors.

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum CodeRuntimeError {
    /// A limit is out of range.
    #[error("invalid code runtime limit `{field}`: {reason}")]
    InvalidLimit {
        /// The limit's field name.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The engine thread could not be started.
    #[error("could not start the code runtime's engine thread")]
    Spawn(#[source] std::io::Error),
}
