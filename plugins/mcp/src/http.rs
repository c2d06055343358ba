//! The streamable HTTP transport's client, on the workspace's `reqwest` (0.12, rustls): rmcp
//! ships one only for reqwest 0.13, and a second HTTP stack is not worth its build time.
//!
//! Each JSON-RPC message is one `POST` answered by JSON, an SSE stream, or `202 Accepted`; a
//! `GET` opens the server's stream of its own messages (`405` means it has none); `DELETE`
//! ends the session. With OAuth ([`crate::auth`]) every request carries the entry's bearer
//! token; a `401` is retried once with a renewed token, and a `403` naming
//! `insufficient_scope` says which scopes to log in for.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_HEADER: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";
/// How much of an error body is kept for the message.
const MAX_ERROR_BODY: usize = 4 * 1024;

/// A `reqwest` 0.12 client as rmcp's streamable HTTP client.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    pub(crate) client: reqwest::Client,
    /// The largest JSON body, and the largest server-sent event, read (the entry's
    /// `maxMessageBytes`): a tool result can be large, but not unbounded.
    pub(crate) max_message: usize,
    /// The entry's OAuth tokens, when it uses OAuth.
    pub(crate) auth: Option<Arc<crate::auth::Authorizer>>,
}

type Error = StreamableHttpError<reqwest::Error>;

fn is(content_type: Option<&HeaderValue>, expected: &str) -> bool {
    content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}

fn with_headers(
    mut request: reqwest::RequestBuilder,
    session: Option<&str>,
    auth: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> reqwest::RequestBuilder {
    // Sorted, so requests are the same bytes whatever the map's order.
    let mut custom: Vec<_> = custom.into_iter().collect();
    custom.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    for (name, value) in custom {
        request = request.header(name, value);
    }
    if let Some(auth) = auth {
        request = request.bearer_auth(auth);
    }
    if let Some(session) = session {
        request = request.header(SESSION_HEADER, session);
    }
    request
}

/// At most `limit` bytes of the body.
async fn read_body(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, Error> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(StreamableHttpError::Client)?;
        if body.len() + chunk.len() > limit {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Why a server-sent event stream ended early.
#[derive(Debug, thiserror::Error)]
enum EventStreamError {
    /// Reading the body failed.
    #[error(transparent)]
    Transport(#[from] reqwest::Error),
    /// One event grew past the limit without ending (a blank line).
    #[error("a server-sent event exceeded {limit} bytes without ending (`maxMessageBytes`)")]
    EventTooLarge {
        /// The limit.
        limit: usize,
    },
}

/// Bytes of the event being read so far, and where in a line the stream is (an event ends at
/// a blank line: two line ends in a row, `\n`, `\r` or `\r\n` each).
#[derive(Default)]
struct EventBound {
    pending: usize,
    at_line_start: bool,
    after_cr: bool,
    failed: bool,
}

impl EventBound {
    /// Accounts for `bytes`; false when the current event passed `limit`.
    fn admit(&mut self, bytes: &[u8], limit: usize) -> bool {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    if self.at_line_start {
                        self.pending = 0;
                    }
                    self.at_line_start = true;
                    self.after_cr = b == b'\r';
                }
                _ => {
                    self.at_line_start = false;
                    self.after_cr = false;
                    self.pending += 1;
                }
            }
            if self.pending > limit {
                return false;
            }
        }
        true
    }
}

/// The response's event stream, each event bounded by `limit` bytes: a stream that never ends
/// an event fails once it passes the limit instead of growing in memory until the call times
/// out.
fn sse(response: reqwest::Response, limit: usize) -> BoxStream<'static, Result<Sse, SseError>> {
    let bounded = response
        .bytes_stream()
        .scan(EventBound::default(), move |bound, chunk| {
            let item = if bound.failed {
                None
            } else {
                Some(match chunk {
                    Err(e) => {
                        bound.failed = true;
                        Err(EventStreamError::from(e))
                    }
                    Ok(bytes) if bound.admit(&bytes, limit) => Ok(bytes),
                    Ok(_) => {
                        bound.failed = true;
                        Err(EventStreamError::EventTooLarge { limit })
                    }
                })
            };
            std::future::ready(item)
        });
    // Each event's message passes the nesting guard before rmcp parses it.
    SseStream::from_bytes_stream(bounded)
        .filter_map(|event| {
            std::future::ready(match event {
                Ok(mut event) => match event.data.as_deref().map(crate::depth::guard) {
                    Some(crate::depth::Guarded::Drop) => None,
                    Some(crate::depth::Guarded::Parse(std::borrow::Cow::Owned(text))) => {
                        event.data = Some(text);
                        Some(Ok(event))
                    }
                    _ => Some(Ok(event)),
                },
                Err(e) => Some(Err(e)),
            })
        })
        .boxed()
}

/// The `Bearer` challenge of a response.
fn challenge_of(response: &reqwest::Response) -> Option<crate::auth::Challenge> {
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::auth::parse_challenge)
}

