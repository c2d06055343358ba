//! What a program can call: the host's side of `tools.<name>(args)`.

use serde_json::Value;
use tokio::sync::watch;

use crate::BoxFuture;

/// Whether a tool's calls may overlap with others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Concurrency {
    /// May overlap with other read-only calls (up to the run's parallel limit).
    ReadOnly,
    /// Runs alone: it starts when every earlier call has finished, and nothing starts until it
    /// has finished.
    Mutating,
}

/// One sub-call as the host receives it.
#[derive(Debug, Clone)]
pub struct SubCall {
    /// 1, 2, … in the order the program submitted its calls (the registry's `<callId>:code:<n>`).
    pub seq: u64,
    /// The binding's name.
    pub name: String,
    /// The arguments, already checked to be lossless JSON.
    pub arguments: Value,
    /// Fires when the run settles; a call still running then should wrap up.
    pub run_over: RunOver,
}

/// A failed sub-call; the program sees it as a rejected `ToolCallError` carrying the tool's name
/// and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolCallError {
    /// What went wrong, for the program (and through it, the model).
    pub message: String,
}

impl ToolCallError {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A sub-call whose execution has finished, on its way to [`ToolBindings::commit`].
#[derive(Debug, Clone)]
pub struct Executed {
    /// The call's sequence number (see [`SubCall::seq`]).
    pub seq: u64,
    /// The binding's name.
    pub name: String,
    /// What [`ToolBindings::call`] returned.
    pub result: Result<Value, ToolCallError>,
}

/// The host's tools as a program sees them.
///
/// A sub-call has two phases: [`ToolBindings::call`] executes it (read-only calls may overlap)
/// and [`ToolBindings::commit`] finishes it (the registry's post-execute and its settle event).
/// Commits run one at a time in submission order, and the program receives each result when its
/// commit ends, so results reach the program in submission order too.
///
/// # Determinism
/// The runtime sorts and deduplicates [`ToolBindings::names`]. Calls start strictly in
/// submission order (the work `call` does before returning its future happens in that order),
/// commits happen in submission order, and the engine takes in one result at a time and runs the
/// program until it waits again before it takes the next. So what a program logs and returns
/// depends on its code and its tools' results, never on which tool finished first.
///
/// A mutating call starts once every earlier call is committed, and nothing starts until its own
/// commit has ended.
pub trait ToolBindings: Send + Sync {
    /// The names the program can call (the scope's tools; never `run_code` itself, which a
    /// program must not reach).
    fn names(&self) -> Vec<String>;
    /// The tool's concurrency class, read right before each call starts.
    fn concurrency(&self, name: &str) -> Concurrency;
    /// Executes one call.
    ///
    /// # Cancel safety
    /// The future is dropped unfinished if it has not finished within
    /// [`Limits::sub_call_grace`](crate::Limits::sub_call_grace) after [`SubCall::run_over`]
    /// fires (or by the run's wall-clock ceiling, whichever is first).
    fn call(&self, call: SubCall) -> BoxFuture<'_, Result<Value, ToolCallError>>;
    /// Finishes one executed call; what it returns is what the program receives. By default the
    /// execution's result, unchanged.
    ///
    /// # Cancel safety
    /// As for [`ToolBindings::call`]; calls that finish executing after the run settled are
    /// still committed (in order) within the grace, but their results reach no program.
    fn commit(&self, executed: Executed) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        Box::pin(std::future::ready(executed.result))
    }
}

/// Bindings with no tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTools;

impl ToolBindings for NoTools {
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
    fn concurrency(&self, _name: &str) -> Concurrency {
        Concurrency::Mutating
    }
    fn call(&self, call: SubCall) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        Box::pin(async move {
            Err(ToolCallError::new(format!(
                "unknown tool \"{}\"",
                call.name
            )))
        })
    }
}

/// Tells a running sub-call that its run has settled.
#[derive(Debug, Clone)]
pub struct RunOver(watch::Receiver<bool>);

impl RunOver {
    /// A signal and its sender, for an engine: the engine sends `true` when its run settles.
    pub fn channel() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Self(rx))
    }

    /// Whether the run has settled.
    pub fn is_over(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the run has settled.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        // An error means the run's sender is gone, which only happens once it is over.
        let _ = rx.wait_for(|over| *over).await;
    }
}
