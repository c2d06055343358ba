//! JSON-RPC 2.0 over newline-delimited stdio: one reader thread, one writer thread, and a
//! [`Connection`] handle to send with.
//!
//! The reader only parses and forwards: requests and notifications go to the server's queue in
//! arrival order, answers to the agent's own requests complete them directly. Nothing the
//! server does can stall it, so a `session/cancel` or a permission answer is read while a turn
//! runs. Every line out goes through the writer's one queue, so what one task sends stays in
//! the order it sent it (a turn's updates before its answer).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc as std_mpsc};

use cordis_schema::Envelope;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    /// The code.
    pub code: i32,
    /// For people.
    pub message: String,
    /// More detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `-32700`: a line that is not JSON.
    pub fn parse_error(why: impl std::fmt::Display) -> Self {
        RpcError::new(-32700, format!("Parse error: {why}"))
    }

    /// `-32600`: JSON that is not a request, a notification or a response.
    pub fn invalid_request(why: impl Into<String>) -> Self {
        RpcError::new(-32600, why)
    }

    /// `-32601`.
    pub fn method_not_found(method: &str) -> Self {
        RpcError::new(-32601, format!("Method not found: {method}"))
    }

    /// `-32602`.
    pub fn invalid_params(why: impl Into<String>) -> Self {
        RpcError::new(-32602, why)
    }

    /// `-32603`.
    pub fn internal(why: impl Into<String>) -> Self {
        RpcError::new(-32603, why)
    }

    /// `-32002` (the protocol's "resource not found").
    pub fn not_found(why: impl Into<String>) -> Self {
        RpcError::new(-32002, why)
    }
}

/// A message from the client the server must handle.
#[derive(Debug)]
pub enum Incoming {
    /// A request: answer it through [`Reply`].
    Request {
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
        /// Where the answer goes.
        reply: Reply,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
        /// Its params.
        params: Value,
    },
}

/// What goes to the writer thread.
enum Out {
    Line(String),
    /// Write what came before, then stop.
    Close,
}

type Pending = Arc<Mutex<BTreeMap<u64, oneshot::Sender<Result<Value, RpcError>>>>>;

/// The sending side of the connection; cheap to clone.
#[derive(Clone)]
pub struct Connection {
    out: std_mpsc::Sender<Out>,
    pending: Pending,
    next_id: Arc<AtomicU64>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct OutNotification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

#[derive(Serialize)]
struct OutRequest<'a, P> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: P,
}

#[derive(Serialize)]
struct OutResponse<'a, T> {
    jsonrpc: &'static str,
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcError>,
}

impl Connection {
    fn line(&self, message: &impl Serialize) {
        match serde_json::to_string(message) {
            Ok(line) => {
                // After the close the writer is gone; there is no one left to tell.
                let _ = self.out.send(Out::Line(line));
            }
            Err(e) => tracing::error!("cordis acp: a message did not serialize: {e}"),
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: impl Serialize) {
        self.line(&OutNotification {
            jsonrpc: "2.0",
            method,
            params,
        });
    }

    /// Sends a request now; the future resolves with the client's answer, or an error when the
    /// connection closes first.
    ///
    /// # Cancel safety
    /// Dropping the future forgets the answer (the request stays sent).
    pub fn request(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send + 'static {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        cordis_runtime::lock(&self.pending).insert(id, tx);
        self.line(&OutRequest {
            jsonrpc: "2.0",
            id,
            method,
            params,
        });
        async move {
            rx.await.unwrap_or_else(|_| {
                Err(RpcError::internal(
                    "the client closed the connection before answering",
                ))
            })
        }
    }
}

/// The answer to one request; answering consumes it.
#[derive(Debug)]
pub struct Reply {
    connection: Connection,
    id: Value,
}

impl Reply {
    /// The id of the request this answers (what `$/cancel_request` names).
    pub fn id(&self) -> &Value {
        &self.id
    }

    /// Sends `result` (or the error) as the answer.
    pub fn send<T: Serialize>(self, result: Result<T, RpcError>) {
        let (result, error) = match result {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e)),
        };
        self.connection.line(&OutResponse {
            jsonrpc: "2.0",
            id: &self.id,
            result,
            error,
        });
    }
}

