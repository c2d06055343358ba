//! The loader under seeded schedules: replay, diversity, timeouts and fault-injected stress.

use crate::common;

use std::collections::BTreeSet;

use common::{cordis, fixture};
use cordis_host::loader::{EntryStatus, boot_blocking};
use cordis_host::{LoadPlan, PlanOptions, load_plan};
use cordis_runtime::{Policy, Schedule};

fn plan(source: &str) -> LoadPlan {
    load_plan(
        source,
        "test.yml",
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn plan_file(name: &str) -> LoadPlan {
    let file = fixture(name);
    let source = std::fs::read_to_string(&file).unwrap();
    load_plan(
        &source,
        &file,
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn independent(n: usize) -> LoadPlan {
    let source: String = (0..n)
        .map(|i| format!("- id: e{i}\n  name: debug/noop\n"))
        .collect();
    plan(&source)
}

fn trace_of(plan: &LoadPlan, policy: Policy, seed: u64) -> Vec<String> {
    let (report, live) = boot_blocking(plan, Schedule::new(policy, seed)).unwrap();
    assert!(live.is_zero(), "seed {seed}: {live:?}");
    report
        .trace
        .iter()
        .map(|t| format!("{} {t}", t.scope))
        .collect()
}

#[test]
fn the_same_seed_replays_every_apply_and_registration_in_the_same_order() {
    let plan = plan_file("good.yml");
    for policy in [Policy::Random, Policy::Pct { depth: 3 }] {
        for seed in [0, 1, 7, 1234, u64::MAX] {
            let first = trace_of(&plan, policy, seed);
            assert!(first.len() >= 10, "{first:?}");
            for _ in 0..3 {
                assert_eq!(trace_of(&plan, policy, seed), first, "{policy} seed {seed}");
            }
        }
    }
}

#[test]
fn different_seeds_reach_many_apply_orders_of_eight_independent_entries() {
    let plan = independent(8);
    let mut orders = BTreeSet::new();
    for seed in 0..5_000 {
        let (report, _) = boot_blocking(&plan, Schedule::new(Policy::Random, seed)).unwrap();
        let order = report.apply_order();
        assert_eq!(order.len(), 8);
        orders.insert(order);
    }
    assert!(
        orders.len() >= 1_000,
        "only {} distinct apply orders",
        orders.len()
    );
}

#[test]
fn fifo_applies_in_file_order() {
    let plan = independent(8);
    let (report, _) = boot_blocking(&plan, Schedule::new(Policy::Fifo, 3)).unwrap();
    let expected: Vec<String> = (0..8).map(|i| format!("e{i}")).collect();
    assert_eq!(report.apply_order(), expected);
}

#[test]
fn dependents_wait_for_providers_declared_after_them() {
    let plan = plan(
        "- id: needs\n  name: debug/noop\n  inject: [delta]\n- id: gives\n  name: debug/provide\n  config: {service: delta}\n",
    );
    for seed in 0..50 {
        let (report, live) = boot_blocking(&plan, Schedule::new(Policy::Random, seed)).unwrap();
        assert!(report.all_active(), "seed {seed}: {:?}", report.entries);
        let order = report.apply_order();
        assert_eq!(order, ["gives", "needs"], "seed {seed}");
        assert!(live.is_zero());
    }
}

#[test]
fn a_hang_becomes_a_timeout_failure_and_the_others_still_load() {
    let plan = plan(
        "- id: stuck\n  name: debug/fault\n  config: {mode: hang}\n  timeout: 30\n- id: a\n  name: debug/noop\n- id: b\n  name: debug/fault\n  config: {mode: error}\n- id: c\n  name: debug/fault\n  config: {mode: panic}\n",
    );
    let started = std::time::Instant::now();
    let (report, live) = boot_blocking(&plan, Schedule::new(Policy::Random, 11)).unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let by_id = |id: &str| report.entries.iter().find(|e| e.id == id).unwrap().clone();
    assert_eq!(by_id("stuck").status, EntryStatus::Failed);
    assert_eq!(
        by_id("stuck").error.as_deref(),
        Some("apply did not finish within 30 ms (timeout)")
    );
    assert_eq!(by_id("a").status, EntryStatus::Active);
    assert_eq!(
        by_id("b").error.as_deref(),
        Some("debug/fault: injected error in \"b\"")
    );
    assert_eq!(
        by_id("c").error.as_deref(),
        Some("apply panicked: debug/fault: injected panic in \"c\"")
    );
    assert!(live.is_zero(), "{live:?}");
}

/// Seeds for the fault-injected stress: `CORDIS_STRESS_SEEDS=10000 cargo test -p cordis-host
/// --release --test suite loader_schedule::fault_injected` runs the long version.
fn stress_seeds() -> u64 {
    std::env::var("CORDIS_STRESS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

#[test]
fn fault_injected_stress_keeps_healthy_entries_active_and_leaks_nothing() {
    let plan = plan_file("faults.yml");
    let mut faults_seen = BTreeSet::new();
    for seed in 0..stress_seeds() {
        let (report, live) = boot_blocking(&plan, Schedule::new(Policy::Random, seed)).unwrap();
        for e in &report.entries {
            if e.id.starts_with("healthy") || e.id == "provide-alpha" || e.id == "listener" {
                assert_eq!(e.status, EntryStatus::Active, "seed {seed}: {e:?}");
            } else {
                assert!(
                    matches!(e.status, EntryStatus::Active | EntryStatus::Failed),
                    "seed {seed}: {e:?}"
                );
                faults_seen.insert(
                    e.error
                        .clone()
                        .unwrap_or_default()
                        .split(" in ")
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                );
            }
        }
        assert!(
            report
                .incidents
                .iter()
                .any(|i| i.contains("injected listener panic")),
            "seed {seed}: {:?}",
            report.incidents
        );
        assert!(live.is_zero(), "seed {seed}: {live:?}");
    }
    // Every seeded fault was drawn at least once: ok, error, panic, hang.
    assert!(faults_seen.len() >= 4, "{faults_seen:?}");
}

#[test]
fn stress_agrees_on_a_healthy_config_and_reports_a_divergence_with_replay_commands() {
    let good = fixture("good.yml");
    let ok = cordis(&["stress", &good, "--seeds", "40", "--shard", "1/4"], &[]);
    assert_eq!(ok.code, 0, "{}", ok.err);
    assert!(ok.out.starts_with("10 seeds agree: digest "), "{}", ok.out);
    // Not a terminal: no progress lines, only the summary.
    assert!(!ok.err.contains("cordis: stress "), "{}", ok.err);

    let faults = fixture("faults.yml");
    let bad = cordis(&["stress", &faults, "--seeds", "200"], &[]);
    assert_eq!(bad.code, 1, "{}", bad.err);
    assert!(
        bad.err.contains("diverge (schedule random):"),
        "{}",
        bad.err
    );
    assert!(
        bad.err
            .contains(&format!("cordis check {faults} --seed 0 --schedule random")),
        "{}",
        bad.err
    );
    assert!(bad.err.contains("    seed 0: "), "{}", bad.err);

    let json = cordis(
        &[
            "stress",
            &good,
            "--seeds",
            "5",
            "--json",
            "--schedule",
            "pct",
        ],
        &[],
    );
    assert_eq!(json.code, 0);
    let j: serde_json::Value = serde_json::from_str(&json.out).unwrap();
    assert_eq!(j["runs"], 5);
    assert_eq!(j["schedule"], "pct:3");
    assert!(j["failure"].is_null());
}
