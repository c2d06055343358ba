//! `debug/log`: a plugin that logs through the host from `apply` and from a tool call, on a
//! thread of its own as foreign code does, to prove that logging never stalls the host (a
//! writer that holds the terminal's lock across a whole command once did).
//!
//! Config: `{level: warn}` (`error`, `warn`, `info`, `debug`, `trace`); the tool is
//! `debug_log` and answers `{"logged": true}`.

use cordis_runtime::{BoxError, Context, Inject, Plugin};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use serde::Deserialize;

/// The `debug/log` plugin.
#[derive(Debug, Clone, Copy)]
pub struct LogProbe;

/// How loud `debug/log` is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// `error`.
    Error,
    /// `warn` (the default; shown by the CLI's default filter).
    #[default]
    Warn,
    /// `info`.
    Info,
    /// `debug`.
    Debug,
    /// `trace`.
    Trace,
}

/// Config of `debug/log`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogProbeConfig {
    /// The level of every line it logs.
    #[serde(default)]
    pub level: LogLevel,
}

/// Logs `message` at `level` from a blocking thread and waits for it.
async fn log_elsewhere(level: LogLevel, message: String) {
    let logged = tokio::task::spawn_blocking(move || match level {
        LogLevel::Error => tracing::error!(target: "debug_log", "{message}"),
        LogLevel::Warn => tracing::warn!(target: "debug_log", "{message}"),
        LogLevel::Info => tracing::info!(target: "debug_log", "{message}"),
        LogLevel::Debug => tracing::debug!(target: "debug_log", "{message}"),
        LogLevel::Trace => tracing::trace!(target: "debug_log", "{message}"),
    });
    let _ = logged.await;
}

impl Plugin for LogProbe {
    type Config = LogProbeConfig;

    fn name(&self) -> &str {
        "debug/log"
    }

    fn inject(&self) -> &[Inject] {
        ToolRegistry::INJECT
    }

    fn claims(&self, _config: &LogProbeConfig) -> Vec<cordis_runtime::Claim> {
        vec![cordis_runtime::Claim::tool("debug_log")]
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &LogProbeConfig) -> Result<(), BoxError> {
        let label = ctx.label().unwrap_or("debug/log").to_owned();
        log_elsewhere(config.level, format!("debug/log: \"{label}\" applying")).await;
        let registry = ctx.require::<ToolRegistry>()?;
        let level = config.level;
        let schema = ToolSchema {
            name: "debug_log".to_owned(),
            description: "Logs one line through the host and answers {\"logged\": true}."
                .to_owned(),
            parameters: serde_json::json!({"type": "object", "properties": {}}).into(),
        };
        let def = ToolDefinition::new(schema, move |_, _| {
            let label = label.clone();
            async move {
                log_elsewhere(level, format!("debug/log: \"{label}\" called")).await;
                Ok(ToolOutput::new(serde_json::json!({"logged": true})))
            }
        });
        let _ = registry.register_scheduled(&ctx, def).await?;
        Ok(())
    }
}
