//! The plugin that offers the [`Presenters`] service.

use cordis_runtime::{BoxError, Context, Plugin};
use serde::Deserialize;

use crate::presenters::Presenters;

/// Configuration of the presenter plugin (none; unknown fields are rejected).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresenterConfig {}

/// The `presenter` plugin: provides [`Presenters::standard`] as the `presenter` service.
#[derive(Debug, Clone, Copy, Default)]
pub struct PresenterPlugin;

impl Plugin for PresenterPlugin {
    type Config = PresenterConfig;

    fn name(&self) -> &str {
        "presenter"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn provides(&self, _config: &Self::Config) -> Vec<String> {
        vec![<crate::Presenters as cordis_runtime::Service>::NAME.to_owned()]
    }

    async fn apply(&self, ctx: Context, _config: &PresenterConfig) -> Result<(), BoxError> {
        let _ = ctx.provide(Presenters::standard())?;
        Ok(())
    }
}
