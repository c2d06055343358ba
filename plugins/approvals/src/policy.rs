//! Policies, permission modes and their configuration.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::command::CommandPattern;

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

/// The permission mode: what a call that changes something does when no rule, grant or per-tool
/// policy decides it. Calls that change nothing (read, state, dispatch effects) never ask.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every call that changes something asks.
    #[default]
    Ask,
    /// Calls confined to the workspace (the file tools, sandboxed commands without network) run
    /// without asking; the rest (`full-access` commands, network, undeclared tools) ask.
    Auto,
    /// Nothing asks (CI): confined calls run, the rest are denied with the reason.
    NeverAsk,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Ask, Mode::Auto, Mode::NeverAsk];

    /// The word configuration, flags and logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Auto => "auto",
            Mode::NeverAsk => "never-ask",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is not a mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission mode {0:?}: choose ask, auto or never-ask")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, UnknownMode> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

/// Rules on the commands of `execute` tools (`bash`), matched on each parsed simple command.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CommandRules {
    /// A line whose every simple command begins with one of these runs without asking.
    pub allow: Vec<CommandPattern>,
    /// A line with a simple command matching one of these is denied (options and their values
    /// before the subcommand do not hide it).
    pub deny: Vec<CommandPattern>,
}

/// Configuration of `approvals`; unknown fields are rejected.
///
/// ```yaml
/// - name: approvals
///   config:
///     mode: auto
///     tools: { write_file: allow, cordis_mount: deny }
///     commands: { allow: ["git status", "cargo test"], deny: ["git push"] }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// The permission mode (a session may choose another).
    pub mode: Mode,
    /// Per-tool policies; they come before the mode and the tool's effect class.
    pub tools: BTreeMap<String, Policy>,
    /// Rules on commands.
    pub commands: CommandRules,
}

impl ApprovalsConfig {
    /// The policy configured for `tool`, if any.
    pub fn tool_policy(&self, tool: &str) -> Option<Policy> {
        self.tools.get(tool).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_their_words_and_a_wrong_one_lists_the_choices() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
            let json = serde_json::to_value(mode).unwrap();
            assert_eq!(json, mode.as_str());
        }
        let e = "yolo".parse::<Mode>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown permission mode \"yolo\": choose ask, auto or never-ask"
        );
    }

    #[test]
    fn the_config_reads_mode_tools_and_command_rules() {
        let c: ApprovalsConfig = serde_json::from_value(serde_json::json!({
            "mode": "never-ask",
            "tools": {"bash": "deny"},
            "commands": {"allow": ["git status"], "deny": ["git push"]}
        }))
        .unwrap();
        assert_eq!(c.mode, Mode::NeverAsk);
        assert_eq!(c.tool_policy("bash"), Some(Policy::Deny));
        assert_eq!(c.commands.allow[0].to_string(), "git status");
        let e = serde_json::from_value::<ApprovalsConfig>(serde_json::json!({"default": "ask"}))
            .unwrap_err();
        assert!(e.to_string().contains("unknown field `default`"), "{e}");
    }
}
