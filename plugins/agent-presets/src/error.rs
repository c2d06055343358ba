//! What can go wrong with presets.

use std::path::PathBuf;

use cordis_agent_loop::CreateAgentError;
use cordis_tools::RegisterError;

/// Resolving or mounting a preset failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PresetError {
    /// No root holds a preset with this id.
    #[error("agent-presets: preset \"{id}\" not found (available: {})", list(.available))]
    NotFound {
        /// The id asked for.
        id: String,
        /// Every discovered id, in listing order.
        available: Vec<String>,
    },
    /// The preset exists but cannot be mounted (broken, a row not active, a service published).
    #[error("agent-presets: preset \"{id}\" failed to mount: {reason} ({})", .path.display())]
    Unusable {
        /// The preset id.
        id: String,
        /// Why, for a person (rows named one per line).
        reason: String,
        /// Its composition file.
        path: PathBuf,
    },
    /// The roster was disposed meanwhile.
    #[error("agent-presets: the roster is disposed")]
    Gone,
}

fn list(ids: &[String]) -> String {
    if ids.is_empty() {
        "none".to_owned()
    } else {
        ids.join(", ")
    }
}

/// Joining an agent to a preset failed.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The preset did not resolve or mount; no agent was created (or the agent is unchanged).
    #[error(transparent)]
    Preset(#[from] PresetError),
    /// Creating the agent failed (after its preset mounted).
    #[error(transparent)]
    Create(#[from] CreateAgentError),
    /// A switch was asked while a turn runs.
    #[error("agent-presets: agent \"{agent}\" is in a turn; switch presets between turns")]
    MidTurn {
        /// The agent id.
        agent: String,
    },
    /// A switch was asked for an agent whose session has turns already: the preset decides what
    /// the model saw, so a conversation keeps the preset it started with.
    #[error(
        "agent-presets: agent \"{agent}\" already has {turns} turn(s) in session \"{session}\"; a preset can only be chosen before the first message (start a new session with --preset)"
    )]
    NotBlank {
        /// The agent id.
        agent: String,
        /// Its session id.
        session: String,
        /// How many turns it has.
        turns: u64,
    },
    /// Re-linking the agent's scope failed.
    #[error("agent-presets: re-linking agent \"{agent}\": {source}")]
    Bind {
        /// The agent id.
        agent: String,
        /// Why.
        source: RegisterError,
    },
    /// Recording the switch in the session failed.
    #[error("agent-presets: recording the switch in session \"{session}\": {message}")]
    Record {
        /// The session id.
        session: String,
        /// Why.
        message: String,
    },
}
