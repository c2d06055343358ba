//! Refusing, before anything loads, two entries that claim one name: a service both provide, a
//! tool or prompt section both declare, an override both make, an MCP server name both use.
//!
//! At run time the runtime and the registries resolve such a name symmetrically (it is
//! contested: nobody gets it, both report it, see [`cordis_runtime::Claim`]); where the
//! configuration already says enough, the plan refuses it instead, with one diagnostic naming
//! every claimant and its position, so the user fixes the file rather than reading statuses.
//!
//! What an entry claims is what its plugin states for its config:
//! [`cordis_runtime::Plugin::provides`] (services) and [`cordis_runtime::Plugin::claims`]
//! (everything else). Disabled entries claim nothing.
//!
//! # Determinism
//! One diagnostic per set of entries that share claims, at the first of them in file order,
//! listing the shared claims sorted and the other entries in file order.

use std::collections::BTreeMap;

use cordis_runtime::Claim;

use crate::diagnostic::{Diagnostic, Problem};
use crate::plan::{LoadPlan, PlannedEntry, Step};

/// What `entry` claims, sorted and without repeats (empty unless it is a plugin entry).
pub fn entry_claims(entry: &PlannedEntry) -> Vec<Claim> {
    let Step::Plugin { prepared, .. } = &entry.step else {
        return Vec::new();
    };
    let config = &*prepared.config;
    let mut claims: Vec<Claim> = prepared
        .plugin
        .provides_erased(config)
        .into_iter()
        .map(Claim::service)
        .chain(prepared.plugin.claims_erased(config))
        .collect();
    claims.sort();
    claims.dedup();
    claims
}

/// A diagnostic for every set of entries of `plan` that claim one name.
pub fn conflicts(plan: &LoadPlan) -> Vec<Diagnostic> {
    let mut claimants: BTreeMap<Claim, Vec<usize>> = BTreeMap::new();
    for (i, entry) in plan.entries.iter().enumerate() {
        for claim in entry_claims(entry) {
            claimants.entry(claim).or_default().push(i);
        }
    }
    // Group the contested claims by who contests them: one diagnostic per set of entries.
    let mut by_set: BTreeMap<Vec<usize>, Vec<Claim>> = BTreeMap::new();
    for (claim, entries) in claimants {
        if entries.len() > 1 {
            by_set.entry(entries).or_default().push(claim);
        }
    }
    by_set
        .into_iter()
        .map(|(entries, claims)| {
            let first = &plan.entries[entries[0]];
            let others: Vec<String> = entries[1..]
                .iter()
                .map(|&i| {
                    let e = &plan.entries[i];
                    format!("\"{}\" ({}:{})", e.id, e.file, e.pos)
                })
                .collect();
            Diagnostic {
                file: first.file.clone(),
                pos: first.pos,
                entry: Some(first.id.clone()),
                problem: Problem::Conflict {
                    claims: claims
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    others: cordis_runtime::prose_list(&others),
                    plural: others.len() > 1,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::builtins::Builtins;
    use crate::plan::{PlanOptions, load_plan};

    fn errors(src: &str) -> Vec<String> {
        match load_plan(
            src,
            "c.yml",
            &|_| None,
            &Builtins::host(),
            &PlanOptions::default(),
        ) {
            Ok(_) => Vec::new(),
            Err(e) => e.diagnostics().iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn two_providers_of_one_service_are_refused_naming_both_in_every_file_order() {
        let a = "- id: one\n  name: debug/provide\n  config: {service: alpha}\n";
        let b = "- id: two\n  name: debug/provide\n  config: {service: alpha}\n";
        assert_eq!(
            errors(&format!("{a}{b}")),
            [
                "c.yml:1:1: entry \"one\": service \"alpha\" is also claimed by entry \"two\" (c.yml:4:1): one name, one owner; remove it from all but one of the entries, or disable all but one"
            ]
        );
        assert_eq!(
            errors(&format!("{b}{a}")),
            [
                "c.yml:1:1: entry \"two\": service \"alpha\" is also claimed by entry \"one\" (c.yml:4:1): one name, one owner; remove it from all but one of the entries, or disable all but one"
            ]
        );
        // A disabled entry claims nothing.
        assert!(errors(&format!("{a}{b}  disabled: true\n")).is_empty());
    }
}
