//! The streamable HTTP transport against a minimal hand-written server (plain JSON answers, no
//! SSE): handshake, session id, the configured headers on every request, list and call; a
//! server down at startup (the entry pending with the reason, then active) or for good.

use std::sync::Arc;
use std::time::Duration;

use cordis_mcp::{McpConfig, McpPlugin};
use cordis_runtime::prelude::*;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{ToolCall, ToolRegistry, ToolsConfig, ToolsPlugin};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::support::{Flooded, Seen, serve, serve_or_flood};

/// A runtime with the tool registry (which needs the system prompt) for mcp entries.
fn root_with_tools() -> Context {
    let root = Context::root();
    root.plugin(ToolsPlugin, ToolsConfig::default());
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    root
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_is_listed_and_called_with_the_configured_headers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    // Owned by the test and aborted at its end.
    let server = serve(listener, seen.clone());

    let root = root_with_tools();
    let config: McpConfig = serde_json::from_value(json!({
        "transport": "http",
        "server": "mini",
        "url": url,
        "headers": {"x-api-key": "k-123"},
        "failOnStartupError": true
    }))
    .unwrap();
    let entry = root.plugin(McpPlugin, config);
    tokio::time::timeout(Duration::from_secs(30), root.idle())
        .await
        .unwrap();
    assert_eq!(entry.status(), ScopeStatus::Active, "{:?}", entry.failure());
    let reg = root.get::<ToolRegistry>().unwrap();
    let names: Vec<String> = reg.schemas(None).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["mcp__mini__whoami"]);
    let call = ToolCall {
        call_id: "1".into(),
        name: "mcp__mini__whoami".into(),
        arguments: json!({}),
    };
    let result = reg.execute(call, None).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.content["content"][0]["text"], "k-123");

    let seen = seen.lock().unwrap().clone();
    let posts: Vec<&String> = seen.iter().filter(|l| l.starts_with("POST")).collect();
    assert!(
        posts[0].starts_with("POST initialize key=k-123"),
        "{seen:?}"
    );
    assert!(
        posts.iter().all(|l| l.contains("key=k-123")),
        "every request carries the header: {seen:?}"
    );
    assert!(
        posts.iter().skip(1).all(|l| l.ends_with("session=s-1")),
        "the session id is sent back: {seen:?}"
    );
    assert!(
        posts.iter().any(|l| l.starts_with("POST tools/call")),
        "{seen:?}"
    );
    root.dispose();
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_that_went_away_and_came_back_is_reconnected() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let first = serve(listener, seen.clone());

    let root = root_with_tools();
    let config: McpConfig = serde_json::from_value(json!({
        "transport": "http",
        "server": "mini",
        "url": format!("http://{addr}/mcp"),
        "headers": {"x-api-key": "k"},
        "callTimeoutMs": 2000,
        "reconnect": {"initialDelayMs": 20, "maxDelayMs": 100, "maxAttempts": 1000}
    }))
    .unwrap();
    let entry = root.plugin(McpPlugin, config);
    tokio::time::timeout(Duration::from_secs(30), root.idle())
        .await
        .unwrap();
    assert_eq!(entry.status(), ScopeStatus::Active, "{:?}", entry.failure());
    let reg = root.get::<ToolRegistry>().unwrap();
    let whoami = || ToolCall {
        call_id: "1".into(),
        name: "mcp__mini__whoami".into(),
        arguments: json!({}),
    };
    assert!(!reg.execute(whoami(), None).await.is_error);
    let initializes = |seen: &Seen| {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("POST initialize"))
            .count()
    };
    assert_eq!(initializes(&seen), 1);

    first.abort();
    let _ = first.await;
    let down = reg.execute(whoami(), None).await;
    assert!(down.is_error, "the server is gone: {down:?}");
    let message = down.content.as_str().unwrap_or_default();
    assert!(
        message.starts_with("mcp(mini): the server cannot be reached ("),
        "{message}"
    );
    // The failed call made the entry ping, find the server gone and start reconnecting.
    let start = std::time::Instant::now();
    loop {
        let result = reg.execute(whoami(), None).await;
        if result
            .content
            .as_str()
            .is_some_and(|m| m.contains("not connected"))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the entry never noticed: {result:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let listener = TcpListener::bind(addr).await.unwrap();
    let second = serve(listener, seen.clone());
    let start = std::time::Instant::now();
    loop {
        let result = reg.execute(whoami(), None).await;
        if !result.is_error {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "never reconnected: {result:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(initializes(&seen) >= 2, "a new session was initialized");
    root.dispose();
    second.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_down_at_startup_leaves_the_entry_pending_with_the_reason_until_it_comes_up() {
    // A free port: bound, read, released.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let root = root_with_tools();
    let config: McpConfig = serde_json::from_value(json!({
        "transport": "http",
        "server": "mini",
        "url": format!("http://{addr}/mcp"),
        "callTimeoutMs": 2000,
        "reconnect": {"initialDelayMs": 20, "maxDelayMs": 100, "maxAttempts": 1000}
    }))
    .unwrap();
    let entry = root.plugin(McpPlugin, config);
    tokio::time::timeout(Duration::from_secs(30), root.idle())
        .await
        .unwrap();
    // Between retries the entry is pending with the reason (a retry may be running just now).
    let info = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let info = entry.info();
            if info.status == ScopeStatus::Pending {
                return info;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap();
    assert!(entry.failure().is_none(), "{:?}", entry.failure());
    assert!(info.missing.is_empty(), "{info:?}");
    let reason = info.waiting.expect("a pending entry says why");
    assert!(
        reason.starts_with("mcp(mini): cannot connect: ") && reason.contains("; retry "),
        "{reason}"
    );
    let reg = root.get::<ToolRegistry>().unwrap();
    assert!(reg.schemas(None).is_empty());

    let listener = TcpListener::bind(addr).await.unwrap();
    let seen: Seen = Arc::default();
    let server = serve(listener, seen.clone());
    let status = tokio::time::timeout(Duration::from_secs(30), entry.wait_for(ScopeStatus::Active))
        .await
        .expect("the entry never became active after its server came up");
    assert_eq!(status, ScopeStatus::Active);
    assert_eq!(entry.info().waiting, None);
    let names: Vec<String> = reg.schemas(None).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["mcp__mini__whoami"]);
    let call = ToolCall {
        call_id: "1".into(),
        name: "mcp__mini__whoami".into(),
        arguments: json!({}),
    };
    assert!(!reg.execute(call, None).await.is_error);
    root.dispose();
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stays_down_fails_the_entry_after_the_budget_or_at_once_without_reconnect() {
    let root = root_with_tools();
    let down = |server: &str, reconnect: Value| -> McpConfig {
        serde_json::from_value(json!({
            "transport": "stdio",
            "server": server,
            "command": "/nonexistent/mcp-server",
            "reconnect": reconnect
        }))
        .unwrap()
    };
    let budget = root.plugin(
        McpPlugin,
        down(
            "budget",
            json!({"initialDelayMs": 5, "maxDelayMs": 10, "maxAttempts": 2}),
        ),
    );
    let disabled = root.plugin(McpPlugin, down("disabled", json!({"enabled": false})));
    let wait_failed = |h: ScopeHandle| async move {
        tokio::time::timeout(Duration::from_secs(30), h.wait_for(ScopeStatus::Failed))
            .await
            .unwrap_or_else(|_| panic!("{:?}", h.info()))
    };
    assert_eq!(wait_failed(budget.clone()).await, ScopeStatus::Failed);
    let message = budget.failure().unwrap().to_string();
    assert!(
        message.starts_with(
            "mcp(budget): gave up after 3 attempts to connect (reconnect.maxAttempts): cannot connect: cannot start \"/nonexistent/mcp-server\""
        ),
        "{message}"
    );
    assert_eq!(wait_failed(disabled.clone()).await, ScopeStatus::Failed);
    let message = disabled.failure().unwrap().to_string();
    assert!(
        message.starts_with("mcp(disabled): initial connection or tool synchronization failed: cannot connect: ")
            && message.ends_with("(reconnect.enabled is false, so the entry does not retry; enable it or start the server first)"),
        "{message}"
    );
    root.dispose();
    tokio::time::timeout(Duration::from_secs(30), root.tasks_finished())
        .await
        .unwrap();
    assert!(root.live().is_zero(), "{:?}", root.live());
}

#[test]
fn a_header_http_cannot_carry_is_a_config_error() {
    let config: McpConfig = serde_json::from_value(json!({
        "transport": "http", "server": "h", "url": "http://x", "headers": {"x-a": "line\nbreak"}
    }))
    .unwrap();
    let err = config.check().unwrap_err().to_string();
    assert!(
        err.contains("header \"x-a\" has characters HTTP does not allow"),
        "{err}"
    );
}

/// Regression (issue 24, high 1): an event stream that never ends an event grew the host's
/// memory (~250 MB/s) until the call timed out. Now the event is cut at `maxMessageBytes`: the
/// call fails, and the client stops reading, so what the server could push is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_that_never_ends_an_event_fails_the_call_at_the_message_limit() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let flooded: Flooded = Arc::default();
    let server = serve_or_flood(listener, Seen::default(), Some(flooded.clone()));
    let root = root_with_tools();
    let config: McpConfig = serde_json::from_value(json!({
        "transport": "http",
        "server": "flood",
        "url": url,
        "maxMessageBytes": 1 << 20,
        "failOnStartupError": true,
        "reconnect": {"enabled": false}
    }))
    .unwrap();
    let entry = root.plugin(McpPlugin, config);
    tokio::time::timeout(Duration::from_secs(30), root.idle())
        .await
        .unwrap();
    assert_eq!(entry.status(), ScopeStatus::Active, "{:?}", entry.failure());
    let reg = root.get::<ToolRegistry>().unwrap();
    let call = ToolCall {
        call_id: "1".into(),
        name: "mcp__flood__whoami".into(),
        arguments: json!({}),
    };
    let result = tokio::time::timeout(Duration::from_secs(30), reg.execute(call, None))
        .await
        .expect("the call ends long before its 60 s timeout");
    assert!(result.is_error, "{result:?}");
    let sent = flooded.load(std::sync::atomic::Ordering::SeqCst);
    // 1 MiB of event plus what the sockets buffer; the unbounded client took all 256 MiB.
    assert!(sent < 32 << 20, "the server pushed {sent} bytes");
    root.dispose();
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_nested_past_the_parser_limit_fails_its_call_at_once_with_the_depth() {
    // It used to be no answer: unparsable, dropped, and the call waited out its 60 s timeout.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = serve(listener, Seen::default());
    let root = root_with_tools();
    let config: McpConfig = serde_json::from_value(json!({
        "transport": "http",
        "server": "deep",
        "url": url,
        "headers": {"x-api-key": "deep"},
        "failOnStartupError": true,
        "reconnect": {"enabled": false}
    }))
    .unwrap();
    let entry = root.plugin(McpPlugin, config);
    tokio::time::timeout(Duration::from_secs(30), root.idle())
        .await
        .unwrap();
    assert_eq!(entry.status(), ScopeStatus::Active, "{:?}", entry.failure());
    let reg = root.get::<ToolRegistry>().unwrap();
    let call = ToolCall {
        call_id: "1".into(),
        name: "mcp__deep__whoami".into(),
        arguments: json!({}),
    };
    let result = tokio::time::timeout(Duration::from_secs(30), reg.execute(call, None))
        .await
        .expect("the call ends long before its 60 s timeout");
    assert!(result.is_error, "{result:?}");
    let text = result.content.to_string();
    assert!(
        text.contains(
            "the server's answer nests 1003 levels, deeper than the 120 this client reads"
        ),
        "{text}"
    );
    root.dispose();
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_requires_task_augmentation_is_left_out_and_the_others_offered() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let server = serve(listener, seen.clone());
    let root = root_with_tools();
    let config: McpConfig = serde_json::from_value(json!({
        "transport": "http",
        "server": "mini",
        "url": url,
        "headers": {"x-api-key": "tasks"},
        "failOnStartupError": true
    }))
    .unwrap();
    let entry = root.plugin(McpPlugin, config);
    tokio::time::timeout(Duration::from_secs(30), root.idle())
        .await
        .unwrap();
    assert_eq!(entry.status(), ScopeStatus::Active, "{:?}", entry.failure());
    let reg = root.get::<ToolRegistry>().unwrap();
    let names: Vec<String> = reg.schemas(None).into_iter().map(|s| s.name).collect();
    // `background` has `execution.taskSupport: "required"`; `later` only "optional".
    assert_eq!(names, ["mcp__mini__later", "mcp__mini__whoami"]);
    root.dispose();
    server.abort();
}
