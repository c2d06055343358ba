//! Stress throughput of the `cordis` application: seeded boots of the bundled `cordis.yml`
//! (standard plugin table, agent entries included) and exercise runs of a 3-turn script.
//!
//! Run with `cargo bench -p cordis --bench stress`. Targets (issues 18 and 45): ≥ 10,000 seeded
//! boots/s on one core, ≥ 15,000/s with `--jobs 2` on two. Divan's `items/s` column is seeds
//! per second (one seed per iteration, or 4,000 per iteration of the whole command).

use cordis::exercise::{ExerciseScript, exercise, exercise_plan};
use cordis_host::loader::{boot, boot_and_dispose_outcome, boot_blocking};
use cordis_host::{LoadPlan, PlanOptions, load_plan};
use cordis_runtime::{Context, Policy, Schedule};
use divan::counter::ItemsCount;

// The allocator of the `cordis` binary (src/main.rs), so these figures are `cordis stress`'s.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    divan::main();
}

/// The bundled composition, resolved once as `cordis stress` does (environment unset).
fn bundled() -> LoadPlan {
    load_plan(
        include_str!("../cordis.yml"),
        "cordis.yml",
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .expect("the bundled cordis.yml resolves")
}

fn rt() -> tokio::runtime::Runtime {
    cordis_host::shutdown::current_thread().expect("tokio runtime")
}

fn policy(name: &str) -> Policy {
    name.parse().expect("a policy name")
}

/// One seed as `cordis stress` runs every seed after the first: boot, gather what the
/// comparison with the first seed reads (no report JSON, no trace), dispose, let aborted tasks
/// drop, on one current-thread runtime kept across seeds, reading the instruction and skill
/// files through one snapshot for all seeds.
#[divan::bench(args = ["fifo", "random", "pct"])]
fn seeded_boot_of_the_bundled_config(bencher: divan::Bencher, policy_name: &str) {
    let (plan, rt, policy) = (bundled(), rt(), policy(policy_name));
    let sources = cordis_instructions::Snapshot::new();
    let mut seed = 0u64;
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        seed += 1;
        sources.enter(|| {
            let (outcome, live) =
                rt.block_on(boot_and_dispose_outcome(&plan, Schedule::new(policy, seed)));
            (outcome, live.is_zero())
        })
    });
}

/// One seed with the full report `cordis check` prints (entries with load times, the trace,
/// the assembly view): what the first seed of a stress run costs.
#[divan::bench(args = ["random"])]
fn seeded_boot_with_the_full_report(bencher: divan::Bencher, policy_name: &str) {
    let (plan, rt, policy) = (bundled(), rt(), policy(policy_name));
    let sources = cordis_instructions::Snapshot::new();
    let mut seed = 0u64;
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        seed += 1;
        sources.enter(|| {
            rt.block_on(async {
                let root = Context::root_with(Schedule::new(policy, seed));
                let report = boot(&root, &plan).await;
                root.dispose();
                root.tasks_finished().await;
                report.digest.len()
            })
        })
    });
}

/// One boot as `cordis check` runs it: a fresh runtime (its I/O driver and timer) per boot.
#[divan::bench]
fn seeded_boot_with_a_runtime_per_seed(bencher: divan::Bencher) {
    let plan = bundled();
    let mut seed = 0u64;
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        seed += 1;
        let (report, live) =
            boot_blocking(&plan, Schedule::new(Policy::Random, seed)).expect("a runtime");
        (report.digest.len(), live.is_zero())
    });
}

/// Seeds per iteration of [`stress_command_with_jobs`].
const COMMAND_SEEDS: usize = 4_000;

