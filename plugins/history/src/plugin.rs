//! The `history` plugin: provides the [`History`] service.

use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_session::SessionStore;
use serde::Deserialize;

use crate::service::History;

/// Configuration of the `history` plugin (none; unknown fields are rejected).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryConfig {}

/// The `history` plugin (injects `sessions`; finds `agent-loop`, `tools`, `presenter` and
/// `agent-presets/standing` at each read, when they exist).
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryPlugin;

const INJECT: &[Inject] = &[Inject::required(SessionStore::NAME)];

impl Plugin for HistoryPlugin {
    type Config = HistoryConfig;

    fn name(&self) -> &str {
        "history"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn provides(&self, _config: &Self::Config) -> Vec<String> {
        vec![History::NAME.to_owned()]
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    async fn apply(&self, ctx: Context, _config: &HistoryConfig) -> Result<(), BoxError> {
        let _ = ctx.provide(History::new(ctx.clone()))?;
        Ok(())
    }
}
