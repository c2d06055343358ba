//! The names an `mcp` entry claims among its siblings: its `server` name and the command
//! name of each prompt its server lists.

use cordis_runtime::{Claim, ScopeId};

use crate::naming::prompt_command;

/// The claim of server name `server` among the entries under one parent scope (an ACP
/// session's servers live under the session's scope, so two sessions may reuse a name).
pub fn server_claim(server: &str, parent: Option<ScopeId>) -> Claim {
    Claim::new(SERVER_CLAIM, server).in_space(parent.map(|p| p.0))
}

/// The kind of claim an `mcp` entry makes on its `server` name.
pub const SERVER_CLAIM: &str = "mcp server";

/// The kind of claim an `mcp` entry makes on the command name of each prompt its server lists.
pub const PROMPT_CLAIM: &str = "prompt command";

/// The claim of the command `/mcp__<server>__<prompt>` ([`prompt_command`]) among the entries
/// under one parent scope: `a`'s prompt `b__c` and `a__b`'s prompt `c` claim one name, and both
/// entries report the conflict instead of one command silently hiding the other.
pub fn prompt_command_claim(server: &str, prompt: &str, parent: Option<ScopeId>) -> Claim {
    Claim::new(PROMPT_CLAIM, prompt_command(server, prompt)).in_space(parent.map(|p| p.0))
}
