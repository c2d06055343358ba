//! The configuration pipeline as one figure per size, for scripts: from reading `cordis.yml`
//! to every entry active, best of `--runs` boots, in milliseconds. It is the like-for-like
//! figure for `benches/compare-cordis` (cordis's own figure includes its loader reading the
//! YAML), where `cordis check`'s `boot_ms` starts only at the first apply.
//!
//! ```sh
//! cargo bench -q -p cordis-host --bench pipeline_sizes -- 100 1000 10000 --runs 5
//! ```
//! prints one `N MS` line per size. Entries are `- id: e<i>` / `name: debug/noop`, booted
//! with the `fifo` schedule, as `compare-cordis` boots them.

use std::time::{Duration, Instant};

use cordis_host::Builtins;
use cordis_host::loader::boot;
use cordis_host::plan::{PlanOptions, load_plan};
use cordis_runtime::{Context, Policy, Schedule};

fn main() {
    let mut sizes = Vec::new();
    let mut runs = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => runs = args.next().and_then(|r| r.parse().ok()).unwrap_or(runs),
            "--bench" => {}
            n => match n.parse::<usize>() {
                Ok(n) if n > 0 => sizes.push(n),
                _ => {
                    eprintln!("pipeline_sizes: not a size: {n}");
                    std::process::exit(2);
                }
            },
        }
    }
    if sizes.is_empty() {
        sizes = vec![100, 1_000, 10_000];
    }
    let dir = std::env::temp_dir().join(format!("cordis-pipeline-sizes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let builtins = Builtins::host();
    let options = PlanOptions::default();
    for n in sizes {
        let path = dir.join(format!("cordis-{n}.yml"));
        let text = (0..n).fold(String::new(), |mut s, i| {
            s.push_str(&format!("- id: e{i}\n  name: debug/noop\n"));
            s
        });
        std::fs::write(&path, text).expect("bench config");
        let file = path.to_string_lossy().into_owned();
        let mut best = Duration::MAX;
        for _ in 0..runs.max(1) {
            let started = Instant::now();
            let source = std::fs::read_to_string(&path).expect("read");
            let plan = load_plan(&source, &file, &|_| None, &builtins, &options).expect("valid");
            let (report, took) = rt.block_on(async {
                let root = Context::root_with(Schedule::new(Policy::Fifo, 1));
                let report = boot(&root, &plan).await;
                // Disposal is not part of booting.
                let took = started.elapsed();
                root.dispose();
                (report, took)
            });
            best = best.min(took);
            assert_eq!(report.entries.len(), n);
        }
        println!("{n} {:.3}", best.as_secs_f64() * 1e3);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
