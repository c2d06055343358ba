//! `debug/echo`: tools that answer with their own arguments after yielding at seeded schedule
//! points, so calls made together complete in an order that changes with the seed. It exists
//! to prove that what the model sees does not depend on completion order.
//!
//! Config: `{tools: [name, ...], racy: false, mutating: false}`. Each tool answers
//! `{"tool": name, "echo": args}` and traces `tool-complete`. With `racy: true` it also answers
//! the rank in which it completed among the entry's calls (`"rank": n`): a deliberately racy
//! plugin whose results depend on completion order, which `cordis stress --exercise` must catch.
//! The tools are read-only (calls made together overlap) unless `mutating: true`, which makes
//! the loop run them one at a time in call order, and so takes the race away.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cordis_runtime::{BoxError, Context, Inject, Plugin};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use serde::Deserialize;

/// The `debug/echo` plugin.
#[derive(Debug, Clone, Copy)]
pub struct Echo;

/// Config of `debug/echo`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EchoConfig {
    /// The tools to register.
    pub tools: Vec<String>,
    /// Answer the completion rank too (a deliberate race).
    #[serde(default)]
    pub racy: bool,
    /// Declare the tools mutating, so calls made together run one at a time in call order
    /// (default: read-only, so they overlap).
    #[serde(default)]
    pub mutating: bool,
}

/// The trace kind each completed call records.
pub const TRACE_TOOL_COMPLETE: &str = "tool-complete";

/// Seeded points a call passes before it answers.
const POINTS: usize = 3;

impl Plugin for Echo {
    type Config = EchoConfig;

    fn name(&self) -> &str {
        "debug/echo"
    }

    fn inject(&self) -> &[Inject] {
        ToolRegistry::INJECT
    }

    fn claims(&self, config: &EchoConfig) -> Vec<cordis_runtime::Claim> {
        config
            .tools
            .iter()
            .map(cordis_runtime::Claim::tool)
            .collect()
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &EchoConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let completed = Arc::new(AtomicU64::new(0));
        for name in &config.tools {
            let schema = ToolSchema {
                name: name.clone(),
                description: format!("Answers with its own arguments (debug/echo \"{name}\")."),
                parameters: serde_json::json!({"type": "object"}).into(),
            };
            let (tool, racy, completed, ctx_) =
                (name.clone(), config.racy, completed.clone(), ctx.clone());
            let mutating = config.mutating;
            let def = ToolDefinition::new(schema, move |arguments, _| {
                let (tool, completed, ctx) = (tool.clone(), completed.clone(), ctx_.clone());
                async move {
                    let site = format!("tool-call/{tool}");
                    for _ in 0..POINTS {
                        ctx.schedule().point(&site).await;
                    }
                    let rank = completed.fetch_add(1, Ordering::SeqCst);
                    ctx.trace(TRACE_TOOL_COMPLETE, tool.clone());
                    let mut answer = serde_json::json!({"tool": tool, "echo": arguments});
                    if racy {
                        answer["rank"] = rank.into();
                    }
                    Ok(ToolOutput::new(answer))
                }
            });
            let def = if mutating { def } else { def.read_only() };
            registry.register_scheduled(&ctx, def).await?;
        }
        Ok(())
    }
}
