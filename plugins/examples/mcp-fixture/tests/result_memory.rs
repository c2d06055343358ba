//! Host memory while an MCP server answers a 3 MB text result (issue 40, finding 8): the
//! answer is read (it is under `maxMessageBytes`), parsed, cut to `maxResultText`, and only the
//! cut result is kept: `cargo test -p cordis-mcp-fixture --test result_memory -- --nocapture`
//! prints the numbers. Counted by a global allocator that tracks the bytes live on the heap:
//! the peak growth of the call stays under [`PEAK_BOUND`], and what is still live after it,
//! the result included, under [`KEPT_BOUND`].
//!
//! A test binary of its own: nothing else runs in this process while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cordis_mcp::{McpConfig, McpPlugin};
use cordis_runtime::prelude::*;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{ToolCall, ToolRegistry, ToolsConfig, ToolsPlugin};
use serde_json::json;

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
#[allow(unsafe_code)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_megabyte_mcp_result_is_cut_without_holding_more_than_the_bound() {
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
