//! `racy/tally` and `racy/first-seen`: example first-party plugins with deliberate races, and
//! what catching them looks like.
//!
//! Each of its tools answers how many of the entry's calls had completed before it
//! (`"completedBefore": n`). When the model calls two of them in one step they run
//! concurrently, so the answer depends on which finished first: the session log then depends
//! on the schedule, which is exactly what `cordis::testing::stress(..).exercise(..)` and
//! `cordis stress --exercise` exist to catch (see `tests/racy.rs`). With `racy: false` it
//! answers without the count, and every seed agrees.
//!
//! The plugin yields at seeded schedule points (`ctx.schedule().point(..)`) before answering,
//! as any plugin doing real asynchronous work would at its awaits; that is where the seeded
//! scheduler reorders the calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cordis_runtime::{BoxError, Context, Inject, Plugin};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use serde::Deserialize;

/// The `racy/tally` plugin.
#[derive(Debug, Clone, Copy)]
pub struct Tally;

/// Config of `racy/tally`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TallyConfig {
    /// The tools to register.
    pub tools: Vec<String>,
    /// Answer the number of calls completed before this one (the race); default true.
    #[serde(default = "yes")]
    pub racy: bool,
}

fn yes() -> bool {
    true
}

/// Seeded points a call passes before it answers: stand-ins for a real tool's awaits.
const POINTS: usize = 2;

impl Plugin for Tally {
    type Config = TallyConfig;

    fn name(&self) -> &str {
        "racy/tally"
    }

    fn inject(&self) -> &[Inject] {
        ToolRegistry::INJECT
    }

    async fn apply(&self, ctx: Context, config: &TallyConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let completed = Arc::new(AtomicU64::new(0));
        for name in &config.tools {
            let schema = ToolSchema {
                name: name.clone(),
                description: format!("Counts its calls (racy/tally \"{name}\")."),
                parameters: serde_json::json!({"type": "object"}).into(),
            };
            let (tool, racy, completed, tool_ctx) =
                (name.clone(), config.racy, completed.clone(), ctx.clone());
            let def = ToolDefinition::new(schema, move |_arguments, _| {
                let (tool, completed, ctx) = (tool.clone(), completed.clone(), tool_ctx.clone());
                async move {
                    let site = format!("racy/tally/{tool}");
                    for _ in 0..POINTS {
                        ctx.schedule().point(&site).await;
                    }
                    // The race: a shared counter read in completion order.
                    let before = completed.fetch_add(1, Ordering::SeqCst);
                    let mut answer = serde_json::json!({"tool": tool});
                    if racy {
                        answer["completedBefore"] = before.into();
                    }
                    Ok(ToolOutput::new(answer))
                }
            })
            // Declared read-only (it only counts), so calls made together overlap: that is how
            // its race can show. A mutating tool runs alone, in call order.
            .read_only();
            registry.register_scheduled(&ctx, def).await?;
        }
        Ok(())
    }
}

/// The `racy/first-seen` plugin: a boot-time race. It registers one tool whose description
/// lists the tools already registered when its entry applied, which depends on which entries
/// the schedule applied first. Even the request header differs between seeds, so a boot-only
/// stress (no exercise) catches it.
#[derive(Debug, Clone, Copy)]
pub struct FirstSeen;

/// Config of `racy/first-seen`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirstSeenConfig {
    /// The tool to register.
    pub tool: String,
}

impl Plugin for FirstSeen {
    type Config = FirstSeenConfig;

    fn name(&self) -> &str {
        "racy/first-seen"
    }

    fn inject(&self) -> &[Inject] {
        ToolRegistry::INJECT
    }

    async fn apply(&self, ctx: Context, config: &FirstSeenConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        // Sorting does not help: the race is in which tools exist yet, not their order.
        let mut seen: Vec<String> = registry.schemas(None).into_iter().map(|s| s.name).collect();
        seen.sort();
        let schema = ToolSchema {
            name: config.tool.clone(),
            description: format!("Registered after: {}.", seen.join(", ")),
            parameters: serde_json::json!({"type": "object"}).into(),
        };
        let def = ToolDefinition::new(schema, |_arguments, _| async {
            Ok(ToolOutput::new(serde_json::json!({})))
        });
        registry.register_scheduled(&ctx, def).await?;
        Ok(())
    }
}

/// The standard plugin table plus `racy/tally` and `racy/first-seen`: what `cordis-racy` runs
/// with.
pub fn builtins() -> cordis::Builtins {
    let mut table = cordis::builtins::standard();
    table.insert(Tally).insert(FirstSeen);
    table
}
