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
            Ok(Line::Over(head, mut rest)) => {
                if skip_line(&mut reader, &mut rest).await.is_err() {
                    tail.end();
                    return;
                }
                tracing::debug!(server = %server, "(a stderr line over {MAX_STDERR_LINE} bytes)");
                let head = String::from_utf8_lossy(&head[..head.len().min(256)]).into_owned();
                tail.push(format!("{head}… (a line of {} bytes)", rest.total));
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
    /// A line longer than the limit: its first bytes, and its last bytes so far. The rest of it
    /// is still to be skipped ([`skip_line`]).
    Over(Vec<u8>, Tail),
    /// The end of the stream.
    End,
}

/// How much of the start and of the end of a line over the limit is kept to find the request
/// it answers.
const EDGE_BYTES: usize = 4 * 1024;

/// The last [`EDGE_BYTES`] bytes of a line being skipped, and its length.
#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
    total: u64,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let keep = &bytes[bytes.len().saturating_sub(EDGE_BYTES)..];
        self.bytes.extend(keep);
        let over = self.bytes.len().saturating_sub(EDGE_BYTES);
        drop(self.bytes.drain(..over));
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
            // Left in the reader for `skip_line`; what `line` held is remembered.
            let mut head = line.clone();
            head.truncate(EDGE_BYTES);
            let room = EDGE_BYTES - head.len();
            head.extend_from_slice(&available[..take.min(room)]);
            let mut tail = Tail::default();
            tail.push(line);
            line.clear();
            return Ok(Line::Over(head, tail));
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(take);
        if newline.is_some() {
            return Ok(Line::Read);
        }
    }
}

/// Skips the rest of a line over the limit, keeping its last bytes in `tail`.
async fn skip_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    tail: &mut Tail,
) -> std::io::Result<()> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(());
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        tail.push(&available[..take]);
        reader.consume(take);
        if newline.is_some() {
            return Ok(());
        }
    }
}

/// What the first bytes of a line over the limit say: `None` unless it is a JSON-RPC
/// response (its first large member is `result` or `error`, and it has no `method`: a
/// server's request or notification is not answered for); else its id when that came before
/// the large member (`{"jsonrpc":"2.0","id":7,"result":…`), as rmcp and most servers write it.
fn response_head(head: &[u8]) -> Option<Option<Value>> {
    let text = String::from_utf8_lossy(head);
    let mut rest = text.trim_start().strip_prefix('{')?;
    let mut id = None;
    // Members before the large one are short scalars (`"jsonrpc":"2.0"`): walk them.
    for _ in 0..8 {
        let (key, after) = json_string(rest.trim_start())?;
        let after = after.trim_start().strip_prefix(':')?.trim_start();
        if after.starts_with('{') || after.starts_with('[') {
            return (key == "result" || key == "error").then_some(id);
        }
        let (value, after) = scalar(after)?;
        match key.as_str() {
            "method" => return None,
            "id" => id = valid_id(value),
            _ => {}
        }
        rest = after.trim_start().strip_prefix(',')?;
    }
    None
}

/// The id of the JSON-RPC response a line answers, from its last bytes: a top-level `"id"`
/// member that ends the object (`…,"id":7}`).
fn id_in_tail(tail: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(tail);
    let body = text.trim_end().strip_suffix('}')?.trim_end();
    // The value: a number or a string without quotes inside, at the very end.
    let (value, before) = if let Some(inner) = body.strip_suffix('"') {
        let start = inner.rfind('"')?;
        (&body[start..], &inner[..start])
    } else {
        let start = body.rfind(|c: char| !(c.is_ascii_digit() || c == '-'))? + 1;
        (&body[start..], &body[..start])
    };
    let before = before.trim_end().strip_suffix(':')?.trim_end();
    let before = before.strip_suffix("\"id\"")?.trim_end();
    before.strip_suffix(',')?;
    valid_id(serde_json::from_str(value).ok()?)
}

/// A JSON-RPC id: a number or a string.
fn valid_id(value: Value) -> Option<Value> {
    (value.is_number() || value.is_string()).then_some(value)
}

