//! The `mcp` plugin against the fixture server: naming, calls, pagination, re-sync and
//! rollback, crash and reconnect, timeouts and cancellation, the scrubbed environment, and
//! disposal that leaves no process.
//!
//! One binary: these tests, the client's features beyond tools (`features`), and the heap bound
//! of a large result (`result_memory`, which counts in a process of its own).
//!
//! Deadlines here only turn a hang into a failure; nothing measures speed.

use std::path::Path;
use std::time::Duration;

use cordis_mcp::{McpConfig, McpPlugin, Reconnect, TRACE_SYNC, public_name};
use cordis_runtime::FnPlugin;
use cordis_runtime::prelude::*;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{ToolCall, ToolDefinition, ToolOutput, ToolRegistry, ToolResult, ToolSchema};
use cordis_tools::{ToolsConfig, ToolsPlugin};
use serde_json::{Value, json};

mod features;
mod result_memory;

const DEADLINE: Duration = Duration::from_secs(30);

fn fixture() -> &'static str {
    env!("CARGO_BIN_EXE_cordis-mcp-fixture")
}

fn cfg(server: &str, args: &[&str]) -> McpConfig {
    McpConfig::stdio(
        server,
        fixture(),
        args.iter().map(|s| (*s).to_owned()).collect(),
    )
}

fn root_with_tools() -> Context {
    let root = Context::root();
    root.plugin(ToolsPlugin, ToolsConfig::default());
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    root
}

/// Waits until nothing loads (an entry waiting for `tools` starts as soon as it is provided),
/// then reads the entry's status.
async fn settle(handle: &ScopeHandle) -> ScopeStatus {
    let root = handle.context().expect("live").root_context();
    tokio::time::timeout(DEADLINE, root.idle())
        .await
        .expect("the entry settles");
    handle.status()
}

fn names(root: &Context) -> Vec<String> {
    let reg = root.get::<ToolRegistry>().unwrap();
    reg.schemas(None).into_iter().map(|s| s.name).collect()
}

async fn call(root: &Context, name: &str, args: Value) -> ToolResult {
    let reg = root.get::<ToolRegistry>().unwrap();
    let call = ToolCall {
        call_id: "c1".into(),
        name: name.into(),
        arguments: args,
    };
    tokio::time::timeout(DEADLINE, reg.execute(call, None))
        .await
        .expect("the call returns")
}

