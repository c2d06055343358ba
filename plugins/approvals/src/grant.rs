//! Grants: what an "always" answer lets run (or, as a refusal, stops) for the rest of a
//! session, and how a question words it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::command::{CommandPattern, EmptyPattern, Simple};

/// A session's "always allow": one tool, or for an `execute` tool one command pattern of it.
/// It never covers another tool.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Grant {
    /// The tool.
    pub tool: String,
    /// For an `execute` tool: the command pattern (`git status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandPattern>,
    /// The pattern must match the whole command (a command without a subcommand), not begin it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
}

impl Grant {
    /// True when, held as a refusal, it refuses simple command `s` of a call of `tool`: the
    /// words match its pattern (what the command writes does not matter: a refused command
    /// stays refused).
    pub(crate) fn refuses(&self, tool: &str, s: &Simple) -> bool {
        self.tool == tool
            && self.command.as_ref().is_some_and(|p| {
                if self.exact {
                    p.is(&s.words)
                } else {
                    p.allows(&s.words)
                }
            })
    }

    /// True when the grant covers simple command `s` of a call of `tool`.
    pub(crate) fn covers(&self, tool: &str, s: &Simple) -> bool {
        self.tool == tool
            && !s.beyond_words
            && self.command.as_ref().is_some_and(|p| {
                if self.exact {
                    p.is(&s.words)
                } else {
                    p.allows(&s.words)
                }
            })
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.command {
            Some(c) => write!(f, "{} `{c}`", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// What an "always" answer to a question would grant, as every front end words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Always {
    /// The command patterns it grants (`git status`), or else the tools.
    pub what: Vec<String>,
    /// True when `what` are command patterns: the commands a grant lets run later run without
    /// a question, so read-only (only this call was seen).
    pub commands: bool,
}

impl Always {
    /// The "always" of a question whose answer would make `grants`; `None` when it would make
    /// none ("always" then allows this call once).
    pub fn of(grants: &[Grant]) -> Option<Always> {
        if grants.is_empty() {
            return None;
        }
        let commands: Vec<String> = grants
            .iter()
            .filter_map(|g| g.command.as_ref().map(ToString::to_string))
            .collect();
        Some(if commands.is_empty() {
            Always {
                what: grants.iter().map(|g| g.tool.clone()).collect(),
                commands: false,
            }
        } else {
            Always {
                what: commands,
                commands: true,
            }
        })
    }

    /// The grants as a person reads them, each passed through `escape` first: commands quoted
    /// (`` `git status`, `cargo test` ``), tools as they are.
    pub fn describe(&self, escape: impl Fn(&str) -> String) -> String {
        let words: Vec<String> = self
            .what
            .iter()
            .map(|w| {
                if self.commands {
                    format!("`{}`", escape(w))
                } else {
                    escape(w)
                }
            })
            .collect();
        words.join(", ")
    }

    /// What a person reads after the grants: ` (read-only)` for commands, else nothing.
    pub fn suffix(&self) -> &'static str {
        if self.commands { " (read-only)" } else { "" }
    }
}

/// A grant read back from a log: `tool` and an optional command pattern text.
///
/// # Errors
/// An empty command pattern.
pub fn grant_from(tool: &str, command: Option<&str>, exact: bool) -> Result<Grant, EmptyPattern> {
    Ok(Grant {
        tool: tool.to_owned(),
        command: command
            .map(|c| CommandPattern::try_from(c.to_owned()))
            .transpose()?,
        exact,
    })
}
