//! Naming `inject` cycles before anything loads: entries that wait for each other's services
//! would otherwise sit pending forever and be reported as two unexplained pending entries.
//!
//! An entry *needs* the services its plugin injects as required plus its own `inject` list, and
//! *provides* what its plugin declares ([`cordis_runtime::Plugin::provides`]). Entry A waits on
//! entry B when B is the only entry providing a service A needs. A cycle of such waits can never
//! resolve, so it is a configuration error. A plugin that declares nothing is never part of a
//! reported cycle (no false alarms; such a cycle still shows as pending entries at run time).
//!
//! # Determinism
//! Entries are visited in file order and each cycle is reported once, at its first entry in file
//! order, listing its waits in that order.

use std::collections::BTreeMap;

use crate::diagnostic::{Diagnostic, Problem};
use crate::plan::{LoadPlan, Step};

/// A cycle diagnostic for every set of entries that wait on each other.
pub fn inject_cycles(plan: &LoadPlan) -> Vec<Diagnostic> {
    let n = plan.entries.len();
    let mut needs: Vec<Vec<String>> = vec![Vec::new(); n];
    let mut providers: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, entry) in plan.entries.iter().enumerate() {
        let Step::Plugin {
            prepared, inject, ..
        } = &entry.step
        else {
            continue;
        };
        let mut wanted: Vec<String> = prepared
            .plugin
            .inject()
            .iter()
            .filter(|i| i.required)
            .map(|i| i.name.to_string())
            .chain(inject.iter().cloned())
            .collect();
        wanted.sort();
        wanted.dedup();
        needs[i] = wanted;
        for service in prepared.plugin.provides_erased(&*prepared.config) {
            providers.entry(service).or_default().push(i);
        }
    }
    // waits[a] = (b, service): a waits on b, the only provider of `service`.
    let waits: Vec<Vec<(usize, String)>> = needs
        .iter()
        .enumerate()
        .map(|(a, wanted)| {
            wanted
                .iter()
                .filter_map(|s| match providers.get(s).map(Vec::as_slice) {
                    Some([b]) if *b != a => Some((*b, s.clone())),
                    _ => None,
                })
                .collect()
        })
        .collect();
    // An entry waiting for a service only it provides is a cycle of one.
    let own: Vec<(usize, String)> = needs
        .iter()
        .enumerate()
        .flat_map(|(a, wanted)| {
            let providers = &providers;
            wanted
                .iter()
                .filter_map(move |s| match providers.get(s).map(Vec::as_slice) {
                    Some([b]) if *b == a => Some((a, s.clone())),
                    _ => None,
                })
        })
        .collect();
    let mut out: Vec<(usize, Diagnostic)> = strongly_connected(&waits)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| (component[0], describe(plan, &waits, &component)))
        .collect();
    out.extend(own.into_iter().map(|(a, service)| {
        let entry = &plan.entries[a];
        (
            a,
            Diagnostic {
                file: plan.file.clone(),
                pos: entry.pos,
                entry: Some(entry.id.clone()),
                problem: Problem::InjectCycle(format!(
                    "\"{}\" waits for {service}, which only it provides; it can never start: drop the `inject` or provide the service from another entry",
                    entry.id
                )),
            },
        )
    }));
    out.sort_by_key(|(first, _)| *first);
    out.into_iter().map(|(_, d)| d).collect()
}

/// The diagnostic of one cycle (`component` sorted by file order).
fn describe(plan: &LoadPlan, waits: &[Vec<(usize, String)>], component: &[usize]) -> Diagnostic {
    let first = &plan.entries[component[0]];
    let steps: Vec<String> = component
        .iter()
        .flat_map(|&a| {
            waits[a]
                .iter()
                .filter(|(b, _)| component.contains(b))
                .map(move |(b, service)| {
                    let (ea, eb) = (&plan.entries[a], &plan.entries[*b]);
                    format!(
                        "\"{}\" waits for {service}, which only \"{}\" ({}) provides",
                        ea.id, eb.id, eb.pos
                    )
                })
        })
        .collect();
    Diagnostic {
        file: plan.file.clone(),
        pos: first.pos,
        entry: Some(first.id.clone()),
        problem: Problem::InjectCycle(format!(
            "{}; none of them can ever start: drop one `inject` or provide the service from another entry",
            steps.join(", ")
        )),
    }
}

/// Tarjan's strongly connected components, iteratively (plans can have 100,000 entries), each
/// component sorted, components in order of their first node.
fn strongly_connected(waits: &[Vec<(usize, String)>]) -> Vec<Vec<usize>> {
    let n = waits.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next edge to look at)
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut edge)) = work.last_mut() {
            if *edge == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some((w, _)) = waits[v].get(*edge) {
                let w = *w;
                *edge += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                component.sort_unstable();
                out.push(component);
            }
        }
    }
    out.sort_by_key(|c| c[0]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(list: &[&[usize]]) -> Vec<Vec<(usize, String)>> {
        list.iter()
            .map(|to| to.iter().map(|&b| (b, "s".to_owned())).collect())
            .collect()
    }

    #[test]
    fn an_entry_waiting_for_a_service_only_it_provides_is_a_cycle() {
        let plan = crate::plan::load_plan(
            "- id: p\n  name: debug/provide\n  config: {service: alpha}\n  inject: [alpha]\n",
            "c.yml",
            &|_| None,
            &crate::builtins::Builtins::host(),
            &crate::plan::PlanOptions::default(),
        );
        let errors: Vec<String> = plan
            .unwrap_err()
            .diagnostics()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "c.yml:1:1: entry \"p\": inject cycle: \"p\" waits for alpha, which only it provides; it can never start: drop the `inject` or provide the service from another entry"
            ]
        );
    }

    #[test]
    fn components_are_found_without_recursion_and_in_order() {
        let g = edges(&[&[1], &[0], &[3], &[], &[4]]);
        assert_eq!(
            strongly_connected(&g),
            vec![vec![0, 1], vec![2], vec![3], vec![4]]
        );
        // A 100,000-long chain closing on itself: one component, no stack overflow.
        let n = 100_000;
        let long: Vec<Vec<(usize, String)>> = (0..n)
            .map(|i| vec![((i + 1) % n, "s".to_owned())])
            .collect();
        let c = strongly_connected(&long);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].len(), n);
    }
}
