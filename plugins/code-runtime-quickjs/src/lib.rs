//! The QuickJS engine behind the code runtime seam (`cordis-code-runtime`), and the
//! `code-runtime` plugin that provides it.
//!
//! - [`QuickJs`] is the JavaScript backend (QuickJS-ng through `rquickjs`): a fresh engine on a
//!   dedicated thread per run, so a hot loop never stalls the async host.
//! - [`CodeRuntimePlugin`] (`code-runtime`) provides a [`QuickJs`] as the host service
//!   [`CodeRuntimeService`](cordis_code_runtime::CodeRuntimeService), which the registry's
//!   `run_code` reads at call time.
//!
//! Only the application and tests depend on this crate: the registry and tool plugins depend on
//! the seam alone and never compile the engine.
//!
//! # Examples
//! ```
//! use std::sync::Arc;
//! use cordis_code_runtime::{Cancel, CodeRunRequest, CodeRuntime, Limits, NoTools};
//! use cordis_code_runtime_quickjs::QuickJs;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let runtime = QuickJs::new();
//! let outcome = runtime
//!     .run(CodeRunRequest {
//!         program: "console.log('hi'); return 1 + 1;".into(),
//!         bindings: Arc::new(NoTools),
//!         limits: Limits::default(),
//!         cancel: Cancel::never(),
//!     })
//!     .await
//!     .unwrap();
//! assert_eq!(outcome.logs[0].text, "hi");
//! assert_eq!(outcome.result.unwrap(), Some(serde_json::json!(2)));
//! # });
//! ```

mod dispatch;
mod engine;
mod plugin;
mod quickjs;

pub use plugin::{CodeRuntimeConfig, CodeRuntimePlugin};
pub use quickjs::QuickJs;
