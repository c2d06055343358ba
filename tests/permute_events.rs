//! The reduced permutation proof sees interactions through events dispatched while applying:
//! in `tests/fixtures/faults.yml`, `fault-b` (drawing `listener-panic` under the proof's
//! schedule) and `listener` each listen to `debug/fault` and emit it in their apply, so which
//! applies first changes how often each listener runs. Their footprints claim nothing in
//! common; the boots report the events, and the proof explores both orders.

use crate::common::{cordis, fixture};

const ORDER_A: &str = "provide-alpha,healthy-1,healthy-2,fault-a,fault-b,listener,healthy-3";
const ORDER_B: &str = "provide-alpha,healthy-1,healthy-2,fault-a,listener,fault-b,healthy-3";

#[test]
fn the_reduced_proof_finds_the_order_dependence_of_entries_meeting_through_an_event() {
    let file = fixture("faults.yml");
    let run = cordis(&["permute", &file], &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.out, run.err);
    assert!(
        run.out.contains(
            "2 orders (every class) standing for all 5040 orders of 7 entries: 2 distinct outcomes"
        ),
        "{}",
        run.out
    );
    assert!(
        run.out
            .contains("interacting: fault-b~listener (event debug/fault)"),
        "{}",
        run.out
    );
    assert!(
        run.err
            .contains("cordis: the outcome depends on load order:"),
        "{}",
        run.err
    );
    assert!(run.err.contains("the incidents differ"), "{}", run.err);
    for (name, order) in [("A", ORDER_A), ("B", ORDER_B)] {
        assert!(
            run.err.contains(&format!("  order {name}: {order}\n")),
            "{}",
            run.err
        );
        assert!(
            run.err.contains(&format!(
                "    replay: cordis permute {file} --order {order}\n"
            )),
            "{}",
            run.err
        );
    }
    // Brute force finds the same two outcomes, first in the same two orders.
    let all = cordis(&["permute", &file, "--all"], &[]);
    assert_eq!(all.code, 1, "{}", all.err);
    assert!(all.out.contains("2 distinct outcomes"), "{}", all.out);
    assert!(
        all.err.contains(&format!("  order A: {ORDER_A}\n")),
        "{}",
        all.err
    );
    assert!(
        all.err.contains(&format!("  order B: {ORDER_B}\n")),
        "{}",
        all.err
    );
}

#[test]
fn the_json_report_carries_the_pairs_meeting_through_events() {
    let run = cordis(&["permute", &fixture("faults.yml"), "--json"], &[]);
    assert_eq!(run.code, 1, "{}", run.err);
    let report: serde_json::Value = serde_json::from_str(&run.out).unwrap();
    assert_eq!(
        report["through_events"],
        serde_json::json!([{"pair": ["fault-b", "listener"], "events": ["debug/fault"]}])
    );
    assert_eq!(
        report["interacting"],
        serde_json::json!([["fault-b", "listener"]])
    );
    assert_eq!(report["distinct_outcomes"], 2);
}