impl HttpClient {
    /// The token for a request: the entry's OAuth token, else what rmcp was configured with.
    async fn token(&self, configured: Option<String>) -> Option<String> {
        match &self.auth {
            Some(auth) => auth.bearer().await,
            None => configured,
        }
    }

    /// The error of a request only a login can let through.
    fn needs_login(&self, auth: &crate::auth::Authorizer) -> Error {
        StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            auth.blocked()
                .unwrap_or_else(|| "the server needs authorization".to_owned()),
        ))
    }
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let body = serde_json::to_vec(&message)?;
        let send = |token: Option<String>| {
            let request = self
                .client
                .post(uri.as_ref())
                .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"))
                .header(CONTENT_TYPE, JSON)
                .body(body.clone());
            with_headers(
                request,
                session_id.as_deref(),
                token,
                custom_headers.clone(),
            )
            .send()
        };
        let token = self.token(auth_header).await;
        let mut response = send(token.clone())
            .await
            .map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::UNAUTHORIZED
            && let Some(auth) = &self.auth
        {
            let challenge = challenge_of(&response);
            match auth.rejected(token.as_deref(), challenge.as_ref()).await {
                Some(renewed) => {
                    response = send(Some(renewed))
                        .await
                        .map_err(StreamableHttpError::Client)?;
                }
                None => return Err(self.needs_login(auth)),
            }
            if response.status() == StatusCode::UNAUTHORIZED {
                auth.give_up("the server refused a renewed token").await;
                return Err(self.needs_login(auth));
            }
        }
        if response.status() == StatusCode::FORBIDDEN
            && let Some(auth) = &self.auth
            && let Some(challenge) = challenge_of(&response)
            && challenge.error.as_deref() == Some("insufficient_scope")
        {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                auth.insufficient(&challenge).await,
            )));
        }
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        let awaits_nothing = matches!(
            message,
            JsonRpcMessage::Notification(_)
                | JsonRpcMessage::Response(_)
                | JsonRpcMessage::Error(_)
        );
        if !status.is_success() {
            let body = read_body(response, self.max_message)
                .await
                .unwrap_or_default();
            // A JSON-RPC error in a failed response is the server's answer, not a transport
            // failure.
            if let Ok(Some(error @ JsonRpcMessage::Error(_))) =
                crate::depth::parse::<ServerJsonRpcMessage>(&body)
            {
                return Ok(StreamableHttpPostResponse::Json(error, session));
            }
            let text =
                String::from_utf8_lossy(&body[..body.len().min(MAX_ERROR_BODY)]).into_owned();
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {text}"),
            )));
        }
        if is(content_type.as_ref(), EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                sse(response, self.max_message),
                session,
            ));
        }
        if is(content_type.as_ref(), JSON) {
            let body = read_body(response, self.max_message).await?;
            return match crate::depth::parse::<ServerJsonRpcMessage>(&body) {
                Ok(Some(parsed)) => Ok(StreamableHttpPostResponse::Json(parsed, session)),
                // A notification too deep to read, dropped.
                Ok(None) => Ok(StreamableHttpPostResponse::Accepted),
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::Deserialize(e)),
            };
        }
        if awaits_nothing {
            // Some servers answer a notification with an empty 200.
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(
            content_type.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let request = with_headers(
            self.client.delete(uri.as_ref()),
            Some(&session_id),
            self.token(auth_header).await,
            custom_headers,
        );
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        response
            .error_for_status()
            .map(drop)
            .map_err(StreamableHttpError::Client)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let mut request = self
            .client
            .get(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        if let Some(last) = last_event_id {
            request = request.header(LAST_EVENT_HEADER, last);
        }
        let token = self.token(auth_header).await;
        let request = with_headers(request, session_id.as_deref(), token, custom_headers);
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        let response = response
            .error_for_status()
            .map_err(StreamableHttpError::Client)?;
        if !is(response.headers().get(CONTENT_TYPE), EVENT_STREAM) {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        Ok(sse(response, self.max_message))
    }
}

#[cfg(test)]
mod tests {
    use super::EventBound;

    #[test]
    fn an_event_is_bounded_from_its_start_and_every_blank_line_form_ends_it() {
        let mut bound = EventBound::default();
        // Ten bytes an event, each event ended by another form of blank line, split anywhere.
        for chunk in [
            &b"data: 1234"[..],
            b"\n\n",
            b"data: abcd\r",
            b"\n\r\n",
            b"data: wxyz\r\r",
        ] {
            assert!(bound.admit(chunk, 10));
        }
        // An event that never ends passes the limit, however it is split.
        let mut bound = EventBound::default();
        assert!(bound.admit(b"data: 12", 15));
        assert!(
            bound.admit(b"\ndata", 15),
            "a single line end does not end the event"
        );
        assert!(!bound.admit(b": 345", 15), "17 bytes of one event");
    }
}
