//! Proofs end to end: the driver over fake boots, compositions of `debug/claim` entries, and
//! entries that meet through events.

use std::collections::BTreeMap;

use cordis_runtime::{Context, Schedule};
use proptest::prelude::*;

use super::*;
use crate::loader::EntryStatus;
use crate::plan::LoadPlan;

/// the assembly), the registrations are the order itself.
fn fake_boot(_: &tokio::runtime::Runtime, order: &[usize]) -> std::io::Result<OrderOutcome> {
    Ok(OrderOutcome {
        digest: format!("first {}", order[0]),
        assembly_error: (order[0] == 3).then(|| "three went first".to_owned()),
        catalog: None,
        entries: Vec::new(),
        incidents: Vec::new(),
        registrations: order.iter().map(ToString::to_string).collect(),
        events: BTreeMap::new(),
        names: BTreeMap::new(),
    })
}

/// Each distinct outcome of `orders` (element ids) with the first order producing it.
fn firsts(orders: impl Iterator<Item = Vec<usize>>, ids: &[String]) -> Vec<(Vec<String>, String)> {
    let mut out: Vec<(Vec<String>, String)> = Vec::new();
    for order in orders {
        let digest = format!("first {}", order[0]);
        if !out.iter().any(|(_, d)| *d == digest) {
            out.push((order.iter().map(|&i| ids[i].clone()).collect(), digest));
        }
    }
    out
}

#[test]
fn the_driver_reports_the_first_order_of_each_distinct_outcome_on_any_thread_count() {
    let ids: Vec<String> = ["a", "b", "c", "d"].map(str::to_owned).to_vec();
    for (max, threads) in [(24, 1), (24, 3), (24, 16), (7, 1), (7, 2)] {
        let options = ProofOptions {
            max,
            seed: 5,
            threads,
        };
        let orders = ProofOrders::every(ids.len(), &options);
        let report = permute_with(
            &ids,
            BTreeMap::new(),
            &orders,
            &options,
            &|_| {},
            &fake_boot,
        )
        .unwrap();
        let exhaustive = max >= 24;
        assert_eq!(report.exhaustive, exhaustive);
        assert_eq!(report.orders, max);
        assert_eq!(report.all_orders, 24);
        let expected = firsts(
            (0..max).map(|k| order_of(ids.len(), exhaustive, 5, k)),
            &ids,
        );
        let found: Vec<(Vec<String>, String)> = report
            .outcomes
            .iter()
            .map(|(order, o)| (order.clone(), o.digest.clone()))
            .collect();
        assert_eq!(found, expected, "max {max}, {threads} threads");
        assert_eq!(report.digests.len(), expected.len());
        for (order, digest) in &expected {
            assert_eq!(&report.digests[digest], order);
        }
        let unhealthy = expected.iter().find(|(_, d)| d == "first 3");
        assert_eq!(
            report.unhealthy.as_ref().map(|(order, _)| order),
            unhealthy.map(|(order, _)| order)
        );
        assert_eq!(
            report.registration_orders as u64, max,
            "every order registers apart"
        );
    }
    // Exhaustively, the first order with `k` in front is `k` then the rest ascending.
    let options = ProofOptions {
        max: 24,
        seed: 0,
        threads: 2,
    };
    let orders = ProofOrders::every(ids.len(), &options);
    let report = permute_with(
        &ids,
        BTreeMap::new(),
        &orders,
        &options,
        &|_| {},
        &fake_boot,
    )
    .unwrap();
    let heads: Vec<String> = report.outcomes.iter().map(|(o, _)| o.join("")).collect();
    assert_eq!(heads, ["abcd", "bacd", "cabd", "dabc"]);
    assert_eq!(
        report.unhealthy,
        Some((
            "dabc".chars().map(String::from).collect(),
            "the assembly failed: three went first".to_owned()
        ))
    );
}

#[test]
fn the_driver_boots_a_listed_order_set_in_its_own_order() {
    let space = Space {
        ids: ["a", "b", "c"].map(str::to_owned).to_vec(),
        positions: vec![0, 1, 2],
        footprints: vec![Footprint::default(); 3],
        dependent: vec![vec![false; 3]; 3],
        seen: true,
    };
    let listed = vec![vec![2, 0, 1], vec![1, 2, 0], vec![2, 1, 0], vec![0, 1, 2]];
    let orders = ProofOrders {
        orders: Orders::Listed(listed.clone()),
        count: 4,
        complete: true,
    };
    let report = prove_with(&space, &orders, &OPTIONS, &|_| {}, &fake_boot).unwrap();
    let expected = firsts(listed.into_iter(), &space.ids);
    let found: Vec<(Vec<String>, String)> = report
        .outcomes
        .iter()
        .map(|(order, o)| (order.clone(), o.digest.clone()))
        .collect();
    assert_eq!(found, expected);
    assert_eq!(report.interacting, Some(Vec::new()));
}

