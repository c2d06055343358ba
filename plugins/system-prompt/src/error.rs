//! Error types of the assembly, one per phase: configuration, registration, assembly, render.

use cordis_runtime::EventError;

/// A `toolOrder` whose shape is invalid; detected when the service is constructed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolOrderError {
    /// A name (or the rest entry) appears twice.
    #[error("toolOrder lists \"{name}\" more than once")]
    Duplicate {
        /// The repeated entry.
        name: String,
    },
    /// The rest entry is missing (an exhaustive list would break every newly loaded tool).
    #[error(
        "toolOrder must contain the \"<unlisted-tools>\" rest entry (where unlisted tools are inserted)"
    )]
    MissingRest,
}

/// A section or variable registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// Section names must be non-empty.
    #[error("prompt section name must be non-empty")]
    EmptySectionName,
    /// `order` is NaN or infinite, which has no place in a total order.
    #[error("prompt section \"{name}\" order must be a finite number")]
    NonFiniteOrder {
        /// The section name.
        name: String,
    },
    /// The registering entry already owns this section name (another entry contests it).
    #[error("prompt section \"{name}\" is already registered")]
    DuplicateSection {
        /// The section name.
        name: String,
    },
    /// The variable name does not match `^[a-z][a-z0-9_]*$`.
    #[error("invalid prompt variable name \"{name}\" (must match /^[a-z][a-z0-9_]*$/)")]
    InvalidVariableName {
        /// The rejected name.
        name: String,
    },
    /// The registering entry already owns this variable name (another entry contests it).
    #[error("prompt variable \"{name}\" is already registered")]
    DuplicateVariable {
        /// The variable name.
        name: String,
    },
    /// The registering context's scope is disposed (or its plugin restarted).
    #[error("cannot register prompt {what} \"{name}\": the registering scope is no longer live")]
    ScopeGone {
        /// `section`, `variable` or `tool provider`.
        what: &'static str,
        /// The name being registered.
        name: String,
    },
}

/// `assemble()` failed; the turn that asked for the prompt fails with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssembleError {
    /// A provider offered a tool named like the `toolOrder` rest entry.
    #[error(
        "tool provider returned reserved tool name \"<unlisted-tools>\" (reserved for toolOrder's rest entry)"
    )]
    ReservedToolName,
    /// `toolOrder` lists names no provider knows.
    #[error("{}", unregistered_message(missing, known))]
    UnregisteredToolOrder {
        /// The listed names nobody knows, in `toolOrder` order.
        missing: Vec<String>,
        /// Every known tool name, sorted by UTF-16 code units.
        known: Vec<String>,
    },
    /// Two schemas (from one or two providers) carry the same tool name.
    #[error("tool \"{name}\" is offered by more than one tool provider")]
    DuplicateTool {
        /// The shared name.
        name: String,
    },
    /// A tool provider, section text or variable callback panicked.
    #[error("prompt {what} panicked during assembly: {message}")]
    CallbackPanicked {
        /// What panicked (`tool provider`, `section "x"`, `variable "y"`).
        what: String,
        /// The panic message.
        message: String,
    },
    /// A tool provider cannot serve this assembly.
    #[error("{message}")]
    ProviderUnavailable {
        /// The provider's reason.
        message: String,
    },
    /// A `system-prompt/assemble` listener panicked, so the assembly is lost.
    #[error(transparent)]
    Waterfall(#[from] EventError),
}

fn unregistered_message(missing: &[String], known: &[String]) -> String {
    let quoted: Vec<String> = missing.iter().map(|n| format!("\"{n}\"")).collect();
    let noun = if missing.len() == 1 { "tool" } else { "tools" };
    format!(
        "toolOrder lists unregistered {noun} {}; known tools: {}",
        quoted.join(", "),
        list_or_none(known)
    )
}

/// Joins names with `, `, or `(none)` for an empty list (the reference's wording).
pub(crate) fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}

/// Interpolating `{{variables}}` into a section failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A `{{` that does not start a complete `{{name}}` group although a `}}` follows.
    #[error(
        "malformed prompt variable reference at \"{excerpt}…\" in section \"{section}\" (references are complete simple {{{{name}}}} groups)"
    )]
    MalformedGroup {
        /// Up to 16 characters from the offending `{{`.
        excerpt: String,
        /// The section name.
        section: String,
    },
    /// A complete group whose name is not a valid variable name.
    #[error(
        "malformed prompt variable reference \"{{{{{reference}}}}}\" in section \"{section}\" (variable names match /^[a-z][a-z0-9_]*$/)"
    )]
    MalformedName {
        /// The text between the braces.
        reference: String,
        /// The section name.
        section: String,
    },
    /// A reference to a variable nobody registered.
    #[error(
        "unknown prompt variable \"{{{{{name}}}}}\" in section \"{section}\"; registered variables: {}",
        list_or_none(registered)
    )]
    UnknownVariable {
        /// The variable name.
        name: String,
        /// The section name.
        section: String,
        /// Every registered variable, sorted.
        registered: Vec<String>,
    },
    /// The variable is registered but has no value for this assembly.
    #[error(
        "prompt variable \"{{{{{name}}}}}\" has no value for this assembly (section \"{section}\")"
    )]
    NoValue {
        /// The variable name.
        name: String,
        /// The section name.
        section: String,
    },
}
