//! What a plugin author writes: a [`ToolPlugin`] and its [`Tool`]s.

use std::time::Duration;

use serde_json::{Value, json};

/// One tool a plugin offers: its model-facing schema and an optional call timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The name the model calls; unique within the host, not `run_code` or `<unlisted-tools>`.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// A JSON Schema object (`"type": "object"`) for the arguments.
    pub parameters: Value,
    /// Fails a call that runs longer (the host's default applies when `None`).
    pub timeout: Option<Duration>,
}

impl Tool {
    /// A tool without a timeout of its own.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Tool {
        Tool {
            name: name.into(),
            description: description.into(),
            parameters,
            timeout: None,
        }
    }

    /// Sets the call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Tool {
        self.timeout = Some(timeout);
        self
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut v = json!({
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        });
        if let Some(t) = self.timeout {
            v["timeout_ms"] = json!(u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        }
        v
    }
}

/// A tool plugin. The host creates one instance per cordis.yml entry, asks it for its tools
/// once, then invokes them; the instance is dropped when the entry is disposed.
///
/// # Lifecycle
/// 1. [`ToolPlugin::create`] with the entry's `config` (`null` when absent).
/// 2. [`ToolPlugin::tools`], once per instance; the host registers them.
/// 3. [`ToolPlugin::invoke`], any number of times, on blocking threads of the host.
/// 4. `drop`, after the entry is disposed and every call has returned.
///
/// Unless [`ToolPlugin::THREAD_SAFE`] is true the host makes one call into the library at a time.
///
/// # Panics
/// A panic in any of these becomes an error the host reports for this entry or call alone.
pub trait ToolPlugin: Send + Sync + Sized + 'static {
    /// True if `invoke` may run concurrently (the host then runs several calls at once).
    const THREAD_SAFE: bool = false;

    /// Makes an instance from the entry's config.
    ///
    /// # Errors
    /// A message the host shows as the entry's failure.
    fn create(config: Value) -> Result<Self, String>;

    /// The tools this instance offers.
    fn tools(&self) -> Vec<Tool>;

    /// Runs `tool` with `args`; the value is the result content the model sees.
    ///
    /// # Errors
    /// A message the host returns as the call's error result.
    fn invoke(&self, tool: &str, args: Value) -> Result<Value, String>;
}
