//! The `llm` plugin: builds the configured adapter and provides the [`Llm`] service.

use std::path::PathBuf;
use std::sync::Arc;

use cordis_runtime::{BoxError, Context, Plugin};
use serde::Deserialize;

use crate::adapter::LlmAdapter;
use crate::scripted::{ScriptedAdapter, ScriptedResponse};
use crate::service::Llm;

/// Which adapter the plugin builds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdapterKind {
    /// [`ScriptedAdapter`]: replays `script` (a file) or inline `responses`.
    #[default]
    Scripted,
}

/// Configuration of the `llm` plugin: `{adapter: scripted, script: path}` or
/// `{adapter: scripted, responses: [...], repeat: bool}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LlmConfig {
    /// The adapter (`scripted`; an OpenAI-compatible adapter will join it).
    #[serde(default)]
    pub adapter: AdapterKind,
    /// A fixture file (YAML, or JSON by extension).
    #[serde(default)]
    pub script: Option<PathBuf>,
    /// Inline responses (when no `script` is given).
    #[serde(default)]
    pub responses: Option<Vec<ScriptedResponse>>,
    /// Cycle the inline responses forever.
    #[serde(default)]
    pub repeat: bool,
}

/// The `llm` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct LlmPlugin;

impl Plugin for LlmPlugin {
    type Config = LlmConfig;

    fn name(&self) -> &str {
        "llm"
    }

    async fn apply(&self, ctx: Context, config: &LlmConfig) -> Result<(), BoxError> {
        let adapter: Arc<dyn LlmAdapter> = match config.adapter {
            AdapterKind::Scripted => {
                let scripted = match (&config.script, &config.responses) {
                    (Some(_), Some(_)) => {
                        return Err("llm: give either `script` or `responses`, not both".into());
                    }
                    (Some(path), None) => {
                        let path = path.clone();
                        tokio::task::spawn_blocking(move || ScriptedAdapter::load(&path)).await??
                    }
                    (None, responses) => {
                        ScriptedAdapter::new(responses.clone().unwrap_or_default())
                    }
                };
                Arc::new(if config.repeat {
                    scripted.repeating()
                } else {
                    scripted
                })
            }
        };
        let _ = ctx.provide(Llm::new(ctx.clone(), adapter))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;

    use super::*;

    #[tokio::test]
    async fn the_plugin_provides_llm_with_a_scripted_adapter_from_a_file() {
        let dir = std::env::temp_dir().join(format!("cordis-llm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("script.json");
        std::fs::write(&path, r#"[{"text": "hi"}]"#).unwrap();
        let root = Context::root();
        let config: LlmConfig =
            serde_json::from_value(serde_json::json!({"adapter": "scripted", "script": path}))
                .unwrap();
        let h = root.plugin(LlmPlugin, config);
        assert_eq!(h.settled().await, ScopeStatus::Active);
        let llm = root.get::<Llm>().unwrap();
        assert_eq!(llm.adapter().name(), "scripted");
        let bad = root.plugin(
            LlmPlugin,
            LlmConfig {
                script: Some(dir.join("missing.yml")),
                ..Default::default()
            },
        );
        assert_eq!(bad.settled().await, ScopeStatus::Failed);
        assert!(bad.failure().unwrap().message.contains("missing.yml"));
        root.dispose();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn an_unknown_adapter_is_a_config_error() {
        let err = serde_json::from_value::<LlmConfig>(serde_json::json!({"adapter": "magic"}))
            .unwrap_err();
        assert!(err.to_string().contains("unknown variant `magic`"), "{err}");
    }
}
