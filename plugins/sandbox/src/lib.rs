//! Processes in a sandbox.
//!
//! A [`Sandbox`] says what a process may write and whether it may reach the network; [`spawn`]
//! starts a command inside it. The rules are built by the host before the fork and applied in
//! the forked child just before `exec` (Landlock and seccomp bind the calling process and
//! everything it starts), so the host itself is never restricted and everything the command
//! starts inherits them:
//!
//! - **Filesystem** (Landlock): read and execute anywhere the user can outside `/dev`; write
//!   only in the private temp dir, the workspace root (in `workspace-write`), the configured
//!   extra roots, and [`WRITABLE_DEVICES`] (`/dev/null`, `/dev/zero`, `/dev/full`); of `/dev`,
//!   read only [`READABLE_DEVICES`]. No terminal (a command's output reaches the user only
//!   through cordis, escaped), no `/dev/shm` (another program's shared memory). Landlock binds paths by their opened
//!   directories, so a symlink inside the workspace that points out leads to a place the rules do
//!   not cover, and `cd /` changes nothing.
//! - **Network** (unless allowed): seccomp refuses `socket()` for IPv4, IPv6 and packet sockets
//!   (so UDP too) and `io_uring_setup`; Landlock refuses TCP bind and connect where its ABI has
//!   network rules (4+). Unix sockets with a path stay usable (local tools need them).
//! - **Process scoping**: a sandboxed process cannot `ptrace` a process outside its Landlock
//!   domain, nor signal one (ABI 6+); it runs without `CAP_SYS_PTRACE`, so it cannot read the
//!   memory or `/proc/PID/environ` of a non-dumpable process: the host ([`protect_host`]) and
//!   the reaper, which holds a copy of the host's memory.
//! - **Lifetime**: with [`Reap::Tree`], the command runs under a reaper: a small process that
//!   makes itself the *child subreaper* of everything below it, so a process that escapes its
//!   group (`setsid cmd &`) is still its descendant; when the command ends or is stopped, the
//!   reaper kills every process that remains, then exits with the command's status.
//!
//! **Fail closed**: a sandboxed mode on a kernel without Landlock refuses to start the command
//! ([`SandboxError::Unsupported`], which says how to choose `full-access`); it never runs it
//! unsandboxed.

#[allow(
    unsafe_code,
    reason = "blanking the environment calls `set_var`, unsafe in edition 2024"
)]
mod host;
mod reaper;
mod rules;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use rules::{READABLE_DEVICES, WRITABLE_DEVICES, landlock_abi};

/// What a sandboxed command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read anywhere the user can; write nowhere but a private temp dir.
    ReadOnly,
    /// Also write inside the workspace root (and the configured extra roots).
    #[default]
    WorkspaceWrite,
    /// No sandbox at all: the command can do anything the user can.
    FullAccess,
}

impl SandboxMode {
    /// The word configuration and messages use.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The sandbox one command runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// What it may write.
    pub mode: SandboxMode,
    /// Whether it may reach the network.
    pub network: bool,
    /// The workspace root (writable in `workspace-write`).
    pub workspace: PathBuf,
    /// More roots writable in `workspace-write` (a build cache outside the workspace).
    pub writable: Vec<PathBuf>,
    /// The private temp dir (always writable; the command's `TMPDIR`).
    pub temp: PathBuf,
}

impl Sandbox {
    /// True when the command's effects cannot leave the workspace (and its temp dir): a
    /// sandboxed mode without network.
    pub fn is_confined(&self) -> bool {
        self.mode != SandboxMode::FullAccess && !self.network
    }
}

/// How a process is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// A command's sandbox.
    Sandbox(Sandbox),
    /// Nothing restricted but process scoping: the process cannot read the host's memory or
    /// environment through `/proc` (an MCP stdio server). Best effort: without Landlock the
    /// process starts unscoped.
    ScopeOnly,
    /// Nothing at all.
    None,
}

/// Whether the command's whole process tree ends with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reap {
    /// Run it under a reaper: when it ends (or the reaper gets `SIGTERM`), everything it started
    /// is killed. Stop it with [`stop`], not `SIGKILL`, so the reaper can clean up.
    Tree,
    /// Start it directly.
    No,
}

/// The sandbox could not be set up; the command did not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel cannot enforce the mode: fail closed.
    #[error(
        "the {mode} sandbox cannot be enforced: {detail}; commands are refused rather than run unsandboxed (to run them without a sandbox, set `sandbox: full-access` in the tool-shell entry's config)"
    )]
    Unsupported {
        /// The mode asked for.
        mode: SandboxMode,
        /// What the kernel lacks.
        detail: String,
    },
    /// Building or applying the rules failed.
    #[error("cannot apply the {mode} sandbox: {detail}")]
    Rules {
        /// The mode asked for.
        mode: SandboxMode,
        /// The failure.
        detail: String,
    },
    /// The command could not start.
    #[error("cannot start the command: {0}")]
    Spawn(#[source] std::io::Error),
}

/// A command armed with its confinement: keep it until the command is spawned (it holds the
/// Landlock ruleset the child applies).
#[derive(Debug)]
pub struct Armed {
    _ruleset: Option<std::os::fd::OwnedFd>,
}

/// Makes `command` apply `confinement` in the child before `exec`, under a reaper when `reap`
/// says so; for a command spawned by someone else (a process wrapper).
///
/// # Errors
/// [`SandboxError`]: the kernel cannot enforce the sandbox, or the rules fail.
pub fn arm(
    command: &mut tokio::process::Command,
    confinement: &Confinement,
    reap: Reap,
) -> Result<Armed, SandboxError> {
    let prepared = rules::prepare(confinement)?;
    let raw = prepared.landlock.as_ref().map(|fd| {
        use std::os::fd::AsRawFd;
        fd.as_raw_fd()
    });
    reaper::install(command, raw, prepared.seccomp, reap == Reap::Tree);
    Ok(Armed {
        _ruleset: prepared.landlock,
    })
}

/// Starts `command` confined as `confinement` says, reaped as `reap` says.
///
/// # Errors
/// [`SandboxError`]: the kernel cannot enforce the sandbox (nothing started), the rules fail,
/// the spawn fails (a restriction the child could not apply fails the spawn too).
pub fn spawn(
    mut command: tokio::process::Command,
    confinement: &Confinement,
    reap: Reap,
) -> Result<tokio::process::Child, SandboxError> {
    let armed = arm(&mut command, confinement, reap)?;
    let child = command.spawn().map_err(SandboxError::Spawn);
    drop(armed);
    child
}

/// Hardens the host against the commands and servers it starts reading its secrets (API keys
/// in its environment): makes it not dumpable (no process without `CAP_SYS_PTRACE`, as every
/// sandboxed one is, can read its memory) and blanks the environment block the kernel shows as
/// `/proc/PID/environ` (some kernels show it to same-user readers whatever the dumpable flag),
/// after moving every variable to the heap so the process still reads them all.
///
/// Call it once, first thing in `main`, before any thread starts: it rewrites the environment.
///
/// # Errors
/// The `prctl` failed, or `/proc/self` could not be read or written (the environment is then
/// unchanged or already moved: nothing is lost).
pub fn protect_host() -> std::io::Result<()> {
    reaper::not_dumpable()?;
    host::blank_environment_block()
}

/// Stops a child started with [`Reap::Tree`]: asks its reaper to kill the command and
/// everything it started (`SIGTERM` to the reaper, which the command never sees).
pub fn stop(pid: u32) {
    reaper::stop(pid);
}

#[cfg(test)]
mod tests;
