//! The `mcp` entry's configuration and its checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;

use crate::error::McpError;

/// How the server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio,
    /// Streamable HTTP (`POST url`).
    Http,
}

/// Reconnect policy after the server went away.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Reconnect {
    /// Reconnect at all.
    pub enabled: bool,
    /// The first delay; each failed attempt doubles it.
    pub initial_delay_ms: u64,
    /// The longest delay; a connection that stayed up this long resets the budget.
    pub max_delay_ms: u64,
    /// Attempts before giving up (the tools are then unregistered).
    pub max_attempts: u32,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect {
            enabled: true,
            initial_delay_ms: 500,
            max_delay_ms: 30_000,
            max_attempts: 10,
        }
    }
}

impl Reconnect {
    /// The delay before attempt `attempt` (1-based): `initial * 2^(attempt-1)`, capped.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u64 << attempt.saturating_sub(1).min(32);
        Duration::from_millis(
            self.initial_delay_ms
                .saturating_mul(factor)
                .min(self.max_delay_ms.max(self.initial_delay_ms)),
        )
    }
}

/// Configuration of one `mcp` entry: one server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpConfig {
    /// `stdio` or `http`.
    pub transport: TransportKind,
    /// The server's name in tool names (`mcp__<server>__<tool>`): `[A-Za-z0-9_-]{1,32}`.
    /// Checked while parsing, so a config error points at the `server` value.
    #[serde(deserialize_with = "server_name")]
    pub server: String,
    /// stdio: the program to run.
    #[serde(default)]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: variables set over the scrubbed environment (see [`crate::PASSED_ENV`]).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: the working directory (default: the host's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// stdio: run the server in a sandbox, as `tool-shell` runs commands: `read-only` (write
    /// nowhere but a private temp dir), `workspace-write` (also in the composition's
    /// `workspace` root) or `full-access` (no filesystem rules). Default: no sandbox (the server
    /// only cannot read cordis's memory or environment).
    #[serde(default)]
    pub sandbox: Option<cordis_sandbox::SandboxMode>,
    /// stdio, with `sandbox`: whether the server may reach the network (default: no).
    #[serde(default)]
    pub network: Option<bool>,
    /// http: the endpoint.
    #[serde(default)]
    pub url: Option<String>,
    /// http: headers sent with every request (values may use `${{ env.NAME }}`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// http: OAuth when the server asks for it (see [`crate::auth`]); off when `headers` sets
    /// `Authorization` (the entry then brings its own credentials).
    #[serde(default)]
    pub oauth: crate::auth::OAuthConfig,
    /// A call that goes this long without a result or a `notifications/progress` fails (and is
    /// cancelled on the server); each progress notification starts the wait again, up to
    /// `maxCallMs`. Also bounds the handshake and each list request. Default 60 000.
    #[serde(default = "default_call_timeout")]
    pub call_timeout_ms: u64,
    /// The longest a call may run, however much progress it reports (then it fails with the
    /// registry's timeout and is cancelled on the server). At least `callTimeoutMs`. Default
    /// 600 000 (10 minutes).
    #[serde(default = "default_max_call")]
    pub max_call_ms: u64,
    /// Which of the server's tools are registered, by the server's (raw) tool names.
    #[serde(default)]
    pub tools: ToolFilter,
    /// Fail the entry when the first connection or tool list fails (default: keep retrying).
    #[serde(default)]
    pub fail_on_startup_error: bool,
    /// Take the tools' effect class from the server's annotations (`readOnlyHint: true` runs
    /// without asking). Off by default: a server could mark any tool read-only, so its tools
    /// are undeclared (they ask) unless this entry trusts it.
    #[serde(default)]
    pub trust_annotations: bool,
    /// Declare sampling and answer the server's `sampling/createMessage` through the
    /// composition's model, each request only after the user allowed it (default true; false:
    /// not declared, refused).
    #[serde(default = "yes")]
    pub sampling: bool,
    /// Reconnect policy.
    #[serde(default)]
    pub reconnect: Reconnect,
    /// The largest message read from the server: a stdio line, an HTTP JSON body or one
    /// server-sent event (default 16 MiB, at least 1 KiB). A larger stdio line is skipped and a
    /// larger HTTP message fails its request, instead of growing without bound.
    #[serde(default = "default_max_message")]
    pub max_message_bytes: usize,
    /// The most bytes of one tool result's text that reach the model and the session log
    /// (default [`cordis_tools::MAX_RESULT_TEXT`], 64 KiB, at least 1 KiB): a longer result
    /// keeps its head and tail, saying how much was cut (see the `result` module).
    #[serde(default = "default_max_result_text")]
    pub max_result_text: usize,
}

