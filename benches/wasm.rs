//! WebAssembly entries: boot of 100 wasm entries from a warm artifact cache, one trivial call
//! through the registry, instantiation, and compiling a component cold vs loading it cached.
//!
//! Run with `cargo bench -p cordis --bench wasm`. The guests are built from WAT here
//! (`plugins/wasm/tests/wasm/guests.rs`); the artifact cache is a temporary directory.

#[path = "../plugins/wasm/tests/wasm/guests.rs"]
mod guests;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cordis_host::loader::boot;
use cordis_host::{LoadPlan, PlanOptions, load_plan};
use cordis_runtime::{Context, Schedule};
use cordis_tools::{ToolCall, ToolRegistry};
use cordis_wasm::{Capabilities, Guest, Limits, Runner, RunnerOptions, WasmEngine};
use divan::counter::ItemsCount;
use sha2::Digest;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Every entry's artifact goes to (and comes from) a cache of the bench's own.
    let cache = std::env::temp_dir().join(format!("cordis-wasm-bench-{}", std::process::id()));
    // SAFETY: set before any thread starts (divan's workers start in `divan::main`).
    #[allow(
        unsafe_code,
        reason = "`set_var` is unsafe in edition 2024; no other thread runs yet"
    )]
    unsafe {
        std::env::set_var("CORDIS_DYLIB_CACHE", &cache)
    };
    divan::main();
    let _ = std::fs::remove_dir_all(&cache);
}

fn rt() -> tokio::runtime::Runtime {
    cordis_host::shutdown::current_thread().expect("tokio runtime")
}

/// `n` echo guests (`t000`…), one entry each, in a directory of their own.
fn entries(n: usize) -> LoadPlan {
    let dir =
        std::env::temp_dir().join(format!("cordis-wasm-bench-plan-{n}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a plan directory");
    let mut yml =
        "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n".to_owned();
    for i in 0..n {
        let name: &'static str = Box::leak(format!("t{i:03}").into_boxed_str());
        let bytes = guests::component(&guests::echo(name));
        std::fs::write(dir.join(format!("{name}.wasm")), bytes).expect("write a guest");
        yml.push_str(&format!("- id: {name}\n  name: ./{name}.wasm\n"));
    }
    let file = dir.join("cordis.yml");
    load_plan(
        &yml,
        &file.display().to_string(),
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .expect("the plan resolves")
}

/// One boot of 100 wasm entries (read, pin, load the cached artifact, instantiate, init,
/// describe, register), disposed; the first boot, which compiles, is not measured.
#[divan::bench(sample_count = 20)]
fn boot_of_100_wasm_entries_from_a_warm_cache(bencher: divan::Bencher) {
    let (plan, rt) = (entries(100), rt());
    let warm = |seed: u64| {
        rt.block_on(async {
            let root = Context::root_with(Schedule::new(cordis_runtime::Policy::Random, seed));
            let report = boot(&root, &plan).await;
            assert!(report.all_active(), "{:?}", report.entries);
            root.dispose();
            root.tasks_finished().await;
        })
    };
    warm(0);
    let mut seed = 0;
    bencher.counter(ItemsCount::new(100usize)).bench_local(|| {
        seed += 1;
        warm(seed);
    });
}

/// One trivial call (`{}` echoed) through the registry: argument check, pipeline, the guest.
#[divan::bench]
fn trivial_call_through_the_registry(bencher: divan::Bencher) {
    let (plan, rt) = (entries(1), rt());
    let _in_runtime = rt.enter();
    let root = Context::root();
    rt.block_on(async {
        let report = boot(&root, &plan).await;
        assert!(report.all_active());
    });
    let registry = root.get::<ToolRegistry>().expect("a registry");
    bencher.bench_local(|| {
        rt.block_on(async {
            let call = ToolCall {
                call_id: "1".into(),
                name: "t000".into(),
                arguments: serde_json::json!({}),
            };
            let result = registry.execute(call, None).await;
            assert!(!result.is_error);
        })
    });
    root.dispose();
}

fn echo_runner() -> Runner {
    let bytes = guests::component(&guests::echo("e"));
    let engine = WasmEngine::shared().expect("an engine");
    let guest = Guest::new(
        &engine,
        &bytes,
        sha2::Sha256::digest(&bytes).into(),
        &Capabilities::default(),
        None,
    )
    .expect("a guest");
    Runner::new(
        Arc::new(guest),
        RunnerOptions {
            entry: "bench".into(),
            limits: Limits::default(),
            grants: Capabilities::default(),
            workspace: None,
            config: "{}".to_owned(),
            seed: None,
            deadline: Duration::from_secs(30),
        },
    )
}

/// One call on a live instance, directly (no registry): the engine's own overhead.
#[divan::bench]
fn trivial_call_on_a_live_instance(bencher: divan::Bencher) {
    let (runner, rt) = (echo_runner(), rt());
    bencher.bench_local(|| rt.block_on(runner.call("e", "{}")).expect("an answer"));
}

/// A fresh instance (new store from the pre-linked component, `init`) and one call.
#[divan::bench]
fn instantiation_and_one_call(bencher: divan::Bencher) {
    let (runner, rt) = (echo_runner(), rt());
    bencher.bench_local(|| {
        rt.block_on(async {
            runner.reset().await;
            runner.call("e", "{}").await.expect("an answer")
        })
    });
}

/// Compiling the echo guest (cold) vs loading its verified artifact from the cache.
#[divan::bench(args = ["cold", "cached"], sample_count = 30)]
fn compile(bencher: divan::Bencher, how: &str) {
    let bytes = guests::component(&guests::echo("e"));
    let sha: [u8; 32] = sha2::Sha256::digest(&bytes).into();
    let engine = WasmEngine::shared().expect("an engine");
    let dir =
        std::env::temp_dir().join(format!("cordis-wasm-bench-compile-{}", std::process::id()));
    let cache = cordis_dylib::Cache::open(Path::new(&dir)).expect("a cache");
    let cache = (how == "cached").then_some(&cache);
    let _ = Guest::new(&engine, &bytes, sha, &Capabilities::default(), cache);
    bencher.bench_local(|| {
        let guest =
            Guest::new(&engine, &bytes, sha, &Capabilities::default(), cache).expect("a guest");
        assert_eq!(guest.from_cache(), how == "cached");
    });
    let _ = std::fs::remove_dir_all(&dir);
}
