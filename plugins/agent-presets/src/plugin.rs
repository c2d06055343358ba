//! The `agent-presets` plugin: provides the [`AgentPresets`] roster and registers its invariant.

use std::path::PathBuf;
use std::sync::Arc;

use cordis_history::StandingScopesService;
use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_system_prompt::{SystemPrompt, ToolProviderResult};
use cordis_tools::ToolRegistry;

use crate::composer::Composer;
use crate::config::{AgentPresetsConfig, resolve_roots, user_root};
use crate::roster::AgentPresets;

/// The `agent-presets` plugin (injects `tools` and `system-prompt`; provides `agent-presets`).
///
/// Roots, in precedence order: the configured ones (relative paths resolve against the directory
/// it was built for — the application builds one per configuration file,
/// [`AgentPresetsPlugin::with_base_dir`]; `~/` against `$HOME`), the user's
/// ([`crate::user_root`], unless `includeUserRoot: false`), then the application's shipped
/// presets ([`AgentPresetsPlugin::with_shipped_root`]).
/// Applying reads no file: presets are discovered when listed or mounted.
#[derive(Clone)]
pub struct AgentPresetsPlugin {
    composer: Arc<dyn Composer>,
    base_dir: PathBuf,
    home: Option<PathBuf>,
    user_root: Option<PathBuf>,
    shipped_root: Option<PathBuf>,
}

impl std::fmt::Debug for AgentPresetsPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentPresetsPlugin")
            .field("base_dir", &self.base_dir)
            .field("user_root", &self.user_root)
            .finish_non_exhaustive()
    }
}

impl AgentPresetsPlugin {
    /// A plugin mounting through `composer`, with roots relative to the current directory and
    /// the user root and home from the process environment.
    pub fn new(composer: Arc<dyn Composer>) -> Self {
        let env = |name: &str| std::env::var(name).ok();
        AgentPresetsPlugin {
            composer,
            base_dir: PathBuf::from("."),
            home: env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
            user_root: user_root(&env),
            shipped_root: None,
        }
    }

    /// The presets shipped with the application, searched after every other root (so a
    /// project's or the user's preset of the same id wins); skipped when the directory is absent.
    #[must_use]
    pub fn with_shipped_root(mut self, root: Option<PathBuf>) -> Self {
        self.shipped_root = root;
        self
    }

    /// Relative roots resolve against `dir` (the configuration file's directory).
    #[must_use]
    pub fn with_base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = dir.into();
        self
    }

    /// The user root appended when `includeUserRoot` holds (`None`: no user root).
    #[must_use]
    pub fn with_user_root(mut self, root: Option<PathBuf>) -> Self {
        self.user_root = root;
        self
    }

    /// The composer this plugin mounts through.
    pub fn composer(&self) -> &Arc<dyn Composer> {
        &self.composer
    }
}

const INJECT: &[Inject] = &[
    Inject::required(ToolRegistry::NAME),
    Inject::required(SystemPrompt::NAME),
];

impl Plugin for AgentPresetsPlugin {
    type Config = AgentPresetsConfig;

    fn name(&self) -> &str {
        "agent-presets"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    /// Its presets' rows register into the presets' own realms, never the shared layers.
    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn provides(&self, _config: &AgentPresetsConfig) -> Vec<String> {
        vec![
            AgentPresets::NAME.to_owned(),
            StandingScopesService::NAME.to_owned(),
        ]
    }

    async fn apply(&self, ctx: Context, config: &AgentPresetsConfig) -> Result<(), BoxError> {
        let tools = ctx.require::<ToolRegistry>()?;
        let prompt = ctx.require::<SystemPrompt>()?;
        let roots = resolve_roots(
            config,
            &self.base_dir,
            self.home.as_deref(),
            self.user_root.as_deref(),
            self.shipped_root.as_deref(),
        );
        let roster = AgentPresets::new(
            ctx.clone(),
            self.composer.clone(),
            roots,
            config.default.clone(),
            tools,
        );
        // The invariant: an agent that joined no preset cannot assemble. The provider offers no
        // tools, so it changes no assembly that passes.
        let weak = roster.downgrade();
        let _ = prompt.tools(&ctx, move |assemble| {
            let unavailable = assemble
                .scope
                .zip(weak.upgrade())
                .and_then(|(scope, roster)| roster.unjoined_agent(scope));
            ToolProviderResult {
                unavailable,
                ..ToolProviderResult::default()
            }
        })?;
        // Cold history reads find a session's preset scope through this seam.
        let _ = ctx.provide(StandingScopesService::new(Arc::new(roster.clone())))?;
        let _ = ctx.provide(roster)?;
        Ok(())
    }
}
