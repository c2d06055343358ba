//! The `code-runtime` plugin: provides the QuickJS backend as the [`CodeRuntimeService`].

use std::sync::Arc;

use cordis_code_runtime::CodeRuntimeService;
use cordis_runtime::{BoxError, Context, Plugin, Service};
use serde::Deserialize;

use crate::QuickJs;

/// Configuration of the `code-runtime` plugin (none yet; unknown fields are rejected).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeRuntimeConfig {}

/// The `code-runtime` plugin: provides [`CodeRuntimeService`] backed by [`QuickJs`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CodeRuntimePlugin;

impl Plugin for CodeRuntimePlugin {
    type Config = CodeRuntimeConfig;

    fn name(&self) -> &str {
        "code-runtime"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn provides(&self, _config: &CodeRuntimeConfig) -> Vec<String> {
        vec![CodeRuntimeService::NAME.to_owned()]
    }

    async fn apply(&self, ctx: Context, _config: &CodeRuntimeConfig) -> Result<(), BoxError> {
        let _ = ctx.provide(CodeRuntimeService(Arc::new(QuickJs::new())))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_plugin_provides_a_javascript_runtime_that_unwinds_with_it() {
        let root = Context::root();
        let scope = root.plugin(CodeRuntimePlugin, CodeRuntimeConfig::default());
        root.idle().await;
        let service = root.get::<CodeRuntimeService>().expect("provided");
        assert_eq!(service.0.language(), "javascript");
        scope.dispose();
        assert!(root.get::<CodeRuntimeService>().is_none());
        root.dispose();
        assert!(root.live().is_zero(), "{:?}", root.live());
    }
}
