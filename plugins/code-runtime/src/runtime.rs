//! The seam: what a code runtime is and what one run asks of it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::{Cancel, CodeRunOutcome, CodeRuntimeError, Limits, ToolBindings};

/// A boxed, sendable future; the trait's methods return these so it stays object safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One program to run, with what it may call and how far it may go.
pub struct CodeRunRequest {
    /// The program: the body of an async function (`await` and `return` work at top level).
    pub program: String,
    /// The tools the program reaches as `tools.<name>(args)`.
    pub bindings: Arc<dyn ToolBindings>,
    /// Memory, CPU, wall-clock, output and parallelism limits for this run.
    pub limits: Limits,
    /// Fires to abort the run; the outcome is then an `abort` failure.
    pub cancel: Cancel,
}

/// A language runtime that runs `run_code` programs.
///
/// # Errors
/// [`CodeRuntime::run`] resolves to `Ok` for every program outcome (a throw, a limit, a
/// cancellation are all [`CodeRunOutcome`]s); `Err` is only for misuse by the caller (invalid
/// limits) or a host that cannot start a thread.
pub trait CodeRuntime: Send + Sync {
    /// The program language, e.g. `javascript`; the SDK renderer is chosen by it.
    fn language(&self) -> &str;
    /// How a run is isolated from the host, e.g. `quickjs-thread`; for diagnostics.
    fn isolation(&self) -> &str;
    /// Runs one program to its outcome.
    ///
    /// # Cancel safety
    /// Dropping the future aborts the run: its engine stops at the next interrupt check, and
    /// its thread ends on its own (it stays counted as live until it has).
    fn run(
        &self,
        request: CodeRunRequest,
    ) -> BoxFuture<'static, Result<CodeRunOutcome, CodeRuntimeError>>;
}
