//! Running one command: spawn it in its sandbox under a reaper (in a process group of its own),
//! read both pipes with caps, wait with a deadline, stop the whole tree.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rustix::process::{Pid, Signal};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use cordis_tools::HeadTail;

use crate::config::ShellConfig;

/// How long pipes may stay open after the group was killed (a process that left the group
/// can hold them); then the output read so far is returned.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// The `bash` tool failed before producing a result.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The arguments do not match the schema.
    #[error("invalid bash arguments: {0}")]
    Args(#[source] serde_json::Error),
    /// A zero timeout.
    #[error("timeout_ms must be positive")]
    ZeroTimeout,
    /// The shell could not start.
    #[error("cannot start {shell}: {source}")]
    Spawn {
        /// The shell.
        shell: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The sandbox could not be set up (fail closed: the command did not run).
    #[error(transparent)]
    Sandbox(cordis_sandbox::SandboxError),
    /// The private temp dir could not be made.
    #[error("cannot make the command's temp dir: {0}")]
    Temp(#[source] std::io::Error),
}

/// `bash` arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BashArgs {
    pub(crate) command: String,
    pub(crate) timeout_ms: Option<u64>,
    #[serde(default)]
    #[allow(
        dead_code,
        reason = "accepted so a model may describe the command; never read"
    )]
    description: Option<String>,
}

/// Stops the command's tree when dropped, so cancellation (a dropped future) leaves no
/// orphans: the reaper kills everything the command started, then exits.
struct Group(Option<Pid>);

impl Group {
    fn stop(&mut self) {
        if let Some(pid) = self.0.take() {
            cordis_sandbox::stop(pid.as_raw_nonzero().get() as u32);
        }
    }