fn text(result: &ToolResult) -> String {
    match &result.content {
        Value::String(s) => s.clone(),
        other => other["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Polls `check` until it holds; panics with `what` after the deadline.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while !check().await {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Is process `pid` gone (no entry, or a zombie that no longer runs)?
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_named_listed_and_called_with_the_raw_name_on_the_wire() {
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, cfg("fx", &[]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let dotted = public_name("fx", "admin.reset");
    let mut expected: Vec<String> = [
        "add", "greet", "fail", "crash", "slow", "env", "pid", "toggle", "image",
    ]
    .iter()
    .map(|t| format!("mcp__fx__{t}"))
    .collect();
    expected.push(dotted.clone());
    expected.sort();
    assert_eq!(names(&root), expected);

    let sum = call(&root, "mcp__fx__add", json!({"a": 3, "b": 7})).await;
    assert!(!sum.is_error, "{sum:?}");
    assert_eq!(text(&sum), "10");
    assert_eq!(
        sum.content["structuredContent"],
        json!({"sum": 10.0}),
        "structured content is kept"
    );
    let hello = call(&root, "mcp__fx__greet", json!({"name": "Ada"})).await;
    assert_eq!(text(&hello), "Hello, Ada!");
    // The normalized public name reaches the server under its raw, dotted name.
    let reset = call(&root, &dotted, json!({})).await;
    assert_eq!(text(&reset), "reset", "{reset:?}");

    // An image block is passed on as it came (the model adapter decides what the model gets).
    let image = call(&root, "mcp__fx__image", json!({})).await;
    assert_eq!(image.content["content"][0]["text"], "a pixel");
    assert_eq!(image.content["content"][1]["type"], "image");
    assert_eq!(image.content["content"][1]["mimeType"], "image/png");

    // isError: a failed call with the server's text.
    let fail = call(&root, "mcp__fx__fail", json!({})).await;
    assert!(fail.is_error);
    assert_eq!(fail.content, json!("fail: it failed on purpose"));
    // A JSON-RPC error: the server no longer knows `greet` (changed without notifying).
    let _ = call(
        &root,
        "mcp__fx__toggle",
        json!({"remove": ["greet"], "silent": true}),
    )
    .await;
    let gone = call(&root, "mcp__fx__greet", json!({"name": "Ada"})).await;
    assert!(gone.is_error);
    assert_eq!(gone.content, json!("unknown tool: greet"));

    root.dispose();
    assert!(names_after_dispose_are_empty(&root));
}

fn names_after_dispose_are_empty(root: &Context) -> bool {
    root.get::<ToolRegistry>().is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_with_the_same_tool_name_coexist_and_a_server_name_used_twice_is_contested() {
    let root = root_with_tools();
    let a = root.plugin(McpPlugin, cfg("alpha", &["--tools", "add,pid"]));
    let b = root.plugin(McpPlugin, cfg("beta", &["--tools", "add,pid"]));
    assert_eq!(settle(&a).await, ScopeStatus::Active);
    assert_eq!(settle(&b).await, ScopeStatus::Active);
    assert_eq!(
        names(&root),
        [
            "mcp__alpha__add",
            "mcp__alpha__pid",
            "mcp__beta__add",
            "mcp__beta__pid"
        ]
    );
    // A second entry with a server name in use: both report the conflict, the shared public
    // name is withheld, whichever started first; nothing retries as if a server were down.
    let again = root.plugin(McpPlugin, cfg("alpha", &["--tools", "add"]));
    assert_eq!(settle(&again).await, ScopeStatus::Active);
    let conflicts = again.info().conflicts;
    assert_eq!(conflicts, a.info().conflicts);
    assert!(
        conflicts[0].contains("mcp server \"alpha\"")
            && conflicts[0].contains("tool \"mcp__alpha__add\""),
        "{conflicts:?}"
    );
    assert_eq!(
        names(&root),
        ["mcp__alpha__pid", "mcp__beta__add", "mcp__beta__pid"]
    );
    again.dispose();
    let pa = text(&call(&root, "mcp__alpha__pid", json!({})).await);
    let pb = text(&call(&root, "mcp__beta__pid", json!({})).await);
    assert_ne!(pa, pb, "each public name reaches its own server");
    assert_eq!(
        text(&call(&root, "mcp__beta__add", json!({"a": 1, "b": 2})).await),
        "3"
    );
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_with_a_schema_the_registry_refuses_is_left_out_alone() {
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "add,broken,greet"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert_eq!(names(&root), ["mcp__fx__add", "mcp__fx__greet"]);
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_of_a_paginated_list_is_registered_whatever_the_server_order() {
    let root = root_with_tools();
    let entry = root.plugin(
        McpPlugin,
        cfg(
            "pages",
            &[
                "--tools",
                "add",
                "--extra",
                "7",
                "--page-size",
                "3",
                "--seed",
                "5",
            ],
        ),
    );
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let mut expected = vec!["mcp__pages__add".to_owned()];
    expected.extend((0..7).map(|i| format!("mcp__pages__extra_{i:02}")));
    assert_eq!(names(&root), expected);
    root.dispose();
}

fn syncs(root: &Context) -> Vec<String> {
    root.trace_details(TRACE_SYNC)
}

async fn toggle_and_wait(root: &Context, args: Value) -> String {
    let before = syncs(root).len();
    let r = call(root, "mcp__fx__toggle", args).await;
    assert!(!r.is_error, "{r:?}");
    eventually("a re-sync", || {
        let n = syncs(root).len();
        async move { n > before }
    })
    .await;
    syncs(root).last().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_resyncs_a_failing_fetch_keeps_and_a_shared_name_is_contested() {
    let root = root_with_tools();
    // A tool another plugin owns, which the server will later try to take.
    let owner = FnPlugin::new("owner", |ctx: Context, _: ()| async move {
        let reg = ctx.require::<ToolRegistry>()?;
        let schema = ToolSchema {
            name: "mcp__fx__clash".into(),
            description: "taken".into(),
            parameters: json!({"type": "object"}).into(),
        };
        let def = ToolDefinition::new(schema, |_, _| async { Ok(ToolOutput::new("mine")) });
        reg.register(&ctx, def)?;
        Ok(())
    })
    .inject(Inject::required(ToolRegistry::NAME));
    root.plugin(owner, ());
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "add,toggle"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let base = ["mcp__fx__add", "mcp__fx__clash", "mcp__fx__toggle"];
    assert_eq!(names(&root), base);

    let outcome = toggle_and_wait(&root, json!({"add": ["x1"]})).await;
    assert!(outcome.ends_with("fx: applied"), "{outcome}");
    let with_x1 = [
        "mcp__fx__add",
        "mcp__fx__clash",
        "mcp__fx__toggle",
        "mcp__fx__x1",
    ];
    assert_eq!(names(&root), with_x1);

    // The fetch fails: the previous set stays.
    let outcome = toggle_and_wait(&root, json!({"add": ["x2"], "failList": true})).await;
    assert!(
        outcome.contains("kept (mcp(fx): tools/list failed"),
        "{outcome}"
    );
    assert_eq!(names(&root), with_x1);

    // An invalid list (a name twice): kept as well.
    let outcome = toggle_and_wait(&root, json!({"duplicate": true})).await;
    assert!(
        outcome.contains("listed tool \"add\" more than once"),
        "{outcome}"
    );
    assert_eq!(names(&root), with_x1);

    // `clash` is another entry's too: the set applies and the name is contested, withheld
    // from both owners (the first to register does not win), instead of a server outage.
    let outcome = toggle_and_wait(&root, json!({"add": ["clash", "x3"]})).await;
    assert!(outcome.ends_with("fx: applied"), "{outcome}");
    assert_eq!(
        names(&root),
        [
            "mcp__fx__add",
            "mcp__fx__toggle",
            "mcp__fx__x1",
            "mcp__fx__x2",
            "mcp__fx__x3"
        ]
    );
    assert!(entry.info().conflicts[0].contains("tool \"mcp__fx__clash\" is claimed by entries"));
    assert!(call(&root, "mcp__fx__clash", json!({})).await.is_error);
    assert_eq!(
        text(&call(&root, "mcp__fx__add", json!({"a": 2, "b": 2})).await),
        "4"
    );

    // The server drops the name: released to the other owner.
    let outcome = toggle_and_wait(&root, json!({"remove": ["clash", "x1"]})).await;
    assert!(outcome.ends_with("fx: applied"), "{outcome}");
    assert_eq!(
        call(&root, "mcp__fx__clash", json!({})).await.content,
        json!("mine")
    );
    assert_eq!(
        names(&root),
        [
            "mcp__fx__add",
            "mcp__fx__clash",
            "mcp__fx__toggle",
            "mcp__fx__x2",
            "mcp__fx__x3"
        ]
    );
    root.dispose();
}

fn fast_reconnect(max_attempts: u32) -> Reconnect {
    Reconnect {
        enabled: true,
        initial_delay_ms: 10,
        max_delay_ms: 40,
        max_attempts,
    }
}

/// `sh -c` that runs the fixture while `marker` is absent (creating it), and fails once it
/// exists: a server that starts once and cannot come back.
fn once_then_down(server: &str, marker: &Path) -> McpConfig {
    let script = format!(
        "if [ -e '{m}' ]; then exit 1; fi; touch '{m}'; exec '{f}' --tools crash,pid",
        m = marker.display(),
        f = fixture()
    );
    let mut c = McpConfig::stdio(server, "sh", vec!["-c".into(), script]);
    c.reconnect = fast_reconnect(3);
    c
}

/// Crashes the server behind `server` and waits until its `pid` tool answers from another
/// process; false if its tools went away instead (the entry gave up).
async fn crash_and_come_back(root: &Context, server: &str) -> bool {
    let pid = format!("mcp__{server}__pid");
    let first = text(&call(root, &pid, json!({})).await);
    assert_eq!(
        text(&call(root, &format!("mcp__{server}__crash"), json!({})).await),
        "crashing"
    );
    let start = std::time::Instant::now();
    loop {
        if !names(root).contains(&pid) {
            return false;
        }
        let r = call(root, &pid, json!({})).await;
        if !r.is_error && text(&r) != first {
            return true;
        }
        assert!(start.elapsed() < DEADLINE, "neither back nor given up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_stayed_up_max_delay_resets_the_reconnect_budget() {
    let root = root_with_tools();
    // One reconnect in the budget; a connection up for 100 ms earns it back.
    let mut lasting = cfg("lasting", &["--tools", "crash,pid"]);
    lasting.reconnect = Reconnect {
        enabled: true,
        initial_delay_ms: 10,
        max_delay_ms: 100,
        max_attempts: 1,
    };
    // The same budget, but earned back only after a minute up.
    let mut hasty = cfg("hasty", &["--tools", "crash,pid"]);
    hasty.reconnect = Reconnect {
        max_delay_ms: 60_000,
        ..lasting.reconnect.clone()
    };
    let lasting = root.plugin(McpPlugin, lasting);
    let hasty = root.plugin(McpPlugin, hasty);
    assert_eq!(settle(&lasting).await, ScopeStatus::Active);
    assert_eq!(settle(&hasty).await, ScopeStatus::Active);

    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            crash_and_come_back(&root, "lasting").await,
            "round {round}: each crash after 100 ms up is reconnected"
        );
    }
    assert!(
        crash_and_come_back(&root, "hasty").await,
        "the one reconnect of the budget"
    );
    assert!(
        !crash_and_come_back(&root, "hasty").await,
        "a second crash within a minute finds the budget spent"
    );
    assert_eq!(
        hasty.status(),
        ScopeStatus::Active,
        "the entry itself stays"
    );
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_server_reconnects_and_after_the_budget_its_tools_are_unregistered() {
    let root = root_with_tools();
    let mut c = cfg("fx", &["--tools", "crash,pid"]);
    c.reconnect = fast_reconnect(5);
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let first = text(&call(&root, "mcp__fx__pid", json!({})).await);
    let crash = call(&root, "mcp__fx__crash", json!({})).await;
    assert_eq!(
        text(&crash),
        "crashing",
        "the reply arrives before the exit"
    );
    eventually("a new server process", || {
        let root = root.clone();
        let first = first.clone();
        async move {
            let r = call(&root, "mcp__fx__pid", json!({})).await;
            !r.is_error && text(&r) != first
        }
    })
    .await;
    assert!(
        process_gone(first.parse().unwrap()),
        "the crashed process is not running"
    );

    // A server that cannot come back: the budget runs out and its tools go.
    let dir = tempfile::tempdir().unwrap();
    let down = root.plugin(
        McpPlugin,
        once_then_down("down", &dir.path().join("started")),
    );
    assert_eq!(settle(&down).await, ScopeStatus::Active);
    assert!(names(&root).contains(&"mcp__down__pid".to_owned()));
    let crash = call(&root, "mcp__down__crash", json!({})).await;
    assert_eq!(text(&crash), "crashing");
    eventually("the tools of the dead server to go", || {
        let gone = !names(&root).iter().any(|n| n.starts_with("mcp__down__"));
        async move { gone }
    })
    .await;
    assert_eq!(down.status(), ScopeStatus::Active, "the entry itself stays");
    assert!(
        names(&root).contains(&"mcp__fx__pid".to_owned()),
        "the other server is untouched"
    );
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_server_fails_the_entry_only_with_fail_on_startup_error_and_is_pending_otherwise() {
    let root = root_with_tools();
    let mut strict = McpConfig::stdio("strict", "/nonexistent/mcp-server", vec![]);
    strict.fail_on_startup_error = true;
    let strict = root.plugin(McpPlugin, strict);
    assert_eq!(settle(&strict).await, ScopeStatus::Failed);
    let message = strict.failure().unwrap().to_string();
    assert!(
        message.contains("mcp(strict): initial connection or tool synchronization failed")
            && message.contains("/nonexistent/mcp-server"),
        "{message}"
    );

    // Lenient (the default): pending with the reason while the server cannot start (it exits
    // until `go` exists), then active with its tools once it can.
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "if [ ! -e '{g}' ]; then exit 1; fi; exec '{f}' --tools add",
        g = go.display(),
        f = fixture()
    );
    let mut lenient = McpConfig::stdio("late", "sh", vec!["-c".into(), script]);
    lenient.reconnect = fast_reconnect(100_000);
    let lenient = root.plugin(McpPlugin, lenient);
    settle(&lenient).await;
    let info = tokio::time::timeout(DEADLINE, async {
        // A retry may be running just now; between retries the entry is pending.
        loop {
            let info = lenient.info();
            if info.status == ScopeStatus::Pending {
                return info;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap();
    let reason = info.waiting.expect("the reason");
    assert!(
        reason.starts_with("mcp(late): cannot connect: ") && reason.contains("; retry "),
        "{reason}"
    );
    assert!(!names(&root).iter().any(|n| n.starts_with("mcp__late__")));
    std::fs::write(&go, "").unwrap();
    let up = tokio::time::timeout(DEADLINE, lenient.wait_for(ScopeStatus::Active)).await;
    assert_eq!(up.unwrap(), ScopeStatus::Active);
    assert!(names(&root).contains(&"mcp__late__add".to_owned()));
    assert_eq!(
        text(&call(&root, "mcp__late__add", json!({"a": 1, "b": 1})).await),
        "2"
    );
    root.dispose();
}

fn log_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_and_a_dropped_call_both_cancel_the_request_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fixture.log");
    let root = root_with_tools();
    let mut c = cfg("fx", &["--tools", "slow", "--log", log.to_str().unwrap()]);
    c.call_timeout_ms = 300;
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let slow = call(&root, "mcp__fx__slow", json!({"ms": 600_000})).await;
    assert!(slow.is_error);
    // No progress within callTimeoutMs: the wait ends before the ceiling (maxCallMs, the
    // registry's TOOL_TIMEOUT; see `features::progress`).
    assert_eq!(
        slow.content,
        json!(
            "mcp(fx): no answer and no progress within 300 ms (callTimeoutMs); the request was cancelled on the server"
        ),
        "{slow:?}"
    );
    eventually("the server to hear the timeout's cancellation", || {
        let n = log_lines(&log)
            .iter()
            .filter(|l| *l == "cancelled slow")
            .count();
        async move { n == 1 }
    })
    .await;

    // A caller that stops waiting (an aborted turn) cancels too.
    let reg = root.get::<ToolRegistry>().unwrap();
    let call = ToolCall {
        call_id: "c2".into(),
        name: "mcp__fx__slow".into(),
        arguments: json!({"ms": 600_000}),
    };
    let running = tokio::spawn(async move { reg.execute(call, None).await });
    eventually("the second slow call to start", || {
        let n = log_lines(&log)
            .iter()
            .filter(|l| *l == "slow started")
            .count();
        async move { n == 2 }
    })
    .await;
    running.abort();
    let _ = running.await;
    eventually("the server to hear the dropped call's cancellation", || {
        let n = log_lines(&log)
            .iter()
            .filter(|l| *l == "cancelled slow")
            .count();
        async move { n == 2 }
    })
    .await;
    root.dispose();
}

/// The half of the scrubbing test that runs in a child test process whose environment holds a
/// secret (setting a variable in this process would need `unsafe`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrub_child() {
    let Ok(secret) = std::env::var("CORDIS_TEST_SECRET_TOKEN") else {
        return; // Only meaningful when started by `the_server_sees_a_scrubbed_environment`.
    };
    assert_eq!(secret, "hunter2");
    let root = root_with_tools();
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg("fx", &["--tools", "env,cwd"]);
    c.env.insert("GIVEN".into(), "yes".into());
    c.cwd = Some(dir.path().to_owned());
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let env = |name: &'static str| {
        let root = root.clone();
        async move { text(&call(&root, "mcp__fx__env", json!({"name": name})).await) }
    };
    assert_eq!(
        env("CORDIS_TEST_SECRET_TOKEN").await,
        "<unset>",
        "the host's secret leaked"
    );
    assert_eq!(env("GIVEN").await, "yes", "the entry's env is passed");
    assert_eq!(
        env("PATH").await,
        std::env::var("PATH").unwrap(),
        "PATH is passed"
    );
    let cwd = text(&call(&root, "mcp__fx__cwd", json!({})).await);
    assert_eq!(
        std::fs::canonicalize(cwd).unwrap(),
        std::fs::canonicalize(dir.path()).unwrap(),
        "the server runs in `cwd`"
    );
    println!("SCRUB-CHILD-RAN");
    root.dispose();
}

#[test]
fn the_server_sees_a_scrubbed_environment() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "scrub_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("CORDIS_TEST_SECRET_TOKEN", "hunter2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("SCRUB-CHILD-RAN"),
        "the child test did not run: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposing_the_entry_kills_a_server_that_ignores_shutdown_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fixture.log");
    // `sh` stays the parent (no exec), so the fixture is a grandchild of this process: killing
    // only the direct child would orphan it. `--linger` ignores SIGTERM and a closed stdin.
    let script = format!(
        "'{f}' --tools pid --linger --log '{l}'; true",
        f = fixture(),
        l = log.display()
    );
    let root = root_with_tools();
    let entry = root.plugin(
        McpPlugin,
        McpConfig::stdio("fx", "sh", vec!["-c".into(), script]),
    );
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let pid: u32 = text(&call(&root, "mcp__fx__pid", json!({})).await)
        .parse()
        .unwrap();
    assert!(!process_gone(pid), "the server runs");
    entry.dispose();
    eventually("the server process to be gone", || {
        let gone = process_gone(pid);
        async move { gone }
    })
    .await;
    assert!(names(&root).is_empty(), "its tools are unregistered");
    // Whether the closed stdin reached it first ("lingering" in the log) is a race that does
    // not matter: it ignores both that and SIGTERM, so only the group kill ends it.
    assert!(
        log_lines(&log).iter().any(|l| l.starts_with("start ")),
        "{:?}",
        log_lines(&log)
    );
    root.dispose();
}
