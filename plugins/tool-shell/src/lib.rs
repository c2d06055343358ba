//! The `tool-shell` plugin: `bash`, a command run in the workspace root.
//!
//! The command runs in a process group of its own. When it ends, times out, or the call is
//! cancelled (its future dropped), the whole group is killed, so background jobs it started do
//! not outlive the call. The environment is cleared and refilled from an allowlist.
//!
//! This is no sandbox: a command can leave its group (`setsid`) and touch anything the user
//! can. The approvals plugin (policy `ask` by default for `bash`) is the boundary.

mod config;
mod plugin;
mod run;

pub use config::ShellConfig;
pub use plugin::{ShellPlugin, bash_tool};
pub use run::{ShellError, run_bash};

/// `bash`: mutating (it can do anything).
pub const BASH: &str = "bash";

/// Every tool of this crate with whether it only reads.
pub const TOOLS: &[(&str, bool)] = &[(BASH, false)];
