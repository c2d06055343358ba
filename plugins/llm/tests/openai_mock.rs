//! The OpenAI-compatible adapter against a mock chat-completions server on 127.0.0.1.
//!
//! The server is a few lines of tokio: it reads one HTTP/1.1 request per connection, records
//! it, and answers with the next scripted reply (a status with a body, or a chunked SSE stream
//! that may stop mid-way). Nothing here contacts any other address.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_llm::{
    CallConfig, Chunk, FinishReason, FrozenRequest, LlmAdapter, LlmRequest, Message, OpenAiAdapter,
    OpenAiSettings, Usage, collect,
};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone)]
enum Reply {
    /// A complete response.
    Status {
        code: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// A chunked `text/event-stream`: each piece is written (and flushed) separately; `cut`
    /// closes the connection without the terminating chunk.
    Sse { pieces: Vec<String>, cut: bool },
    /// Read the request, then answer nothing for this long.
    Stall(Duration),
}

#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: serde_json::Value,
}

struct Mock {
    base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_request(sock: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or_default();
    Some(Seen { head, body })
}

async fn answer(sock: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Status {
            code,
            headers,
            body,
        } => {
            let mut text = format!(
                "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                text += &format!("{k}: {v}\r\n");
            }
            text += "\r\n";
            text += &body;
            sock.write_all(text.as_bytes()).await?;
        }
        Reply::Sse { pieces, cut } => {
            sock.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
            )
            .await?;
            for p in pieces {
                sock.write_all(format!("{:x}\r\n{p}\r\n", p.len()).as_bytes())
                    .await?;
                sock.flush().await?;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if !cut {
                sock.write_all(b"0\r\n\r\n").await?;
            }
        }
        Reply::Stall(d) => tokio::time::sleep(d).await,
    }
    sock.flush().await?;
    let _ = sock.shutdown().await;
    Ok(())
}

/// Starts a server answering `replies` in order (one per connection), bounded: it stops after
/// the last reply.
async fn mock(replies: Vec<Reply>) -> Mock {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    let task = tokio::spawn(async move {
        for reply in replies {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            if let Some(req) = read_request(&mut sock).await {
                record.lock().unwrap().push(req);
            }
            let _ = answer(&mut sock, reply).await;
        }
    });
    Mock {
        base_url: format!("http://{addr}/v1"),
        seen,
        task,
    }
}

fn event(v: serde_json::Value) -> String {
    format!("data: {v}\n\n")
}

fn text_delta(t: &str) -> String {
    event(serde_json::json!({"choices": [{"index": 0, "delta": {"content": t}}]}))
}

fn finish(reason: &str) -> String {
    event(serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

fn usage(i: u64, o: u64) -> String {
    event(
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}}),
    )
}

const DONE: &str = "data: [DONE]\n\n";

fn adapter(mock: &Mock, tune: impl FnOnce(&mut OpenAiSettings)) -> OpenAiAdapter {
    let mut s = OpenAiSettings::new(mock.base_url.clone());
    s.api_key = Some("sk-test".into());
    s.timeout = Duration::from_secs(5);
    s.retry_base = Duration::from_millis(10);
    tune(&mut s);
    OpenAiAdapter::new(s).unwrap()
}

fn request() -> FrozenRequest {
    FrozenRequest::new(LlmRequest {
        config: CallConfig::model("deepseek-chat"),
        messages: vec![Message::user("hi")].into(),
        system: Some("You are terse.".into()),
        tools: vec![],
        session_id: "s".into(),
    })
}

#[tokio::test]
async fn text_streams_in_deltas_with_usage_and_a_stop_finish() {
    let m = mock(vec![Reply::Sse {
        pieces: vec![
            text_delta("Hel"),
            text_delta("lo"),
            // One event split across two writes.
            text_delta("!")[..10].to_owned(),
            text_delta("!")[10..].to_owned(),
            finish("stop"),
            usage(12, 3),
            DONE.into(),
        ],
        cut: false,
    }])
    .await;
    let a = adapter(&m, |_| {});
    let mut stream = a.stream(request());
    let mut chunks = Vec::new();
    while let Some(c) = stream.next().await {
        chunks.push(c.unwrap());
    }
    assert_eq!(
        chunks,
        vec![
            Chunk::Text {
                delta: "Hel".into()
            },
            Chunk::Text { delta: "lo".into() },
            Chunk::Text { delta: "!".into() },
            Chunk::Usage {
                usage: Usage {
                    input_tokens: 12,
                    output_tokens: 3,
                    cached_input_tokens: None
                }
            },
            Chunk::Finish {
                reason: FinishReason::Stop
            },
        ]
    );
    let seen = m.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].head.starts_with("POST /v1/chat/completions "),
        "{}",
        seen[0].head
    );
    assert!(
        seen[0]
            .head
            .to_ascii_lowercase()
            .contains("authorization: bearer sk-test"),
        "{}",
        seen[0].head
    );
    let body = &seen[0].body;
    assert_eq!(body["model"], "deepseek-chat");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["content"], "hi");
}

