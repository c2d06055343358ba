//! The code runtime behind Code Mode's `run_code`: a [`CodeRuntime`] runs one program with tool
//! bindings under [`Limits`] and always resolves to a [`CodeRunOutcome`].
//!
//! # Choosing this crate's pieces
//! - [`CodeRuntime`] is the seam the tool registry calls; it knows nothing of the registry.
//!   The registry hands it a [`ToolBindings`] that dispatches each sub-call through its own
//!   pipeline (guards, approvals, events) and says which tools may overlap.
//! - [`QuickJs`] is the JavaScript backend (QuickJS-ng through `rquickjs`): a fresh engine on a
//!   dedicated thread per run, so a hot loop never stalls the async host.
//!
//! - [`CodeRuntimePlugin`] (`code-runtime`) provides a [`QuickJs`] as the host service
//!   [`CodeRuntimeService`] (`codeRuntime`), which the registry's `run_code` reads at call time.
//!
//! # Containment, not a security boundary
//! A run is contained: it has a memory cap, a CPU-time budget, a wall-clock ceiling, an output
//! cap and cancellation; the engine has no network, file system, clock-driven timers or module
//! loader, and its only way out is the tool bindings it is given. That protects the host from a
//! runaway or careless program. It is **not** a sandbox against a hostile one: the engine is C
//! code in the host's process, and an engine bug is the host's bug. Give a program only the tools
//! its agent may call anyway.
//!
//! # Examples
//! ```
//! use std::sync::Arc;
//! use cordis_code_runtime::{Cancel, CodeRunRequest, CodeRuntime, Limits, NoTools, QuickJs};
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

mod bindings;
mod cancel;
mod error;
mod limits;
mod outcome;
mod quickjs;
mod runtime;
mod service;

pub use bindings::{
    Concurrency, Executed, NoTools, RunOver, ToolBindings, ToolCall, ToolCallError,
};
pub use cancel::Cancel;
pub use error::CodeRuntimeError;
pub use limits::{DEFAULT_MAX_SUB_CALLS, Limits};
pub use outcome::{CodeRunFailure, CodeRunOutcome, FailureKind, LogLevel, LogLine};
pub use quickjs::QuickJs;
pub use runtime::{BoxFuture, CodeRunRequest, CodeRuntime};
pub use service::{CodeRuntimeConfig, CodeRuntimePlugin, CodeRuntimeService};
