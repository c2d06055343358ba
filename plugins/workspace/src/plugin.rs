//! The `workspace` plugin: opens the configured root and offers it as a service.
//!
//! Opening touches the file system, so it runs on a blocking thread, and in
//! [`Plugin::preload`]: a host awaits preloads before the seeded applies, so when the open
//! finishes cannot change the interleaving a seed replays. A root opened less than
//! [`REUSE_WITHIN`] ago is reused instead of opened again: a process that boots one plan many
//! times (`cordis stress`, `permute`, benchmarks) then hands no work to another thread per boot,
//! which cost more wall time than the rest of a boot (a thread handoff, and with a fresh runtime
//! per seed a thread started and joined).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use cordis_runtime::{BoxError, Context, Plugin, Service};
use serde::Deserialize;

use crate::error::WorkspaceError;
use crate::snapshot::{self, Key};
use crate::workspace::Workspace;

/// How long an opened root is reused for the same absolute path before it is opened again (so
/// a root replaced on disk is picked up by the next boot after at most this long).
pub const REUSE_WITHIN: Duration = Duration::from_secs(1);

/// Roots opened recently, by the configured root made absolute (which reads only the process's
/// current directory, not the file system), with when they were opened.
fn recent() -> &'static Mutex<BTreeMap<PathBuf, (Workspace, Instant)>> {
    static RECENT: OnceLock<Mutex<BTreeMap<PathBuf, (Workspace, Instant)>>> = OnceLock::new();
    RECENT.get_or_init(Default::default)
}

/// A root opened under `key` less than [`REUSE_WITHIN`] ago.
fn reuse(key: &Path) -> Option<Workspace> {
    let recent = cordis_runtime::lock(recent());
    let (ws, opened) = recent.get(key)?;
    (opened.elapsed() < REUSE_WITHIN).then(|| ws.clone())
}

/// Opens `config`'s root, or takes the open kept in the current run's
/// [`Snapshot`](crate::Snapshot): the boots of one run share one open, and skip making the
/// root absolute, which asks the OS for the current directory every time (no part of cordis
/// changes it, so within a run a relative root names one directory). A failed open is not
/// kept: the next boot tries again. Outside a snapshot, [`open_recent`].
async fn open(config: &WorkspaceConfig) -> Result<Workspace, BoxError> {
    if !snapshot::active() {
        return open_recent(config).await;
    }
    let key = Key::new("workspace").opt_path(config.root.as_deref());
    if let Some(ws) = snapshot::get::<Workspace>(&key) {
        return Ok(ws);
    }
    let ws = open_recent(config).await?;
    snapshot::put(key, ws.clone());
    Ok(ws)
}

/// Opens `config`'s root on a blocking thread, or reuses a recent open of the same path.
async fn open_recent(config: &WorkspaceConfig) -> Result<Workspace, BoxError> {
    let root = config.root.clone().unwrap_or_else(|| PathBuf::from("."));
    let key = std::path::absolute(&root).map_err(|source| WorkspaceError::Root {
        root: root.clone(),
        source,
    })?;
    if let Some(ws) = reuse(&key) {
        return Ok(ws);
    }
    // Canonicalizing and opening the root touch the file system: off the async threads.
    let ws = tokio::task::spawn_blocking(move || Workspace::open(root)).await??;
    let now = Instant::now();
    let mut recent = cordis_runtime::lock(recent());
    // Expired roots go, so the map holds only what was opened within the last second.
    recent.retain(|_, (_, opened)| now.duration_since(*opened) < REUSE_WITHIN);
    recent.insert(key, (ws.clone(), now));
    Ok(ws)
}

impl Service for Workspace {
    const NAME: &'static str = "workspace";
}

/// The additional roots a front end gives a session's workspace (`workspace-more-roots`: an
/// editor's additional directories), provided on the composition's root before it boots: the
/// plugin opens them with the configured root (see [`Workspace::open_with`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoreRoots(pub Vec<PathBuf>);

impl Service for MoreRoots {
    const NAME: &'static str = "workspace-more-roots";
}

/// Opens `config`'s root with the additional roots `more` on a blocking thread (never reused:
/// only a front end's session gives them).
async fn open_more(config: &WorkspaceConfig, more: &MoreRoots) -> Result<Workspace, BoxError> {
    let root = config.root.clone().unwrap_or_else(|| PathBuf::from("."));
    let more = more.0.clone();
    Ok(tokio::task::spawn_blocking(move || Workspace::open_with(root, &more)).await??)
}

/// Configuration of `workspace`; unknown fields are rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// The root every workspace tool is confined to; the current directory when absent.
    #[serde(default)]
    pub root: Option<PathBuf>,
}

/// The `workspace` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkspacePlugin;

impl Plugin for WorkspacePlugin {
    type Config = WorkspaceConfig;

