//! The stdio transport: the server process, its stdin for requests, and its stdout read line by
//! line (each line at most `maxMessageBytes`) through the nesting guard ([`crate::depth`])
//! before rmcp parses it.

use std::process::Stdio;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::depth::{Guarded, guard};

/// How much of one line a server writes to stderr is logged.
const MAX_STDERR_LINE: usize = 8 * 1024;

/// Logs what the server writes to stderr, a line at a time (each cut at [`MAX_STDERR_LINE`],
/// invalid UTF-8 shown lossily), until it closes: a server cannot grow the client's memory or
/// block on a full pipe by writing there.
pub(crate) async fn log_stderr(stderr: ChildStderr, server: String) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, MAX_STDERR_LINE).await {
            Ok(Line::Read) => {
                let text = String::from_utf8_lossy(&line);
                tracing::debug!(server = %server, "{}", text.trim_end_matches(['\n', '\r']));
            }
            Ok(Line::TooLong) => {
                tracing::debug!(server = %server, "(a stderr line over {MAX_STDERR_LINE} bytes)");
            }
            Ok(Line::End) | Err(_) => return,
        }
    }
}

/// How long a closed server may take to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// A server process as an rmcp transport.
pub(crate) struct ChildTransport {
    /// Killed when dropped (the command is wrapped with `KillOnDrop`).
    child: Box<dyn ChildWrapper>,
    inner: AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>,
}

impl ChildTransport {
    /// The server's process id.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.id()
    }
}

/// Starts `command`; returns the transport, the server's stderr, and the task that copies its
/// stdout through the guard (the caller spawns it in the entry's scope, which then owns it).
pub(crate) fn spawn(
    mut command: CommandWrap,
    server: &str,
    max_line: usize,
) -> std::io::Result<(
    ChildTransport,
    Option<ChildStderr>,
    impl Future<Output = ()> + Send + 'static,
)> {
    command
        .command_mut()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn()?;
    let taken = |what: &str| std::io::Error::other(format!("the server's {what} was not piped"));
    let stdin = child
        .inner_mut()
        .stdin()
        .take()
        .ok_or_else(|| taken("stdin"))?;
    let stdout = child
        .inner_mut()
        .stdout()
        .take()
        .ok_or_else(|| taken("stdout"))?;
    let stderr = child.inner_mut().stderr().take();
    // Lines are whole when they are written here, so a small pipe only paces the copy.
    let (reader, writer) = tokio::io::duplex(64 << 10);
    let copy = copy_lines(stdout, writer, server.to_owned(), max_line);
    let transport = ChildTransport {
        child,
        inner: AsyncRwTransport::new_client(reader, stdin),
    };
    Ok((transport, stderr, copy))
}

/// What reading one line found.
enum Line {
    /// A line (with its newline, unless the stream ended without one).
    Read,
    /// A line longer than the limit, skipped to its end.
    TooLong,
    /// The end of the stream.
    End,
}

/// Reads one line into `line` without ever holding more than `max` bytes of it.
async fn read_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    let mut skipping = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (skipping, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Read,
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        if !skipping {
            if line.len() + take > max {
                skipping = true;
                line.clear();
            } else {
                line.extend_from_slice(&available[..take]);
            }
        }
        reader.consume(take);
        if newline.is_some() {
            return Ok(if skipping { Line::TooLong } else { Line::Read });
        }
    }
}

/// Copies the server's stdout to rmcp's reader, a line at a time through the guard, until
/// either side is gone.
async fn copy_lines(stdout: ChildStdout, mut out: DuplexStream, server: String, max: usize) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let skipped = std::sync::atomic::AtomicU64::new(0);
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, max).await {
            Ok(Line::Read) => {}
            Ok(Line::TooLong) => {
                if crate::depth::worth_warning(&skipped) {
                    tracing::warn!(server = %server, max, skipped = skipped.load(std::sync::atomic::Ordering::Relaxed), "an MCP message longer than maxMessageBytes was skipped");
                }
                continue;
            }
            Ok(Line::End) | Err(_) => return,
        }
        let text = std::str::from_utf8(&line).map(|t| t.trim_end_matches(['\n', '\r']));
        let written = match text.map(guard) {
            Ok(Guarded::Drop) => continue,
            Ok(Guarded::Parse(std::borrow::Cow::Owned(rewritten))) => {
                let mut bytes = rewritten.into_bytes();
                bytes.push(b'\n');
                out.write_all(&bytes).await
            }
            // Unchanged, or not UTF-8 (rmcp reports that itself).
            _ => out.write_all(&line).await,
        };
        if written.is_err() {
            return;
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    /// Closes the server's stdin (the MCP way to ask a stdio server to exit), waits a little,
    /// then kills it.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await?;
        if tokio::time::timeout(EXIT_GRACE, self.child.wait())
            .await
            .is_err()
        {
            Box::into_pin(self.child.kill()).await?;
        }
        Ok(())
    }
}
