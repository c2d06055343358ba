//! The reduction for silent entries (dynamic partial-order reduction) against brute force:
//! random compositions of `test/probe` entries — plugins that state nothing, look tools up,
//! list them, register tools only when they saw one, listen to and emit events while
//! applying, and inject a service optionally — give the same verdict and the same set of
//! distinct outcomes under the reduced proof as under every order.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cordis_runtime::{BoxError, Claim, Context, Inject, Plugin, Schedule, Service};
use cordis_system_prompt::{AssembledSection, SystemPrompt, SystemPromptAssemble};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use serde::Deserialize;

use super::*;
use crate::builtins::Builtins;
use crate::debug::Marker;
use crate::plan::LoadPlan;

struct Ping;
impl cordis_runtime::Event for Ping {
    const NAME: &'static str = "test/probe-ping";
    type Output = ();
}

/// Config of `test/probe` and `test/probe-opt`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeConfig {
    /// Tools to register.
    #[serde(default)]
    tools: Vec<String>,
    /// `[seen, then]`: register the tool `then` when the tool `seen` is visible.
    #[serde(default)]
    when: Vec<(String, String)>,
    /// Register `<id>-list` describing every tool visible when it applied.
    #[serde(default)]
    list: bool,
    /// Listen to the ping event (a note at assembly says how often it came).
    #[serde(default)]
    listen: bool,
    /// Emit the ping event at the end of its apply.
    #[serde(default)]
    emit: bool,
    /// Provide the marker service `alpha`.
    #[serde(default)]
    provide: bool,
    /// State its claims (only for a config that registers `tools` and nothing else).
    #[serde(default)]
    stated: bool,
}

const PROBE_INJECT: &[Inject] = &[
    Inject::required(ToolRegistry::NAME),
    Inject::required(SystemPrompt::NAME),
];

const PROBE_OPT_INJECT: &[Inject] = &[
    Inject::required(ToolRegistry::NAME),
    Inject::required(SystemPrompt::NAME),
    Inject::optional("alpha"),
];

/// `test/probe` (`optional: false`) and `test/probe-opt` (injects `alpha` optionally and
/// registers `<id>-alpha` when it is there).
#[derive(Debug, Clone, Copy)]
struct Probe {
    optional: bool,
}

fn tool(name: &str, description: String) -> ToolDefinition {
    let schema = ToolSchema {
        name: name.to_owned(),
        description,
        parameters: serde_json::json!({"type": "object"}).into(),
    };
    ToolDefinition::new(schema, |_, _| async {
        Ok(ToolOutput::new(serde_json::json!({})))
    })
}

impl Plugin for Probe {
    type Config = ProbeConfig;

    fn name(&self) -> &str {
        if self.optional {
            "test/probe-opt"
        } else {
            "test/probe"
        }
    }

    fn inject(&self) -> &[Inject] {
        if self.optional {
            PROBE_OPT_INJECT
        } else {
            PROBE_INJECT
        }
    }

    fn claims(&self, config: &ProbeConfig) -> Vec<Claim> {
        if config.stated {
            config.tools.iter().map(Claim::tool).collect()
        } else {
            Vec::new()
        }
    }

    fn provides(&self, config: &ProbeConfig) -> Vec<String> {
        if config.stated && config.provide {
            vec!["alpha".to_owned()]
        } else {
            Vec::new()
        }
    }

    fn open_claims(&self, config: &ProbeConfig) -> Option<Vec<&'static str>> {
        config.stated.then(Vec::new)
    }

    async fn apply(&self, ctx: Context, config: &ProbeConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let who = ctx.label().unwrap_or("probe").to_owned();
        if config.listen {
            let heard = Arc::new(AtomicUsize::new(0));
            let count = heard.clone();
            drop(ctx.on::<Ping>(move |_| {
                count.fetch_add(1, Ordering::SeqCst);
            }));
            let who = who.clone();
            drop(ctx.on_waterfall::<SystemPromptAssemble, _, _>(
                cordis_runtime::Position::Back,
                move |mut v, next| {
                    v.assembly.sections.push(AssembledSection {
                        name: format!("heard:{who}"),
                        order: 1_000.0,
                        text: format!("{who} heard {}", heard.load(Ordering::SeqCst)),
                    });
                    next.run(v)
                },
            ));
        }
        for name in &config.tools {
            registry
                .register_scheduled(&ctx, tool(name, format!("{name} of {who}")))
                .await?;
        }
        for (seen, then) in &config.when {
            ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
            if registry.get(seen, None).is_some() {
                registry
                    .register_scheduled(&ctx, tool(then, format!("{who} saw {seen}")))
                    .await?;
            }
        }
        if config.list {
            let seen: Vec<String> = registry.schemas(None).into_iter().map(|s| s.name).collect();
            let name = format!("{who}-list");
            registry
                .register_scheduled(&ctx, tool(&name, format!("saw {}", seen.join(","))))
                .await?;
        }
        if self.optional && ctx.get::<Marker<0>>().is_some() {
            let name = format!("{who}-alpha");
            registry
                .register_scheduled(&ctx, tool(&name, "alpha was there".to_owned()))
                .await?;
        }
        if config.provide {
            ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
            drop(ctx.provide(Marker::<0>)?);
        }
        if config.emit {
            ctx.emit(Ping);
        }
        Ok(())
    }
}

