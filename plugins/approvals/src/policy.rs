//! Policies and their defaults.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// What happens to a call of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Runs without asking.
    Allow,
    /// Runs only if the approver says yes; with no approver, denied.
    Ask,
    /// Never runs.
    Deny,
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Allow => "allow",
            Policy::Ask => "ask",
            Policy::Deny => "deny",
        })
    }
}

/// Tools allowed by default: they read the workspace or only keep session state.
pub const READ_ONLY_TOOLS: &[&str] = &["grep", "list_files", "read_file", "todo_write"];

/// Tools allowed by default because they act only through other tool calls, each of which
/// passes the guard itself (Code Mode's transport); asking for them too would ask twice.
pub const DISPATCHING_TOOLS: &[&str] = &[cordis_tools::RUN_CODE];

/// Configuration of `approvals`; unknown fields are rejected.
///
/// ```yaml
/// - name: approvals
///   config:
///     tools: { bash: deny, write_file: allow }
///     default: ask
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// Per-tool policies; they override the defaults.
    pub tools: BTreeMap<String, Policy>,
    /// The policy of every tool not in [`READ_ONLY_TOOLS`] or [`DISPATCHING_TOOLS`] (mutating tools, the shell,
    /// and tools this crate does not know, such as MCP tools).
    pub default: Policy,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        ApprovalsConfig {
            tools: BTreeMap::new(),
            default: Policy::Ask,
        }
    }
}

impl ApprovalsConfig {
    /// The policy for `tool`: its configured one, else `allow` for read-only and dispatching
    /// tools, else
    /// [`ApprovalsConfig::default`].
    pub fn policy_for(&self, tool: &str) -> Policy {
        if let Some(p) = self.tools.get(tool) {
            return *p;
        }
        if READ_ONLY_TOOLS.contains(&tool) || DISPATCHING_TOOLS.contains(&tool) {
            Policy::Allow
        } else {
            self.default
        }
    }
}
