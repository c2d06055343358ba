//! The `llm` plugin: builds the configured adapter and provides the [`Llm`] service.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cordis_runtime::{BoxError, Context, Plugin};
use serde::Deserialize;

use crate::openai::{OpenAiAdapter, OpenAiSettings};
use crate::scripted::{ScriptedAdapter, ScriptedResponse};
use cordis_conversation::Llm;
use cordis_conversation::LlmAdapter;
use cordis_conversation::Price;

/// Which adapter the plugin builds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdapterKind {
    /// [`ScriptedAdapter`]: replays `script` (a file) or inline `responses`.
    #[default]
    Scripted,
    /// [`OpenAiAdapter`]: an OpenAI-compatible chat-completions endpoint (DeepSeek, OpenAI).
    #[serde(alias = "openai-compatible")]
    Openai,
}

/// Configuration of the `llm` plugin: `{adapter: scripted, script: path}`,
/// `{adapter: scripted, responses: [...], repeat: bool}` or
/// `{adapter: openai, baseUrl, model, apiKey | apiKeyEnv, timeoutMs, maxRetries}`.
///
/// The keys of the adapter not chosen are ignored, so one entry can carry both and pick with
/// `adapter: "${{ env.CORDIS_LLM ?? 'scripted' }}"`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LlmConfig {
    /// The adapter (`scripted` or `openai`).
    #[serde(default)]
    pub adapter: AdapterKind,
    /// The model agents use when they name none (`cordis run` creates its agent on it).
    #[serde(default)]
    pub model: Option<String>,
    /// Other models a session may switch to (an editor's model picker), beside `model`.
    #[serde(default)]
    pub models: Vec<String>,
    /// The reasoning efforts a session may choose (`[low, medium, high]` for models that take
    /// OpenAI-compatible `reasoning_effort`); empty, none is offered.
    #[serde(default)]
    pub thought_levels: Vec<String>,
    /// The model takes images in user messages (sent as OpenAI-compatible `image_url` parts);
    /// an editor may then attach images to prompts, and images tools return (an MCP server's)
    /// reach the model after the tool results.
    #[serde(default)]
    pub image_input: bool,
    /// openai: the model takes audio (OpenAI-compatible `input_audio` parts, WAV and MP3):
    /// audio tools return (an MCP server's) reaches the model after the tool results.
    #[serde(default)]
    pub audio_input: bool,
    /// openai: the API base URL (default `https://api.deepseek.com`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// openai: the API key itself (e.g. `${{ env.DEEPSEEK_API_KEY }}`).
    #[serde(default)]
    pub api_key: Option<String>,
    /// openai: the environment variable holding the API key (read at load; must be set).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// openai: limit for the response headers and every gap in the stream (default 60000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// openai: retries of 429/5xx/connection failures (default 3).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// openai: the first retry delay when no `Retry-After` is sent (default 500; doubles).
    #[serde(default)]
    pub retry_base_ms: Option<u64>,
    /// A fixture file (YAML, or JSON by extension).
    #[serde(default)]
    pub script: Option<PathBuf>,
    /// Inline responses (when no `script` is given).
    #[serde(default)]
    pub responses: Option<Vec<ScriptedResponse>>,
    /// Cycle the inline responses forever.
    #[serde(default)]
    pub repeat: bool,
    /// scripted: keep the last N requests for inspection (tests; default 0, none kept).
    #[serde(default)]
    pub record_requests: usize,
    /// The model's context window in tokens (e.g. 131072 for DeepSeek's chat models), so a
    /// client can show how full it is (ACP `usage_update`); unset, no window is claimed.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// What each model's tokens cost, in US dollars per million tokens:
    /// `{<model>: {input, cachedInput, output}}` (`cachedInput` defaults to `input`); `/usage`
    /// and ACP show a cost for the models priced here, and the agent loop's
    /// `budget.maxCostUsd` needs them.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
}

