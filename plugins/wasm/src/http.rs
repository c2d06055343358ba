//! The mediated network: `cordis:plugin/http`'s `fetch`, performed by the host for a guest
//! whose entry grants `network`, to the hosts `network.allow` lists only.
//!
//! # What the host enforces
//! - **Hosts**: a request goes out only when its URL's host and port match `network.allow`
//!   ([`crate::grants::Allowed`]); otherwise the guest gets an error naming the host, the list
//!   and the key. Redirects are followed by the host, at most [`MAX_REDIRECTS`] of them, each
//!   hop checked again like a first request (a hop to a host not listed is refused, naming it),
//!   and each hop counted as a request. Proxies from the environment are never used.
//! - **Bounds**: [`MAX_REQUEST_BODY`], [`MAX_URL`], [`MAX_HEADERS`] and [`MAX_HEADER_BYTES`] on
//!   what the guest sends; on what it gets, the entry's `network.max_response_bytes` (the body,
//!   also refused up front by its `content-length`) and the same header bounds; per call
//!   `network.max_requests`; per request `network.timeout_ms`, never past the call's deadline.
//!   Passing a bound fails that request with an error naming it; the guest decides what next.
//! - **When**: only during `call` (never in `init` or `describe`, which run at load and when an
//!   instance is remade), so every request belongs to one tool call and is recorded in its
//!   outcome.
//!
//! # The record
//! Every request (refused ones too) becomes an [`HttpRecord`]: method, URL, status, the body's
//! length and SHA-256 (the request body's too, when there is one), or why it failed. The
//! runner hands them back with the call's answer ([`crate::Runner::call_recorded`]); the plugin
//! puts them in the tool call's outcome, so the session log holds them.
//!
//! # Keeping and replaying
//! A call runs on a [`Tape`]. Live, each answer (status, the headers the host kept, body; a
//! redirect's location) of a request that reached its host is kept in the session store's
//! [`KEPT_DIR`] directory (next to the logs; nothing is kept for sessions in memory), in a file
//! named by the SHA-256 of the request's record as the log holds it ([`kept_name`]); bodies
//! over [`MAX_KEPT_BODY`] are not kept. The tool result the model sees is unchanged. In a
//! replay ([`Tape::Replay`]) nothing goes out: request *n* of the call is matched against the
//! *n*-th recorded one (method, URL, request body SHA-256) and answered from the recording;
//! one that does not match fails the call with [`Mismatch`], naming the request and what
//! differed, and is traced as [`TRACE_REPLAY_MISMATCH`].
//!
//! # Threads
//! `fetch` is an async host function: the request is a future polled by the task that runs
//! the call (the guest's fiber is suspended meanwhile), so no thread blocks on the network.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasmtime::component::{ComponentType, Lift, Lower};

use crate::grants::Network;

/// The largest request body a guest may send, in bytes (1 MiB).
pub const MAX_REQUEST_BODY: usize = 1 << 20;
/// The longest URL, in bytes.
pub const MAX_URL: usize = 4096;
/// Headers per request and per response.
pub const MAX_HEADERS: usize = 64;
/// The most bytes of one header (name and value), sent or received.
pub const MAX_HEADER_BYTES: usize = 8192;
/// Redirects the host follows for one request (each hop re-checked and counted as a request).
pub const MAX_REDIRECTS: u32 = 5;
/// Methods a guest may use.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
/// Request headers the host sets itself (or that would let a request reach something other
/// than what its URL names).
const FORBIDDEN: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
];
/// The directory, under the session store's root, that keeps the answers of live requests.
pub const KEPT_DIR: &str = "http";
/// The largest response body kept for a replay, in bytes (1 MiB); a longer one is not kept.
pub const MAX_KEPT_BODY: usize = 1 << 20;
/// The trace kind of a replayed request that does not match the recording.
pub const TRACE_REPLAY_MISMATCH: &str = "wasm-http-replay-mismatch";
/// Headers dropped when a redirect leaves the request's origin.
const CREDENTIALS: &[&str] = &["authorization", "cookie"];