/// The two threads of a stdio connection; [`Stdio::finish`] flushes and joins them.
pub struct Stdio {
    connection: Connection,
    reader: std::thread::JoinHandle<()>,
    writer: std::thread::JoinHandle<()>,
}

impl Stdio {
    /// Starts reading stdin and writing stdout. Returns the connection, the queue of requests
    /// and notifications (it ends at the client's EOF), and the threads.
    ///
    /// # Errors
    /// A thread could not be spawned.
    pub fn start() -> std::io::Result<(Stdio, mpsc::UnboundedReceiver<Incoming>)> {
        let (out, lines) = std_mpsc::channel::<Out>();
        let writer = std::thread::Builder::new()
            .name("acp-writer".into())
            .spawn(move || write_lines(lines))?;
        let connection = Connection {
            out,
            pending: Arc::default(),
            next_id: Arc::new(AtomicU64::new(0)),
        };
        let (incoming, queue) = mpsc::unbounded_channel();
        let reading = connection.clone();
        let reader = std::thread::Builder::new()
            .name("acp-reader".into())
            .spawn(move || read_lines(reading, incoming))?;
        Ok((
            Stdio {
                connection,
                reader,
                writer,
            },
            queue,
        ))
    }

    /// The connection.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Writes everything sent so far, then joins both threads. Call it after the queue ended
    /// (the reader is done then) and after the last answer was sent.
    pub fn finish(self) {
        let _ = self.connection.out.send(Out::Close);
        let _ = self.writer.join();
        let _ = self.reader.join();
    }
}

fn write_lines(lines: std_mpsc::Receiver<Out>) {
    let mut stdout = std::io::stdout();
    while let Ok(Out::Line(line)) = lines.recv() {
        let written = stdout
            .write_all(line.as_bytes())
            .and_then(|()| stdout.write_all(b"\n"))
            .and_then(|()| stdout.flush());
        if let Err(e) = written {
            tracing::warn!("cordis acp: writing to the client failed: {e}");
            return;
        }
    }
}

/// The longest message line read from the client; a longer one is answered with a parse error
/// and skipped (a 1 GiB line used to take 2 GB of memory).
pub(crate) const MAX_LINE_BYTES: usize = 16 << 20;

/// A line over the limit: its length and what its envelope said.
#[derive(Debug)]
struct Skipped {
    len: usize,
    envelope: Envelope,
}

/// One line of at most `limit` bytes from `input`, without its line end: `Ok(None)` at the end,
/// `Err(Skipped)` for a longer line, which is consumed to its end without being kept (its
/// envelope is read on the way).
fn read_bounded_line(
    input: &mut impl std::io::BufRead,
    limit: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Result<(), Skipped>>> {
    buf.clear();
    let read = std::io::Read::take(&mut *input, limit as u64 + 1).read_until(b'\n', buf)?;
    if read == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Some(Ok(())));
    }
    if buf.len() <= limit {
        // The last line, without a line end.
        return Ok(Some(Ok(())));
    }
    // Too long: skip the rest of the line in bounded steps.
    let mut envelope = Envelope::default();
    envelope.feed(buf);
    let mut skipped = buf.len();
    buf.clear();
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            break;
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(end) => {
                envelope.feed(&available[..end]);
                skipped += end;
                input.consume(end + 1);
                break;
            }
            None => {
                let n = available.len();
                envelope.feed(available);
                skipped += n;
                input.consume(n);
            }
        }
    }
    Ok(Some(Err(Skipped {
        len: skipped,
        envelope,
    })))
}

