//! Why loading a guest or calling it failed.

use std::path::PathBuf;

/// Why a component could not be loaded (the entry fails with this reason).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading the file failed.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The file's bytes do not match the entry's `sha256` pin.
    #[error("{path} has sha256 {found}, but the entry pins {expected}")]
    Pin {
        /// The file.
        path: PathBuf,
        /// The pinned hash.
        expected: String,
        /// The file's hash.
        found: String,
    },
    /// Not a valid component for this engine.
    #[error("not a valid WebAssembly component: {0}")]
    Compile(String),
    /// The guest does not export the `cordis:plugin/guest` interface at all.
    #[error(
        "the component exports no cordis:plugin/guest interface (expected cordis:plugin/guest@{expected}; it exports: {found})"
    )]
    NoWorld {
        /// The version the host implements.
        expected: &'static str,
        /// What it exports instead.
        found: String,
    },
    /// The guest was built against a world version this host does not accept.
    #[error(
        "the component implements cordis:plugin/guest@{found}, but this host implements @{expected} (it accepts every 0.1.x guest); rebuild it against world.wit {expected}"
    )]
    Version {
        /// The version the host implements.
        expected: &'static str,
        /// The guest's.
        found: String,
    },
    /// The guest imports something its entry does not grant (or nobody can grant).
    #[error("the component imports {import}, {why}")]
    Import {
        /// The import, as the component names it.
        import: String,
        /// Why it is refused and how to grant it, if it can be.
        why: String,
    },
    /// The exported interface lacks a function or has another type.
    #[error("the component's cordis:plugin/guest export is malformed: {0}")]
    Shape(String),
    /// Instantiating, `init` or `describe` failed.
    #[error("{stage} failed: {reason}")]
    Stage {
        /// `instantiate`, `init` or `describe`.
        stage: &'static str,
        /// Why.
        reason: String,
    },
    /// The artifact cache cannot be used.
    #[error("{0}")]
    Cache(String),
}

/// Why one call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The guest returned an error: a failed call.
    #[error("{0}")]
    Failed(String),
    /// The guest ran out of fuel (the deterministic limit).
    #[error("stopped: out of fuel ({fuel} units per call; raise `fuel` in the entry's config)")]
    OutOfFuel {
        /// The per-call budget.
        fuel: u64,
    },
    /// The epoch deadline (the tool timeout) passed.
    #[error("stopped: the call ran past its deadline of {ms} ms (the tool's timeout)")]
    Deadline {
        /// The deadline in milliseconds.
        ms: u64,
    },
    /// The guest asked for more memory (or table space) than its limit.
    #[error("stopped: {0}")]
    Limit(String),
    /// The guest trapped (a panic in its source language): a panicked call.
    #[error("the guest trapped: {0}")]
    Trap(String),
    /// The instance could not be made again (instantiate or `init` failed).
    #[error("{0}")]
    Instance(String),
}
