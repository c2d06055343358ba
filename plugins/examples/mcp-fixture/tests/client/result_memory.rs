//! Host memory while an MCP server answers a 3 MB text result (issue 40, finding 8): the
//! answer is read (it is under `maxMessageBytes`), parsed, cut to `maxResultText`, and only the
//! cut result is kept. Counted by a global allocator that tracks the bytes live on the heap:
//! the peak growth of the call stays under [`PEAK_BOUND`], and what is still live after it,
//! the result included, under [`KEPT_BOUND`]. This prints the numbers:
//! `cargo test -p cordis-mcp-fixture --test client result_memory -- --nocapture`.
//!
//! Nothing else may run in the process while it counts, and the binary's other tests run in
//! parallel: the test re-executes this binary with [`ENV_CHILD`] set and `--exact
//! result_memory::measured_child`, which turns `measured_child` into the call alone in its
//! process. Elsewhere `measured_child` returns at once; the allocator only observes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cordis_mcp::{McpConfig, McpPlugin};
use cordis_runtime::prelude::*;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{ToolCall, ToolRegistry, ToolsConfig, ToolsPlugin};
use serde_json::json;

/// Set in the re-executed process: `measured_child` measures there.
const ENV_CHILD: &str = "CORDIS_MCP_FIXTURE_MEASURE";

/// The answer's size.
const ANSWER: usize = 3_000_000;

/// The most the live heap may grow while the call runs: rmcp's line buffer (it doubles as it
/// reads: up to twice the answer), the parsed text, and the JSON result it is moved into and
/// cut in, not all at once. (Before issue 40: five times the answer, and the whole answer kept.)
const PEAK_BOUND: usize = 4 * ANSWER;

/// The most still live once the call returned: the cut result (64 KiB) and rmcp's line buffer,
/// which keeps the capacity of the largest line it read (at most `maxMessageBytes` rounded up
/// to a power of two), never the answer itself.
const KEPT_BOUND: usize = 3 * ANSWER / 2;

/// Counts the bytes live on the heap, and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; the counters only observe. (A global
// allocator is unsafe to implement; counting is the one way to see the heap, not the
// allocator's retained pages, which `VmRSS` shows.)
#[allow(
    unsafe_code,
    reason = "a global allocator implements the unsafe `GlobalAlloc` trait"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the caller promised for `ptr`, `layout` and `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

#[test]
fn a_three_megabyte_mcp_result_is_cut_without_holding_more_than_the_bound() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "result_memory::measured_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV_CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the measured process failed");
    assert!(
        stdout.contains("heap peak"),
        "the measured process ran no call"
    );
}

#[test]
fn measured_child() {
    if std::env::var_os(ENV_CHILD).is_none() {
        return; // not the measured process
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(measure());
}

/// The measured call, in a process where nothing else runs.
async fn measure() {
    let root = Context::root();
    root.plugin(ToolsPlugin, ToolsConfig::default());
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    let config = McpConfig::stdio(
        "fx",
        env!("CARGO_BIN_EXE_cordis-mcp-fixture"),
        vec!["--tools".into(), "big".into()],
    );
    let _entry = root.plugin(McpPlugin, config);
    tokio::time::timeout(Duration::from_secs(30), root.idle())
        .await
        .expect("the entry settles");
    let reg = root.get::<ToolRegistry>().expect("the registry");
    let call = ToolCall {
        call_id: "c1".into(),
        name: "mcp__fx__big".into(),
        arguments: json!({"bytes": ANSWER}),
    };

    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let result = tokio::time::timeout(Duration::from_secs(60), reg.execute(call, None))
        .await
        .expect("the call returns");
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    let kept = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    let size = serde_json::to_string(&result.content).unwrap().len();
    println!(
        "a {ANSWER}-byte answer: heap peak +{peak} bytes, still live +{kept} bytes, result {size} bytes"
    );
    assert!(!result.is_error, "{result:?}");
    assert!(
        size <= cordis_tools::MAX_RESULT_TEXT + 256,
        "{size} bytes kept"
    );
    assert!(
        peak <= PEAK_BOUND,
        "the call grew the heap by {peak} bytes, over {PEAK_BOUND}"
    );
    assert!(
        kept <= KEPT_BOUND,
        "{kept} bytes still live after the call, over {KEPT_BOUND}"
    );
    root.dispose();
}