/// The `llm` entry's configuration cannot build its adapter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmConfigError {
    /// The variable `apiKeyEnv` names is unset or empty.
    #[error(
        "llm: the API key variable {var} is not set: export {var} (or point apiKeyEnv of the llm entry at another variable)"
    )]
    MissingApiKey {
        /// The variable.
        var: String,
    },
    /// Both a fixture file and inline responses.
    #[error("llm: give either `script` or `responses`, not both")]
    ScriptAndResponses,
    /// A price that is negative or not a finite number.
    #[error(
        "llm: prices.{model}.{field} must be a finite number of US dollars per million tokens, at least 0, not {value}"
    )]
    BadPrice {
        /// The model priced.
        model: String,
        /// The field (`input`, `cachedInput`, `output`).
        field: &'static str,
        /// The value given, as written back.
        value: String,
    },
}

/// The price table of `config`, checked: every price finite and not negative.
///
/// # Errors
/// [`LlmConfigError::BadPrice`] naming the first bad model and field.
pub fn checked_prices(config: &LlmConfig) -> Result<BTreeMap<String, Price>, LlmConfigError> {
    for (model, price) in &config.prices {
        if let Some((field, value)) = price.invalid_field() {
            return Err(LlmConfigError::BadPrice {
                model: model.clone(),
                field,
                value: value.to_string(),
            });
        }
    }
    Ok(config.prices.clone())
}

/// The default API base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";

fn openai_settings(config: &LlmConfig) -> Result<OpenAiSettings, LlmConfigError> {
    let mut settings = OpenAiSettings::new(
        config
            .base_url
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
    );
    settings.api_key = match (&config.api_key, &config.api_key_env) {
        (Some(key), _) if !key.is_empty() => Some(key.clone()),
        (_, Some(var)) => match std::env::var(var) {
            Ok(key) if !key.is_empty() => Some(key),
            _ => return Err(LlmConfigError::MissingApiKey { var: var.clone() }),
        },
        _ => None,
    };
    settings.default_model = config.model.clone();
    settings.image_input = config.image_input;
    settings.audio_input = config.audio_input;
    if let Some(ms) = config.timeout_ms {
        settings.timeout = Duration::from_millis(ms.max(1));
    }
    if let Some(n) = config.max_retries {
        settings.max_retries = n;
    }
    if let Some(ms) = config.retry_base_ms {
        settings.retry_base = Duration::from_millis(ms);
    }
    Ok(settings)
}

/// The `llm` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct LlmPlugin;

impl Plugin for LlmPlugin {
    type Config = LlmConfig;

    fn name(&self) -> &str {
        "llm"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn provides(&self, config: &Self::Config) -> Vec<String> {
        let mut out = vec![<cordis_conversation::Llm as cordis_runtime::Service>::NAME.to_owned()];
        if config.model.is_some() {
            out.push(<cordis_schema::RequestConfig as cordis_runtime::Service>::NAME.to_owned());
        }
        out
    }

    /// A conversation (and the API key) sent somewhere new: an agent's command could have
    /// pointed the entry at its own server.
    fn widens(&self, old: Option<&LlmConfig>, new: Option<&LlmConfig>) -> Vec<String> {
        let Some(new) = new.filter(|n| n.adapter == AdapterKind::Openai) else {
            return Vec::new();
        };
        let endpoint = |c: &LlmConfig| {
            (
                c.adapter,
                c.base_url.clone(),
                c.api_key_env.clone(),
                c.api_key.clone(),
            )
        };
        if old.is_some_and(|o| endpoint(o) == endpoint(new)) {
            return Vec::new();
        }
        vec![format!(
            "the conversation and its API key would go to {}",
            new.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL)
        )]
    }

