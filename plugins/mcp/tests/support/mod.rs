//! A minimal hand-written streamable-HTTP MCP server (plain JSON answers), shared by the HTTP
//! tests and the SSE memory bench: it can flood a call with an event that never ends, or
//! answer one nested past the parser's limit.
#![allow(
    dead_code,
    reason = "shared by the tests and a bench; each uses only some of it"
)]

pub mod oauth;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// What the server saw: one `METHOD path rpc-method header` line per request.
pub type Seen = Arc<Mutex<Vec<String>>>;

pub async fn answer(stream: TcpStream, seen: Seen) {
    answer_or_flood(stream, seen, None).await;
}

/// How many body bytes a flooding server wrote before the client went away.
pub type Flooded = Arc<std::sync::atomic::AtomicUsize>;

/// [`answer`]; with `flood`, a `tools/call` is answered by an event stream of 64 KiB `data:`
/// lines that never ends an event (at most 256 MiB, so the test ends whatever the client does).
pub async fn answer_or_flood(stream: TcpStream, seen: Seen, flood: Option<Flooded>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let (mut length, mut key, mut session) = (0usize, String::new(), String::new());
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "x-api-key" => key = value.trim().to_owned(),
                "mcp-session-id" => session = value.trim().to_owned(),
                _ => {}
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        let method = request_line
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_owned();
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let rpc = message["method"].as_str().unwrap_or("-").to_owned();
        seen.lock()
            .unwrap()
            .push(format!("{method} {rpc} key={key} session={session}"));
        let result = match rpc.as_str() {
            "initialize" => Some(json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mini", "version": "1"}
            })),
            // A client sending the key `tasks` is also offered a tool that can only be called
            // as a task and one that may be.
            "tools/list" if key == "tasks" => Some(json!({"tools": [
                {"name": "whoami", "description": "The x-api-key it was sent.", "inputSchema": {"type": "object"}},
                {"name": "background", "description": "Only as a task.", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "required"}},
                {"name": "later", "description": "As a task or not.", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "optional"}}
            ]})),
            "tools/list" => Some(json!({"tools": [
                {"name": "whoami", "description": "The x-api-key it was sent.", "inputSchema": {"type": "object"}}
            ]})),
            // A client sending the key `deep` is answered with a result nested 1,000 levels.
            "tools/call" if key == "deep" => {
                let deep = (0..1000).fold(json!(1), |inner, _| json!([inner]));
                Some(
                    json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"v": deep}}),
                )
            }
            "tools/call" => Some(json!({"content": [{"type": "text", "text": key}]})),
            _ => None,
        };
        if let (Some(flooded), "tools/call") = (&flood, rpc.as_str()) {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            if reader.get_mut().write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let line = format!("data: {}\n", "x".repeat(64 << 10));
            for _ in 0..(256 << 20) / line.len() {
                if reader.get_mut().write_all(line.as_bytes()).await.is_err() {
                    return;
                }
                flooded.fetch_add(line.len(), std::sync::atomic::Ordering::SeqCst);
            }
            return;
        }
        let response = match (method.as_str(), result) {
            ("POST", Some(result)) => {
                let body =
                    json!({"jsonrpc": "2.0", "id": message["id"], "result": result}).to_string();
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s-1\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
            ("POST", None) => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned(),
            ("GET", _) => "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n".to_owned(),
            _ => "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_owned(),
        };
        if reader
            .get_mut()
            .write_all(response.as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Serves on `listener` until aborted.
pub fn serve(listener: TcpListener, seen: Seen) -> tokio::task::JoinHandle<()> {
    serve_or_flood(listener, seen, None)
}

/// [`serve`], flooding every `tools/call` with `flood` (see [`answer_or_flood`]).
///
/// Connections are driven inside the server's own task, not spawned: once an aborted server's
/// handle has been awaited, every connection of it is closed.
pub fn serve_or_flood(
    listener: TcpListener,
    seen: Seen,
    flood: Option<Flooded>,
) -> tokio::task::JoinHandle<()> {
    use futures_util::StreamExt;
    tokio::spawn(async move {
        let mut connections = futures_util::stream::FuturesUnordered::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        connections.push(answer_or_flood(stream, seen.clone(), flood.clone()));
                    }
                    Err(_) => return,
                },
                Some(()) = connections.next(), if !connections.is_empty() => {}
            }
        }
    })
}
