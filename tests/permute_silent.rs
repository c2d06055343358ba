//! Proofs that stay exact with entries that state nothing (issue 45).
//!
//! `tests/fixtures/permute-silent.yml` has 20 plugin entries, three of them `debug/claim` (a
//! plugin that says neither what it claims nor which kinds of name it registers). Guessing
//! that each may read every tool and section would make thousands of classes of orders for
//! one such entry and billions for three; explored by what the boots saw them do (dynamic
//! partial-order reduction) the proof covers all 20! orders in a handful of boots. A run
//! that had to sample instead of proving exits 6, saying so. And every built-in plugin states
//! its claims: booted with a representative config, none writes a name it did not state, nor
//! reads one another entry registers.

use std::collections::BTreeSet;

use cordis::host::permute::{Space, boot};
use cordis::host::plan::{LoadPlan, PlanOptions, load_plan};
use cordis::runtime::Claim;

use crate::common::{cordis, fixture};

/// Classes of orders the reduced proof of the fixture boots (see the module docs).
const SILENT_CLASSES: u64 = 2;

#[test]
fn twenty_entries_with_three_silent_ones_are_proven_exactly() {
    let file = fixture("permute-silent.yml");
    let run = cordis(&["permute", &file, "--json", "--threads", "2"], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.out, run.err);
    let report: serde_json::Value = serde_json::from_str(&run.out).unwrap();
    assert_eq!(report["entries"].as_array().unwrap().len(), 20);
    assert_eq!(report["exhaustive"], true, "{}", run.out);
    assert_eq!(report["orders"], SILENT_CLASSES, "{}", run.out);
    assert_eq!(report["distinct_outcomes"], 1);
    assert_eq!(report["claims"]["silent (seen)"], 3, "{}", run.out);
    // Guessed instead (each silent entry reading every tool and section), the classes run
    // past any budget.
    let plan = plan(&std::fs::read_to_string(&file).unwrap());
    let (_, complete) = Space::of(&plan).unseen().classes(100_000);
    assert!(!complete, "the guess has more than 100,000 classes");
}

#[test]
fn a_permute_that_samples_instead_of_proving_exits_6_and_says_so() {
    let file = fixture("permute-silent.yml");
    // Brute force over 20! orders cannot be exhaustive: a seeded sample, not a proof.
    let run = cordis(&["permute", &file, "--all", "--max", "3"], &[]);
    assert_eq!(run.code, 6, "{}\n{}", run.out, run.err);
    assert!(run.out.contains("seeded sample"), "{}", run.out);
    assert!(
        run.err
            .contains("cordis: not proven: 3 seeded orders sampled of"),
        "{}",
        run.err
    );
    // A proof that covers every class exits 0.
    assert_eq!(cordis(&["permute", &file], &[]).code, 0);
}

/// Every built-in plugin with a representative config, beside the registries and services
/// they need. `agent-core` (which provides those itself) boots apart.
const BUILTINS: &str = r#"
- {id: system-prompt, name: system-prompt, config: {persona: "A persona."}}
- {id: tools, name: tools}
- {id: todo, name: tool-todo}
- {id: web, name: tool-declare, config: {tools: [{name: web_fetch, description: Fetch a URL., parameters: {type: object}}]}}
- {id: llm, name: llm, config: {adapter: scripted, model: m}}
- {id: sessions, name: sessions, config: {memory: true}}
- {id: agent-loop, name: agent-loop, config: {maxSteps: 4}}
- {id: subagent, name: tool-subagent}
- {id: workspace, name: workspace, config: {root: "."}}
- {id: fs, name: tool-fs}
- {id: search, name: tool-search}
- {id: shell, name: tool-shell, config: {sandbox: workspace-write, env: [PATH]}}
- {id: approvals, name: approvals, config: {mode: ask}}
- {id: presenter, name: presenter}
- {id: code-runtime, name: code-runtime}
- {id: presentation, name: tool-presentation, config: {mode: native}}
- {id: restrict, name: tool-restrict, config: {deny: [web_fetch]}}
- {id: persona, name: persona, config: {text: "Another persona."}}
- {id: tool-order, name: tool-order, config: {}}
- {id: cordis, name: tool-cordis}
- {id: presets, name: agent-presets, config: {roots: [{path: PRESETS}], default: standard}}
- {id: down, name: mcp, config: {transport: stdio, server: down, command: /nonexistent/mcp-server}}
- {id: history, name: history}
- {id: instructions, name: instructions}
- {id: skills, name: skills}
- {id: hooks, name: hooks, config: {hooks: {PreToolUse: [{matcher: bash, hooks: [{type: command, command: "true"}]}]}}}
- {id: noop, name: debug/noop}
- {id: provide, name: debug/provide, config: {service: beta}}
- {id: fault, name: debug/fault, config: {mode: ok}}
- {id: log, name: debug/log}
- {id: echo, name: debug/echo, config: {tools: [echo_a, echo_b]}}
- {id: deferred, name: deferred-tools, config: {threshold: 8}}
"#;

