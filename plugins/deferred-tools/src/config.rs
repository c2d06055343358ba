//! The configuration and the split of an assembly into a prefix and deferred tools.

use cordis_system_prompt::{PromptAssembly, TOOL_SEARCH};
use cordis_tools::RUN_CODE;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

/// A configuration value that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A `prefix` entry is not a valid pattern.
    #[error("prefix entry {pattern:?} is not a valid pattern: {message}")]
    Pattern {
        /// The entry.
        pattern: String,
        /// Why.
        message: String,
    },
    /// `maxResults` is out of range.
    #[error("maxResults must be between 1 and {max}, not {value}")]
    MaxResults {
        /// The value given.
        value: usize,
        /// The largest allowed.
        max: usize,
    },
}

/// The tools always in the request: names or glob patterns (`*`, `?`, `[..]`) over tool names.
#[derive(Debug, Clone, Default)]
pub struct Prefix {
    patterns: Vec<String>,
    set: GlobSet,
}

impl PartialEq for Prefix {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Prefix {
    /// Compiles `patterns`.
    ///
    /// # Errors
    /// [`ConfigError::Pattern`] for an entry that is not a valid glob.
    pub fn new(patterns: Vec<String>) -> Result<Self, ConfigError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in &patterns {
            let glob = Glob::new(pattern).map_err(|e| ConfigError::Pattern {
                pattern: pattern.clone(),
                message: e.kind().to_string(),
            })?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| ConfigError::Pattern {
            pattern: patterns.join(", "),
            message: e.to_string(),
        })?;
        Ok(Prefix { patterns, set })
    }

    /// The patterns as configured.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// True when a pattern matches tool `name`.
    pub fn matches(&self, name: &str) -> bool {
        self.set.is_match(name)
    }
}

impl<'de> Deserialize<'de> for Prefix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Prefix::new(Vec::<String>::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The largest `maxResults`: a search loads at most this many tools.
pub const MAX_RESULTS: usize = 32;

fn default_threshold() -> usize {
    64
}

fn default_max_results() -> usize {
    5
}

fn max_results<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let value = usize::deserialize(d)?;
    if (1..=MAX_RESULTS).contains(&value) {
        Ok(value)
    } else {
        Err(serde::de::Error::custom(ConfigError::MaxResults {
            value,
            max: MAX_RESULTS,
        }))
    }
}

/// Configuration of the `deferred-tools` plugin.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeferredToolsConfig {
    /// Tool search starts when a scope is offered more tools than this (default 64; not
    /// counting `tool_search`).
    #[serde(default = "default_threshold")]
    pub threshold: usize,
    /// The tools always sent besides `tool_search` (names or glob patterns).
    #[serde(default)]
    pub prefix: Prefix,
    /// The most tools one search loads (1 to 32, default 5).
    #[serde(default = "default_max_results", deserialize_with = "max_results")]
    pub max_results: usize,
}

impl Default for DeferredToolsConfig {
    fn default() -> Self {
        DeferredToolsConfig {
            threshold: default_threshold(),
            prefix: Prefix::default(),
            max_results: default_max_results(),
        }
    }
}

impl DeferredToolsConfig {
    /// Splits `assembly`'s tools: over the threshold (and with `tool_search` among them) the
    /// prefix stays in `tools` and the rest moves to `deferred`; otherwise every tool stays and
    /// `tool_search` leaves.
    ///
    /// # Determinism
    /// A filter: both lists keep the order they had (the canonical one).
    pub fn split(&self, assembly: &mut PromptAssembly) {
        let tools = std::mem::take(&mut assembly.tools);
        let offered = tools.iter().filter(|t| t.name != TOOL_SEARCH).count();
        // Without `tool_search` in this view (restricted away, Code Mode's `run_code`) a
        // deferred tool could never be loaded: nothing is deferred.
        let searchable = offered < tools.len();
        if offered <= self.threshold || !searchable {
            assembly.tools = tools
                .into_iter()
                .filter(|t| t.name != TOOL_SEARCH)
                .collect();
            return;
        }
        // `run_code` (Code Mode's `both`) is a transport, not a tool to look for: always sent.
        let (prefix, deferred) = tools.into_iter().partition(|t| {
            t.name == TOOL_SEARCH || t.name == RUN_CODE || self.prefix.matches(&t.name)
        });
        assembly.tools = prefix;
        assembly.deferred.extend(deferred);
    }
}

#[cfg(test)]
mod tests {
    use cordis_system_prompt::ToolSchema;

    use super::*;

    fn schema(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}).into(),
        }
    }

    fn assembly(names: &[&str]) -> PromptAssembly {
        PromptAssembly {
            tools: names.iter().map(|n| schema(n)).collect(),
            ..PromptAssembly::default()
        }
    }

    fn names(tools: &[ToolSchema]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn config(threshold: usize, prefix: &[&str]) -> DeferredToolsConfig {
        DeferredToolsConfig {
            threshold,
            prefix: Prefix::new(prefix.iter().map(|p| (*p).to_owned()).collect()).unwrap(),
            max_results: 5,
        }
    }

    #[test]
    fn over_the_threshold_the_prefix_and_tool_search_stay_in_canonical_order() {
        let mut a = assembly(&[
            "a_x",
            "b",
            "mcp__fx__add",
            "read",
            "run_code",
            "tool_search",
            "z",
        ]);
        config(4, &["read", "mcp__*"]).split(&mut a);
        assert_eq!(
            names(&a.tools),
            ["mcp__fx__add", "read", "run_code", "tool_search"]
        );
        assert_eq!(names(&a.deferred), ["a_x", "b", "z"]);
    }

    #[test]
    fn at_the_threshold_every_tool_stays_and_tool_search_leaves() {
        let mut a = assembly(&["a", "b", "tool_search"]);
        config(2, &[]).split(&mut a);
        assert_eq!(names(&a.tools), ["a", "b"]);
        assert!(a.deferred.is_empty());
    }

    #[test]
    fn without_tool_search_in_the_view_nothing_is_deferred() {
        let mut a = assembly(&["a", "b", "c"]);
        config(1, &[]).split(&mut a);
        assert_eq!(names(&a.tools), ["a", "b", "c"]);
    }

    #[test]
    fn the_config_parses_with_defaults_and_refuses_bad_values() {
        let parse = |v| serde_json::from_value::<DeferredToolsConfig>(v);
        assert_eq!(parse(serde_json::json!({})).unwrap(), config(64, &[]));
        let err = parse(serde_json::json!({"maxResults": 0})).unwrap_err();
        assert!(
            err.to_string()
                .contains("maxResults must be between 1 and 32, not 0"),
            "{err}"
        );
        let err = parse(serde_json::json!({"prefix": ["a[b"]})).unwrap_err();
        assert!(err.to_string().contains("\"a[b\""), "{err}");
        assert!(parse(serde_json::json!({"limit": 3})).is_err());
    }
}
