//! Host memory while a hostile streamable-HTTP server answers a tool call with a server-sent
//! event that never ends (64 KiB `data:` lines, never a blank line), and the bound
//! `maxMessageBytes` puts on it. Before the bound the client buffered the event until the
//! call timed out: ~250 MB/s, 3 GB in 10 s.
//!
//! A measurement, not a test: each limit runs in a fresh process (this bench runs itself with
//! `--limit BYTES`) and prints how many bytes the server pushed before the client gave up, how
//! long the call took to fail, and the peak resident set growth of the call (`VmHWM`, reset
//! through `/proc/self/clear_refs`).
//!
//! `cargo bench -p cordis-mcp --bench sse_memory`

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cordis_mcp::{McpConfig, McpPlugin};
use cordis_runtime::Context;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{ToolCall, ToolRegistry, ToolsConfig, ToolsPlugin};
use serde_json::json;

#[path = "../../../benches/support/peak.rs"]
mod peak;

use peak::{reset_peak, status_kib};

fn main() {
    peak::run_each("--limit", &["1048576", "4194304", "16777216"], |limit| {
        measure(usize::try_from(limit).unwrap_or(usize::MAX));
    });
}

/// One flooded call with `maxMessageBytes: limit`.
fn measure(limit: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}/mcp", listener.local_addr().expect("an address"));
        let flooded: support::Flooded = Arc::default();
        let server =
            support::serve_or_flood(listener, support::Seen::default(), Some(flooded.clone()));
        let root = Context::root();
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        let config: McpConfig = serde_json::from_value(json!({
            "transport": "http",
            "server": "flood",
            "url": url,
            "maxMessageBytes": limit,
            "failOnStartupError": true,
            "reconnect": {"enabled": false}
        }))
        .expect("a config");
        let _entry = root.plugin(McpPlugin, config);
        root.idle().await;
        let reg = root.get::<ToolRegistry>().expect("the registry");
        let call = ToolCall {
            call_id: "1".into(),
            name: "mcp__flood__whoami".into(),
            arguments: json!({}),
        };
        reset_peak();
        let before = status_kib("VmRSS:");
        let started = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(60), reg.execute(call, None))
            .await
            .expect("the call ends");
        let took = started.elapsed();
        let grown = status_kib("VmHWM:").saturating_sub(before);
        let pushed = flooded.load(std::sync::atomic::Ordering::SeqCst);
        println!(
            "sse memory: maxMessageBytes {:>3} MiB: the call failed: {} after {:.0} ms; the server pushed {:.1} MiB; peak RSS +{:.1} MiB",
            limit >> 20,
            result.is_error,
            took.as_secs_f64() * 1000.0,
            pushed as f64 / f64::from(1 << 20),
            grown as f64 / 1024.0
        );
        root.dispose();
        server.abort();
    });
}