    async fn apply(&self, ctx: Context, config: &LlmConfig) -> Result<(), BoxError> {
        let prices = checked_prices(config)?;
        let adapter: Arc<dyn LlmAdapter> = match config.adapter {
            AdapterKind::Scripted => {
                if config.script.is_none()
                    && config.responses.is_none()
                    && config.base_url.is_some()
                {
                    tracing::debug!("llm: scripted adapter; the openai keys are ignored");
                }
                let scripted = match (&config.script, &config.responses) {
                    (Some(_), Some(_)) => return Err(LlmConfigError::ScriptAndResponses.into()),
                    (Some(path), None) => {
                        let path = path.clone();
                        tokio::task::spawn_blocking(move || ScriptedAdapter::load(&path)).await??
                    }
                    (None, responses) => ScriptedAdapter::shared(crate::shared::shared(
                        responses.as_deref().unwrap_or_default(),
                    )),
                };
                let scripted = scripted.recording(config.record_requests);
                Arc::new(if config.repeat {
                    scripted.repeating()
                } else {
                    scripted
                })
            }
            AdapterKind::Openai => Arc::new(OpenAiAdapter::new(openai_settings(config)?)?),
        };
        if let Some(model) = &config.model {
            // What a request of an agent on the default model carries as its `config`, so a
            // digest of the request covers the model too.
            let call = serde_json::to_value(cordis_conversation::CallConfig::model(model.clone()))?;
            let _ = ctx.provide(cordis_schema::RequestConfig(call))?;
        }
        let llm = Llm::new(ctx.clone(), adapter)
            .with_default_model(config.model.clone())
            .with_models(config.models.clone())
            .with_thought_levels(config.thought_levels.clone())
            .with_image_input(config.image_input)
            .with_context_window(config.context_window)
            .with_prices(prices);
        let _ = ctx.provide(llm)?;
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
    fn a_missing_api_key_names_the_variable_to_set() {
        let var = "CORDIS_LLM_TEST_SURELY_UNSET_KEY";
        let config = LlmConfig {
            adapter: AdapterKind::Openai,
            api_key_env: Some(var.into()),
            ..Default::default()
        };
        let err = openai_settings(&config).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "llm: the API key variable {var} is not set: export {var} (or point apiKeyEnv of the llm entry at another variable)"
            )
        );
    }

    #[tokio::test]
    async fn the_price_table_prices_the_models_it_names() {
        let root = Context::root();
        let config: LlmConfig = serde_json::from_value(serde_json::json!({
            "model": "deepseek-chat",
            "prices": {"deepseek-chat": {"input": 0.27, "cachedInput": 0.07, "output": 1.1}},
        }))
        .unwrap();
        assert_eq!(
            root.plugin(LlmPlugin, config).settled().await,
            ScopeStatus::Active
        );
        let llm = root.get::<Llm>().unwrap();
        let usage = cordis_conversation::Usage {
            input_tokens: 2_000_000,
            output_tokens: 1_000_000,
            cached_input_tokens: Some(1_000_000),
        };
        // 1M fresh × 0.27 + 1M cached × 0.07 + 1M out × 1.1.
        let cost = llm.cost("deepseek-chat", &usage).unwrap();
        assert!((cost - 1.44).abs() < 1e-9, "{cost}");
        assert_eq!(llm.cost("other", &usage), None);
        root.dispose();
    }

    #[tokio::test]
    async fn a_negative_price_is_refused_naming_the_model_and_field() {
        let config: LlmConfig = serde_json::from_value(serde_json::json!({
            "prices": {"m1": {"input": 1, "output": 1}, "m2": {"input": 1, "output": -2}},
        }))
        .unwrap();
        assert_eq!(
            checked_prices(&config).unwrap_err().to_string(),
            "llm: prices.m2.output must be a finite number of US dollars per million tokens, at least 0, not -2"
        );
        let root = Context::root();
        let h = root.plugin(LlmPlugin, config);
        assert_eq!(h.settled().await, ScopeStatus::Failed);
        assert!(h.failure().unwrap().message.contains("prices.m2.output"));
        root.dispose();
        let infinite = LlmConfig {
            prices: BTreeMap::from([(
                "m".to_owned(),
                Price {
                    input: 1.0,
                    cached_input: Some(f64::INFINITY),
                    output: 1.0,
                },
            )]),
            ..Default::default()
        };
        assert!(matches!(
            checked_prices(&infinite),
            Err(LlmConfigError::BadPrice {
                field: "cachedInput",
                ..
            })
        ));
    }

    #[test]
    fn an_unknown_adapter_is_a_config_error() {
        let err = serde_json::from_value::<LlmConfig>(serde_json::json!({"adapter": "magic"}))
            .unwrap_err();
        assert!(err.to_string().contains("unknown variant `magic`"), "{err}");
    }
}