fn default_max_result_text() -> usize {
    cordis_tools::MAX_RESULT_TEXT
}

impl McpConfig {
    /// What `new` lets this server do or be told that `self` did not, one line each (the
    /// process or endpoint itself is [`cordis_runtime::Plugin::starts`]'s): trusting its
    /// annotations (its `readOnlyHint` tools then run without a question), secrets passed to it
    /// (`env` values, `headers`), more of its tools, sampling.
    pub fn widened_by(&self, new: &McpConfig) -> Vec<String> {
        let server = &new.server;
        let mut out = Vec::new();
        let rank = |c: &McpConfig| match c.sandbox {
            Some(cordis_sandbox::SandboxMode::ReadOnly) => 0,
            Some(cordis_sandbox::SandboxMode::WorkspaceWrite) => 1,
            Some(cordis_sandbox::SandboxMode::FullAccess) => 2,
            None => 3,
        };
        if rank(new) > rank(self) {
            let name = |c: &McpConfig| c.sandbox.map_or("none", |m| m.as_str());
            out.push(format!(
                "server {server}'s sandbox {} → {}",
                name(self),
                name(new)
            ));
        }
        if new.sandbox.is_some()
            && self.sandbox.is_some()
            && new.network == Some(true)
            && self.network != Some(true)
        {
            out.push(format!("server {server} would reach the network"));
        }
        if new.trust_annotations && !self.trust_annotations {
            out.push(format!(
                "server {server}'s annotations would be trusted (its read-only tools run without a question)"
            ));
        }
        for (name, value) in &new.env {
            if self.env.get(name) != Some(value) {
                out.push(format!(
                    "server {server} would get another value of `{name}`"
                ));
            }
        }
        for (name, value) in &new.headers {
            if self.headers.get(name) != Some(value) {
                out.push(format!(
                    "server {server} would be sent another `{name}` header"
                ));
            }
        }
        let narrower = |old: &ToolFilter, new: &ToolFilter| {
            let allow_within = match (&old.allow, &new.allow) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(o), Some(n)) => n.is_subset(o),
            };
            allow_within && old.deny.is_subset(&new.deny)
        };
        if !narrower(&self.tools, &new.tools) {
            out.push(format!("more of server {server}'s tools would be offered"));
        }
        if new.sampling && !self.sampling {
            out.push(format!("server {server} could ask the model (sampling)"));
        }
        out
    }
}

/// The default of [`McpConfig::max_message_bytes`].
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;

fn yes() -> bool {
    true
}

fn default_max_message() -> usize {
    DEFAULT_MAX_MESSAGE_BYTES
}

fn server_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    if valid_server_name(&name) {
        Ok(name)
    } else {
        Err(serde::de::Error::custom(McpError::BadServerName { name }))
    }
}

/// Whether `name` fits `[A-Za-z0-9_-]{1,32}`.
fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn default_call_timeout() -> u64 {
    60_000
}

/// The default of [`McpConfig::max_call_ms`]: 10 minutes.
pub const DEFAULT_MAX_CALL_MS: u64 = 600_000;

fn default_max_call() -> u64 {
    DEFAULT_MAX_CALL_MS
}

/// `tools: {allow: [...], deny: [...]}`: the server's tools an entry registers, by raw name.
///
/// No `allow` registers every tool the server lists; an `allow` list registers only those.
/// `deny` removes tools either way. A name in both lists is refused while parsing (which one
/// was meant cannot be guessed), as is any other key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// Only these raw names, when present.
    pub allow: Option<BTreeSet<String>>,
    /// Never these raw names.
    pub deny: BTreeSet<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolFilter {
    #[serde(default)]
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
}

impl<'de> Deserialize<'de> for ToolFilter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawToolFilter::deserialize(d)?;
        let allow: Option<BTreeSet<String>> = raw.allow.map(|a| a.into_iter().collect());
        let deny: BTreeSet<String> = raw.deny.into_iter().collect();
        if let Some(both) = allow.as_ref().and_then(|a| a.intersection(&deny).next()) {
            return Err(serde::de::Error::custom(format!(
                "tool {both:?} is both in `tools.allow` and in `tools.deny`; keep it in one list"
            )));
        }
        Ok(ToolFilter { allow, deny })
    }
}

impl ToolFilter {
    /// Whether the server's tool `raw` is registered.
    pub fn admits(&self, raw: &str) -> bool {
        !self.deny.contains(raw) && self.allow.as_ref().is_none_or(|a| a.contains(raw))
    }
}

/// The longest server name.
pub const MAX_SERVER_NAME: usize = 32;

