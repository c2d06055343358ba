//! Configuration of `hooks`: the Claude Code settings shape, checked when the file loads.
//!
//! ```yaml
//! - id: hooks
//!   plugin: hooks
//!   config:
//!     hooks:
//!       PreToolUse:
//!         - matcher: "bash|edit_file"
//!           hooks: [{type: command, command: "./check.sh", timeout: 10}]
//! ```

use std::path::PathBuf;
use std::time::Duration;

use cordis_sandbox::SandboxMode;
use regex::Regex;
use serde::{Deserialize, Deserializer};

/// The events a hook can run on, in the order the table lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookEvent {
    /// Before a tool call runs: may block it, rewrite its input, or add context.
    PreToolUse,
    /// After a tool call succeeded: may tell the model something (block) or add context.
    PostToolUse,
    /// Before the user's prompt is logged: may block it or add context.
    UserPromptSubmit,
    /// The model answered without tool calls: may block the stop (the model goes on).
    Stop,
    /// The first turn of a session in this process (`startup` or `resume`): may add context.
    SessionStart,
    /// The agent is disposed (not logged).
    SessionEnd,
    /// A compaction is about to ask for its summary: may block it.
    PreCompact,
}

impl HookEvent {
    /// The name configuration, the hook's input and the log use (`PreToolUse`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
        }
    }
}

/// Configuration of one `hooks` entry; unknown fields are rejected.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HooksConfig {
    /// The hooks, by event.
    pub hooks: HookTable,
    /// What hook commands may write: `read-only` (the default), `workspace-write` or
    /// `full-access` (no sandbox).
    pub sandbox: SandboxMode,
    /// Whether hook commands may reach the network (default: no).
    pub network: bool,
    /// The shell, run as `<shell> -c <command>`.
    pub shell: PathBuf,
    /// Environment variables passed through; a trailing `*` matches a prefix (`LC_*`).
    pub env: Vec<String>,
    /// Bytes kept of a hook's stdout and of its stderr each (the head and the tail, saying how
    /// much was cut).
    pub max_output_bytes: usize,
    /// Seconds a hook may run when it gives no `timeout` (Claude Code's 60).
    pub default_timeout: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            hooks: HookTable::default(),
            sandbox: SandboxMode::ReadOnly,
            network: false,
            shell: PathBuf::from("bash"),
            env: [
                "HOME", "LANG", "LC_*", "LOGNAME", "PATH", "SHELL", "TZ", "USER",
            ]
            .map(String::from)
            .to_vec(),
            max_output_bytes: 16 * 1024,
            default_timeout: 60,
        }
    }
}

impl HooksConfig {
    /// The environment passed to hook commands: the listed variables that are set, sorted.
    pub(crate) fn filtered_env(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| {
                self.env.iter().any(|p| match p.strip_suffix('*') {
                    Some(prefix) => k.starts_with(prefix),
                    None => k == p,
                })
            })
            .collect();
        out.sort();
        out
    }

    /// The timeout of `hook`.
    pub(crate) fn timeout_of(&self, hook: &Hook) -> Duration {
        Duration::from_secs(hook.timeout.unwrap_or(self.default_timeout).max(1))
    }

    /// True when no event has a hook.
    pub fn is_empty(&self) -> bool {
        HookTable::EVENTS
            .iter()
            .all(|e| self.hooks.groups(*e).is_empty())
    }
}

/// The hooks of each event, in the file's order (`PreToolUse: [{matcher, hooks}]`); an unknown
/// event name is an error naming it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HookTable {
    /// `PreToolUse`.
    #[serde(rename = "PreToolUse")]
    pub pre_tool_use: Vec<MatcherGroup>,
    /// `PostToolUse`.
    #[serde(rename = "PostToolUse")]
    pub post_tool_use: Vec<MatcherGroup>,
    /// `UserPromptSubmit`.
    #[serde(rename = "UserPromptSubmit")]
    pub user_prompt_submit: Vec<MatcherGroup>,
    /// `Stop`.
    #[serde(rename = "Stop")]
    pub stop: Vec<MatcherGroup>,
    /// `SessionStart`.
    #[serde(rename = "SessionStart")]
    pub session_start: Vec<MatcherGroup>,
    /// `SessionEnd`.
    #[serde(rename = "SessionEnd")]
    pub session_end: Vec<MatcherGroup>,
    /// `PreCompact`.
    #[serde(rename = "PreCompact")]
    pub pre_compact: Vec<MatcherGroup>,
}

