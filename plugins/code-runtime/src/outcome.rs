//! What a run comes back with.

use serde_json::Value;

/// The outcome of one run: what it logged, then its completion or failure.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeRunOutcome {
    /// Captured `console.*` lines in the order the program wrote them (kept on failure too).
    pub logs: Vec<LogLine>,
    /// The program's completion (`None` when it returned nothing) or why it failed.
    pub result: Result<Option<Value>, CodeRunFailure>,
    /// How many tool calls the program submitted (including ones the run abandoned).
    pub sub_calls: u64,
}

impl CodeRunOutcome {
    /// The captured lines' texts, in order (what the model-facing result joins).
    pub fn log_texts(&self) -> Vec<String> {
        self.logs.iter().map(|line| line.text.clone()).collect()
    }
}

/// One captured console line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Which console method wrote it.
    pub level: LogLevel,
    /// The arguments, rendered and joined by spaces.
    pub text: String,
}

/// The console method that wrote a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// `console.log`
    Log,
    /// `console.info`
    Info,
    /// `console.warn`
    Warn,
    /// `console.error`
    Error,
    /// `console.debug`
    Debug,
}

impl LogLevel {
    /// The level of a `console` method name (`info`, `warn`, …); anything else is `log`.
    pub fn from_name(name: &str) -> Self {
        match name {
            "info" => Self::Info,
            "warn" => Self::Warn,
            "error" => Self::Error,
            "debug" => Self::Debug,
            _ => Self::Log,
        }
    }
}

/// Why a run failed: a kind to branch on and a message for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("code run failed ({kind}): {message}")]
pub struct CodeRunFailure {
    /// The kind of failure.
    pub kind: FailureKind,
    /// A one-line explanation, e.g. `compute budget exhausted (1000ms busy)`.
    pub message: String,
}

/// The kinds of run failure; each limit has its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureKind {
    /// The program threw (or did not parse, or awaited something nothing will settle).
    Exception,
    /// The CPU-time budget or the wall-clock ceiling was reached.
    Timeout,
    /// The caller cancelled the run.
    Abort,
    /// The completion was not lossless JSON.
    InvalidOutput,
    /// Logs plus completion exceeded the output cap.
    OutputLimit,
    /// The engine's memory cap was reached.
    Memory,
    /// The program made more tool calls than [`crate::Limits::max_sub_calls`].
    SubCallLimit,
    /// The engine thread ended without an outcome (a bug in the runtime, not in the program).
    EngineExit,
}

impl FailureKind {
    /// The kind's wire name: `exception`, `timeout`, `abort`, `invalid-output`, `output-limit`,
    /// `memory`, `sub-call-limit` or `engine-exit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exception => "exception",
            Self::Timeout => "timeout",
            Self::Abort => "abort",
            Self::InvalidOutput => "invalid-output",
            Self::OutputLimit => "output-limit",
            Self::Memory => "memory",
            Self::SubCallLimit => "sub-call-limit",
            Self::EngineExit => "engine-exit",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl CodeRunFailure {
    /// A failure of this kind with this message.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}
