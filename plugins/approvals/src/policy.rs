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
    /// Runs without asking; an `execute` tool's call runs read-only (see
    /// [`cordis_tools::Clearance`]).
    Allow,
    /// Runs without asking and may write: the configuration says so in so many words (a
    /// command in the entry's own sandbox, or an editor's terminal).
    Write,
    /// Runs only if the approver says yes; with no approver, denied.
    Ask,
    /// Never runs.
    Deny,
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Allow => "allow",
            Policy::Write => "write",
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
    /// without asking, commands read-only; the rest (`full-access` commands, network,
    /// undeclared tools) ask.
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
    /// A line whose every simple command begins with one of these runs without asking, in a
    /// read-only sandbox: no option a rule's reader misses can make it write.
    pub allow: Vec<CommandPattern>,
    /// Like `allow`, and the commands may write where the sandbox lets them (the workspace): a
    /// line runs so when every simple command begins with one of these.
    pub write: Vec<CommandPattern>,
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

    /// What `new` lets run without a question that `self` did not, one line each: a mode that
    /// runs more unasked, a per-tool policy that asks less, an allow or write rule added, a deny
    /// rule dropped.
    pub fn widened_by(&self, new: &ApprovalsConfig) -> Vec<String> {
        // How much runs unasked: `auto` and `never-ask` both run confined calls.
        let unasked = |m: Mode| u8::from(m != Mode::Ask);
        // No policy lets the effect class and the mode decide: between ask and allow.
        let rank = |p: Option<Policy>| match p {
            Some(Policy::Deny) => 0,
            Some(Policy::Ask) => 1,
            None => 2,
            Some(Policy::Allow) => 3,
            Some(Policy::Write) => 4,
        };
        let word = |p: Option<Policy>| p.map_or("(none)".to_owned(), |p| p.to_string());
        let mut out = Vec::new();
        if unasked(new.mode) > unasked(self.mode) {
            out.push(format!(
                "the permission mode {} → {} runs confined calls without a question",
                self.mode, new.mode
            ));
        }
        let tools: std::collections::BTreeSet<&String> =
            self.tools.keys().chain(new.tools.keys()).collect();
        for tool in tools {
            let (was, is) = (self.tool_policy(tool), new.tool_policy(tool));
            if rank(is) > rank(was) {
                out.push(format!("tool `{tool}`: {} → {}", word(was), word(is)));
            }
        }
        let (old, now) = (&self.commands, &new.commands);
        for p in &now.allow {
            if !old.allow.contains(p) && !old.write.contains(p) {
                out.push(format!("commands.allow adds `{p}`"));
            }
        }
        for p in now.write.iter().filter(|p| !old.write.contains(p)) {
            out.push(format!("commands.write adds `{p}`"));
        }
        for p in old.deny.iter().filter(|p| !now.deny.contains(p)) {
            out.push(format!("commands.deny drops `{p}`"));
        }
        out
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
    fn a_change_that_lets_more_run_unasked_is_named_and_one_that_narrows_is_not() {
        let read = |v: serde_json::Value| -> ApprovalsConfig { serde_json::from_value(v).unwrap() };
        let old = read(serde_json::json!({
            "mode": "ask",
            "tools": {"bash": "ask", "fetch": "deny"},
            "commands": {"allow": ["git status"], "write": ["cargo test"], "deny": ["git push"]}
        }));
        let wider = read(serde_json::json!({
            "mode": "auto",
            "tools": {"fetch": "ask", "write_file": "allow"},
            "commands": {"allow": ["git status", "cargo test", "rm"], "write": ["make"], "deny": []}
        }));
        assert_eq!(
            old.widened_by(&wider),
            [
                "the permission mode ask → auto runs confined calls without a question",
                "tool `bash`: ask → (none)",
                "tool `fetch`: deny → ask",
                "tool `write_file`: (none) → allow",
                "commands.allow adds `rm`",
                "commands.write adds `make`",
                "commands.deny drops `git push`",
            ]
        );
        // Back again narrows everything but one: `cargo test` goes from read-only to writing.
        assert_eq!(wider.widened_by(&old), ["commands.write adds `cargo test`"]);
        assert!(old.widened_by(&old).is_empty());
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
