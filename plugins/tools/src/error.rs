//! Errors of registry writes.

/// A tool registration, restriction, guard, parent binding or presentation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// A second approval stage.
    #[error("an approval stage is already installed: load one `approvals` entry")]
    ApprovalTaken,
    /// Tool names must be non-empty.
    #[error("tool name must be non-empty")]
    EmptyName,
    /// A name longer than the limit or with whitespace or control characters.
    #[error(
        "invalid tool name {name:?}: names are 1 to {max} bytes without whitespace or control characters",
        max = crate::MAX_TOOL_NAME
    )]
    InvalidName {
        /// The refused name.
        name: String,
    },
    /// `run_code` is reserved, always.
    #[error(
        "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
    )]
    ReservedRunCode,
    /// `<unlisted-tools>` is `toolOrder`'s rest entry.
    #[error(
        "tool name \"<unlisted-tools>\" is reserved for toolOrder's rest entry and cannot be registered"
    )]
    ReservedRest,
    /// The parameters are not a JSON Schema object.
    #[error("tool \"{name}\" parameters must be a JSON Schema object with \"type\": \"object\"")]
    InvalidParameters {
        /// The tool name.
        name: String,
    },
    /// The parameters do not compile as a JSON Schema.
    #[error("tool \"{name}\" parameters are not a valid JSON Schema: {reason}")]
    InvalidSchema {
        /// The tool name.
        name: String,
        /// What the schema compiler said.
        reason: String,
    },
    /// A zero timeout would fail every call.
    #[error("tool \"{name}\" timeout must be positive")]
    ZeroTimeout {
        /// The tool name.
        name: String,
    },
    /// The global layer already has this name.
    #[error(
        "tool \"{name}\" is already registered (for a per-agent variant, register through that agent's `agent.ctx` instead)"
    )]
    DuplicateGlobal {
        /// The tool name.
        name: String,
    },
    /// The scope's own layer already has this name.
    #[error("tool \"{name}\" is already registered in this scope")]
    DuplicateScoped {
        /// The tool name.
        name: String,
    },
    /// `restrict` with neither `allow` nor a non-empty `deny`.
    #[error(
        "tools.restrict({{}}) is a no-op: pass `allow` (names to keep) or a non-empty `deny` (names to hide)"
    )]
    EmptyRestriction,
    /// `restrict` may not name `run_code`.
    #[error(
        "tools.restrict() cannot name \"run_code\": it is reserved for the Code Mode presentation transport"
    )]
    RestrictRunCode,
    /// `restrict` names tools the scope does not inherit.
    #[error(
        "tools.restrict() names unknown global tool(s) {}; known global tools: {}",
        quoted(unknown),
        list_or_none(known)
    )]
    UnknownRestricted {
        /// The unknown names, in the order given.
        unknown: Vec<String>,
        /// The names the scope inherits, sorted.
        known: Vec<String>,
    },
    /// A scope's parent is bound once.
    #[error("{child} already has a parent ({parent})")]
    ParentAlreadyBound {
        /// The child scope key.
        child: cordis_schema::ScopeKey,
        /// Its existing parent.
        parent: cordis_schema::ScopeKey,
    },
    /// Binding would make a cycle.
    #[error("binding {child} under {parent} would make a parent cycle")]
    ParentCycle {
        /// The child scope key.
        child: cordis_schema::ScopeKey,
        /// The requested parent.
        parent: cordis_schema::ScopeKey,
    },
    /// `present_as` without a scope.
    #[error(
        "tools.present_as() requires a scope (an agent's or a standing scope's key): a registry-wide presentation is the `mode` field of the tools entry"
    )]
    PresentUnscoped,
    /// A scope declares one presentation.
    #[error(
        "tools.present_as(\"{new}\") conflicts with \"{old}\" already declared for this scope; one composition selects one presentation"
    )]
    PresentConflict {
        /// The refused mode.
        new: crate::PresentationMode,
        /// The mode declared first.
        old: crate::PresentationMode,
    },
    /// The registering scope is disposed or restarted.
    #[error("cannot register with the tool registry: the registering scope is no longer live")]
    ScopeGone,
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}
