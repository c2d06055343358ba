//! Where an unsandboxed command runs when a front end offers to run it: a [`CommandHost`] (an
//! editor's terminal over ACP, which shows the command live). Only a `full-access` shell uses
//! one: a host runs the command outside cordis's sandbox, so a sandboxed shell (whose `bash` is
//! confined, which approvals rely on) never hands it over.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cordis_runtime::Service;

/// A command a host is asked to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedCommand {
    /// The call running it.
    pub call_id: String,
    /// The shell program.
    pub program: PathBuf,
    /// Its arguments (`-c`, the command line).
    pub args: Vec<String>,
    /// Where it runs (the workspace root).
    pub cwd: PathBuf,
    /// Its environment: the shell entry's allowlist.
    pub env: Vec<(String, String)>,
    /// When it is stopped.
    pub timeout: Duration,
    /// The most output the host keeps (its tail).
    pub output_limit: usize,
}

/// How a hosted command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedOutcome {
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<String>,
    /// Its output (stdout and stderr as they came), at most the limit.
    pub output: String,
    /// Output was dropped to stay within the limit.
    pub truncated: bool,
    /// It was stopped at its timeout.
    pub timed_out: bool,
}

/// A boxed future of a host's answer.
pub type HostFuture = Pin<Box<dyn Future<Output = Result<HostedOutcome, String>> + Send>>;

/// Runs commands for the `bash` tool (see the module docs).
pub trait CommandHost: Send + Sync + 'static {
    /// Runs `command` to its end (or its timeout). Dropping the future stops it.
    fn run(&self, command: HostedCommand) -> HostFuture;
}

/// The `command-host` service: the host a front end provides for its composition.
#[derive(Clone)]
pub struct CommandHostService(pub Arc<dyn CommandHost>);

impl Service for CommandHostService {
    const NAME: &'static str = "command-host";
}

impl std::fmt::Debug for CommandHostService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommandHostService")
    }
}

/// The `bash` result of a hosted command: the shape of a command run here, its output as
/// `stdout` (a terminal does not tell the streams apart).
pub fn result_of(outcome: &HostedOutcome, timeout_ms: u64) -> serde_json::Value {
    let mut result = serde_json::json!({
        "exit_code": outcome.exit_code,
        "stdout": outcome.output,
        "stderr": "",
    });
    if let Some(signal) = &outcome.signal {
        result["signal"] = serde_json::json!(signal);
    }
    if outcome.truncated {
        result["note"] =
            serde_json::json!("the output was longer than the limit; its tail is kept");
    }
    if outcome.timed_out {
        result["timed_out"] = serde_json::json!(true);
        result["note"] = serde_json::json!(format!(
            "the command did not finish within {timeout_ms} ms; it was killed"
        ));
    }
    result
}