/// A deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn name(&mut self) -> &'static str {
        ["a", "b", "c", "d"][self.below(4) as usize]
    }
}

/// One random probe entry's YAML (`id: p<i>`).
fn random_entry(rng: &mut Rng, i: usize) -> String {
    let stated = rng.chance(20);
    let mut fields: Vec<String> = Vec::new();
    let tools: BTreeSet<&str> = (0..rng.below(3)).map(|_| rng.name()).collect();
    if !tools.is_empty() {
        let tools: Vec<&str> = tools.into_iter().collect();
        fields.push(format!("tools: {tools:?}"));
    }
    if stated {
        fields.push("stated: true".to_owned());
    } else {
        if rng.chance(50) {
            let when: Vec<[&str; 2]> = (0..=rng.below(2))
                .map(|_| [rng.name(), rng.name()])
                .collect();
            fields.push(format!("when: {when:?}"));
        }
        for (field, percent) in [("list", 20), ("listen", 30), ("emit", 30), ("provide", 15)] {
            if rng.chance(percent) {
                fields.push(format!("{field}: true"));
            }
        }
    }
    let name = if !stated && rng.chance(30) {
        "test/probe-opt"
    } else {
        "test/probe"
    };
    format!(
        "- id: p{i}\n  name: {name}\n  config: {{{}}}\n",
        fields.join(", ")
    )
}

fn table() -> Builtins {
    let mut table = Builtins::host();
    table.insert(Probe { optional: false });
    table.insert(Probe { optional: true });
    table
}

/// A random composition of 2–5 probes after the two registries, or `None` when the plan
/// refuses it (two stated entries claiming one name).
fn random_composition(rng: &mut Rng) -> (String, Option<LoadPlan>) {
    let mut yml =
        String::from("- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n");
    for i in 0..2 + rng.below(4) as usize {
        yml.push_str(&random_entry(rng, i));
    }
    let plan = crate::plan::load_plan(
        &yml,
        "generated.yml",
        &|_| None,
        &table(),
        &crate::plan::PlanOptions::default(),
    )
    .ok();
    (yml, plan)
}

const OPTIONS: ProofOptions = ProofOptions {
    max: 100_000,
    seed: 0,
    threads: 1,
};

#[test]
fn the_reduced_proof_of_silent_entries_finds_every_outcome_brute_force_finds() {
    let mut rng = Rng(45);
    let (mut compositions, mut dependent_ones, mut fewer_boots) = (0, 0, 0);
    let (mut reduced_boots, mut brute_boots) = (0, 0);
    while compositions < 200 {
        let (yml, Some(plan)) = random_composition(&mut rng) else {
            continue;
        };
        compositions += 1;
        // Every order of the probes (the registries, which every probe requires and so waits
        // for, stay first); the reduced proof permutes the registries too.
        let probes: Vec<usize> = (2..plan.entries.len()).collect();
        let brute = permute(&plan, &probes, &OPTIONS, &|_| {}).unwrap();
        assert!(brute.exhaustive);
        let reduced = prove(&plan, &OPTIONS, &|_| {}).unwrap();
        assert!(reduced.exhaustive, "{yml}");
        let keys = |r: &PermuteReport| -> BTreeSet<_> {
            r.outcomes.iter().map(|(_, o)| o.key()).collect()
        };
        assert_eq!(
            keys(&reduced),
            keys(&brute),
            "composition {compositions}:\n{yml}\nreduced {} orders ({:?}), brute force {}",
            reduced.orders,
            reduced.interacting,
            brute.orders
        );
        assert_eq!(
            reduced.unhealthy.is_some(),
            brute.unhealthy.is_some(),
            "{yml}"
        );
        if brute.outcomes.len() > 1 {
            dependent_ones += 1;
        }
        reduced_boots += reduced.orders;
        brute_boots += brute.orders;
        if reduced.orders < brute.orders {
            fewer_boots += 1;
        }
    }
    // Not vacuous: many compositions depend on order, and the reduction saves boots.
    eprintln!(
        "{compositions} compositions: {dependent_ones} order-dependent, {fewer_boots} reduced, \
         {reduced_boots} reduced boots against {brute_boots} brute-force boots"
    );
    assert!(dependent_ones >= 40, "{dependent_ones} order-dependent");
    assert!(fewer_boots >= 100, "{fewer_boots} reduced");
    assert!(reduced_boots * 2 < brute_boots);
}
