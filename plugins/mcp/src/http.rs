//! The streamable HTTP transport's client, on the workspace's `reqwest` (0.12, rustls): rmcp
//! ships one only for reqwest 0.13, and a second HTTP stack is not worth its build time.
//!
//! Each JSON-RPC message is one `POST` answered by JSON, an SSE stream, or `202 Accepted`; a
//! `GET` opens the server's stream of its own messages (`405` means it has none); `DELETE`
//! ends the session. Authentication beyond fixed headers is not supported.

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
/// The largest JSON body read (a tool result can be large, but not unbounded).
const MAX_JSON_BODY: usize = 16 * 1024 * 1024;
/// How much of an error body is kept for the message.
const MAX_ERROR_BODY: usize = 4 * 1024;

/// A `reqwest` 0.12 client as rmcp's streamable HTTP client.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient(pub(crate) reqwest::Client);

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

fn sse(response: reqwest::Response) -> BoxStream<'static, Result<Sse, SseError>> {
    SseStream::from_bytes_stream(response.bytes_stream()).boxed()
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
        let request = self
            .0
            .post(uri.as_ref())
            .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"))
            .header(CONTENT_TYPE, JSON)
            .body(body);
        let request = with_headers(request, session_id.as_deref(), auth_header, custom_headers);
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
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
            let body = read_body(response, MAX_JSON_BODY).await.unwrap_or_default();
            // A JSON-RPC error in a failed response is the server's answer, not a transport
            // failure.
            if let Ok(error @ JsonRpcMessage::Error(_)) =
                serde_json::from_slice::<ServerJsonRpcMessage>(&body)
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
            return Ok(StreamableHttpPostResponse::Sse(sse(response), session));
        }
        if is(content_type.as_ref(), JSON) {
            let body = read_body(response, MAX_JSON_BODY).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session)),
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
            self.0.delete(uri.as_ref()),
            Some(&session_id),
            auth_header,
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
            .0
            .get(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        if let Some(last) = last_event_id {
            request = request.header(LAST_EVENT_HEADER, last);
        }
        let request = with_headers(request, session_id.as_deref(), auth_header, custom_headers);
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
        Ok(sse(response))
    }
}