impl McpConfig {
    /// A stdio config for `server` running `command args…` (defaults elsewhere).
    pub fn stdio(server: &str, command: impl Into<String>, args: Vec<String>) -> Self {
        McpConfig {
            transport: TransportKind::Stdio,
            server: server.to_owned(),
            command: Some(command.into()),
            args,
            env: BTreeMap::new(),
            cwd: None,
            sandbox: None,
            network: None,
            url: None,
            headers: BTreeMap::new(),
            oauth: crate::auth::OAuthConfig::default(),
            call_timeout_ms: default_call_timeout(),
            max_call_ms: DEFAULT_MAX_CALL_MS,
            tools: ToolFilter::default(),
            fail_on_startup_error: false,
            trust_annotations: false,
            sampling: true,
            reconnect: Reconnect::default(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_result_text: cordis_tools::MAX_RESULT_TEXT,
        }
    }

    /// The `headers` as HTTP header names and values.
    ///
    /// # Errors
    /// A name or value HTTP does not allow.
    pub fn header_map(&self) -> Result<Vec<(HeaderName, HeaderValue)>, McpError> {
        self.headers
            .iter()
            .map(|(name, value)| {
                let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    McpError::config(&self.server, &format!("header name {name:?} is not a valid HTTP header name"))
                })?;
                let v = HeaderValue::from_str(value).map_err(|_| {
                    McpError::config(&self.server, &format!("the value of header {name:?} has characters HTTP does not allow (a line break?)"))
                })?;
                Ok((n, v))
            })
            .collect()
    }

    /// Whether OAuth applies: an HTTP entry with `oauth.enabled` that sets no `Authorization`
    /// header of its own.
    pub fn uses_oauth(&self) -> bool {
        self.transport == TransportKind::Http
            && self.oauth.enabled
            && !self
                .headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"))
    }

    /// The call timeout (without a result or progress).
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }

    /// The ceiling of one call, progress or not.
    pub fn max_call(&self) -> Duration {
        Duration::from_millis(self.max_call_ms)
    }

    /// Checks what serde cannot: the server name, the fields each transport needs, and that
    /// fields of the other transport are absent.
    ///
    /// # Errors
    /// The [`McpError`] naming the field and the fix.
    pub fn check(&self) -> Result<(), McpError> {
        let s = &self.server;
        if !valid_server_name(s) {
            return Err(McpError::BadServerName { name: s.clone() });
        }
        if self.call_timeout_ms == 0 {
            return Err(McpError::config(s, "callTimeoutMs must be positive"));
        }
        if self.max_call_ms < self.call_timeout_ms {
            return Err(McpError::config(
                s,
                &format!(
                    "maxCallMs ({}) is below callTimeoutMs ({}); raise maxCallMs (the ceiling of a call that reports progress) or lower callTimeoutMs",
                    self.max_call_ms, self.call_timeout_ms
                ),
            ));
        }
        if let Some(problem) = self.oauth.problem() {
            return Err(McpError::config(s, &problem));
        }
        if self.max_message_bytes < 1024 {
            return Err(McpError::config(s, "maxMessageBytes must be at least 1024"));
        }
        if self.max_result_text < 1024 {
            return Err(McpError::config(s, "maxResultText must be at least 1024"));
        }
        match self.transport {
            TransportKind::Stdio => {
                if self.command.as_deref().is_none_or(str::is_empty) {
                    return Err(McpError::config(
                        s,
                        "transport \"stdio\" needs `command` (the program that runs the server)",
                    ));
                }
                if self.network.is_some() && self.sandbox.is_none() {
                    return Err(McpError::config(
                        s,
                        "`network` applies to a sandboxed server: set `sandbox` too (read-only, workspace-write or full-access)",
                    ));
                }
                if self.url.is_some()
                    || !self.headers.is_empty()
                    || self.oauth != crate::auth::OAuthConfig::default()
                {
                    return Err(McpError::config(
                        s,
                        "`url`, `headers` and `oauth` belong to transport \"http\"; remove them or set `transport: http`",
                    ));
                }
            }
            TransportKind::Http => {
                self.header_map()?;
                if self.url.as_deref().is_none_or(str::is_empty) {
                    return Err(McpError::config(
                        s,
                        "transport \"http\" needs `url` (the server's streamable HTTP endpoint)",
                    ));
                }
                if self.command.is_some()
                    || !self.args.is_empty()
                    || !self.env.is_empty()
                    || self.cwd.is_some()
                    || self.sandbox.is_some()
                    || self.network.is_some()
                {
                    return Err(McpError::config(
                        s,
                        "`command`, `args`, `env`, `cwd`, `sandbox` and `network` belong to transport \"stdio\"; remove them or set `transport: stdio`",
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_and_transport_fields_are_checked() {
        let ok = McpConfig::stdio("files-1_x", "srv", vec![]);
        assert!(ok.check().is_ok());
        for bad in ["", "has.dot", "has space", &"x".repeat(33)] {
            let mut c = ok.clone();
            c.server = bad.to_owned();
            assert!(
                matches!(c.check(), Err(McpError::BadServerName { .. })),
                "{bad:?}"
            );
        }
        let mut no_command = ok.clone();
        no_command.command = None;
        assert!(
            no_command
                .check()
                .unwrap_err()
                .to_string()
                .contains("needs `command`")
        );
        let http: McpConfig = serde_json::from_value(serde_json::json!({
            "transport": "http", "server": "h", "url": "http://x", "args": ["a"]
        }))
        .unwrap();
        assert!(
            http.check()
                .unwrap_err()
                .to_string()
                .contains("belong to transport \"stdio\"")
        );
    }

    #[test]
    fn a_change_that_trusts_tells_or_offers_a_server_more_is_named() {
        let old = McpConfig::stdio("fx", "srv", vec![]);
        assert!(old.widened_by(&old).is_empty());
        let mut new = old.clone();
        new.trust_annotations = true;
        let _ = new.env.insert("TOKEN".into(), "secret".into());
        new.tools.deny.insert("x".into());
        assert_eq!(
            old.widened_by(&new),
            [
                "server fx's annotations would be trusted (its read-only tools run without a question)",
                "server fx would get another value of `TOKEN`",
            ]
        );
        // Denying a tool narrows; lifting the denial, or an allow list, widens.
        assert!(
            new.widened_by(&old)
                .contains(&"more of server fx's tools would be offered".to_owned())
        );
    }

    #[test]
    fn a_bad_server_name_is_refused_while_parsing() {
        let err = serde_json::from_value::<McpConfig>(serde_json::json!({
            "transport": "stdio", "server": "my server", "command": "x"
        }))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("server name \"my server\" is invalid"),
            "{err}"
        );
    }

    #[test]
    fn defaults_and_unknown_fields() {
        let c: McpConfig = serde_json::from_value(serde_json::json!({
            "transport": "stdio", "server": "s", "command": "x"
        }))
        .unwrap();
        assert_eq!(c.call_timeout_ms, 60_000);
        assert!(!c.fail_on_startup_error);
        assert_eq!(c.reconnect, Reconnect::default());
        let err = serde_json::from_value::<McpConfig>(serde_json::json!({
            "transport": "stdio", "server": "s", "command": "x", "serverName": "y"
        }))
        .unwrap_err();
        assert!(
            err.to_string().contains("unknown field `serverName`"),
            "{err}"
        );
    }

    #[test]
    fn a_tool_filter_admits_by_raw_name_and_refuses_a_name_in_both_lists_and_unknown_keys() {
        let parse = |filter: serde_json::Value| {
            serde_json::from_value::<McpConfig>(serde_json::json!({
                "transport": "stdio", "server": "s", "command": "x", "tools": filter
            }))
        };
        let c = parse(serde_json::json!({"allow": ["a", "b.c"], "deny": ["d"]})).unwrap();
        assert!(c.tools.admits("a") && c.tools.admits("b.c"));
        assert!(!c.tools.admits("d") && !c.tools.admits("e"));
        let deny_only = parse(serde_json::json!({"deny": ["d"]})).unwrap();
        assert!(deny_only.tools.admits("e") && !deny_only.tools.admits("d"));
        assert!(McpConfig::stdio("s", "x", vec![]).tools.admits("anything"));
        let both = parse(serde_json::json!({"allow": ["a", "d"], "deny": ["d"]})).unwrap_err();
        assert!(
            both.to_string()
                .contains("tool \"d\" is both in `tools.allow` and in `tools.deny`"),
            "{both}"
        );
        let unknown = parse(serde_json::json!({"allows": ["a"]})).unwrap_err();
        assert!(
            unknown.to_string().contains("unknown field `allows`"),
            "{unknown}"
        );
    }

    #[test]
    fn the_call_ceiling_defaults_to_ten_minutes_and_may_not_undercut_the_call_timeout() {
        let mut c = McpConfig::stdio("s", "x", vec![]);
        assert_eq!(c.max_call_ms, 600_000);
        c.max_call_ms = 1_000;
        assert!(
            c.check()
                .unwrap_err()
                .to_string()
                .contains("maxCallMs (1000) is below callTimeoutMs (60000)")
        );
    }

    #[test]
    fn backoff_doubles_to_the_cap() {
        let r = Reconnect {
            initial_delay_ms: 100,
            max_delay_ms: 500,
            ..Reconnect::default()
        };
        let ms: Vec<u128> = (1..=5).map(|a| r.delay(a).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 500, 500]);
    }
}
