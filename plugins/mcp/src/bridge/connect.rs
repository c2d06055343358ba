//! Starting the server (a stdio child in its own process group with a scrubbed environment,
//! or a streamable HTTP transport) and the MCP handshake; a stdio server that fails to start
//! has the end of its stderr in the reason.

use std::time::Duration;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use tokio::sync::mpsc;

use super::{Bridge, Connection};
use crate::config::TransportKind;
use crate::error::{McpError, innermost};
use crate::handler::Handler;
use crate::{http, stdio};

/// The host variables a stdio server inherits; everything else (API keys, tokens) is dropped
/// unless the entry's `env` sets it. Enough to find programs, a home, a locale and a terminal.
pub const PASSED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR",
    "TZ",
];

/// How long a stdio server that failed to start may take to close its stderr after its
/// process group was killed (only a grandchild that left the group and kept the pipe open
/// takes this long; its stderr is then quoted as far as it was read).
const STDERR_WAIT: Duration = Duration::from_secs(2);

impl Bridge {
    pub(super) async fn connect(&self) -> Result<Connection, McpError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let handler = Handler {
            changes: tx,
            link: self.link.clone(),
            ctx: self.ctx.clone(),
            sampling: self.config.sampling,
        };
        let limit = self.config.call_timeout();
        let mut stderr = None;
        let handshake = match self.config.transport {
            TransportKind::Stdio => {
                let (transport, tail) = self.spawn_stdio()?;
                stderr = Some(tail);
                tokio::time::timeout(limit, handler.serve(transport)).await
            }
            TransportKind::Http => {
                let transport = self.http_transport()?;
                tokio::time::timeout(limit, handler.serve(transport)).await
            }
        };
        let failure = match handshake {
            Ok(Ok(service)) => {
                return Ok(Connection {
                    service,
                    changes: rx,
                });
            }
            // A stdio server that went away during the handshake: a write to its closed stdin
            // or the end of its stdout, whichever the operating system noticed first; one
            // reason either way (its stderr says why).
            Ok(Err(
                rmcp::service::ClientInitializeError::ConnectionClosed(_)
                | rmcp::service::ClientInitializeError::TransportError { .. },
            )) if stderr.is_some() => {
                "handshake failed: the server closed the connection".to_owned()
            }
            Ok(Err(e)) => format!("handshake failed: {}", innermost(&e)),
            Err(_) => format!("no handshake within {} ms", self.config.call_timeout_ms),
        };
        Err(self.connect_error(self.with_stderr(failure, stderr).await))
    }

    /// `failure` and, for a stdio server, the last lines it wrote to stderr (where a server
    /// says why it would not start): its process group is killed first, so its stderr ends.
    async fn with_stderr(&self, failure: String, stderr: Option<stdio::StderrTail>) -> String {
        let Some(tail) = stderr else {
            return failure;
        };
        self.link.kill();
        tail.ended(STDERR_WAIT).await;
        match tail.text() {
            Some(said) => format!("{failure}; the server's stderr ended with: {said}"),
            None => format!("{failure} (the server wrote nothing to stderr)"),
        }
    }

    fn connect_error(&self, reason: String) -> McpError {
        McpError::Connect {
            server: self.server().to_owned(),
            reason,
        }
    }

    /// Starts the server process: its own process group, the scrubbed environment, stderr to
    /// the debug log, and process scoping (it cannot read the host's memory or
    /// `/proc/PID/environ`, nor `ptrace` it).
    fn spawn_stdio(&self) -> Result<(stdio::ChildTransport, stdio::StderrTail), McpError> {
        let program = self.config.command.clone().unwrap_or_default();
        let mut command = tokio::process::Command::new(&program);
        command.args(&self.config.args).env_clear();
        for name in PASSED_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(&self.config.env);
        if let Some(cwd) = &self.config.cwd {
            command.current_dir(cwd);
        }
        let sandbox = self.sandbox()?;
        let (confinement, reap, temp) = match sandbox {
            Some((sandbox, temp)) => {
                command.env("TMPDIR", &temp);
                (
                    cordis_sandbox::Confinement::Sandbox(sandbox),
                    cordis_sandbox::Reap::Tree,
                    Some(temp),
                )
            }
            None => (
                cordis_sandbox::Confinement::ScopeOnly,
                cordis_sandbox::Reap::No,
                None,
            ),
        };
        let armed = match cordis_sandbox::arm(&mut command, &confinement, reap) {
            Ok(armed) => armed,
            Err(e) => {
                remove_temp(temp);
                return Err(self.connect_error(sandbox_error(&e)));
            }
        };
        let reaped = reap == cordis_sandbox::Reap::Tree;
        let mut wrap = CommandWrap::from(command);
        if !reaped {
            wrap.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        }
        // Under the reaper (which leads a session and process group of its own), the server is
        // stopped through it: it kills everything the server started, however it left the group.
        let spawned = stdio::spawn(wrap, self.server(), self.config.max_message_bytes);
        drop(armed);
        let (transport, stderr, copy) = match spawned {
            Ok(spawned) => spawned,
            Err(e) => {
                remove_temp(temp);
                return Err(self.connect_error(format!("cannot start {program:?}: {e}")));
            }
        };
        // Recorded before anything can fail, so dispose kills it from here on.
        if !self.link.started(transport.id(), reaped, temp) {
            return Err(self.connect_error("the entry was disposed".to_owned()));
        }
        let _ = self.ctx.spawn(copy);
        let tail = stdio::StderrTail::default();
        match stderr {
            Some(stderr) => {
                let server = self.server().to_owned();
                let _ = self
                    .ctx
                    .spawn(stdio::log_stderr(stderr, server, tail.clone()));
            }
            None => tail.end(),
        }
        Ok((transport, tail))
    }

    /// The sandbox of the server (`sandbox` in its entry) and its private temp dir, created
    /// here; `None` without one.
    fn sandbox(&self) -> Result<Option<(cordis_sandbox::Sandbox, std::path::PathBuf)>, McpError> {
        let Some(mode) = self.config.sandbox else {
            return Ok(None);
        };
        let workspace = self
            .ctx
            .get::<cordis_workspace::Workspace>()
            .map(|w| w.root().to_path_buf());
        let workspace = match (workspace, mode) {
            (Some(root), _) => root,
            // Nothing is written there in full access; the rules are not built.
            (None, cordis_sandbox::SandboxMode::FullAccess) => std::path::PathBuf::from("/"),
            (None, _) => {
                return Err(self.connect_error(format!(
                    "`sandbox: {mode}` needs the composition's `workspace` entry (its root is the workspace the server may write in): add `{{id: workspace, name: workspace}}`"
                )));
            }
        };
        let temp = private_temp_dir(self.server())
            .map_err(|e| self.connect_error(format!("cannot make the server's temp dir: {e}")))?;
        Ok(Some((
            cordis_sandbox::Sandbox {
                mode,
                network: self.config.network.unwrap_or(false),
                workspace,
                writable: Vec::new(),
                temp: temp.clone(),
            },
            temp,
        )))
    }

    fn http_transport(&self) -> Result<StreamableHttpClientTransport<http::HttpClient>, McpError> {
        let url = self.config.url.clone().unwrap_or_default();
        let mut transport = StreamableHttpClientTransportConfig::with_uri(url);
        transport.custom_headers = self.config.header_map()?.into_iter().collect();
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| self.connect_error(format!("cannot build the HTTP client: {e}")))?;
        Ok(StreamableHttpClientTransport::with_client(
            http::HttpClient {
                client,
                max_message: self.config.max_message_bytes,
                auth: self.auth.clone(),
            },
            transport,
        ))
    }
}

/// The reason a sandbox could not be set up, naming the entry's setting (not tool-shell's).
fn sandbox_error(e: &cordis_sandbox::SandboxError) -> String {
    match e {
        cordis_sandbox::SandboxError::Unsupported { mode, detail } => format!(
            "the {mode} sandbox cannot be enforced: {detail}; the server is not started rather than run unsandboxed (to run it without a sandbox, remove `sandbox` from its entry or set `sandbox: full-access`)"
        ),
        other => other.to_string(),
    }
}

/// A private temp dir (0700) for one start of `server`: `cordis-mcp-<host pid>-<server>-<n>`.
fn private_temp_dir(server: &str) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "cordis-mcp-{}-{server}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// Removes a server's temp dir (best effort).
pub(crate) fn remove_temp(temp: Option<std::path::PathBuf>) {
    if let Some(dir) = temp {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passed_env_is_short_and_has_no_secrets() {
        assert!(PASSED_ENV.contains(&"PATH") && PASSED_ENV.contains(&"HOME"));
        assert!(
            PASSED_ENV
                .iter()
                .all(|n| !n.contains("KEY") && !n.contains("TOKEN"))
        );
    }
}