/// `cordis:plugin/http`'s `request`.
#[derive(Debug, Clone, ComponentType, Lift, Lower)]
#[component(record)]
pub(crate) struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// `cordis:plugin/http`'s `response`.
#[derive(Debug, Clone, ComponentType, Lift, Lower)]
#[component(record)]
pub(crate) struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// One request a guest made, as the call's outcome records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRecord {
    /// The method.
    pub method: String,
    /// The URL (of this hop, after a redirect).
    pub url: String,
    /// The request body's length, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    /// The request body's SHA-256 (hex), when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_sha256: Option<String>,
    /// The response's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The response body's length (0 for a redirect the host followed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The response body's SHA-256 (hex).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Why the request was refused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a request that reached its host came back with, as kept for a replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The status.
    pub status: u16,
    /// The headers the host kept (the guest's view), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// A redirect's location (the host followed it); the body is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The body.
    #[serde(skip)]
    pub body: Vec<u8>,
}

/// A recorded request and, when it reached its host and was kept, its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    /// The request as the log records it.
    pub record: HttpRecord,
    /// Its answer (`None` for a refused or failed request, or one that was not kept).
    pub answer: Option<Answer>,
}

/// A replay's recordings: each call's requests, by call id (the exercise runner fills it from
/// an exported session; see [`crate::WasmConfig::replay`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replay {
    /// Each call's recorded requests, in order.
    pub calls: std::collections::BTreeMap<String, Vec<Recording>>,
}

impl Replay {
    /// The tape of call `call`: its recorded requests (none when the recording has no such
    /// call, so any request it makes fails the call).
    pub fn tape(&self, call: &str) -> Tape {
        Tape::Replay {
            call: call.to_owned(),
            recorded: self.calls.get(call).cloned().unwrap_or_default(),
        }
    }
}

/// Where a call's requests are answered from.
#[derive(Debug, Clone, Default)]
pub enum Tape {
    /// The network, nothing kept.
    #[default]
    Live,
    /// The network, each answer kept in the directory (see [`kept_name`]).
    Keep(PathBuf),
    /// A replay of call `call`: its recorded requests answer, never the network.
    Replay {
        /// The call id.
        call: String,
        /// Its recorded requests, in order.
        recorded: Vec<Recording>,
    },
}

/// A replayed request that does not match the recording: why (naming the request and what
/// differed). The call fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Mismatch(pub String);

/// The name of the file that keeps `record`'s answer: the SHA-256 (hex) of the record's JSON,
/// as the log holds it.
pub fn kept_name(record: &HttpRecord) -> String {
    hex(&Sha256::digest(
        serde_json::to_vec(record).unwrap_or_default(),
    ))
}

/// Reads the answer kept for `record` in `dir` (`Ok(None)`: none was kept). The file is the
/// answer's JSON head on one line, then the body.
///
/// # Errors
/// The file cannot be read, is malformed, or does not match the record (status, body length
/// or SHA-256).
pub fn read_kept(dir: &Path, record: &HttpRecord) -> Result<Option<Answer>, String> {
    let path = dir.join(kept_name(record));
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let split = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or_else(|| format!("{} has no head line", path.display()))?;
    let mut answer: Answer = serde_json::from_slice(&bytes[..split])
        .map_err(|e| format!("{}: a malformed head: {e}", path.display()))?;
    answer.body = bytes[split + 1..].to_vec();
    answer_matches(record, &answer).map_err(|why| format!("{}: {why}", path.display()))?;
    Ok(Some(answer))
}

/// Checks that `answer` is the one `record` describes: its status, and its body's length and
/// SHA-256 (a redirect's body is empty).
pub fn answer_matches(record: &HttpRecord, answer: &Answer) -> Result<(), String> {
    if record.status != Some(answer.status) {
        return Err(format!(
            "the kept answer has status {}, the record {}",
            answer.status,
            record
                .status
                .map_or_else(|| "none".to_owned(), |s| s.to_string())
        ));
    }
    let sha = record
        .sha256
        .is_some()
        .then(|| hex(&Sha256::digest(&answer.body)));
    if record.bytes != Some(answer.body.len() as u64) || sha != record.sha256 {
        return Err(format!(
            "the kept body ({} bytes, sha256 {}) is not the recorded one ({} bytes, sha256 {})",
            answer.body.len(),
            hex(&Sha256::digest(&answer.body)),
            record.bytes.unwrap_or(0),
            record.sha256.as_deref().unwrap_or("none")
        ));
    }
    Ok(())
}

