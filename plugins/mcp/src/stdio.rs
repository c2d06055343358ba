//! The stdio transport: the server process, its stdin for requests, and its stdout read line by
//! line (each line at most `maxMessageBytes`) through the nesting guard ([`crate::depth`])
//! before rmcp parses it.
//!
//! A line over the limit is never held: it is skipped, and when it answers a request (its `id`
//! is in its first or last few KiB, where JSON-RPC puts it) that request fails at once with an
//! error naming the limit, instead of waiting out `callTimeoutMs` for an answer that was
//! thrown away. The last lines the server wrote to stderr are kept ([`StderrTail`]) so a
//! server that dies at start can say why.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::depth::{Guarded, guard};

/// How much of one line a server writes to stderr is logged.
const MAX_STDERR_LINE: usize = 8 * 1024;

/// The most lines of a server's stderr a start failure quotes (the last ones).
pub const MAX_STDERR_TAIL_LINES: usize = 20;

/// The most bytes of a server's stderr a start failure quotes (the last ones).
pub const MAX_STDERR_TAIL_BYTES: usize = 2 * 1024;

/// The last lines a server wrote to stderr (at most [`MAX_STDERR_TAIL_LINES`] lines and
/// [`MAX_STDERR_TAIL_BYTES`] bytes), and whether its stderr has ended.
#[derive(Clone, Default)]
pub(crate) struct StderrTail {
    inner: Arc<Mutex<TailState>>,
    ended: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct TailState {
    lines: VecDeque<String>,
    bytes: usize,
    ended: bool,
}

impl StderrTail {
    fn push(&self, mut line: String) {
        // One line longer than the whole tail keeps its end (the reason is often last).
        if line.len() > MAX_STDERR_TAIL_BYTES {
            let mut start = line.len() - (MAX_STDERR_TAIL_BYTES - '…'.len_utf8());
            while !line.is_char_boundary(start) {
                start += 1;
            }
            line = format!("…{}", &line[start..]);
        }
        let mut st = crate::lock(&self.inner);
        st.bytes += line.len();
        st.lines.push_back(line);
        while st.lines.len() > MAX_STDERR_TAIL_LINES || st.bytes > MAX_STDERR_TAIL_BYTES {
            match st.lines.pop_front() {
                Some(gone) => st.bytes -= gone.len(),
                None => break,
            }
        }
    }

    pub(crate) fn end(&self) {
        crate::lock(&self.inner).ended = true;
        self.ended.notify_waiters();
    }

    /// Waits until the server's stderr has ended (its process is gone), at most `limit`.
    pub(crate) async fn ended(&self, limit: Duration) {
        let wait = async {
            loop {
                let notified = self.ended.notified();
                if crate::lock(&self.inner).ended {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }

    /// The kept lines as one line of text (`a | b | c`, control characters escaped), or `None`
    /// when the server wrote nothing.
    pub(crate) fn text(&self) -> Option<String> {
        let st = crate::lock(&self.inner);
        let lines: Vec<String> = st
            .lines
            .iter()
            .map(|l| escape(l.trim_end_matches(['\n', '\r'])))
            .filter(|l| !l.trim().is_empty())
            .collect();
        (!lines.is_empty()).then(|| lines.join(" | "))
    }
}

/// `text` with control characters escaped: a stranger's stderr reaches the terminal in a status.
fn escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<char>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// Logs what the server writes to stderr, a line at a time (each cut at [`MAX_STDERR_LINE`],
/// invalid UTF-8 shown lossily), and keeps its last lines in `tail`, until it closes: a server
/// cannot grow the client's memory or block on a full pipe by writing there.
pub(crate) async fn log_stderr(stderr: ChildStderr, server: String, tail: StderrTail) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, MAX_STDERR_LINE).await {
            Ok(Line::Read) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                tracing::debug!(server = %server, "{text}");
                tail.push(text.to_owned());
            }
            Ok(Line::Over(mut skipping)) => {
                loop {
                    match skipping.more(&mut reader).await {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(_) => {
                            tail.end();
                            return;
                        }
                    }
                }
                tracing::debug!(server = %server, "(a stderr line over {MAX_STDERR_LINE} bytes)");
                let head = &skipping.head[..skipping.head.len().min(256)];
                let head = String::from_utf8_lossy(head);
                tail.push(format!("{head}… (a line of {} bytes)", skipping.total));
            }
            Ok(Line::End) | Err(_) => {
                tail.end();
                return;
            }
        }
    }
}

