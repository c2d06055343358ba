//! Loader throughput: boots of generated cordis.yml files with 100 / 1,000 / 10,000 trivial
//! entries on the current-thread runtime. (Seeded boots of the bundled cordis.yml need the
//! application's plugin table: `cargo bench -p cordis --bench stress`.)
//!
//! Run with `cargo bench -p cordis-host`. Targets (issue 3): seeded boots of the bundled file at
//! ≥ 10,000/s; 10,000 entries within 12× the time of 1,000 (linear growth).

use cordis_host::Builtins;
use cordis_host::loader::boot;
use cordis_host::plan::{LoadPlan, PlanOptions, load_plan};
use cordis_runtime::{Context, Policy, Schedule};

fn main() {
    divan::main();
}

fn plan_of(src: &str) -> LoadPlan {
    load_plan(
        src,
        "bench.yml",
        &|_| None,
        &Builtins::host(),
        &PlanOptions::default(),
    )
    .expect("a valid bench config")
}

/// `n` trivial entries, the shape the cordis comparison script boots in Node.
pub fn trivial_config(n: usize) -> String {
    (0..n).fold(String::new(), |mut s, i| {
        s.push_str(&format!("- id: e{i}\n  name: debug/noop\n"));
        s
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Parse, resolve and boot `n` trivial entries, then dispose (what `cordis check` does).
#[divan::bench(args = [100, 1_000, 10_000], sample_count = 20)]
fn boot_trivial_entries(bencher: divan::Bencher, n: usize) {
    let src = trivial_config(n);
    let rt = rt();
    bencher.bench_local(|| {
        let plan = plan_of(&src);
        rt.block_on(async {
            let root = Context::root_with(Schedule::new(Policy::Random, 1));
            let report = boot(&root, &plan).await;
            root.dispose();
            report.entries.len()
        })
    });
}

/// Parse and resolve only (no boot), to separate configuration cost from load cost.
#[divan::bench(args = [1_000, 10_000], sample_count = 20)]
fn resolve_trivial_entries(bencher: divan::Bencher, n: usize) {
    let src = trivial_config(n);
    bencher.bench_local(|| plan_of(&src).entries.len());
}