impl HookTable {
    /// Every event.
    pub const EVENTS: [HookEvent; 7] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
    ];

    /// The matcher groups of `event`, in the file's order.
    pub fn groups(&self, event: HookEvent) -> &[MatcherGroup] {
        match event {
            HookEvent::PreToolUse => &self.pre_tool_use,
            HookEvent::PostToolUse => &self.post_tool_use,
            HookEvent::UserPromptSubmit => &self.user_prompt_submit,
            HookEvent::Stop => &self.stop,
            HookEvent::SessionStart => &self.session_start,
            HookEvent::SessionEnd => &self.session_end,
            HookEvent::PreCompact => &self.pre_compact,
        }
    }
}

/// Hooks that run when the matcher matches (a tool name for tool events, the source or trigger
/// for `SessionStart` and `PreCompact`; ignored by the other events).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatcherGroup {
    /// What it matches.
    #[serde(default)]
    pub matcher: Matcher,
    /// The hooks, run in order.
    pub hooks: Vec<Hook>,
}

/// A matcher: empty or `*` matches everything; otherwise a regular expression that must match
/// the whole name (`bash` matches `bash` only, `bash|edit_file` either).
#[derive(Debug, Clone, Default)]
pub struct Matcher(Option<Regex>);

impl Matcher {
    /// True when it matches `name`.
    pub fn matches(&self, name: &str) -> bool {
        self.0.as_ref().is_none_or(|r| r.is_match(name))
    }
}

impl<'de> Deserialize<'de> for Matcher {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() || text == "*" {
            return Ok(Matcher(None));
        }
        Regex::new(&format!("^(?:{text})$"))
            .map(|r| Matcher(Some(r)))
            .map_err(|e| {
                serde::de::Error::custom(format!(
                    "matcher \"{text}\" is not a valid regular expression: {e}"
                ))
            })
    }
}

/// One hook.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hook {
    /// `command` (the only kind).
    #[serde(rename = "type")]
    pub kind: HookKind,
    /// The command line, run with `<shell> -c` in the workspace root.
    pub command: String,
    /// Seconds it may run (default: the entry's `defaultTimeout`).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// What a hook is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookKind {
    /// A shell command.
    Command,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<HooksConfig, String> {
        serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn the_claude_code_shape_parses_in_file_order() {
        let c = parse(
            "hooks:\n  PreToolUse:\n    - matcher: bash|edit_file\n      hooks: [{type: command, command: a, timeout: 3}, {type: command, command: b}]\n    - hooks: [{type: command, command: c}]\n",
        )
        .unwrap();
        let groups = c.hooks.groups(HookEvent::PreToolUse);
        let commands: Vec<&str> = groups
            .iter()
            .flat_map(|g| g.hooks.iter().map(|h| h.command.as_str()))
            .collect();
        assert_eq!(commands, ["a", "b", "c"]);
        assert!(groups[0].matcher.matches("bash") && groups[0].matcher.matches("edit_file"));
        assert!(!groups[0].matcher.matches("bash2") && groups[1].matcher.matches("anything"));
        assert_eq!(c.timeout_of(&groups[0].hooks[0]), Duration::from_secs(3));
        assert_eq!(c.sandbox, SandboxMode::ReadOnly);
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = parse("hooks: {PreToolCall: []}").unwrap_err();
        assert!(e.contains("PreToolCall") && e.contains("PreToolUse"), "{e}");
        let e = parse("hooks: {PreToolUse: [{matcher: '(', hooks: []}]}").unwrap_err();
        assert!(
            e.contains("matcher \"(\" is not a valid regular expression"),
            "{e}"
        );
        let e = parse("hooks: {Stop: [{hooks: [{type: http, command: x}]}]}").unwrap_err();
        assert!(e.contains("http") && e.contains("command"), "{e}");
        let e = parse("hooks: {Stop: [{hooks: [{type: command}]}]}").unwrap_err();
        assert!(e.contains("command"), "{e}");
    }
}
