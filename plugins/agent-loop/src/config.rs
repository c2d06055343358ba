//! Configuration: the plugin's, and one agent's.

use std::time::Duration;

use cordis_conversation::CallConfig;
use cordis_system_prompt::ScopeKey;
use serde::Deserialize;

/// One agent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentOptions {
    /// The agent id (unique within the loop).
    pub id: String,
    /// The model name.
    pub model: String,
    /// The session to log to (opened, or created); defaults to the agent id.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Output token limit.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default)]
    pub stop: Option<Vec<String>>,
    /// A registry scope to bind as the parent of the agent's own scope.
    #[serde(default)]
    pub parent_scope: Option<u64>,
    /// The agent preset recorded in the header of a session this creates (an existing session
    /// keeps its header); joining the preset is `parent_scope`'s job.
    #[serde(default)]
    pub agent_preset: Option<String>,
    /// The working directory (the project) recorded in the header of a session this creates,
    /// absolute: what `--continue` and listings by directory match.
    #[serde(default)]
    pub cwd: Option<String>,
}

impl AgentOptions {
    /// An agent `id` on `model` with defaults.
    pub fn new(id: impl Into<String>, model: impl Into<String>) -> Self {
        AgentOptions {
            id: id.into(),
            model: model.into(),
            ..Default::default()
        }
    }

    /// The call config of its requests.
    pub fn call_config(&self) -> CallConfig {
        CallConfig {
            model: self.model.clone(),
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            stop: self.stop.clone(),
            reasoning_effort: None,
        }
    }

    /// The parent scope key, if any.
    pub fn parent(&self) -> Option<ScopeKey> {
        self.parent_scope.map(ScopeKey)
    }
}

fn default_parallel() -> usize {
    4
}

fn default_steps() -> u64 {
    32
}

/// Configuration of the `agent-loop` plugin.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentLoopConfig {
    /// Agents created at apply.
    #[serde(default)]
    pub agents: Vec<AgentOptions>,
    /// How many tool calls of one step run at once (at least 1).
    #[serde(default = "default_parallel")]
    pub max_parallel_tools: usize,
    /// Steps per turn before `turn/end {kind: max-steps}`.
    #[serde(default = "default_steps")]
    pub max_steps: u64,
    /// The reconstructability check before each model call; default: on in debug builds.
    #[serde(default)]
    pub invariant: Option<bool>,
    /// A timeout for every tool call on top of the tool's own (milliseconds).
    #[serde(default)]
    pub tool_timeout_ms: Option<u64>,
    /// When and how a session's conversation is compacted.
    #[serde(default)]
    pub compaction: CompactionConfig,
    /// What one session may spend.
    #[serde(default)]
    pub budget: Budget,
}

fn yes() -> bool {
    true
}

fn default_threshold() -> f64 {
    0.8
}

fn share<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let x = f64::deserialize(d)?;
    if x > 0.0 && x <= 1.0 {
        Ok(x)
    } else {
        Err(serde::de::Error::custom(format!(
            "threshold must be a share of the context window, above 0 and at most 1 (0.8 is 80%), not {x}"
        )))
    }
}

fn default_kept_results() -> usize {
    4
}

/// Compaction settings (`compaction:` of the agent loop).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CompactionConfig {
    /// Compact before a request when the last request's input tokens reached `threshold` of
    /// the `llm` entry's `contextWindow` (never without a window).
    #[serde(default = "yes")]
    pub auto: bool,
    /// The share of the context window that triggers it (0 < threshold ≤ 1; default 0.8).
    #[serde(default = "default_threshold", deserialize_with = "share")]
    pub threshold: f64,
    /// The newest tool results sent whole to the summary request; older ones are cut to a
    /// line (default 4).
    #[serde(default = "default_kept_results")]
    pub keep_tool_results: usize,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            auto: true,
            threshold: default_threshold(),
            keep_tool_results: default_kept_results(),
        }
    }
}

/// Per-session budgets (`budget:` of the agent loop): a turn that would go past one ends with
/// `turn/end {kind: budget}` before its next request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Budget {
    /// Input plus output tokens the model may report over the session.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// US dollars the session may cost (priced by the `llm` entry's `prices`).
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
}

impl Default for AgentLoopConfig {
    fn default() -> Self {
        AgentLoopConfig {
            agents: Vec::new(),
            max_parallel_tools: default_parallel(),
            max_steps: default_steps(),
            invariant: None,
            tool_timeout_ms: None,
            compaction: CompactionConfig::default(),
            budget: Budget::default(),
        }
    }
}

/// The resolved loop settings every agent of a loop shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopSettings {
    /// Parallel tool calls (≥ 1).
    pub max_parallel_tools: usize,
    /// Step limit per turn.
    pub max_steps: u64,
    /// Whether the invariant runs.
    pub invariant: bool,
    /// Extra timeout per tool call.
    pub tool_timeout: Option<Duration>,
    /// Compaction.
    pub compaction: CompactionConfig,
    /// Budgets.
    pub budget: Budget,
}

impl AgentLoopConfig {
    /// The settings this config resolves to.
    pub fn settings(&self) -> LoopSettings {
        LoopSettings {
            max_parallel_tools: self.max_parallel_tools.max(1),
            max_steps: self.max_steps.max(1),
            invariant: self.invariant.unwrap_or(cfg!(debug_assertions)),
            tool_timeout: self.tool_timeout_ms.map(Duration::from_millis),
            compaction: self.compaction,
            budget: self.budget,
        }
    }
}