/// The largest line buffer kept between lines (a larger one, grown by one large answer, is
/// freed once that answer is passed on).
const KEEP_LINE_BUFFER: usize = 64 * 1024;

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
    /// A line longer than the limit: what was read of it so far. The rest of it is still to be
    /// skipped ([`Skipping::more`]).
    Over(Skipping),
    /// The end of the stream.
    End,
}

/// How much of the start of a line over the limit is kept (for a stderr line's message).
const EDGE_BYTES: usize = 4 * 1024;

/// A line over the limit being skipped, never held: its first bytes, its length so far, and
/// its JSON-RPC envelope ([`cordis_schema::Envelope`]), which says as soon as it can which
/// request the line answers.
struct Skipping {
    head: Vec<u8>,
    total: u64,
    envelope: cordis_schema::Envelope,
}

impl Skipping {
    fn new(read: &[u8]) -> Self {
        let mut skipping = Skipping {
            head: Vec::new(),
            total: 0,
            envelope: cordis_schema::Envelope::default(),
        };
        skipping.push(read);
        skipping
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = EDGE_BYTES.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        self.total += bytes.len() as u64;
        self.envelope.feed(bytes);
    }

    /// Skips the next piece of the line; false once the line (or the stream) has ended.
    async fn more(
        &mut self,
        reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    ) -> std::io::Result<bool> {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(false);
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        self.push(&available[..take]);
        reader.consume(take);
        Ok(newline.is_none())
    }
}

/// Reads one line into `line` without ever holding more than `max` bytes of it; a longer one
/// is returned as [`Line::Over`] as soon as it is over the limit.
async fn read_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() {
                Line::End
            } else {
                Line::Read
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        if line.len() + take > max {
            // The rest, `available` included, is left in the reader for `Skipping::more`.
            let skipping = Skipping::new(line);
            line.clear();
            return Ok(Line::Over(skipping));
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(take);
        if newline.is_some() {
            return Ok(Line::Read);
        }
    }
}

