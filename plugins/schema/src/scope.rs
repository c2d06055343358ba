//! `ScopeKey`: the registry scope an assembly is made for.

use serde::{Deserialize, Serialize};

/// Identifies one registry scope (an agent's scope, a preset's standing scope).
///
/// Usually made from the runtime [`cordis_runtime::ScopeId`] of the scope that owns the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ScopeKey(pub u64);

impl From<cordis_runtime::ScopeId> for ScopeKey {
    fn from(id: cordis_runtime::ScopeId) -> Self {
        ScopeKey(id.0)
    }
}

impl std::fmt::Display for ScopeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "scope {}", self.0)
    }
}
