//! Plugin calls that never return (`create`, `describe`, a tool call, `destroy`): each fails or
//! times out alone, and none keeps the process (or a runtime being dropped) alive.
#![cfg(unix)]

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::plugins::{self, cordis_bin, lib_name};
use cordis_host::plan::{PlanOptions, Step, load_plan};
use cordis_runtime::{Context, Inject, PluginOptions, ScopeStatus};
use cordis_tools::{ToolCall, ToolRegistry, codes};
use serde_json::{Value, json};

const BASE: &str = "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n";

fn dylib(id: &str, stem: &str, prefix: &str, timeout_ms: u64) -> String {
    format!(
        "- id: {id}\n  name: ./{}\n  config: {prefix}\n  timeout: {timeout_ms}\n",
        lib_name(stem)
    )
}

fn write(name: &str, yml: &str) -> String {
    let path = plugins::dir().join(name);
    std::fs::write(&path, yml).unwrap();
    path.display().to_string()
}

#[test]
fn check_with_a_create_or_describe_that_never_returns_exits_within_its_timeout() {
    let timeout_ms = 500;
    let yml = format!(
        "{BASE}{}{}{}",
        dylib("stuck-create", "c_create_hangs", "a_", timeout_ms),
        dylib("stuck-describe", "c_describe_hangs", "b_", timeout_ms),
        dylib("fine", "c_good", "c_", 10_000),
    );
    let file = write("hang-check.yml", &yml);
    let cache = plugins::dir().join("hang-cache");
    // The entry timeout plus a margin: a guard against a hang, not a performance threshold.
    let limit = Duration::from_millis(timeout_ms) + Duration::from_secs(10);
    let run = cordis_bin(
        &["check", &file, "--json", "--seed", "1"],
        &[("CORDIS_DYLIB_CACHE", cache.as_os_str())],
        limit,
    );
    assert_eq!(run.code, Some(1), "{}", run.err);
    let report: Value = serde_json::from_str(&run.out).unwrap();
    let entry = |id: &str| {
        report["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap()
            .clone()
    };
    for id in ["stuck-create", "stuck-describe"] {
        let e = entry(id);
        assert_eq!(e["status"], "failed", "{e}");
        let error = e["error"].as_str().unwrap();
        assert!(error.contains("timeout"), "{id}: {error}");
    }
    assert_eq!(entry("fine")["status"], "active");
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        call_id: "1".into(),
        name: name.into(),
        arguments: json!({}),
    }
}

/// A `create` that never returns times out, a tool call that never returns times out, and
/// neither they nor a `destroy` that never returns keep a runtime from being dropped (a plain
/// drop, which waits for every blocking task the runtime started).
#[test]
fn a_create_tool_call_or_destroy_that_never_returns_does_not_block_dropping_the_runtime() {
    let yml = format!(
        "{BASE}{}{}{}",
        dylib("stuck-create", "c_create_hangs", "c_", 300),
        dylib("stuck-call", "c_invoke_hangs", "i_", 10_000),
        dylib("stuck-destroy", "c_destroy_hangs", "d_", 10_000),
    );
    let file = write("hang-runtime.yml", &yml);
    let plan = load_plan(
        &yml,
        &file,
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let outcome = rt.block_on(async {
            let root = Context::root();
            let mut handles = Vec::new();
            for e in &plan.entries {
                if let Step::Plugin {
                    prepared,
                    inject,
                    timeout,
                    ..
                } = &e.step
                {
                    let options = PluginOptions {
                        label: Some(e.id.clone()),
                        inject: inject.iter().map(Inject::required_named).collect(),
                        timeout: Some(*timeout),
                        place: None,
                    };
                    handles.push(root.plugin_with(prepared.clone(), options));
                }
            }
            root.idle().await;
            let statuses: Vec<(String, ScopeStatus)> = handles
                .iter()
                .map(|h| (h.info().label.unwrap_or_default(), h.status()))
                .collect();
            let reg = root.get::<ToolRegistry>().unwrap();
            // `hang` declares a 50 ms timeout.
            let first = reg.execute(call("i_hang"), None).await;
            let second = reg.execute(call("d_echo"), None).await;
            root.dispose();
            (statuses, first, second)
        });
        drop(rt);
        let _ = done_tx.send(outcome);
    });
    // A guard against a hang, not a performance threshold.
    let (statuses, first, second) = done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the runtime was dropped despite the hung plugin calls");
    for (id, status) in &statuses {
        let expected = if id == "stuck-create" {
            ScopeStatus::Failed
        } else {
            ScopeStatus::Active
        };
        assert_eq!(*status, expected, "{id}: {statuses:?}");
    }
    assert_eq!(
        first.code.as_deref(),
        Some(codes::TOOL_TIMEOUT),
        "{first:?}"
    );
    assert_eq!(second.content, json!({"echo": {}}));
}