    /// The fallback when the reaper itself did not exit: the process group.
    fn kill(pid: Option<Pid>) {
        if let Some(pid) = pid {
            // ESRCH (the group is already gone) is the normal case.
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads `stream` to its end into `kept` (its head and tail), sending it to `live` as it comes.
async fn fill(kept: &mut HeadTail, mut stream: impl AsyncRead + Unpin, live: Option<&Live<'_>>) {
    let mut buf = [0u8; 8192];
    // The end of a character split between two reads waits for the next one.
    let mut carry: Vec<u8> = Vec::new();
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.push(&buf[..n]);
        if let Some(live) = live {
            carry.extend_from_slice(&buf[..n]);
            let whole = match std::str::from_utf8(&carry) {
                Ok(_) => carry.len(),
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => carry.len(),
            };
            live.send(&String::from_utf8_lossy(&carry[..whole]));
            carry.drain(..whole);
        }
    }
    if let Some(live) = live.filter(|_| !carry.is_empty()) {
        live.send(&String::from_utf8_lossy(&carry));
    }
}

/// How much of one command's output is shown live, at most (the result keeps its head and
/// tail whatever the size).
pub const LIVE_OUTPUT_LIMIT: usize = 1024 * 1024;

/// Where a running command's output goes as it arrives (stdout and stderr as they come), up to
/// [`LIVE_OUTPUT_LIMIT`] bytes, then one note.
pub struct Live<'a> {
    sink: &'a (dyn Fn(&str) + Sync),
    sent: std::sync::atomic::AtomicUsize,
}

impl<'a> Live<'a> {
    /// Output to `sink`.
    pub fn new(sink: &'a (dyn Fn(&str) + Sync)) -> Self {
        Live {
            sink,
            sent: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn send(&self, text: &str) {
        use std::sync::atomic::Ordering;
        if text.is_empty() {
            return;
        }
        let before = self.sent.fetch_add(text.len(), Ordering::Relaxed);
        if before + text.len() <= LIVE_OUTPUT_LIMIT {
            (self.sink)(text);
        } else if before <= LIVE_OUTPUT_LIMIT {
            (self.sink)(&format!(
                "\n[live output stops after {LIVE_OUTPUT_LIMIT} bytes; the result keeps the head and tail]\n"
            ));
        }
    }
}

/// The name every command temp dir starts with; the host's pid follows.
const TEMP_PREFIX: &str = "cordis-bash-";

/// A command's private temp dir (0700, named `cordis-bash-<host pid>-…`). The first call of a
/// process also removes the dirs of hosts that are gone (one killed mid-command never removed
/// its own), so they do not pile up.
fn private_temp_dir() -> std::io::Result<tempfile::TempDir> {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(sweep_stale_temp_dirs);
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
}

/// Removes `cordis-bash-<pid>-…` dirs of this user whose host process no longer exists.
fn sweep_stale_temp_dirs() {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TEMP_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // Never through a symlink, never another user's, never a live host's.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_dir()
            || meta.uid() != me
            || std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            continue;
        }
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

/// Runs `arguments.command` with `<shell> -c` in `root`, in the sandbox `config` describes,
/// with a private temp dir as `TMPDIR` (removed afterwards).
///
/// The result has `exit_code` (null when killed by a signal), `signal` if any, `stdout`,
/// `stderr`, and `timed_out` plus a `note` when the deadline passed. A failing command is a
/// result, not an error.
///
/// # Errors
/// Bad arguments, a zero timeout, a sandbox the kernel cannot enforce, a shell that cannot start.
///
/// # Cancel safety
/// Dropping the future stops the command's whole tree (its reaper kills everything it started).
pub async fn run_bash(
    root: &Path,
    config: &ShellConfig,
    arguments: Value,
) -> Result<Value, ShellError> {
    run_bash_live(root, config, arguments, None).await
}

/// [`run_bash`], its output also sent to `live` as it arrives.
///
/// # Errors
/// As [`run_bash`].
///
/// # Cancel safety
/// As [`run_bash`].
pub async fn run_bash_live(
    root: &Path,
    config: &ShellConfig,
    arguments: Value,
    live: Option<&Live<'_>>,
) -> Result<Value, ShellError> {
    let a: BashArgs = serde_json::from_value(arguments).map_err(ShellError::Args)?;
    let timeout_ms = a
        .timeout_ms
        .unwrap_or(config.default_timeout_ms)
        .min(config.max_timeout_ms);
    if timeout_ms == 0 {
        return Err(ShellError::ZeroTimeout);
    }
    let temp = private_temp_dir().map_err(ShellError::Temp)?;
    let mut command = tokio::process::Command::new(&config.shell);
    let _ = command
        .arg("-c")
        .arg(&a.command)
        .current_dir(root)
        .env_clear()
        .envs(config.filtered_env())
        .env("TMPDIR", temp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let sandbox = cordis_sandbox::Confinement::Sandbox(config.sandbox_for(root, temp.path()));
    let spawned = cordis_sandbox::spawn(command, &sandbox, cordis_sandbox::Reap::Tree);
    let mut child = spawned.map_err(|e| match e {
        cordis_sandbox::SandboxError::Spawn(source) => ShellError::Spawn {
            shell: config.shell.display().to_string(),
            source,
        },
        other => ShellError::Sandbox(other),
    })?;
    // The reaper leads a session and process group of its own (it calls `setsid`), so its
    // pid is the group id.
    let leader = child.id().and_then(|id| Pid::from_raw(id as i32));
    let mut group = Group(leader);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut out = HeadTail::new(config.max_output_bytes);
    let mut err = HeadTail::new(config.max_output_bytes);
    let status = {
        let reading = async {
            if let Some(s) = stdout {
                fill(&mut out, s, live).await;
            }
        };
        let reading_err = async {
            if let Some(s) = stderr {
                fill(&mut err, s, live).await;
            }
        };
        let reading = async { tokio::join!(reading, reading_err) };
        tokio::pin!(reading);
        let deadline = tokio::time::sleep(Duration::from_millis(timeout_ms));
        tokio::pin!(deadline);
        let mut drained = false;
        let status = loop {
            tokio::select! {
                s = child.wait() => {
                    // Reaped: its pid may be reused from now on, so it is never signalled again.
                    group.0 = None;
                    break s.ok();
                }
                () = &mut deadline => break None,
                _ = &mut reading, if !drained => drained = true,
            }
        };
        // Background jobs of a finished command die here too (the reaper kills what the command
        // left when it exits): nothing outlives the call.
        group.stop();
        let status = match status {
            Some(s) => Some(s),
            None => {
                if tokio::time::timeout(DRAIN_GRACE, child.wait())
                    .await
                    .is_err()
                {
                    Group::kill(leader);
                    let _ = child.wait().await;
                }
                None
            }
        };
        if !drained {
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut reading).await;
        }
        status
    };
    let mut result = json!({
        "exit_code": status.and_then(|s| s.code()),
        "stdout": out.render(),
        "stderr": err.render(),
    });
    if let Some(signal) = status.and_then(|s| s.signal()) {
        result["signal"] = json!(signal);
    }
    if status.is_none() {
        result["timed_out"] = json!(true);
        result["note"] = json!(format!(
            "the command did not finish within {timeout_ms} ms; it and everything it started were killed"
        ));
    }
    let _ = tokio::task::spawn_blocking(move || drop(temp)).await;
    Ok(result)
}

#[cfg(test)]
mod tests;
