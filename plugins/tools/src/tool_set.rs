//! A plugin that only registers tools, written as a [`ToolSet`]: a name and a list of tools.
//!
//! Choose it for a pure tool plugin (no configuration, no other services): the registry
//! injection, the empty config, the schedule point and the trace come with [`ToolSetPlugin`].
//! Write a [`Plugin`] by hand when the plugin needs configuration or other services.
//!
//! # Examples
//!
//! ```
//! use cordis_tools::{ToolDefinition, ToolSet, ToolSetPlugin};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Args {
//!     text: String,
//! }
//!
//! /// The `tool-reverse` tools.
//! #[derive(Debug, Default)]
//! pub struct Reverse;
//!
//! impl ToolSet for Reverse {
//!     const NAME: &'static str = "tool-reverse";
//!
//!     fn tools(&self) -> Vec<ToolDefinition> {
//!         vec![ToolDefinition::typed("reverse", "Reverse text.", |a: Args, _| async move {
//!             Ok(a.text.chars().rev().collect::<String>())
//!         })]
//!     }
//! }
//!
//! /// The `tool-reverse` plugin.
//! pub type ReversePlugin = ToolSetPlugin<Reverse>;
//! # let _ = ReversePlugin::default();
//! ```

use cordis_runtime::{BoxError, Claim, Context, Inject, Plugin};

use crate::definition::ToolDefinition;
use crate::plugin::NoConfig;
use crate::registry::ToolRegistry;

/// The tools of a pure tool plugin.
pub trait ToolSet: Send + Sync + 'static {
    /// The plugin name, as the host's plugin table and `cordis.yml` spell it.
    const NAME: &'static str;

    /// Fresh tools for one apply: state they own lives as long as their registration.
    fn tools(&self) -> Vec<ToolDefinition>;
}

/// The plugin of a [`ToolSet`]: injects the registry, takes `{}` as config, and registers every
/// tool with [`ToolRegistry::register_scheduled`] on each apply.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolSetPlugin<T>(pub T);

impl<T: ToolSet> Plugin for ToolSetPlugin<T> {
    type Config = NoConfig;

    fn name(&self) -> &str {
        T::NAME
    }

    fn inject(&self) -> &[Inject] {
        ToolRegistry::INJECT
    }

    /// Every tool of the set, by name: the definitions say it, so nothing keeps a copy.
    fn claims(&self, _config: &NoConfig) -> Vec<Claim> {
        self.0
            .tools()
            .iter()
            .map(|t| Claim::tool(t.name().to_owned()))
            .collect()
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, _config: &NoConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        for tool in self.0.tools() {
            let _ = registry.register_scheduled(&ctx, tool).await?;
        }
        Ok(())
    }
}
