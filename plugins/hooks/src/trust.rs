//! Trust: hooks from a configuration file inside the workspace (a project's `cordis.yml`, which
//! anyone who can commit to the project wrote) run only in a workspace the user trusts; hooks
//! from the user's own configuration (a file outside the workspace) always run.
//!
//! Trust is remembered per directory, one canonical path a line, in
//! `$XDG_STATE_HOME/cordis/trusted-workspaces` (else `~/.local/state/…`). A run trusts its
//! workspace with `cordis run --trust` (remembered from then on).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `--trust`: this run trusts its workspace (and remembers it).
static TRUST_THIS_RUN: AtomicBool = AtomicBool::new(false);

/// Trusts the workspace of this process's runs (`cordis run --trust`): hooks from its files run,
/// and the trust is remembered for the directory.
pub fn trust_workspace_for_run(trust: bool) {
    TRUST_THIS_RUN.store(trust, Ordering::Release);
}

/// Where an entry's hooks may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The configuration is the user's own (outside the workspace), or the workspace is trusted.
    Trusted,
    /// The configuration is in workspace `dir`, which the user has not trusted.
    Untrusted {
        /// The workspace directory.
        dir: PathBuf,
    },
}

impl Trust {
    /// The message a skipped hook logs.
    pub fn refusal(&self) -> Option<String> {
        match self {
            Trust::Trusted => None,
            Trust::Untrusted { dir } => Some(format!(
                "not run: hooks from the workspace's own configuration run only in a trusted workspace, and {} is not trusted (run `cordis run --trust` there to trust it)",
                dir.display()
            )),
        }
    }
}

/// The file trusted directories are remembered in, from `env`.
pub fn store_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(xdg) = env("XDG_STATE_HOME").filter(|v| Path::new(v).is_absolute()) {
        return Some(PathBuf::from(xdg).join("cordis").join("trusted-workspaces"));
    }
    env("HOME")
        .filter(|v| Path::new(v).is_absolute())
        .map(|h| PathBuf::from(h).join(".local/state/cordis/trusted-workspaces"))
}

/// True when `store` lists `dir`.
pub fn is_remembered(store: &Path, dir: &Path) -> bool {
    std::fs::read_to_string(store).is_ok_and(|text| text.lines().any(|l| Path::new(l) == dir))
}

/// Adds `dir` to `store` (made with its folders when missing).
///
/// # Errors
/// The store could not be written.
pub fn remember(store: &Path, dir: &Path) -> std::io::Result<()> {
    if is_remembered(store, dir) {
        return Ok(());
    }
    if let Some(parent) = store.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(store)?;
    writeln!(f, "{}", dir.display())
}

/// The trust of hooks configured in the file whose directory is `config_dir`, for the
/// workspace `workspace` (blocking: it reads the store).
pub fn decide(config_dir: Option<&Path>, workspace: &Path, store: Option<&Path>) -> Trust {
    let Some(config_dir) = config_dir else {
        return Trust::Trusted;
    };
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (config_dir, workspace) = (canon(config_dir), canon(workspace));
    if !config_dir.starts_with(&workspace) {
        return Trust::Trusted;
    }
    if TRUST_THIS_RUN.load(Ordering::Acquire) {
        if let Some(store) = store
            && let Err(e) = remember(store, &workspace)
        {
            tracing::warn!("cannot remember the trust of {}: {e}", workspace.display());
        }
        return Trust::Trusted;
    }
    if store.is_some_and(|s| is_remembered(s, &workspace)) {
        return Trust::Trusted;
    }
    Trust::Untrusted { dir: workspace }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_file_needs_trust_and_a_user_file_does_not() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let store = root.path().join("state/trusted");
        let ws_canon = std::fs::canonicalize(&ws).unwrap();
        assert_eq!(
            decide(Some(&ws), &ws, Some(&store)),
            Trust::Untrusted {
                dir: ws_canon.clone()
            }
        );
        assert_eq!(decide(Some(root.path()), &ws, Some(&store)), Trust::Trusted);
        assert_eq!(decide(None, &ws, Some(&store)), Trust::Trusted);
        remember(&store, &ws_canon).unwrap();
        remember(&store, &ws_canon).unwrap();
        assert_eq!(std::fs::read_to_string(&store).unwrap().lines().count(), 1);
        assert_eq!(decide(Some(&ws), &ws, Some(&store)), Trust::Trusted);
    }
}