/// `cordis stress cordis.yml --seeds 4000 --jobs N` as the command runs it (loading the file
/// included, once per 4,000 seeds): seeds on N worker threads, outcomes settled in seed order on
/// the calling thread. `items/s` is seeds per second; compare `--jobs 1` with `--jobs 2`.
#[divan::bench(args = [1, 2], sample_count = 10, sample_size = 1)]
fn stress_command_with_jobs(bencher: divan::Bencher, jobs: usize) {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");
    let (seeds, jobs) = (COMMAND_SEEDS.to_string(), jobs.to_string());
    let builtins = cordis::builtins::standard();
    // The sessions entry needs a state directory, as a user's environment gives it.
    let state = std::env::temp_dir()
        .join("cordis-bench-state")
        .display()
        .to_string();
    let env = move |name: &str| (name == "XDG_STATE_HOME").then(|| state.clone());
    bencher
        .counter(ItemsCount::new(COMMAND_SEEDS))
        .bench_local(|| {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let mut io = cordis::cli::Io {
                out: &mut out,
                err: &mut err,
                env: &env,
                progress: false,
            };
            let argv = ["cordis", "stress", file, "--seeds", &seeds, "--jobs", &jobs];
            let code = cordis::cli::run(argv, &mut io, &builtins);
            assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
            out.len()
        });
}

/// One seed of `stress --exercise`: boot the bundled composition, three turns with its own
/// scripted responses (each turn a `todo_write` call, then an answer), dispose.
#[divan::bench(args = ["random", "pct"], sample_count = 50)]
fn exercise_of_three_turns(bencher: divan::Bencher, policy_name: &str) {
    let script = ExerciseScript::parse("turns: [one, two, three]\n", "bench").expect("script");
    let plan = exercise_plan(&bundled(), &script).expect("an exercisable composition");
    let (rt, policy) = (rt(), policy(policy_name));
    let mut seed = 0u64;
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        seed += 1;
        let run = rt
            .block_on(exercise(&plan, &script, Schedule::new(policy, seed)))
            .expect("the exercise runs");
        run.log.len()
    });
}

/// The bundled composition grown to 20 plugin entries with tool entries: the first
/// `observers` of them `debug/claim` entries (which do not state what they register, so the
/// proof explores them by what its boots see them do), the rest `tool-declare` entries.
fn twenty_entries(observers: usize) -> LoadPlan {
    let extras = 20 - cordis_host::permute::plugin_entries(&bundled()).len();
    assert!(
        observers <= extras,
        "{observers} observers, {extras} extra entries"
    );
    let mut yml = include_str!("../cordis.yml").to_owned();
    for i in 0..extras {
        if i < observers {
            yml.push_str(&format!(
                "- {{id: extra{i}, name: debug/claim, config: {{tools: [extra_{i}]}}}}\n"
            ));
        } else {
            yml.push_str(&format!(
                "- id: extra{i}\n  name: tool-declare\n  config: {{tools: [{{name: extra_{i}, description: x, parameters: {{type: object}}}}]}}\n"
            ));
        }
    }
    let plan = load_plan(
        &yml,
        "twenty.yml",
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .expect("the grown composition resolves");
    assert_eq!(
        cordis_host::permute::plugin_entries(&plan).len(),
        20,
        "twenty plugin entries"
    );
    plan
}

/// The reduced permutation proof of a 20-entry composition: every one of its 20! orders covered
/// by one boot per class (issue 45's target: under a second on this machine with three entries
/// that state nothing). With 0 observers every entry states its claims; each observer is
/// explored by what the boots see it do (dynamic partial-order reduction), re-exploring only
/// when a boot shows a new interaction.
#[divan::bench(args = [0, 1, 3], sample_count = 10)]
fn reduced_proof_of_twenty_entries(bencher: divan::Bencher, observers: usize) {
    let plan = twenty_entries(observers);
    let options = cordis_host::permute::ProofOptions {
        max: 1_000_000,
        seed: 0,
        threads: 2,
    };
    bencher.bench_local(|| {
        let report = cordis_host::permute::prove(&plan, &options, &|_| {}).expect("proof runs");
        assert!(report.exhaustive);
        assert_eq!(report.outcomes.len(), 1);
        report.orders
    });
}
