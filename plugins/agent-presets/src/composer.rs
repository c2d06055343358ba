//! The seam to the host's loader: read, resolve and mount one composition file.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use cordis_runtime::{Context, ScopeId};

/// Reads and resolves composition files; the application implements it over its host's loader
/// and plugin table (a plugin crate cannot depend on the host).
pub trait Composer: Send + Sync + 'static {
    /// Reads and resolves the composition at `file`, without side effects.
    ///
    /// # Errors
    /// Why the file is unusable (missing, unparsable, not a list of named rows, unknown
    /// plugins, invalid configs), as one text for a person; the preset is listed as broken with
    /// it.
    fn prepare(&self, file: &Path) -> Result<Arc<dyn Composition>, String>;
}

/// One resolved composition, ready to mount (any number of times).
pub trait Composition: Send + Sync {
    /// Its rows in file order.
    fn rows(&self) -> Vec<RowInfo>;

    /// Every file it was read from (the composition and what it includes), for the stamp that
    /// decides whether a later join needs a new generation.
    fn files(&self) -> Vec<PathBuf>;

    /// Applies every enabled row under `under` (a standing scope) and waits until none is
    /// loading; returns each row's outcome in file order.
    ///
    /// # Cancel safety
    /// Not cancel safe: rows applied so far stay under `under`; dispose it.
    fn mount<'a>(
        &'a self,
        under: &'a Context,
    ) -> Pin<Box<dyn Future<Output = Vec<RowReport>> + Send + 'a>>;
}

/// A row as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowInfo {
    /// The row id.
    pub id: String,
    /// The plugin name.
    pub name: String,
    /// Services the row declares it provides (`Plugin::provides`), sorted.
    pub provides: Vec<String>,
    /// What applying the row starts or loads (`Plugin::starts`): a command, a library, a
    /// connection.
    pub starts: Vec<String>,
}

/// Where a row ended up after a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowStatus {
    /// Applied.
    Active,
    /// Disabled in the composition.
    Disabled,
    /// Waiting for services.
    Pending,
    /// Still loading.
    Loading,
    /// Apply failed, panicked or timed out.
    Failed,
    /// Disposed.
    Disposed,
    /// Applied, but a name it claims another row claims too (neither gets it).
    Conflict,
}

impl RowStatus {
    /// Lowercase name, as `cordis check` spells statuses.
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::Active => "active",
            RowStatus::Disabled => "disabled",
            RowStatus::Pending => "pending",
            RowStatus::Loading => "loading",
            RowStatus::Failed => "failed",
            RowStatus::Disposed => "disposed",
            RowStatus::Conflict => "conflict",
        }
    }

    /// Whether the row is where the composition asked it to be.
    pub fn is_as_configured(self) -> bool {
        matches!(self, RowStatus::Active | RowStatus::Disabled)
    }
}

impl std::fmt::Display for RowStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of one row of a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowReport {
    /// The row id.
    pub id: String,
    /// The plugin name.
    pub name: String,
    /// Its status.
    pub status: RowStatus,
    /// Why it failed, or what a pending row waits for.
    pub reason: Option<String>,
    /// Its scope while it lives (`None` for a disabled row).
    pub scope: Option<ScopeId>,
}
