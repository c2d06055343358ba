//! The code runtime as a host service (`code-runtime`).
//!
//! The tool registry reads the service at call time (`ctx.get`), never injects it, so a
//! deployment that presents every scope natively needs none; a `tool-presentation` entry that
//! selects `code` or `both` waits for it (pending until a runtime is loaded). An engine crate
//! (`cordis-code-runtime-quickjs`) provides it.

use std::sync::Arc;

use cordis_runtime::Service;

use crate::CodeRuntime;

/// The `code-runtime` service: one shared [`CodeRuntime`].
#[derive(Clone)]
pub struct CodeRuntimeService(pub Arc<dyn CodeRuntime>);

impl Service for CodeRuntimeService {
    const NAME: &'static str = "code-runtime";
}

impl std::fmt::Debug for CodeRuntimeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeRuntimeService")
            .field("language", &self.0.language())
            .field("isolation", &self.0.isolation())
            .finish()
    }
}
