//! Error types of the runtime, one small type per concern.

use std::fmt;

/// The error a plugin's `apply` (or a listener) may return: anything that is an error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A plugin configuration value that does not fit the plugin's `Config` type.
///
/// `path` is the field path inside the config value (`timeout`, `tools[2].name`); the display
/// form prefixes it with `config` so a person reads `config.timeout: invalid type: …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Field path inside the config value; empty for the value itself.
    pub path: String,
    /// What serde said was wrong at that path.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() || self.path == "." {
            write!(f, "config: {}", self.message)
        } else if self.path.starts_with('[') {
            write!(f, "config{}: {}", self.path, self.message)
        } else {
            write!(f, "config.{}: {}", self.path, self.message)
        }
    }
}

/// Providing or reading a service failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The providing entry already provides a service under this name.
    #[error("service \"{name}\" is provided twice by entry \"{owner}\"")]
    AlreadyProvided {
        /// The service name.
        name: String,
        /// The entry (scope label, else plugin name) providing it.
        owner: String,
    },
    /// Two or more entries provide the name, so none of them does (see [`crate::Claim`]).
    #[error("service \"{name}\" is contested: entries {holders} all provide it")]
    Contested {
        /// The service name.
        name: String,
        /// The providing entries, sorted and quoted.
        holders: String,
    },
    /// The scope was disposed (or restarted) before the service could be provided.
    #[error("service \"{name}\" was not provided: the scope is no longer live")]
    ScopeGone {
        /// The service name.
        name: String,
    },
    /// A service is required but nobody provides it.
    #[error("service \"{name}\" is not available")]
    Missing {
        /// The service name.
        name: String,
    },
    /// A service of this name exists but has another Rust type.
    #[error("service \"{name}\" has type {actual}, not {expected}")]
    WrongType {
        /// The service name.
        name: String,
        /// The type the caller asked for.
        expected: &'static str,
        /// The type that was provided.
        actual: &'static str,
    },
}

/// Dispatching an event failed as a whole (single listener panics in other modes are contained).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// A waterfall listener panicked, so the value it held is lost.
    #[error("listener of \"{event}\" of entry \"{entry}\" ({plugin}) panicked: {message}")]
    ListenerPanicked {
        /// The event name.
        event: &'static str,
        /// Scope that registered the listener.
        scope: u64,
        /// The entry that scope belongs to (its label, see [`crate::Context::claim_owner`]).
        entry: String,
        /// Plugin name of that scope.
        plugin: String,
        /// The panic message.
        message: String,
    },
}

/// Turns a panic payload into the message a person should read.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

/// What an `apply` returns when its plugin cannot become active *yet* (a server it needs is
/// down): not a failure. The scope goes back to `Pending` with `reason` in its
/// [`crate::ScopeInfo::waiting`], and the scope itself owns a retry that applies it again after
/// `retry_after` (aborted if the scope is disposed or unwound meanwhile). The plugin decides
/// the backoff and when to give up from [`crate::Context::deferrals`]; giving up is an
/// ordinary error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Deferred {
    /// Why the plugin is not active, for a person ("server \"x\" is down: …; retrying").
    pub reason: String,
    /// How long to wait before applying again.
    pub retry_after: std::time::Duration,
}

impl Deferred {
    /// A deferral for `reason`, applied again after `retry_after`.
    pub fn new(reason: impl Into<String>, retry_after: std::time::Duration) -> Deferred {
        Deferred {
            reason: reason.into(),
            retry_after,
        }
    }
}
