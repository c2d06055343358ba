//! The permutation proof over a Code Mode composition: every registration order of the tool
//! entries of `tests/fixtures/code-mode.yml` yields one request digest, and that digest covers the
//! generated SDK section (the global assembly is `run_code` plus the SDK).
//!
//! The CLI runs the same sweep: `cargo run -- permute tests/fixtures/code-mode.yml`, and the
//! seeded schedules with `cargo run -- stress tests/fixtures/code-mode.yml --seeds 200`.

use cordis::host::plan::{LoadPlan, PlanOptions, load_plan};

use crate::common::brute;
use brute::brute;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/code-mode.yml");

fn plan(yml: &str) -> LoadPlan {
    load_plan(
        yml,
        "code-mode.yml",
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("the fixture is invalid: {e}"))
}

fn fixture() -> String {
    std::fs::read_to_string(FIXTURE).expect("fixture readable")
}

#[test]
fn every_order_of_the_code_mode_entries_yields_one_digest() {
    let report = brute(&plan(&fixture()), 10_000, 0, 2);
    assert!(report.unhealthy.is_none(), "{:?}", report.unhealthy);
    assert!(report.exhaustive);
    assert_eq!(
        report.orders, 5_040,
        "six tool-declare entries and tool-presentation"
    );
    // tool-presentation registers no tool, so 6! registration orders are observable.
    assert_eq!(report.registration_orders, 720, "the proof is not vacuous");
    assert_eq!(report.outcomes.len(), 1, "{:#?}", report.digests);
}

#[test]
fn the_digest_covers_the_sdk_section() {
    let digest = |yml: &str| {
        let report = brute(&plan(yml), 1, 0, 1);
        assert!(report.unhealthy.is_none(), "{:?}", report.unhealthy);
        report.digests.into_keys().next().unwrap()
    };
    let base = digest(&fixture());
    // One changed property description reaches the model only through the SDK (the tools list is
    // `run_code` alone), so a digest that did not cover the SDK would not move.
    let changed = fixture().replace("description: \"Where.\"", "description: \"Where to.\"");
    assert_ne!(changed, fixture());
    assert_ne!(digest(&changed), base);
}

#[test]
fn the_global_assembly_of_the_fixture_is_run_code_with_the_sdk() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (report, live) =
        cordis::host::boot_blocking(&plan(&fixture()), cordis::runtime::Schedule::fifo()).unwrap();
    drop(rt);
    assert!(live.is_zero(), "{live:?}");
    assert_eq!(report.assembly["tools"], serde_json::json!(["run_code"]));
    let sections: Vec<&str> = report.assembly["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        sections,
        ["deployment:persona", "tools:code-only", "tools:sdk"]
    );
}
