//! The `tool-cordis` plugin: `cordis_inspect`, which lists every entry of the running
//! composition (the host's entries and the rows of mounted presets) with its plugin and status,
//! so an agent building compositions can see what loaded and what did not.
//!
//! # Determinism
//! The listing is sorted by entry id, then plugin, then status and failure text; scope ids
//! (which depend on load order) are never shown.

use cordis_runtime::{BoxError, Context, Inject, Plugin};
use cordis_tools::{NoConfig, ToolDefinition, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;

/// The tool name.
pub const CORDIS_INSPECT: &str = "cordis_inspect";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {}

/// One line per labelled scope of the runtime `ctx` lives in: `id (plugin): status[: why]`.
pub fn inspect(ctx: &Context) -> String {
    let mut lines: Vec<(String, String, String)> = ctx
        .scopes()
        .into_iter()
        .filter_map(|s| {
            let label = s.label?;
            let mut status = s.status.as_str().to_owned();
            if let Some(failure) = &s.failure {
                status.push_str(&format!(": {failure}"));
            } else if !s.missing.is_empty() {
                status.push_str(&format!(": waiting for {}", s.missing.join(", ")));
            }
            Some((label, s.plugin, status))
        })
        .collect();
    lines.sort();
    lines
        .into_iter()
        .map(|(id, plugin, status)| format!("{id} ({plugin}): {status}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `tool-cordis` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolCordisPlugin;

impl Plugin for ToolCordisPlugin {
    type Config = NoConfig;

    fn name(&self) -> &str {
        "tool-cordis"
    }

    fn inject(&self) -> &[Inject] {
        ToolRegistry::INJECT
    }

    async fn apply(&self, ctx: Context, _config: &NoConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let root = ctx.root_context();
        let description = "List every entry of the running cordis composition (the host's entries and the rows of mounted agent presets): its id, plugin and status, with the reason when it is not active.";
        let tool = ToolDefinition::typed(CORDIS_INSPECT, description, move |Args {}, _call| {
            let text = inspect(&root);
            async move { Ok(text) }
        })
        .read_only();
        let _ = registry.register_scheduled(&ctx, tool).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lists_labelled_entries_sorted_with_their_status() {
        let root = Context::root();
        let _ = root.provide(ToolRegistry::new(root.clone()));
        let options = |label: &str| cordis_runtime::PluginOptions {
            label: Some(label.into()),
            ..Default::default()
        };
        let b = root.plugin_with(
            cordis_runtime::Prepared::new(ToolCordisPlugin, NoConfig {}),
            options("b-cordis"),
        );
        let a = root.plugin_with(
            cordis_runtime::Prepared::new(
                cordis_runtime::FnPlugin::new("waiter", |_ctx: Context, (): ()| async { Ok(()) })
                    .inject(Inject::required("nobody")),
                (),
            ),
            options("a-waits"),
        );
        root.idle().await;
        let _ = (a, b);
        assert_eq!(
            inspect(&root),
            "a-waits (waiter): pending: waiting for nobody\nb-cordis (tool-cordis): active"
        );
        let registry = root.get::<ToolRegistry>().unwrap();
        assert!(registry.get(CORDIS_INSPECT, None).is_some());
        root.dispose();
    }
}