/// One `debug/claim` entry: its tools, sections, services, and whether it adds a note.
type Claimer = (
    Vec<&'static str>,
    Vec<&'static str>,
    Vec<&'static str>,
    bool,
);

/// A composition of `debug/claim` entries.
fn composition(entries: &[Claimer]) -> LoadPlan {
    let mut yml =
        String::from("- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n");
    for (i, (tools, sections, services, note)) in entries.iter().enumerate() {
        yml.push_str(&format!(
            "- id: c{i}\n  name: debug/claim\n  config: {{tools: {tools:?}, sections: {sections:?}, services: {services:?}{}}}\n",
            if *note { format!(", note: \"note of c{i}\"") } else { String::new() }
        ));
    }
    crate::plan::load_plan(
        &yml,
        "generated.yml",
        &|_| None,
        &crate::builtins::Builtins::host(),
        &crate::plan::PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{yml}"))
}

const OPTIONS: ProofOptions = ProofOptions {
    max: 1_000,
    seed: 0,
    threads: 1,
};

#[test]
fn names_two_entries_register_at_run_time_resolve_the_same_in_every_order() {
    let plan = composition(&[
        (vec!["echo", "mine"], vec!["guide"], vec!["alpha"], true),
        (vec!["echo"], vec!["guide"], vec!["alpha"], true),
        (vec!["other"], vec![], vec![], true),
    ]);
    let positions: Vec<usize> = (2..5).collect();
    let brute = permute(&plan, &positions, &OPTIONS, &|_| {}).unwrap();
    assert_eq!(brute.orders, 6);
    assert_eq!(brute.outcomes.len(), 1, "{:#?}", brute.outcomes);
    let outcome = &brute.outcomes[0].1;
    let conflict = "section \"guide\", service \"alpha\", tool \"echo\" are claimed by entries \"c0\" and \"c1\", so none of them gets them; remove them from all but one (or disable all but one of the entries)";
    assert_eq!(
        outcome.entries[2..4],
        [
            (
                "c0".to_owned(),
                EntryStatus::Conflict,
                Some(conflict.to_owned())
            ),
            (
                "c1".to_owned(),
                EntryStatus::Conflict,
                Some(conflict.to_owned())
            ),
        ]
    );
    assert_eq!(outcome.entries[4].1, EntryStatus::Active);
    assert!(brute.registration_orders > 1, "the proof is not vacuous");
    // The reduced proof explores the interacting orders only and finds the same outcome.
    let reduced = prove(&plan, &OPTIONS, &|_| {}).unwrap();
    assert!(reduced.exhaustive);
    assert!(reduced.orders < factorial(5), "{}", reduced.orders);
    assert_eq!(reduced.outcomes.len(), 1);
    assert_eq!(reduced.outcomes[0].1.key(), outcome.key());
}

/// A random composition of 2–4 `debug/claim` entries drawing from few names.
fn arbitrary_composition() -> impl Strategy<Value = Vec<Claimer>> {
    let entry = (
        proptest::sample::subsequence(vec!["a", "b", "c"], 0..=2),
        proptest::sample::subsequence(vec!["s1", "s2"], 0..=1),
        proptest::sample::subsequence(vec!["alpha", "beta"], 0..=1),
        any::<bool>(),
    );
    proptest::collection::vec(entry, 2..=4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random compositions whose entries claim overlapping names at run time (tools,
    /// sections, services) and listen to one waterfall: every order of them boots to one
    /// outcome, and the reduced proof finds exactly that outcome.
    #[test]
    fn every_order_of_overlapping_claims_gives_one_outcome(entries in arbitrary_composition()) {
        let plan = composition(&entries);
        let positions: Vec<usize> = (2..plan.entries.len()).collect();
        let brute = permute(&plan, &positions, &OPTIONS, &|_| {}).unwrap();
        prop_assert!(brute.exhaustive);
        prop_assert_eq!(brute.outcomes.len(), 1, "{:#?}", brute.outcomes);
        let reduced = prove(&plan, &OPTIONS, &|_| {}).unwrap();
        prop_assert_eq!(reduced.outcomes.len(), 1);
        prop_assert_eq!(reduced.outcomes[0].1.key(), brute.outcomes[0].1.key());
    }
}

struct Ping;
impl cordis_runtime::Event for Ping {
    const NAME: &'static str = "test/ping";
    type Output = ();
}
struct Pong;
impl cordis_runtime::Event for Pong {
    const NAME: &'static str = "test/pong";
    type Output = ();
}

/// Which events an element of [`event_boot`] listens to (counting the calls) and emits
/// while applying: `ping`, `pong` or `none`.
type Uses = (&'static str, &'static str);

/// A boot strategy for elements that only listen and emit: each element is a plugin applied
/// in its place of `order` under the `fifo` schedule; the outcome is how often each
/// element's listener ran, the footprints are what the runtime recorded.
fn event_boot(
    uses: &'static [Uses],
) -> impl Fn(&tokio::runtime::Runtime, &[usize]) -> std::io::Result<OrderOutcome> + Sync {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    move |rt, order| {
        Ok(rt.block_on(async {
            let root = Context::root_with(Schedule::fifo());
            let hits: Vec<Arc<AtomicUsize>> = (0..uses.len())
                .map(|_| Arc::new(AtomicUsize::new(0)))
                .collect();
            for &i in order {
                let (listen, emit) = uses[i];
                let hit = hits[i].clone();
                let plugin = cordis_runtime::FnPlugin::new("uses", move |ctx: Context, ()| {
                    let hit = hit.clone();
                    async move {
                        let count = move || {
                            hit.fetch_add(1, Ordering::SeqCst);
                        };
                        match listen {
                            "ping" => drop(ctx.on::<Ping>(move |_| count())),
                            "pong" => drop(ctx.on::<Pong>(move |_| count())),
                            _ => {}
                        }
                        match emit {
                            "ping" => ctx.emit(Ping),
                            "pong" => ctx.emit(Pong),
                            _ => {}
                        }
                        Ok(())
                    }
                });
                let _ = root.plugin_with(
                    cordis_runtime::Prepared::new(plugin, ()),
                    cordis_runtime::PluginOptions {
                        label: Some(format!("e{i}")),
                        place: Some(i as u64),
                        ..Default::default()
                    },
                );
            }
            root.idle().await;
            let counts: Vec<String> = hits
                .iter()
                .enumerate()
                .map(|(i, h)| format!("e{i}:{}", h.load(Ordering::SeqCst)))
                .collect();
            let events = event_footprints(&root);
            root.dispose();
            OrderOutcome {
                digest: counts.join(" "),
                assembly_error: None,
                catalog: None,
                entries: Vec::new(),
                incidents: Vec::new(),
                registrations: Vec::new(),
                events,
                names: BTreeMap::new(),
            }
        }))
    }
}

/// A space of `n` elements `e0..` whose footprints say nothing about events (as the
/// plan-time footprints cannot), so the first round boots one order.
fn silent_space(n: usize) -> Space {
    Space {
        ids: (0..n).map(|i| format!("e{i}")).collect(),
        positions: (0..n).collect(),
        footprints: vec![Footprint::default(); n],
        dependent: vec![vec![false; n]; n],
        seen: true,
    }
}

#[test]
fn entries_that_emit_while_applying_what_the_other_listens_to_are_proved_in_both_orders() {
    // e1 and e2 each listen to ping and emit it while applying: whichever applies first
    // misses nothing, the later one's emit reaches both. e0 and e3 use no event.
    static USES: [Uses; 4] = [
        ("none", "none"),
        ("ping", "ping"),
        ("ping", "ping"),
        ("pong", "none"),
    ];
    let space = silent_space(USES.len());
    let orders = space.orders(&OPTIONS);
    assert_eq!(orders.count, 1, "the plan-time footprints see one class");
    let report = prove_with(&space, &orders, &OPTIONS, &|_| {}, &event_boot(&USES)).unwrap();
    assert!(report.exhaustive);
    assert_eq!(report.orders, 2, "the class with e2 first is booted too");
    assert_eq!(
        report.through_events,
        [(
            "e1".to_owned(),
            "e2".to_owned(),
            vec!["test/ping".to_owned()]
        )]
    );
    assert_eq!(
        report.interacting,
        Some(vec![("e1".to_owned(), "e2".to_owned())])
    );
    let found: Vec<(String, String)> = report
        .outcomes
        .iter()
        .map(|(order, o)| (order.join(","), o.digest.clone()))
        .collect();
    assert_eq!(
        found,
        [
            ("e0,e1,e2,e3".to_owned(), "e0:0 e1:2 e2:1 e3:0".to_owned()),
            ("e0,e2,e1,e3".to_owned(), "e0:0 e1:1 e2:2 e3:0".to_owned()),
        ]
    );
    // Brute force agrees: exactly these two outcomes.
    let brute = permute_with(
        &space.ids,
        BTreeMap::new(),
        &ProofOrders::every(USES.len(), &OPTIONS),
        &OPTIONS,
        &|_| {},
        &event_boot(&USES),
    )
    .unwrap();
    assert_eq!(brute.outcomes.len(), 2);
}

#[test]
fn an_emitter_and_a_listener_of_different_events_stay_one_class() {
    // e0 listens to ping; e1 emits pong while applying (and listens to it itself, which
    // meets no other entry).
    static DISJOINT: [Uses; 2] = [("ping", "none"), ("pong", "pong")];
    let space = silent_space(DISJOINT.len());
    let orders = space.orders(&OPTIONS);
    let report = prove_with(&space, &orders, &OPTIONS, &|_| {}, &event_boot(&DISJOINT)).unwrap();
    assert!(report.exhaustive);
    assert_eq!(report.orders, 1);
    assert!(
        report.through_events.is_empty(),
        "{:?}",
        report.through_events
    );
    assert_eq!(report.interacting, Some(Vec::new()));
    assert_eq!(report.outcomes.len(), 1);
}