    fn name(&self) -> &str {
        "workspace"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn provides(&self, _config: &Self::Config) -> Vec<String> {
        vec![<crate::Workspace as cordis_runtime::Service>::NAME.to_owned()]
    }

    fn widens(&self, old: Option<&WorkspaceConfig>, new: Option<&WorkspaceConfig>) -> Vec<String> {
        let shown = |c: &WorkspaceConfig| {
            c.root.as_ref().map_or_else(
                || "the current directory".to_owned(),
                |r| r.display().to_string(),
            )
        };
        match (old, new) {
            (Some(old), Some(new)) if old.root != new.root => vec![format!(
                "the workspace tools would act in {} instead of {}",
                shown(new),
                shown(old)
            )],
            (None, Some(new)) => vec![format!("it opens a workspace in {}", shown(new))],
            _ => Vec::new(),
        }
    }

    async fn preload(&self, root: &Context, config: &WorkspaceConfig) {
        // Opened here, before the seeded applies, so the apply finds it in `recent`; a failure
        // is reported by the apply, which tries again.
        if root.get::<MoreRoots>().is_none() {
            let _ = open(config).await;
        }
    }

    async fn apply(&self, ctx: Context, config: &WorkspaceConfig) -> Result<(), BoxError> {
        let ws = match ctx.get::<MoreRoots>() {
            Some(more) if !more.0.is_empty() => open_more(config, &more).await?,
            _ => open(config).await?,
        };
        let _ = ctx.provide(ws)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;

    use super::*;

    async fn booted(config: &WorkspaceConfig) -> Workspace {
        let root = Context::root();
        root.plugin(WorkspacePlugin, config.clone());
        root.idle().await;
        let ws = (*root.get::<Workspace>().unwrap()).clone();
        root.dispose();
        ws
    }

    #[tokio::test]
    async fn a_root_is_reused_by_the_next_boot_within_a_second_and_opened_again_after() {
        let tmp = tempfile::tempdir().unwrap();
        let config = WorkspaceConfig {
            root: Some(tmp.path().to_path_buf()),
        };
        let first = booted(&config).await;
        let second = booted(&config).await;
        assert!(
            first.same_open(&second),
            "a boot right after reuses the open root"
        );
        assert_eq!(second.root(), std::fs::canonicalize(tmp.path()).unwrap());
        // Age the open past the reuse window: the next boot opens the root again.
        let key = std::path::absolute(tmp.path()).unwrap();
        let old = Instant::now().checked_sub(REUSE_WITHIN).unwrap();
        cordis_runtime::lock(recent()).insert(key, (first.clone(), old));
        let third = booted(&config).await;
        assert!(!third.same_open(&first), "an old open is not reused");
        assert_eq!(third.root(), first.root());
    }

    /// Ages `dir`'s entry in `recent` past the reuse window, so only a snapshot can serve it.
    fn age(dir: &Path, ws: &Workspace) {
        let key = std::path::absolute(dir).unwrap();
        let old = Instant::now().checked_sub(REUSE_WITHIN).unwrap();
        cordis_runtime::lock(recent()).insert(key, (ws.clone(), old));
    }

    #[test]
    fn inside_a_snapshot_each_root_is_opened_once_and_a_failed_open_is_not_kept() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let config = |dir: &Path| WorkspaceConfig {
            root: Some(dir.to_path_buf()),
        };
        let missing = a.path().join("later");
        let snapshot = crate::Snapshot::new();
        let first = snapshot.enter(|| {
            let first = rt.block_on(booted(&config(a.path())));
            age(a.path(), &first);
            let again = rt.block_on(booted(&config(a.path())));
            assert!(
                again.same_open(&first),
                "the snapshot serves the first open"
            );
            // Another root is another open, never the first one's.
            let other = rt.block_on(booted(&config(b.path())));
            assert!(!other.same_open(&first));
            assert_eq!(other.root(), std::fs::canonicalize(b.path()).unwrap());
            // A root that failed to open is tried again by the next boot.
            let status = rt.block_on(async {
                let root = Context::root();
                let h = root.plugin(WorkspacePlugin, config(&missing));
                root.idle().await;
                let status = h.status();
                root.dispose();
                status
            });
            assert_eq!(status, ScopeStatus::Failed);
            std::fs::create_dir(&missing).unwrap();
            let made = rt.block_on(booted(&config(&missing)));
            assert_eq!(made.root(), std::fs::canonicalize(&missing).unwrap());
            first
        });
        // Outside the snapshot: opened again (the recent open is too old).
        age(a.path(), &first);
        let outside = rt.block_on(booted(&config(a.path())));
        assert!(!outside.same_open(&first));
    }

    #[tokio::test]
    async fn a_preload_opens_the_root_the_apply_then_provides() {
        let tmp = tempfile::tempdir().unwrap();
        let config = WorkspaceConfig {
            root: Some(tmp.path().to_path_buf()),
        };
        let root = Context::root();
        WorkspacePlugin.preload(&root, &config).await;
        let key = std::path::absolute(tmp.path()).unwrap();
        let preloaded = reuse(&key).expect("the preload opened the root");
        root.plugin(WorkspacePlugin, config);
        root.idle().await;
        assert!(root.get::<Workspace>().unwrap().same_open(&preloaded));
        root.dispose();
    }

    #[tokio::test]
    async fn the_plugin_offers_the_opened_root_and_fails_on_a_missing_one() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Context::root();
        let config = WorkspaceConfig {
            root: Some(tmp.path().to_path_buf()),
        };
        let h = root.plugin(WorkspacePlugin, config);
        root.idle().await;
        assert_eq!(h.status(), ScopeStatus::Active);
        let ws = root.get::<Workspace>().unwrap();
        assert_eq!(ws.root(), std::fs::canonicalize(tmp.path()).unwrap());
        h.dispose();
        let missing = WorkspaceConfig {
            root: Some("/definitely/not/here".into()),
        };
        let h = root.plugin(WorkspacePlugin, missing);
        root.idle().await;
        assert_eq!(h.status(), ScopeStatus::Failed);
        root.dispose();
    }
}
