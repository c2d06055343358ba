//! The configuration pipeline, from reading `cordis.yml` to every entry active, at 1,000,
//! 10,000 and 100,000 trivial entries, and its phases apart (parse; parse + resolve).
//!
//! Run with `cargo bench -p cordis-host --bench pipeline`. Targets (issue 12): the whole
//! pipeline ≤ 2 ms at 1,000 entries, and ≤ 12× growth per decade up to 100,000.

use std::path::PathBuf;

use cordis_host::Builtins;
use cordis_host::config::parse_lenient;
use cordis_host::loader::boot;
use cordis_host::plan::{PlanOptions, load_plan};
use cordis_runtime::{Context, Policy, Schedule};

fn main() {
    divan::main();
}

/// `n` trivial entries, the shape the cordis comparison script boots in Node.
fn trivial_config(n: usize) -> String {
    (0..n).fold(String::new(), |mut s, i| {
        s.push_str(&format!("- id: e{i}\n  name: debug/noop\n"));
        s
    })
}

/// The config written to a file once per size, so the bench reads it like `cordis check` does.
fn config_file(n: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-bench-pipeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let path = dir.join(format!("cordis-{n}.yml"));
    std::fs::write(&path, trivial_config(n)).expect("bench config");
    path
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Read the file, parse, resolve, boot until every entry is active, report; then dispose.
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 10, sample_size = 1)]
fn read_to_all_active(bencher: divan::Bencher, n: usize) {
    let path = config_file(n);
    let file = path.to_string_lossy().into_owned();
    let builtins = Builtins::host();
    let options = PlanOptions::default();
    let rt = rt();
    bencher.bench_local(|| {
        let source = std::fs::read_to_string(&path).expect("read");
        let plan = load_plan(&source, &file, &|_| None, &builtins, &options).expect("valid");
        rt.block_on(async {
            let root = Context::root_with(Schedule::new(Policy::Random, 1));
            let report = boot(&root, &plan).await;
            assert_eq!(report.entries.len(), n);
            root.dispose();
        })
    });
}

/// Parse only: the marked YAML tree and the raw entry model.
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 10, sample_size = 1)]
fn parse(bencher: divan::Bencher, n: usize) {
    let src = trivial_config(n);
    bencher.bench_local(|| parse_lenient(&src, "bench.yml", &|_| None).0.entries.len());
}

/// Parse and resolve (no boot).
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 10, sample_size = 1)]
fn parse_and_resolve(bencher: divan::Bencher, n: usize) {
    let src = trivial_config(n);
    let builtins = Builtins::host();
    let options = PlanOptions::default();
    bencher.bench_local(|| {
        load_plan(&src, "bench.yml", &|_| None, &builtins, &options)
            .expect("valid")
            .entries
            .len()
    });
}
