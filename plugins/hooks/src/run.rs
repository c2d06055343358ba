//! Running one hook command: `<shell> -c <command>` in the workspace root, in the command
//! sandbox under a reaper (its own process group), the event as JSON on stdin, both pipes read
//! with caps, stopped (with everything it started) at its timeout.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use cordis_tools::HeadTail;
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::config::HooksConfig;

/// How long pipes may stay open after the command was stopped.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What one hook command did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ran {
    /// Its exit status (`None` when it was killed or never started).
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Its stdout (head and tail, saying how much was cut).
    pub stdout: String,
    /// Its stderr (likewise).
    pub stderr: String,
    /// True when it was stopped at its timeout.
    pub timed_out: bool,
    /// Why it did not start (a sandbox the kernel cannot enforce, a missing shell).
    pub failed: Option<String>,
}

/// Stops the command's tree when dropped (a dropped future leaves nothing running).
struct Group(Option<Pid>);

impl Group {
    fn stop(&mut self) {
        if let Some(pid) = self.0.take() {
            cordis_sandbox::stop(pid.as_raw_nonzero().get().unsigned_abs());
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn fill(kept: &mut HeadTail, mut stream: impl AsyncRead + Unpin) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.push(&buf[..n]);
    }
}

/// Runs `command` in `root` with `input` on its stdin, stopped after `timeout`.
///
/// # Cancel safety
/// Dropping the future stops the command's whole tree.
pub async fn run_hook(
    config: &HooksConfig,
    root: &Path,
    command: &str,
    input: Vec<u8>,
    timeout: Duration,
) -> Ran {
    let temp = match tempfile::Builder::new().prefix("cordis-hook-").tempdir() {
        Ok(t) => t,
        Err(e) => {
            return Ran {
                failed: Some(format!("cannot make the hook's temp dir: {e}")),
                ..Ran::default()
            };
        }
    };
    let mut cmd = tokio::process::Command::new(&config.shell);
    let _ = cmd
        .arg("-c")
        .arg(command)
        .current_dir(root)
        .env_clear()
        .envs(config.filtered_env())
        .env("TMPDIR", temp.path())
        .env("CORDIS_PROJECT_DIR", root)
        .env("CLAUDE_PROJECT_DIR", root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = match config.sandbox {
        cordis_sandbox::SandboxMode::FullAccess => cordis_sandbox::Confinement::None,
        mode => cordis_sandbox::Confinement::Sandbox(cordis_sandbox::Sandbox {
            mode,
            network: config.network,
            workspace: root.to_path_buf(),
            writable: Vec::new(),
            temp: temp.path().to_path_buf(),
        }),
    };
    let mut child = match cordis_sandbox::spawn(cmd, &confinement, cordis_sandbox::Reap::Tree) {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                failed: Some(e.to_string()),
                ..Ran::default()
            };
        }
    };
    let leader = child.id().and_then(|id| Pid::from_raw(id.cast_signed()));
    let mut group = Group(leader);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let mut out = HeadTail::new(config.max_output_bytes);
    let mut err = HeadTail::new(config.max_output_bytes);
    let status = {
        let writing = async move {
            if let Some(mut stdin) = stdin {
                // A hook that does not read its input closes the pipe: not an error.
                let _ = stdin.write_all(&input).await;
                let _ = stdin.shutdown().await;
            }
        };
        let reading = async {
            tokio::join!(
                writing,
                async {
                    if let Some(s) = stdout {
                        fill(&mut out, s).await;
                    }
                },
                async {
                    if let Some(s) = stderr {
                        fill(&mut err, s).await;
                    }
                }
            )
        };
        tokio::pin!(reading);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut drained = false;
        let status = loop {
            tokio::select! {
                s = child.wait() => {
                    group.0 = None;
                    break s.ok();
                }
                () = &mut deadline => break None,
                _ = &mut reading, if !drained => drained = true,
            }
        };
        group.stop();
        if status.is_none()
            && tokio::time::timeout(DRAIN_GRACE, child.wait())
                .await
                .is_err()
        {
            if let Some(pid) = leader {
                let _ = rustix::process::kill_process_group(pid, Signal::KILL);
            }
            let _ = child.wait().await;
        }
        if !drained {
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut reading).await;
        }
        status
    };
    let _ = tokio::task::spawn_blocking(move || drop(temp)).await;
    Ran {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stdout: out.render(),
        stderr: err.render(),
        timed_out: status.is_none(),
        failed: None,
    }
}
