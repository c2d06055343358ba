//! The code runtime seam behind Code Mode's `run_code`: a [`CodeRuntime`] runs one program with
//! tool bindings under [`Limits`] and always resolves to a [`CodeRunOutcome`].
//!
//! This crate is the interface only; it compiles no engine, so the tool registry and every tool
//! plugin can name it cheaply. The QuickJS engine and the `code-runtime` plugin that provides it
//! live in `cordis-code-runtime-quickjs`, which only the application (and tests) pull in.
//!
//! # Choosing this crate's pieces
//! - [`CodeRuntime`] is the seam the tool registry calls; it knows nothing of the registry.
//!   The registry hands it a [`ToolBindings`] that dispatches each sub-call through its own
//!   pipeline (guards, approvals, events) and says which tools may overlap ([`Concurrency`]).
//! - [`CodeRuntimeService`] (`code-runtime`) is the host service through which an engine is
//!   found at call time.
//! - [`Limits`], [`Cancel`] and [`CodeRunOutcome`] are what one run is given and gives back.
//!
//! # Containment, not a security boundary
//! A run is contained: it has a memory cap, a CPU-time budget, a wall-clock ceiling, an output
//! cap and cancellation; an engine has no network, file system, clock-driven timers or module
//! loader, and its only way out is the tool bindings it is given. That protects the host from a
//! runaway or careless program. It is **not** a sandbox against a hostile one: an in-process
//! engine is C code in the host's process, and an engine bug is the host's bug. Give a program
//! only the tools its agent may call anyway.

mod bindings;
mod cancel;
mod error;
mod limits;
mod outcome;
mod runtime;
mod service;

pub use bindings::{Concurrency, Executed, NoTools, RunOver, SubCall, ToolBindings, ToolCallError};
pub use cancel::Cancel;
pub use error::CodeRuntimeError;
pub use limits::{DEFAULT_MAX_SUB_CALLS, Limits};
pub use outcome::{CodeRunFailure, CodeRunOutcome, FailureKind, LogLevel, LogLine};
pub use runtime::{BoxFuture, CodeRunRequest, CodeRuntime};
pub use service::CodeRuntimeService;