/// Answers or settles a message skipped for its size: a request gets the error under its own
/// id, an answer to an open request of the agent fails that request (its caller sees the limit
/// named), anything else gets the error with a null id.
fn skip_over_limit(connection: &Connection, skipped: &Skipped) {
    let Skipped { len, envelope } = skipped;
    let id = envelope.id();
    if !envelope.has_method()
        && let Some(n) = id.and_then(Value::as_u64)
        && let Some(tx) = cordis_runtime::lock(&connection.pending).remove(&n)
    {
        let _ = tx.send(Err(RpcError::invalid_request(format!(
            "the client's answer of {len} bytes is over the {MAX_LINE_BYTES}-byte message limit; it was skipped"
        ))));
        return;
    }
    let id = if envelope.has_method() {
        id.cloned().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    Reply {
        connection: connection.clone(),
        id,
    }
    .send::<()>(Err(RpcError::parse_error(format!(
        "a message of {len} bytes, over the {MAX_LINE_BYTES}-byte limit; it was skipped"
    ))));
}

fn read_lines(connection: Connection, incoming: mpsc::UnboundedSender<Incoming>) {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut buf = Vec::new();
    loop {
        let line = match read_bounded_line(&mut input, MAX_LINE_BYTES, &mut buf) {
            Ok(None) => break,
            Ok(Some(Ok(()))) => &buf,
            Ok(Some(Err(skipped))) => {
                skip_over_limit(&connection, &skipped);
                continue;
            }
            Err(e) => {
                tracing::warn!("cordis acp: reading from the client failed: {e}");
                break;
            }
        };
        // Bytes that are not UTF-8 are one bad message, answered, not the end of the connection.
        let Ok(line) = std::str::from_utf8(line) else {
            Reply {
                connection: connection.clone(),
                id: Value::Null,
            }
            .send::<()>(Err(RpcError::parse_error(
                "a message that is not UTF-8 text",
            )));
            continue;
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(message) = classify(&connection, line) {
            let _ = incoming.send(message);
        }
    }
    // EOF: every question still open is answered "closed" (by dropping its sender).
    cordis_runtime::lock(&connection.pending).clear();
}

/// Sorts one line: a request or notification for the server, an answer to one of ours
/// (completed here), or garbage (answered with an error here).
fn classify(connection: &Connection, line: &str) -> Option<Incoming> {
    let reject = |id: Value, e: RpcError| {
        Reply {
            connection: connection.clone(),
            id,
        }
        .send::<()>(Err(e));
    };
    let mut message: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            reject(Value::Null, RpcError::parse_error(e));
            return None;
        }
    };
    let Some(object) = message.as_object_mut() else {
        reject(
            Value::Null,
            RpcError::invalid_request("a message must be a JSON object"),
        );
        return None;
    };
    let id = object.remove("id");
    let params = object.remove("params").unwrap_or(Value::Null);
    let method = object.remove("method");
    // An id JSON-RPC does not allow (an object, an array, a boolean) is never echoed back or
    // taken as a request's: the message is refused as an Invalid Request, with a null id.
    if method.is_some()
        && let Some(id) = id.as_ref().filter(|id| !cordis_schema::is_valid_id(id))
    {
        let kind = match id {
            Value::Object(_) => "an object",
            Value::Array(_) => "an array",
            _ => "a boolean",
        };
        reject(
            Value::Null,
            RpcError::invalid_request(format!(
                "the id is {kind}; JSON-RPC allows only a string, a number or null"
            )),
        );
        return None;
    }
    match (method, id) {
        (Some(Value::String(method)), Some(id)) => Some(Incoming::Request {
            method,
            params,
            reply: Reply {
                connection: connection.clone(),
                id,
            },
        }),
        (Some(Value::String(method)), None) => Some(Incoming::Notification { method, params }),
        (Some(_), id) => {
            reject(
                id.unwrap_or(Value::Null),
                RpcError::invalid_request("method must be a string"),
            );
            None
        }
        (None, Some(id)) => {
            let answer = match (object.remove("result"), object.remove("error")) {
                (_, Some(error)) => Err(serde_json::from_value(error).unwrap_or_else(|e| {
                    RpcError::internal(format!("the client sent a malformed error: {e}"))
                })),
                (Some(result), None) => Ok(result),
                (None, None) => Err(RpcError::internal(
                    "the client answered with neither result nor error",
                )),
            };
            let waiting = id
                .as_u64()
                .and_then(|n| cordis_runtime::lock(&connection.pending).remove(&n));
            match waiting {
                Some(tx) => {
                    let _ = tx.send(answer);
                }
                None => tracing::debug!(%id, "cordis acp: an answer to no open request"),
            }
            None
        }
        (None, None) => {
            reject(
                Value::Null,
                RpcError::invalid_request("neither a request, a notification nor a response"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(text: &str) -> Envelope {
        let mut e = Envelope::default();
        e.feed(text.as_bytes());
        e
    }

    /// A connection whose lines go to the returned receiver.
    fn connection() -> (Connection, std_mpsc::Receiver<Out>) {
        let (out, lines) = std_mpsc::channel();
        let connection = Connection {
            out,
            pending: Arc::default(),
            next_id: Arc::new(AtomicU64::new(0)),
        };
        (connection, lines)
    }

    fn sent(lines: &std_mpsc::Receiver<Out>) -> Vec<Value> {
        lines
            .try_iter()
            .filter_map(|o| match o {
                Out::Line(l) => serde_json::from_str(&l).ok(),
                Out::Close => None,
            })
            .collect()
    }

    #[test]
    fn an_over_limit_line_is_skipped_whole_and_the_next_line_read() {
        let text = format!("{{\"result\": \"{}\", \"id\": 3}}\nnext\n", "y".repeat(100));
        let mut input = std::io::BufReader::with_capacity(8, text.as_bytes());
        let mut buf = Vec::new();
        let Ok(Some(Err(skipped))) = read_bounded_line(&mut input, 16, &mut buf) else {
            panic!("the line is over the limit");
        };
        assert_eq!(skipped.len, text.find('\n').unwrap());
        assert_eq!(skipped.envelope.id(), Some(&json!(3)));
        assert!(matches!(
            read_bounded_line(&mut input, 16, &mut buf),
            Ok(Some(Ok(())))
        ));
        assert_eq!(buf, b"next");
    }

    #[test]
    fn an_over_limit_answer_fails_its_request_at_once_naming_the_limit() {
        let (connection, lines) = connection();
        let answer = connection.request("fs/read_text_file", json!({}));
        let skipped = Skipped {
            len: MAX_LINE_BYTES + 10,
            envelope: envelope(r#"{"jsonrpc": "2.0", "result": {"content": "…"}, "id": 0}"#),
        };
        skip_over_limit(&connection, &skipped);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let error = runtime.block_on(answer).unwrap_err();
        assert_eq!(
            error.message,
            format!(
                "the client's answer of {} bytes is over the {MAX_LINE_BYTES}-byte message limit; it was skipped",
                MAX_LINE_BYTES + 10
            )
        );
        // Only the request went out: an answer is never answered.
        let out = sent(&lines);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0]["method"], "fs/read_text_file");
    }

    #[test]
    fn an_over_limit_request_is_answered_under_its_own_id() {
        let (connection, lines) = connection();
        let skipped = Skipped {
            len: 20,
            envelope: envelope(r#"{"method": "session/prompt", "id": 41, "params": {}}"#),
        };
        skip_over_limit(&connection, &skipped);
        let out = sent(&lines);
        assert_eq!(out[0]["id"], 41);
        assert_eq!(out[0]["error"]["code"], -32700);
    }

    #[test]
    fn a_request_whose_id_is_an_object_an_array_or_a_boolean_is_an_invalid_request() {
        let (connection, lines) = connection();
        for (id, kind) in [
            (json!({"a": 1}), "an object"),
            (json!([1]), "an array"),
            (json!(true), "a boolean"),
        ] {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "initialize"}).to_string();
            assert!(classify(&connection, &line).is_none(), "{line}");
            let out = sent(&lines);
            assert_eq!(out[0]["id"], Value::Null, "{out:?}");
            assert_eq!(out[0]["error"]["code"], -32600);
            assert_eq!(
                out[0]["error"]["message"],
                format!("the id is {kind}; JSON-RPC allows only a string, a number or null")
            );
        }
        for id in [json!("s"), json!(1), json!(1.5), Value::Null] {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "initialize"}).to_string();
            let Some(Incoming::Request { reply, .. }) = classify(&connection, &line) else {
                panic!("{line} is a request");
            };
            assert_eq!(reply.id, id);
        }
    }
}