#[tokio::test]
async fn tool_call_deltas_split_across_chunks_are_assembled_in_index_order() {
    let tc = |v: serde_json::Value| {
        event(serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [v]}}]}))
    };
    let m = mock(vec![Reply::Sse {
        pieces: vec![
            text_delta("Let me look."),
            tc(
                serde_json::json!({"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_", "arguments": ""}}),
            ),
            tc(serde_json::json!({"index": 0, "function": {"name": "file", "arguments": "{\"pa"}})),
            tc(
                serde_json::json!({"index": 1, "id": "call_b", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":"}}),
            ),
            tc(serde_json::json!({"index": 0, "function": {"arguments": "th\":\"a.txt\"}"}})),
            tc(serde_json::json!({"index": 1, "function": {"arguments": "\"ls\"}"}})),
            finish("tool_calls"),
            usage(20, 9),
            DONE.into(),
        ],
        cut: false,
    }])
    .await;
    let got = collect(adapter(&m, |_| {}).stream(request()))
        .await
        .unwrap();
    assert_eq!(got.text, "Let me look.");
    let calls: Vec<(&str, &str, &str)> = got
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a", "read_file", r#"{"path":"a.txt"}"#),
            ("call_b", "bash", r#"{"command":"ls"}"#)
        ]
    );
    assert_eq!(got.finish, Some(FinishReason::ToolCalls));
    assert_eq!(got.usage.unwrap().output_tokens, 9);
}

#[tokio::test]
async fn a_malformed_event_ends_the_stream_with_an_error_finish_after_what_was_streamed() {
    let m = mock(vec![Reply::Sse {
        pieces: vec![
            text_delta("partial"),
            "data: {not json\n\n".into(),
            DONE.into(),
        ],
        cut: false,
    }])
    .await;
    let got = collect(adapter(&m, |_| {}).stream(request()))
        .await
        .unwrap();
    assert_eq!(got.text, "partial");
    match got.finish {
        Some(FinishReason::Error { message }) => {
            assert!(message.starts_with("malformed stream event"), "{message}");
            assert!(message.contains("{not json"), "{message}");
        }
        other => panic!("expected an error finish, got {other:?}"),
    }
}

#[tokio::test]
async fn a_429_is_retried_after_retry_after_and_then_succeeds() {
    let m = mock(vec![
        Reply::Status {
            code: 429,
            headers: vec![("retry-after", "0.2".into())],
            body: r#"{"error": {"message": "Rate limit reached"}}"#.into(),
        },
        Reply::Sse {
            pieces: vec![text_delta("ok"), finish("stop"), DONE.into()],
            cut: false,
        },
    ])
    .await;
    let started = std::time::Instant::now();
    // A 10 ms backoff would be far shorter: the wait is the server's Retry-After.
    let got = collect(adapter(&m, |_| {}).stream(request()))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(got.text, "ok");
    assert_eq!(got.finish, Some(FinishReason::Stop));
    assert_eq!(m.seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_a_bounded_number_of_times_then_reported_with_status() {
    let five = || Reply::Status {
        code: 503,
        headers: vec![],
        body: r#"{"error": {"message": "Server overloaded"}}"#.into(),
    };
    let m = mock(vec![five(), five(), five()]).await;
    let err = collect(adapter(&m, |s| s.max_retries = 2).stream(request()))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("HTTP 503 Service Unavailable: Server overloaded"),
        "{text}"
    );
    assert!(text.contains("gave up after 3 attempts"), "{text}");
    assert_eq!(m.seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_carries_the_server_message() {
    let m = mock(vec![Reply::Status {
        code: 401,
        headers: vec![],
        body: r#"{"error": {"message": "Authentication Fails (no such user)", "type": "authentication_error"}}"#.into(),
    }])
    .await;
    let err = collect(adapter(&m, |_| {}).stream(request()))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "openai adapter: HTTP 401 Unauthorized: Authentication Fails (no such user)"
    );
    assert_eq!(m.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_mid_stream_disconnect_keeps_the_text_and_ends_with_an_error_finish() {
    let m = mock(vec![Reply::Sse {
        pieces: vec![text_delta("Half an ans"), text_delta("wer")],
        cut: true,
    }])
    .await;
    let got = collect(adapter(&m, |_| {}).stream(request()))
        .await
        .unwrap();
    assert_eq!(got.text, "Half an answer");
    match got.finish {
        Some(FinishReason::Error { message }) => assert!(
            message.starts_with("the stream ended before the response finished"),
            "{message}"
        ),
        other => panic!("expected an error finish, got {other:?}"),
    }
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let m = mock(vec![Reply::Stall(Duration::from_secs(3))]).await;
    let err = collect(
        adapter(&m, |s| {
            s.timeout = Duration::from_millis(200);
            s.max_retries = 0;
        })
        .stream(request()),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("within 200 ms"), "{err}");
}
