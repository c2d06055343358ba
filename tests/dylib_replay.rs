//! Exact replay with dylib entries: under one seed, the whole registration trace of a
//! composition with two dylib entries (and a built-in tool entry between them) is the same on
//! every boot, whatever the operating system does with the threads that load the libraries:
//! the loader preloads dylib entries (open, `create`, `describe`) before the seeded applies.
#![cfg(unix)]

use crate::common::plugins;

use cordis_host::boot_blocking;
use cordis_host::plan::{PlanOptions, load_plan};
use cordis_runtime::{Policy, Schedule};

fn trace_of(plan: &cordis_host::LoadPlan, policy: Policy, seed: u64) -> Vec<String> {
    let (report, _) = boot_blocking(plan, Schedule::new(policy, seed)).unwrap();
    assert!(report.all_active(), "{:?}", report.entries);
    report
        .trace
        .iter()
        .map(|t| format!("{} {} {}", t.kind, t.label, t.detail))
        .collect()
}

/// Without the preload phase this fails: under one seed, `register a a_echo` lands before or
/// after `apply b` depending on when the thread loading `a` finishes.
#[test]
fn the_same_seed_gives_the_same_registration_trace_with_two_dylib_entries() {
    let yml = format!(
        "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
         - id: a\n  name: ./{c}\n  config: a_\n\
         - id: declared\n  name: tool-declare\n  config: {{tools: [{{name: d1, description: d, parameters: {{type: object}}}}, {{name: d2, description: d, parameters: {{type: object}}}}]}}\n\
         - id: b\n  name: ./{text}\n  config: {{prefix: b_}}\n",
        c = plugins::lib_name("c_good"),
        text = plugins::lib_name("cordis-example-text-tools"),
    );
    let file = plugins::dir().join("replay-dylib.yml");
    std::fs::write(&file, &yml).unwrap();
    let plan = load_plan(
        &yml,
        &file.display().to_string(),
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut distinct_seeds = std::collections::BTreeSet::new();
    for (policy, seed) in [
        (Policy::Random, 1),
        (Policy::Random, 7),
        (Policy::Pct { depth: 3 }, 3),
        (Policy::Fifo, 0),
    ] {
        let first = trace_of(&plan, policy, seed);
        for run in 1..25 {
            let again = trace_of(&plan, policy, seed);
            assert_eq!(
                again, first,
                "{policy} seed {seed}, boot {run}: the trace differs from boot 0"
            );
        }
        distinct_seeds.insert(first);
    }
    assert!(distinct_seeds.len() > 1, "the seeds do perturb the trace");
}
