//! The `deferred-tools` plugin: deterministic, cache-safe tool search.
//!
//! Many tools (a few MCP servers are enough) bloat every request. Peers' tool search changes
//! the tool list mid-session and breaks the provider's prompt cache; here nothing before the
//! loaded tools ever moves:
//!
//! - When a composition offers more tools than `threshold`, the assembly's tools become a
//!   fixed **prefix**: the tools the `prefix` names or patterns match, plus [`TOOL_SEARCH`], in
//!   canonical order; every other tool is **deferred** ([`PromptAssembly::deferred`]). At or
//!   under the threshold the model sees every tool and no `tool_search`.
//! - `tool_search {query}` ranks the deferred tools of the caller's scope by a score over their
//!   names and descriptions, ties in canonical order, keeps at most `maxResults`, and answers
//!   `{"loaded": [names], "tools": [{name, description}]}`.
//! - The agent loop reads the loads back from the session log (the one fact) and appends the
//!   loaded tools after the prefix, each load in canonical order, loads in log order; the
//!   request's header is logged as a `tool-load`, which the cache-prefix contract checks is a
//!   pure append. Loads survive a resume and a compaction because they are in the log.
//!
//! # Determinism
//! The split is a filter over the canonical list and the ranking breaks ties by canonical
//! position, so neither depends on registration order, MCP list order or connection timing.
//!
//! # Examples
//!
//! ```yaml
//! - id: deferred-tools
//!   name: deferred-tools
//!   config: {threshold: 64, prefix: [read_file, write_file, "mcp__github__*"], maxResults: 5}
//! ```
//!
//! [`PromptAssembly::deferred`]: cordis_system_prompt::PromptAssembly::deferred

mod config;
mod plugin;
mod search;

pub use config::{ConfigError, DeferredToolsConfig, Prefix};
pub use cordis_system_prompt::TOOL_SEARCH;
pub use plugin::{DeferredToolsPlugin, tool_search_tool};
pub use search::{SearchError, search};