/// A body as text for a script (standard base64).
pub fn body_to_base64(body: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(body)
}

/// A body from a script's text ([`body_to_base64`]).
///
/// # Errors
/// The text is not base64.
pub fn body_from_base64(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("the body is not base64: {e}"))
}

/// Keeps `answer` for `record` in `dir` (written aside, then renamed into place), on a blocking
/// thread.
async fn keep(dir: &Path, record: &HttpRecord, answer: &Answer) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(answer).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    bytes.extend_from_slice(&answer.body);
    let (dir, name) = (dir.to_path_buf(), kept_name(record));
    tokio::task::spawn_blocking(move || cordis_session::write_private(&dir, &name, &bytes))
        .await
        .map_err(std::io::Error::other)?
}

/// An entry's HTTP client and grant, shared by its stores.
#[derive(Debug)]
pub(crate) struct Fetcher {
    client: reqwest::Client,
    network: Network,
    entry: Arc<str>,
}

impl Fetcher {
    /// A client for `network`: no redirects of its own (the host follows them, re-checking
    /// each), no proxy.
    pub(crate) fn new(network: Network, entry: Arc<str>) -> Result<Fetcher, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(network.timeout())
            .build()
            .map_err(|e| format!("cannot make the HTTP client: {e}"))?;
        Ok(Fetcher {
            client,
            network,
            entry,
        })
    }
}

/// A store's side of the network: the shared client, whether requests may go out now, and the
/// requests of the running call.
#[derive(Debug)]
pub(crate) struct Exchange {
    fetcher: Arc<Fetcher>,
    open: bool,
    used: u32,
    deadline: Option<Instant>,
    records: Vec<HttpRecord>,
    /// Where the running call's requests are answered from.
    tape: Tape,
    /// Why the running call's replay failed.
    mismatch: Option<Mismatch>,
}

impl Exchange {
    pub(crate) fn new(fetcher: Arc<Fetcher>) -> Exchange {
        Exchange {
            fetcher,
            open: false,
            used: 0,
            deadline: None,
            records: Vec::new(),
            tape: Tape::Live,
            mismatch: None,
        }
    }

    /// Before each entry into the guest: requests are allowed (`open`, a `call`) or not, none
    /// made yet, none may run past `deadline`, and they go to the network keeping nothing
    /// (until [`Exchange::play`]).
    pub(crate) fn begin(&mut self, open: bool, deadline: Instant) {
        self.open = open;
        self.used = 0;
        self.deadline = Some(deadline);
        self.records.clear();
        self.tape = Tape::Live;
        self.mismatch = None;
    }

    /// The running call's requests are answered as `tape` says.
    pub(crate) fn play(&mut self, tape: Tape) {
        self.tape = tape;
    }

    /// The records of the call that just ran, and why its replay failed, if it did.
    pub(crate) fn take(&mut self) -> (Vec<HttpRecord>, Option<Mismatch>) {
        self.open = false;
        self.tape = Tape::Live;
        (std::mem::take(&mut self.records), self.mismatch.take())
    }