const AGENT_CORE: &str = "- {id: core, name: agent-core, config: {persona: P}}\n";

/// `debug/claim` states nothing on purpose: it stands for a third-party plugin that does not
/// (the proofs above and the host's tests use it so).
const SILENT_ON_PURPOSE: [&str; 1] = ["debug/claim"];

fn plan(yml: &str) -> LoadPlan {
    let presets = cordis::builtins::shipped_presets().display().to_string();
    load_plan(
        &yml.replace("PRESETS", &presets),
        "builtins.yml",
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// What each plugin entry of `plan` did beyond what it states, one line each: a name it wrote
/// that it did not state, a name it looked up that another entry writes (other than a service
/// it injects optionally), a listing of a kind another entry writes.
fn beyond_statements(plan: &LoadPlan) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let starts: Vec<usize> = (0..plan.entries.len()).collect();
    let outcome = rt.block_on(boot(plan, &starts));
    let space = Space::of(plan);
    // Who writes what: stated claims and what the boot saw written, by element.
    let writes: Vec<Vec<Claim>> = space
        .ids
        .iter()
        .zip(&space.footprints)
        .map(|(id, f)| {
            let seen = outcome.names.get(id).map(|n| n.writes.clone());
            f.claims
                .iter()
                .cloned()
                .chain(seen.into_iter().flatten())
                .collect()
        })
        .collect();
    let written_by_another = |me: usize, hit: &dyn Fn(&Claim) -> bool| {
        writes
            .iter()
            .enumerate()
            .any(|(k, w)| k != me && w.iter().any(hit))
    };
    let mut out = Vec::new();
    for (k, id) in space.ids.iter().enumerate() {
        let stated = &space.footprints[k];
        if stated.silent {
            out.push(format!("{id} does not state its claims"));
            continue;
        }
        let seen = outcome.names.get(id).cloned().unwrap_or_default();
        for w in &seen.writes {
            let said = stated
                .claims
                .iter()
                .any(|c| c.kind == w.kind && c.name == w.name)
                || stated.open.iter().any(|k| *k == w.kind);
            if !said {
                out.push(format!("{id} wrote {w} without stating it"));
            }
        }
        for r in &seen.reads {
            let optional = r.kind == "service" && stated.optional.contains(&r.name);
            if !optional && written_by_another(k, &|w| w.kind == r.kind && w.name == r.name) {
                out.push(format!(
                    "{id} read {r}, which another entry writes, while booting"
                ));
            }
        }
        for kind in &seen.lists {
            if written_by_another(k, &|w| w.kind == *kind) {
                out.push(format!("{id} listed every {kind} while booting"));
            }
        }
    }
    out
}

#[test]
fn every_built_in_states_its_claims_and_does_nothing_beyond_them_when_booted() {
    let table = cordis::builtins::standard();
    let mut covered = BTreeSet::new();
    let mut beyond = Vec::new();
    for yml in [BUILTINS, AGENT_CORE] {
        let plan = plan(yml);
        for entry in &plan.entries {
            covered.insert(entry.name.clone());
        }
        beyond.extend(beyond_statements(&plan));
    }
    assert!(beyond.is_empty(), "{beyond:#?}");
    let missing: Vec<String> = table
        .names()
        .into_iter()
        .filter(|n| table.get(n).is_some() && !covered.contains(n))
        .filter(|n| !SILENT_ON_PURPOSE.contains(&n.as_str()))
        .collect();
    assert!(missing.is_empty(), "not booted here: {missing:?}");
    // The one built-in that states nothing does so on purpose.
    for name in SILENT_ON_PURPOSE {
        let plugin = table.get(name).unwrap();
        let config = plugin.parse_config(&serde_json::json!({})).unwrap();
        assert!(plugin.open_claims_erased(&*config).is_none());
    }
}
