//! The permutation proof with dylib entries: two shared-library plugins (one in Rust against the
//! SDK, one in C) among the tool-registering entries, every order one digest.
#![cfg(unix)]

use crate::common::plugins;

use cordis::host::permute::{factorial, tool_entries};
use cordis::host::plan::{PlanOptions, load_plan};

use crate::common::brute;
use brute::brute;

#[test]
fn every_order_of_two_dylib_and_two_built_in_tool_entries_yields_one_digest() {
    let yml = format!(
        "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
         - id: zulu\n  name: tool-declare\n  config: {{tools: [{{name: zulu, description: z, parameters: {{type: object}}}}]}}\n\
         - id: text\n  name: ./{}\n  config: {{prefix: \"\u{FF5E}\"}}\n\
         - id: alpha\n  name: tool-declare\n  config: {{tools: [{{name: alpha, description: a, parameters: {{type: object}}}}]}}\n\
         - id: c\n  name: ./{}\n  config: \"\u{1F600}\"\n",
        plugins::lib_name("cordis-example-text-tools"),
        plugins::lib_name("c_good"),
    );
    let file = plugins::dir().join("permute-dylib.yml");
    std::fs::write(&file, &yml).unwrap();
    let file = file.display().to_string();
    let plan = load_plan(
        &yml,
        &file,
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = tool_entries(&plan)
        .iter()
        .map(|&i| plan.entries[i].id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["zulu", "text", "alpha", "c"],
        "dylib entries are permuted too"
    );
    let report = brute(&plan, 1_000, 0, 2);
    assert!(report.exhaustive);
    assert_eq!(report.orders, factorial(4));
    assert!(report.unhealthy.is_none(), "{:?}", report.unhealthy);
    assert_eq!(report.outcomes.len(), 1, "{:#?}", report.digests);
    assert!(report.registration_orders > 1, "the proof is not vacuous");
}
