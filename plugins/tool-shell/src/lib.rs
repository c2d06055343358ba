//! The `tool-shell` plugin: `bash`, a command run in the workspace root.
//!
//! Every command runs in a sandbox (`cordis-sandbox`): `workspace-write` by default (write only
//! in the workspace and a private temp dir, no network), `read-only`, or `full-access` (no
//! sandbox, an explicit choice). A kernel that cannot enforce the sandbox refuses the command
//! rather than run it unsandboxed. The command runs under a reaper: when it ends, times out, or
//! the call is cancelled (its future dropped), everything it started is killed, also what left
//! its process group (`setsid`). The environment is cleared and refilled from an allowlist.

mod config;
mod host;
mod plugin;
mod run;

pub use config::ShellConfig;
pub use cordis_sandbox::SandboxMode;
pub use host::{
    CommandHost, CommandHostService, HostFuture, HostedCommand, HostedOutcome, result_of,
};
pub use plugin::CommandOutput;
pub use plugin::{ShellPlugin, bash_tool};
pub use run::{LIVE_OUTPUT_LIMIT, Live, ShellError, run_bash, run_bash_live};

/// `bash`.
pub const BASH: &str = "bash";

/// The names of this crate's tools (what it claims).
pub const TOOLS: &[&str] = &[BASH];