/// The line rmcp reads in place of an answer over the limit: a JSON-RPC error for request
/// `id` naming the limit.
fn over_limit_answer(id: &Value, server: &str, max: usize, size: Option<u64>) -> Vec<u8> {
    let size = size.map_or_else(|| "over".to_owned(), |n| format!("{n} bytes, over"));
    let message = format!(
        "mcp({server}): the server's answer is {size} the maxMessageBytes limit of {max} bytes, so it was dropped; raise `maxMessageBytes` in the entry's config, or ask for less"
    );
    let mut line = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message}
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// Copies the server's stdout to rmcp's reader, a line at a time through the guard, until
/// either side is gone. An answer over the limit becomes an error answer naming it: at once
/// as soon as its envelope names the request it answers.
async fn copy_lines(stdout: ChildStdout, mut out: DuplexStream, server: String, max: usize) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let skipped = std::sync::atomic::AtomicU64::new(0);
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, max).await {
            Ok(Line::Read) => {}
            Ok(Line::Over(mut skipping)) => {
                // Answered as soon as the envelope names the request: at once when the id comes
                // first, else when it is read (its size known if the line has ended by then).
                let mut answered = false;
                loop {
                    let going = match skipping.more(&mut reader).await {
                        Ok(going) => going,
                        Err(_) => return,
                    };
                    if !answered && let Some(id) = skipping.envelope.answers() {
                        answered = true;
                        let size = (!going).then_some(skipping.total);
                        let answer = over_limit_answer(id, &server, max, size);
                        if out.write_all(&answer).await.is_err() {
                            return;
                        }
                    }
                    if !going {
                        break;
                    }
                }
                if crate::depth::worth_warning(&skipped) {
                    tracing::warn!(server = %server, max, bytes = skipping.total, skipped = skipped.load(std::sync::atomic::Ordering::Relaxed), "an MCP message longer than maxMessageBytes was skipped");
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
        // A large line's buffer is not kept for the connection's life.
        if line.capacity() > KEEP_LINE_BUFFER {
            line = Vec::new();
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Skips the rest of an over-limit line; the pieces read before its envelope named the
    /// request it answers (`None`: it never did), and whether the line had ended then.
    async fn skip(
        reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
        skipping: &mut Skipping,
    ) -> (Option<(usize, bool)>, Value) {
        let mut named = None;
        let mut pieces = 0;
        loop {
            let going = skipping.more(reader).await.unwrap();
            pieces += 1;
            if named.is_none() && skipping.envelope.answers().is_some() {
                named = Some((pieces, going));
            }
            if !going {
                let id = skipping.envelope.answers().cloned().unwrap_or(Value::Null);
                return (named, id);
            }
        }
    }

    #[tokio::test]
    async fn a_line_over_the_limit_names_its_request_at_once_and_is_skipped_holding_only_its_start()
    {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{{\"text\":\"{}\"}}}}\nnext\n",
            "x".repeat(100_000)
        );
        let mut reader = tokio::io::BufReader::with_capacity(1024, big.as_bytes());
        let mut line = Vec::new();
        let Line::Over(mut skipping) = read_line(&mut reader, &mut line, 10_000).await.unwrap()
        else {
            panic!("not over");
        };
        assert!(line.is_empty());
        // The id came first: named with the first pieces, long before the line ends.
        let (named, id) = skip(&mut reader, &mut skipping).await;
        assert_eq!((named, id), (Some((1, true)), json!(5)));
        assert_eq!(skipping.total, big.len() as u64 - "next\n".len() as u64);
        assert_eq!(skipping.head.len(), EDGE_BYTES);
        assert!(matches!(
            read_line(&mut reader, &mut line, 10_000).await.unwrap(),
            Line::Read
        ));
        assert_eq!(line, b"next\n");
        // The id ends the line: named when it is read, with the line's end; a request (it has a
        // method) is never taken for an answer.
        for (text, expected) in [
            (
                r#"{"jsonrpc":"2.0","result":{"text":"BIG"},"id":"r-1"}"#,
                json!("r-1"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"text":"BIG"}}"#,
                Value::Null,
            ),
        ] {
            let text = format!("{}\n", text.replace("BIG", &"y".repeat(50_000)));
            let mut reader = tokio::io::BufReader::with_capacity(1024, text.as_bytes());
            let Line::Over(mut skipping) = read_line(&mut reader, &mut line, 10_000).await.unwrap()
            else {
                panic!("not over");
            };
            let (named, id) = skip(&mut reader, &mut skipping).await;
            assert_eq!(id, expected, "{}", &text[..80]);
            if !expected.is_null() {
                assert_eq!(named.map(|(_, going)| going), Some(false));
            }
        }
    }

    #[test]
    fn the_answer_in_place_of_one_over_the_limit_names_the_limit() {
        let line = over_limit_answer(&json!(5), "fx", 1024, Some(4096));
        let answer: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(answer["id"], 5);
        assert_eq!(
            answer["error"]["message"],
            "mcp(fx): the server's answer is 4096 bytes, over the maxMessageBytes limit of 1024 bytes, so it was dropped; raise `maxMessageBytes` in the entry's config, or ask for less"
        );
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_lines_within_its_bounds_escaped() {
        let tail = StderrTail::default();
        assert_eq!(tail.text(), None);
        for i in 0..100 {
            tail.push(format!("line {i}"));
        }
        tail.push("bad \u{1b}[31mred".to_owned());
        let text = tail.text().unwrap();
        assert!(text.starts_with("line 81 | "), "{text}");
        assert!(text.ends_with("line 99 | bad \\u{1b}[31mred"), "{text}");
        tail.push("y".repeat(MAX_STDERR_TAIL_BYTES));
        assert_eq!(tail.text().unwrap(), "y".repeat(MAX_STDERR_TAIL_BYTES));
        tail.push(format!(
            "{}the reason",
            "z".repeat(3 * MAX_STDERR_TAIL_BYTES)
        ));
        let kept = tail.text().unwrap();
        assert!(
            kept.starts_with('…') && kept.ends_with("zzthe reason"),
            "a line over the bound keeps its end: {kept}"
        );
        assert!(kept.len() <= MAX_STDERR_TAIL_BYTES, "{}", kept.len());
    }
}