    /// Request `index` (0-based) of a replayed call, matched against the recording: its
    /// recorded answer (or the recorded failure), or why it does not match.
    fn replayed(
        &self,
        method: &str,
        url: &reqwest::Url,
        body: &[u8],
    ) -> Result<Result<Hop, String>, Mismatch> {
        let Tape::Replay { call, recorded } = &self.tape else {
            return Err(Mismatch("not a replay".to_owned()));
        };
        let index = self.records.len();
        let shown = format!(
            "replay: request {} of call {call} ({method} {url})",
            index + 1
        );
        let Some(Recording { record, answer }) = recorded.get(index) else {
            return Err(Mismatch(format!(
                "{shown} is not in the recording, which holds {} requests for the call",
                recorded.len()
            )));
        };
        let sha = (!body.is_empty()).then(|| hex(&Sha256::digest(body)));
        let mut differs = Vec::new();
        if record.method != method {
            differs.push(format!("the method was {}", record.method));
        }
        if record.url != url.as_str() {
            differs.push(format!("the URL was {}", record.url));
        }
        if record.request_sha256 != sha {
            differs.push(format!(
                "the request body's sha256 was {} (now {})",
                record.request_sha256.as_deref().unwrap_or("none (no body)"),
                sha.as_deref().unwrap_or("none (no body)")
            ));
        }
        if !differs.is_empty() {
            return Err(Mismatch(format!(
                "{shown} differs from the recording: {}",
                differs.join("; ")
            )));
        }
        if let Some(error) = &record.error {
            let prefix = format!("{method} {url}: ");
            return Ok(Err(error.strip_prefix(&prefix).unwrap_or(error).to_owned()));
        }
        let Some(answer) = answer else {
            return Err(Mismatch(format!(
                "{shown}: the recording keeps no answer for it (a session in memory keeps none, and a body over {MAX_KEPT_BODY} bytes is not kept)"
            )));
        };
        answer_matches(record, answer).map_err(|why| Mismatch(format!("{shown}: {why}")))?;
        Ok(Ok(match &answer.location {
            Some(location) => Hop::Redirect(answer.status, location.clone()),
            None => Hop::Answer(Response {
                status: answer.status,
                headers: answer.headers.clone(),
                body: answer.body.clone(),
            }),
        }))
    }

    /// Keeps the answer of the request just recorded, when the tape keeps answers.
    async fn keep(&self, answer: &Answer) {
        let (Tape::Keep(dir), Some(record)) = (&self.tape, self.records.last()) else {
            return;
        };
        if answer.body.len() > MAX_KEPT_BODY {
            tracing::debug!(entry = %self.fetcher.entry, url = record.url, "a response body over {MAX_KEPT_BODY} bytes is not kept for replays");
            return;
        }
        if let Err(e) = keep(dir, record, answer).await {
            tracing::warn!(entry = %self.fetcher.entry, url = record.url, "cannot keep the response for replays in {}: {e}", dir.display());
        }
    }

    fn record(&mut self, method: &str, url: &str, body: &[u8], outcome: Outcome) {
        let (status, bytes, sha256, error) = match outcome {
            Outcome::Answered { status, body } => (
                Some(status),
                Some(body.len() as u64),
                Some(hex(&Sha256::digest(body))),
                None,
            ),
            Outcome::Redirected(status) => (Some(status), Some(0), None, None),
            Outcome::Failed(why) => (None, None, None, Some(why.to_owned())),
        };
        match (&error, status) {
            (Some(why), _) => {
                tracing::info!(entry = %self.fetcher.entry, method, url, "http request refused or failed: {why}");
            }
            (None, Some(status)) => {
                tracing::info!(entry = %self.fetcher.entry, method, url, status, bytes, "http request");
            }
            (None, None) => {}
        }
        self.records.push(HttpRecord {
            method: method.to_owned(),
            url: url.to_owned(),
            request_bytes: (!body.is_empty()).then_some(body.len() as u64),
            request_sha256: (!body.is_empty()).then(|| hex(&Sha256::digest(body))),
            status,
            bytes,
            sha256,
            error,
        });
    }
}