/// A JSON string at the start of `text`: its value and what follows.
fn json_string(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => {
                let value = serde_json::from_str(&text[..i + 2]).ok()?;
                return Some((value, &body[i + 1..]));
            }
            _ => {}
        }
    }
    None
}

/// A JSON scalar (a string, a number, `true`, `false`, `null`) at the start of `text`.
fn scalar(text: &str) -> Option<(Value, &str)> {
    if text.starts_with('"') {
        let (s, rest) = json_string(text)?;
        return Some((Value::String(s), rest));
    }
    let end = text
        .find(|c: char| c == ',' || c == '}' || c.is_whitespace())
        .unwrap_or(text.len());
    let value: Value = serde_json::from_str(&text[..end]).ok()?;
    (!value.is_object() && !value.is_array()).then_some((value, &text[end..]))
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
/// when its id is in its first bytes, else when it ends.
async fn copy_lines(stdout: ChildStdout, mut out: DuplexStream, server: String, max: usize) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let skipped = std::sync::atomic::AtomicU64::new(0);
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, max).await {
            Ok(Line::Read) => {}
            Ok(Line::Over(head, mut tail)) => {
                let response = response_head(&head);
                let early = response.clone().flatten();
                if let Some(id) = &early
                    && out
                        .write_all(&over_limit_answer(id, &server, max, None))
                        .await
                        .is_err()
                {
                    return;
                }
                if skip_line(&mut reader, &mut tail).await.is_err() {
                    return;
                }
                if crate::depth::worth_warning(&skipped) {
                    tracing::warn!(server = %server, max, bytes = tail.total, skipped = skipped.load(std::sync::atomic::Ordering::Relaxed), "an MCP message longer than maxMessageBytes was skipped");
                }
                let (a, b) = tail.bytes.as_slices();
                if response.is_some_and(|id| id.is_none())
                    && let Some(id) = id_in_tail(&[a, b].concat())
                    && out
                        .write_all(&over_limit_answer(&id, &server, max, Some(tail.total)))
                        .await
                        .is_err()
                {
                    return;
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

    #[test]
    fn a_response_names_its_id_in_its_first_bytes_and_a_request_does_not() {
        let head = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"xxxx"#;
        assert_eq!(response_head(head), Some(Some(json!(7))));
        let named = br#" { "id" : "a\"b", "jsonrpc":"2.0", "error": {"code": 1"#;
        assert_eq!(response_head(named), Some(Some(json!("a\"b"))));
        let late = br#"{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"xx"#;
        assert_eq!(response_head(late), Some(None));
        let request = br#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"#;
        assert_eq!(response_head(request), None);
        assert_eq!(response_head(b"not json at all"), None);
    }

    #[test]
    fn an_id_that_ends_the_line_is_found_in_its_last_bytes() {
        assert_eq!(id_in_tail(br#"xxxx"}]},"id":12}"#), Some(json!(12)));
        assert_eq!(
            id_in_tail(b"xx\"}]} , \"id\" : \"r-1\" }\n"),
            Some(json!("r-1"))
        );
        // A nested `id` is not the response's.
        assert_eq!(id_in_tail(br#"xxxx","id":12}}"#), None);
        assert_eq!(id_in_tail(br#"xxxx"}]}}"#), None);
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_reported_at_once_and_skipped_holding_only_its_edges() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{{\"text\":\"{}\"}}}}\nnext\n",
            "x".repeat(100_000)
        );
        let mut reader = tokio::io::BufReader::with_capacity(1024, big.as_bytes());
        let mut line = Vec::new();
        let Line::Over(head, mut tail) = read_line(&mut reader, &mut line, 10_000).await.unwrap()
        else {
            panic!("not over");
        };
        assert!(head.len() <= EDGE_BYTES && line.is_empty());
        assert_eq!(response_head(&head), Some(Some(json!(5))));
        skip_line(&mut reader, &mut tail).await.unwrap();
        assert_eq!(tail.total, big.len() as u64 - "next\n".len() as u64);
        assert!(tail.bytes.len() <= EDGE_BYTES);
        assert!(matches!(
            read_line(&mut reader, &mut line, 10_000).await.unwrap(),
            Line::Read
        ));
        assert_eq!(line, b"next\n");
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
