//! The `workspace` plugin: opens the configured root and offers it as a service.

use std::path::PathBuf;

use cordis_runtime::{BoxError, Context, Plugin, Service};
use serde::Deserialize;

use crate::workspace::Workspace;

impl Service for Workspace {
    const NAME: &'static str = "workspace";
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

    fn provides(&self, _config: &Self::Config) -> Vec<String> {
        vec![<crate::Workspace as cordis_runtime::Service>::NAME.to_owned()]
    }

    async fn apply(&self, ctx: Context, config: &WorkspaceConfig) -> Result<(), BoxError> {
        let root = config.root.clone().unwrap_or_else(|| PathBuf::from("."));
        // Canonicalizing and opening the root touch the file system: off the async threads.
        let ws = tokio::task::spawn_blocking(move || Workspace::open(root)).await??;
        let _ = ctx.provide(ws)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;

    use super::*;

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