enum Outcome<'a> {
    Answered { status: u16, body: &'a [u8] },
    Redirected(u16),
    Failed(&'a str),
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What one hop came back with.
enum Hop {
    /// A response for the guest.
    Answer(Response),
    /// A redirect the host follows, to this location (relative or absolute).
    Redirect(u16, String),
}

/// `fetch`: performs `request` if `exchange` allows it (the guest's answer), or, in a replay,
/// why it does not match the recording (which fails the call).
pub(crate) async fn fetch(
    exchange: Option<&mut Exchange>,
    request: Request,
) -> Result<Result<Response, String>, Mismatch> {
    let Some(ex) = exchange else {
        return Ok(Err(
            "the network is not granted to this entry (`capabilities.network`)".to_owned(),
        ));
    };
    let answer = exchange_request(ex, request).await;
    if let Some(mismatch) = &ex.mismatch {
        return Err(mismatch.clone());
    }
    Ok(answer)
}

/// Performs `request` through `ex`: the allowlist, the bounds, the hops.
async fn exchange_request(ex: &mut Exchange, request: Request) -> Result<Response, String> {
    if !ex.open {
        return Err(
            "the network is available only during `call` (not in `init` or `describe`)".to_owned(),
        );
    }
    let mut method = checked_method(&request.method)?;
    check_request_headers(&request.headers)?;
    if request.body.len() > MAX_REQUEST_BODY {
        return Err(format!(
            "the request body of {} bytes is over the bound of {MAX_REQUEST_BODY} bytes",
            request.body.len()
        ));
    }
    let mut url = parse_url(&request.url)?;
    let (mut headers, mut body) = (request.headers, request.body);
    let mut hops = 0;
    loop {
        let (host, port, default) = target(&url)?;
        let network = &ex.fetcher.network;
        if !network.allows(&host, port, default) {
            let via = if hops > 0 {
                " (a redirect's target)"
            } else {
                ""
            };
            let why = format!(
                "{host}:{port}{via} is not on this entry's network.allow ({}); add it to `capabilities.network.allow` to reach it",
                network.listed()
            );
            ex.record(method.as_str(), url.as_str(), &body, Outcome::Failed(&why));
            return Err(why);
        }
        if ex.used >= network.max_requests() {
            let why = format!(
                "the call has made its {} requests (network.max_requests)",
                network.max_requests()
            );
            ex.record(method.as_str(), url.as_str(), &body, Outcome::Failed(&why));
            return Err(why);
        }
        ex.used += 1;
        let timeout = match ex.deadline {
            Some(d) => network
                .timeout()
                .min(d.saturating_duration_since(Instant::now())),
            None => network.timeout(),
        };
        let sent = match ex.tape {
            Tape::Replay { .. } => match ex.replayed(method.as_str(), &url, &body) {
                Ok(sent) => sent,
                Err(mismatch) => {
                    tracing::warn!(entry = %ex.fetcher.entry, "{mismatch}");
                    ex.record(
                        method.as_str(),
                        url.as_str(),
                        &body,
                        Outcome::Failed(&mismatch.0),
                    );
                    let why = mismatch.0.clone();
                    ex.mismatch = Some(mismatch);
                    return Err(why);
                }
            },
            Tape::Live | Tape::Keep(_) => {
                send(&ex.fetcher, &method, &url, &headers, &body, timeout).await
            }
        };
        match sent {
            Err(why) => {
                let why = format!("{method} {url}: {why}");
                ex.record(method.as_str(), url.as_str(), &body, Outcome::Failed(&why));
                return Err(why);
            }
            Ok(Hop::Answer(response)) => {
                let answered = Outcome::Answered {
                    status: response.status,
                    body: &response.body,
                };
                ex.record(method.as_str(), url.as_str(), &body, answered);
                let kept = Answer {
                    status: response.status,
                    headers: response.headers,
                    location: None,
                    body: response.body,
                };
                ex.keep(&kept).await;
                return Ok(Response {
                    status: kept.status,
                    headers: kept.headers,
                    body: kept.body,
                });
            }
            Ok(Hop::Redirect(status, location)) => {
                ex.record(
                    method.as_str(),
                    url.as_str(),
                    &body,
                    Outcome::Redirected(status),
                );
                let kept = Answer {
                    status,
                    headers: Vec::new(),
                    location: Some(location),
                    body: Vec::new(),
                };
                ex.keep(&kept).await;
                let location = kept.location.unwrap_or_default();
                hops += 1;
                if hops > MAX_REDIRECTS {
                    return Err(format!(
                        "{url} redirected more than {MAX_REDIRECTS} times in a row"
                    ));
                }
                let next = url
                    .join(&location)
                    .map_err(|e| format!("{url} redirected to {location:?}, not a URL: {e}"))?;
                let next = parse_url(next.as_str())?;
                if next.origin() != url.origin() {
                    headers
                        .retain(|(n, _)| !CREDENTIALS.contains(&n.to_ascii_lowercase().as_str()));
                }
                if status == 303 || (matches!(status, 301 | 302) && method == reqwest::Method::POST)
                {
                    method = reqwest::Method::GET;
                    body = Vec::new();
                    headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
                }
                url = next;
            }
        }
    }
}

fn checked_method(method: &str) -> Result<reqwest::Method, String> {
    let upper = method.to_ascii_uppercase();
    if !METHODS.contains(&upper.as_str()) {
        return Err(format!(
            "method {:?} is not one of {}",
            cut(method, 32),
            METHODS.join(", ")
        ));
    }
    reqwest::Method::from_bytes(upper.as_bytes()).map_err(|e| e.to_string())
}

fn check_request_headers(headers: &[(String, String)]) -> Result<(), String> {
    if headers.len() > MAX_HEADERS {
        return Err(format!(
            "{} request headers are over the bound of {MAX_HEADERS}",
            headers.len()
        ));
    }
    for (name, value) in headers {
        if name.len() + value.len() > MAX_HEADER_BYTES {
            return Err(format!(
                "request header {:?} is over the bound of {MAX_HEADER_BYTES} bytes",
                cut(name, 64)
            ));
        }
        if FORBIDDEN.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "request header {name:?} is set by the host, not the guest"
            ));
        }
        reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("request header name {:?} is not valid", cut(name, 64)))?;
        reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| format!("the value of request header {name:?} is not valid"))?;
    }
    Ok(())
}

