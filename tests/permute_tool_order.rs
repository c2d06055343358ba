//! The permutation proof through the real host: every registration order of the tool entries of
//! a cordis.yml yields byte-identical request headers.
//!
//! The full 8! = 40,320 sweep runs with `cargo run --release -- permute tests/fixtures/permute-8.yml`.

use cordis::host::permute::factorial;
use cordis::host::plan::{LoadPlan, PlanOptions, load_plan};

use crate::common::brute;
use brute::brute;

/// Tool names chosen so registration order, `str` order and UTF-16 order all disagree somewhere:
/// U+FF5E sorts after U+1F600 in `str` (UTF-8) order but before it in UTF-16 order.
const NAMES: [&str; 8] = [
    "zulu",
    "alpha",
    "\u{1F600}_smile",
    "\u{FF5E}_wave",
    "mike",
    "Échelle",
    "bash",
    "todo_bis",
];

fn config(entries: usize, tool_order: Option<&str>) -> String {
    config_with(entries, tool_order, false)
}

/// With `sections`, every tool entry also registers a prompt section; orders repeat (0, 10, 0,
/// 10, …) so ties must be broken by name, not by registration order.
fn config_with(entries: usize, tool_order: Option<&str>, sections: bool) -> String {
    let mut yml = String::from(
        "- id: system-prompt\n  name: system-prompt\n  config:\n    persona: \"Persona for {{nothing}}\"\n",
    );
    yml = yml.replace(" for {{nothing}}", "");
    if let Some(order) = tool_order {
        yml.push_str(&format!("    toolOrder: {order}\n"));
    }
    yml.push_str("- id: tools\n  name: tools\n");
    for (i, name) in NAMES.iter().take(entries).enumerate() {
        yml.push_str(&format!(
            "- id: t{i}\n  name: tool-declare\n  config:\n    tools:\n      - name: \"{name}\"\n        description: tool {i}\n        parameters: {{type: object, properties: {{x: {{type: integer}}}}}}\n"
        ));
        if sections {
            yml.push_str(&format!(
                "    sections:\n      - name: \"guide:{name}\"\n        order: {}\n        text: How to use {name}.\n",
                (i % 2) * 10
            ));
        }
    }
    yml
}

fn plan(yml: &str) -> LoadPlan {
    load_plan(
        yml,
        "generated.yml",
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("generated config is invalid: {e}"))
}

#[test]
fn every_order_of_six_tool_entries_yields_one_digest() {
    let report = brute(&plan(&config(6, None)), 1_000_000, 0, 2);
    assert!(report.exhaustive);
    assert_eq!(report.orders, factorial(6));
    assert_eq!(report.registration_orders, 720, "the proof is not vacuous");
    assert_eq!(report.outcomes.len(), 1, "{:#?}", report.digests);
    assert!(report.unhealthy.is_none(), "{:?}", report.unhealthy);
}

#[test]
fn every_order_with_a_tool_order_yields_one_digest() {
    let order = r#"["mike", "<unlisted-tools>", "alpha"]"#;
    let report = brute(&plan(&config(6, Some(order))), 1_000_000, 0, 2);
    assert_eq!(report.orders, 720);
    assert_eq!(report.outcomes.len(), 1);
    assert!(report.unhealthy.is_none(), "{:?}", report.unhealthy);
}

#[test]
fn a_seeded_sample_of_the_eight_factorial_orders_yields_one_digest() {
    let report = brute(&plan(&config(8, None)), 2_000, 7, 2);
    assert!(!report.exhaustive);
    assert_eq!(report.orders, 2_000);
    assert!(
        report.registration_orders > 1_900,
        "{}",
        report.registration_orders
    );
    assert_eq!(report.outcomes.len(), 1);
    assert!(report.unhealthy.is_none(), "{:?}", report.unhealthy);
}

#[test]
fn an_unknown_tool_order_name_fails_every_order() {
    let report = brute(
        &plan(&config(3, Some(r#"["ghost", "<unlisted-tools>"]"#))),
        100,
        0,
        1,
    );
    let (_, why) = report.unhealthy.expect("the assembly must fail");
    assert!(
        why.starts_with(
            "the assembly failed: toolOrder lists unregistered tool \"ghost\"; known tools: "
        ),
        "{why}"
    );
}

#[test]
fn the_bundled_permutation_fixture_matches_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/permute-8.yml");
    if std::env::var_os("CORDIS_RECORD").is_some() {
        std::fs::write(path, config(8, None)).unwrap();
    }
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        on_disk,
        config(8, None),
        "re-record with CORDIS_RECORD=1 cargo test --test suite permute_tool_order::"
    );
}

#[test]
fn every_order_of_six_section_registering_entries_yields_one_prompt() {
    let report = brute(&plan(&config_with(6, None, true)), 1_000_000, 0, 2);
    assert_eq!(report.orders, 720);
    assert_eq!(report.registration_orders, 720);
    assert_eq!(report.outcomes.len(), 1, "{:#?}", report.digests);
    assert!(report.unhealthy.is_none(), "{:?}", report.unhealthy);
}

#[test]
fn sections_with_equal_orders_are_sorted_by_name() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (report, live) = cordis::host::boot_blocking(
        &plan(&config_with(4, None, true)),
        cordis::runtime::Schedule::fifo(),
    )
    .unwrap();
    drop(rt);
    assert!(live.is_zero(), "{live:?}");
    let names: Vec<&str> = report.assembly["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    // order 0: persona, guide:zulu (t0), guide:😀 (t2); order 10: guide:alpha (t1), guide:～ (t3).
    assert_eq!(
        names,
        [
            "deployment:persona",
            "guide:zulu",
            "guide:\u{1F600}_smile",
            "guide:alpha",
            "guide:\u{FF5E}_wave"
        ]
    );
}
