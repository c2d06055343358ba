//! The code runtime as a host service (`codeRuntime`) and the `code-runtime` plugin that
//! provides the QuickJS backend.
//!
//! The tool registry reads the service at call time (`ctx.get`), never injects it, so a
//! deployment that presents every scope natively needs none; a `tool-presentation` entry that
//! selects `code` or `both` waits for it (pending until a runtime is loaded).

use std::sync::Arc;

use cordis_runtime::{BoxError, Context, Plugin, Service};
use serde::Deserialize;

use crate::{CodeRuntime, QuickJs};

/// The `codeRuntime` service: one shared [`CodeRuntime`].
#[derive(Clone)]
pub struct CodeRuntimeService(pub Arc<dyn CodeRuntime>);

impl Service for CodeRuntimeService {
    const NAME: &'static str = "codeRuntime";
}

impl std::fmt::Debug for CodeRuntimeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeRuntimeService")
            .field("language", &self.0.language())
            .field("isolation", &self.0.isolation())
            .finish()
    }
}

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