/// `text`'s first `n` bytes (at a character boundary), for messages.
fn cut(text: &str, n: usize) -> &str {
    let mut end = text.len().min(n);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn parse_url(text: &str) -> Result<reqwest::Url, String> {
    if text.len() > MAX_URL {
        return Err(format!(
            "the URL of {} bytes is over the bound of {MAX_URL} bytes",
            text.len()
        ));
    }
    let url = reqwest::Url::parse(text)
        .map_err(|e| format!("{:?} is not an absolute URL: {e}", cut(text, 256)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{:?}: only http and https URLs are fetched",
            cut(text, 256)
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{:?}: a URL with a user or password is not fetched (send an `authorization` header)",
            cut(text, 256)
        ));
    }
    Ok(url)
}

/// The URL's host (as written, lower case), port and its scheme's default port.
fn target(url: &reqwest::Url) -> Result<(String, u16, u16), String> {
    let host = url
        .host_str()
        .ok_or_else(|| format!("{url} has no host"))?
        .to_owned();
    let default = if url.scheme() == "https" { 443 } else { 80 };
    Ok((host, url.port().unwrap_or(default), default))
}

/// Sends one hop and reads its answer within `timeout` and the bounds.
async fn send(
    fetcher: &Fetcher,
    method: &reqwest::Method,
    url: &reqwest::Url,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> Result<Hop, String> {
    if timeout.is_zero() {
        return Err("the call's deadline has passed".to_owned());
    }
    let mut builder = fetcher.client.request(method.clone(), url.clone());
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    if !body.is_empty() {
        builder = builder.body(body.to_vec());
    }
    let max = fetcher.network.max_response_bytes();
    let exchange = async {
        let mut response = builder.send().await.map_err(|e| reason(&e))?;
        let status = response.status().as_u16();
        if matches!(status, 301 | 302 | 303 | 307 | 308)
            && let Some(location) = response.headers().get(reqwest::header::LOCATION)
        {
            let location = String::from_utf8_lossy(location.as_bytes()).into_owned();
            return Ok(Hop::Redirect(status, location));
        }
        let headers = response_headers(response.headers())?;
        if let Some(length) = response.content_length()
            && length > max
        {
            return Err(format!(
                "the response body of {length} bytes is over network.max_response_bytes ({max} bytes)"
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| reason(&e))? {
            if (body.len() + chunk.len()) as u64 > max {
                return Err(format!(
                    "the response body is over network.max_response_bytes ({max} bytes)"
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Hop::Answer(Response {
            status,
            headers,
            body,
        }))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("no answer within {} ms", timeout.as_millis()))?
}

fn response_headers(map: &reqwest::header::HeaderMap) -> Result<Vec<(String, String)>, String> {
    if map.len() > MAX_HEADERS {
        return Err(format!(
            "the response has {} headers, over the bound of {MAX_HEADERS}",
            map.len()
        ));
    }
    let mut out = Vec::with_capacity(map.len());
    for (name, value) in map {
        if name.as_str().len() + value.len() > MAX_HEADER_BYTES {
            return Err(format!(
                "response header {:?} is over the bound of {MAX_HEADER_BYTES} bytes",
                name.as_str()
            ));
        }
        out.push((
            name.as_str().to_owned(),
            String::from_utf8_lossy(value.as_bytes()).into_owned(),
        ));
    }
    Ok(out)
}

/// A client error in words, with its cause (reqwest's own text is often just "error sending
/// request").
fn reason(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_outside_the_bounds_are_refused_before_anything_is_sent() {
        assert!(checked_method("get").is_ok());
        assert!(
            checked_method("CONNECT")
                .unwrap_err()
                .contains("is not one of GET")
        );
        let host = vec![("Host".to_owned(), "other.example".to_owned())];
        assert!(
            check_request_headers(&host)
                .unwrap_err()
                .contains("set by the host")
        );
        let many = vec![("x-a".to_owned(), "1".to_owned()); MAX_HEADERS + 1];
        assert!(
            check_request_headers(&many)
                .unwrap_err()
                .contains("bound of 64")
        );
        let long = vec![("x-a".to_owned(), "v".repeat(MAX_HEADER_BYTES))];
        assert!(
            check_request_headers(&long)
                .unwrap_err()
                .contains("8192 bytes")
        );
        assert!(
            parse_url("file:///etc/passwd")
                .unwrap_err()
                .contains("only http and https")
        );
        assert!(
            parse_url("http://u:p@example.org/")
                .unwrap_err()
                .contains("user or password")
        );
        assert!(parse_url("/relative").is_err());
        let long = format!("http://example.org/{}", "a".repeat(MAX_URL));
        assert!(
            parse_url(&long)
                .unwrap_err()
                .contains("bound of 4096 bytes")
        );
        let url = parse_url("https://API.Example.org/x").unwrap();
        assert_eq!(
            target(&url).unwrap(),
            ("api.example.org".to_owned(), 443, 443)
        );
        let url = parse_url("http://127.1:8080/").unwrap();
        assert_eq!(target(&url).unwrap(), ("127.0.0.1".to_owned(), 8080, 80));
    }

    /// An exchange on `tape`, allowing 127.0.0.1:9 (where nothing answers), open for a call.
    fn exchange(tape: Tape) -> Exchange {
        let network: Network =
            serde_json::from_value(serde_json::json!({"allow": ["127.0.0.1:9"]})).unwrap();
        let fetcher = Fetcher::new(network, Arc::from("web")).unwrap();
        let mut ex = Exchange::new(Arc::new(fetcher));
        ex.begin(true, Instant::now() + Duration::from_secs(30));
        ex.play(tape);
        ex
    }

    fn get(url: &str) -> Request {
        Request {
            method: "GET".to_owned(),
            url: url.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// A recorded redirect from `/a` to `/b`, then `/b`'s answer `hi`.
    fn recording() -> Vec<Recording> {
        let record = |url: &str, status: u16, body: &[u8], sha: bool| HttpRecord {
            method: "GET".to_owned(),
            url: url.to_owned(),
            request_bytes: None,
            request_sha256: None,
            status: Some(status),
            bytes: Some(body.len() as u64),
            sha256: sha.then(|| hex(&Sha256::digest(body))),
            error: None,
        };
        vec![
            Recording {
                record: record("http://127.0.0.1:9/a", 302, b"", false),
                answer: Some(Answer {
                    status: 302,
                    headers: Vec::new(),
                    location: Some("/b".to_owned()),
                    body: Vec::new(),
                }),
            },
            Recording {
                record: record("http://127.0.0.1:9/b", 200, b"hi", true),
                answer: Some(Answer {
                    status: 200,
                    headers: vec![("x-kept".to_owned(), "1".to_owned())],
                    location: None,
                    body: b"hi".to_vec(),
                }),
            },
        ]
    }

    #[test]
    fn a_replay_answers_from_the_recording_following_its_redirects_and_records_the_same() {
        let recorded = recording();
        let mut ex = exchange(Tape::Replay {
            call: "c1".to_owned(),
            recorded: recorded.clone(),
        });
        let answer = run(fetch(Some(&mut ex), get("http://127.0.0.1:9/a"))).unwrap();
        let response = answer.unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"hi");
        assert_eq!(response.headers, [("x-kept".to_owned(), "1".to_owned())]);
        let (records, mismatch) = ex.take();
        assert_eq!(mismatch, None);
        let want: Vec<HttpRecord> = recorded.into_iter().map(|r| r.record).collect();
        assert_eq!(records, want);
    }

    #[test]
    fn a_replayed_request_that_differs_or_was_not_made_fails_naming_it_and_what_differed() {
        let tape = || Tape::Replay {
            call: "c1".to_owned(),
            recorded: recording(),
        };
        let mut ex = exchange(tape());
        let mut post = get("http://127.0.0.1:9/a");
        post.method = "POST".to_owned();
        post.body = b"x".to_vec();
        let Err(Mismatch(why)) = run(fetch(Some(&mut ex), post)) else {
            panic!("a differing request must fail the call");
        };
        assert_eq!(
            why,
            format!(
                "replay: request 1 of call c1 (POST http://127.0.0.1:9/a) differs from the recording: the method was GET; the request body's sha256 was none (no body) (now {})",
                hex(&Sha256::digest(b"x"))
            )
        );
        // The mismatch is recorded with the call, too.
        let (records, mismatch) = ex.take();
        assert_eq!(records[0].error.as_deref(), Some(why.as_str()));
        assert_eq!(mismatch, Some(Mismatch(why)));

        let mut ex = exchange(Tape::Replay {
            call: "c2".to_owned(),
            recorded: Vec::new(),
        });
        let Err(Mismatch(why)) = run(fetch(Some(&mut ex), get("http://127.0.0.1:9/a"))) else {
            panic!("a request the recording lacks must fail the call");
        };
        assert_eq!(
            why,
            "replay: request 1 of call c2 (GET http://127.0.0.1:9/a) is not in the recording, which holds 0 requests for the call"
        );

        // A kept body that is not the record's is refused, never served.
        let mut bad = recording();
        if let Some(a) = bad[1].answer.as_mut() {
            a.body = b"ho".to_vec();
        }
        let mut ex = exchange(Tape::Replay {
            call: "c1".to_owned(),
            recorded: bad,
        });
        let Err(Mismatch(why)) = run(fetch(Some(&mut ex), get("http://127.0.0.1:9/a"))) else {
            panic!("a kept body that is not the record's must fail the call");
        };
        assert!(
            why.starts_with("replay: request 2 of call c1 (GET http://127.0.0.1:9/b): the kept body (2 bytes, sha256"),
            "{why}"
        );
    }

    #[test]
    fn a_kept_answer_reads_back_under_its_records_name_and_a_changed_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let Recording { record, answer } = recording().remove(1);
        let answer = answer.unwrap();
        run(keep(dir.path(), &record, &answer)).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, [kept_name(&record)]);
        assert_eq!(read_kept(dir.path(), &record).unwrap(), Some(answer));
        let path = dir.path().join(kept_name(&record));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] = b'o';
        std::fs::write(&path, bytes).unwrap();
        let err = read_kept(dir.path(), &record).unwrap_err();
        assert!(err.contains("the kept body (2 bytes"), "{err}");
        let mut other = record;
        other.url.push('x');
        assert_eq!(read_kept(dir.path(), &other).unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_kept_answer_is_never_written_through_a_link_and_is_the_users_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("victim");
        std::fs::create_dir(&target).unwrap();
        let Recording { record, answer } = recording().remove(1);
        let answer = answer.unwrap();
        // The kept directory is a link: refused, nothing written where it points.
        let linked = tmp.path().join("http");
        std::os::unix::fs::symlink(&target, &linked).unwrap();
        assert!(run(keep(&linked, &record, &answer)).is_err());
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        // A link at the kept name is replaced, not followed.
        let dir = tmp.path().join("kept");
        std::fs::create_dir(&dir).unwrap();
        let bashrc = target.join("bashrc");
        std::fs::write(&bashrc, "mine\n").unwrap();
        std::os::unix::fs::symlink(&bashrc, dir.join(kept_name(&record))).unwrap();
        run(keep(&dir, &record, &answer)).unwrap();
        assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "mine\n");
        let kept = dir.join(kept_name(&record));
        assert!(!std::fs::symlink_metadata(&kept).unwrap().is_symlink());
        assert_eq!(
            std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(read_kept(&dir, &record).unwrap(), Some(answer));
    }
}
