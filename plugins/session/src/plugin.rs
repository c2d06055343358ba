//! The `sessions` plugin: provides the [`SessionStore`].

use std::path::PathBuf;

use cordis_runtime::{BoxError, Context, Plugin};
use serde::Deserialize;

use crate::store::SessionStore;

/// How appends reach the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// Group commit with `fsync` per batch (the default).
    #[default]
    Fsync,
    /// Written, never synced: survives a process crash, not a power loss (benchmarks).
    None,
}

/// Configuration of the `sessions` plugin: `{root?: dir, durability?: fsync | none}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SessionConfig {
    /// Directory of `<id>.jsonl` files; absent keeps sessions in memory.
    #[serde(default)]
    pub root: Option<PathBuf>,
    /// How appends reach the disk.
    #[serde(default)]
    pub durability: Durability,
}

/// The `sessions` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionPlugin;

impl Plugin for SessionPlugin {
    type Config = SessionConfig;

    fn name(&self) -> &str {
        "sessions"
    }

    fn provides(&self, _config: &Self::Config) -> Vec<String> {
        vec![<crate::SessionStore as cordis_runtime::Service>::NAME.to_owned()]
    }

    async fn apply(&self, ctx: Context, config: &SessionConfig) -> Result<(), BoxError> {
        let _ = ctx.provide(SessionStore::new(config.root.clone(), config.durability))?;
        Ok(())
    }
}
