//! Errors of the `mcp` plugin.

/// Why an `mcp` entry could not apply (or a tool set could not be synchronized).
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server name does not fit `[A-Za-z0-9_-]{1,32}`.
    #[error(
        "mcp: server name {name:?} is invalid: use 1 to 32 characters of A-Z, a-z, 0-9, `_` and `-` (it becomes part of every tool name, `mcp__<server>__<tool>`)"
    )]
    BadServerName {
        /// The refused name.
        name: String,
    },
    /// A field combination that cannot work.
    #[error("mcp({server}): {message}")]
    Config {
        /// The server name.
        server: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// Starting the process or the MCP handshake failed.
    #[error("mcp({server}): cannot connect: {reason}")]
    Connect {
        /// The server name.
        server: String,
        /// What failed.
        reason: String,
    },
    /// `tools/list` failed.
    #[error("mcp({server}): tools/list failed: {reason}")]
    List {
        /// The server name.
        server: String,
        /// What failed.
        reason: String,
    },
    /// Listing prompts, resources or resource templates failed (the previous list is kept).
    #[error("mcp({server}): {what}/list failed: {reason}")]
    Catalog {
        /// The server name.
        server: String,
        /// `prompts`, `resources` or `resources/templates`.
        what: &'static str,
        /// What failed.
        reason: String,
    },
    /// A `prompts/get` or `resources/read` request failed.
    #[error("mcp({server}): {method} failed: {reason}")]
    Request {
        /// The server name.
        server: String,
        /// The method.
        method: &'static str,
        /// The server's error text, or what else failed.
        reason: String,
    },
    /// The server listed one raw name twice.
    #[error("mcp({server}): server listed tool \"{tool}\" more than once — invalid tool list")]
    ListedTwice {
        /// The server name.
        server: String,
        /// The repeated raw name.
        tool: String,
    },
    /// Registering the tool set failed (it was rolled back whole).
    #[error(
        "mcp({server}): registering tool \"{tool}\" failed, the whole tool list was rolled back: {reason}"
    )]
    Register {
        /// The server name.
        server: String,
        /// The public name that failed.
        tool: String,
        /// The registry's reason.
        reason: String,
    },
    /// `failOnStartupError: true` and the first connection or sync failed.
    #[error("mcp({server}): initial connection or tool synchronization failed: {reason}")]
    Startup {
        /// The server name.
        server: String,
        /// The first failure, without the repeated `mcp(<server>): `.
        reason: String,
    },
    /// `failOnStartupError: false`, and every attempt of the reconnect budget failed.
    #[error(
        "mcp({server}): gave up after {attempts} attempts to connect (reconnect.maxAttempts): {reason}"
    )]
    GaveUp {
        /// The server name.
        server: String,
        /// How many connections were tried.
        attempts: u32,
        /// The last failure, without the repeated `mcp(<server>): `.
        reason: String,
    },
}

impl McpError {
    /// `failOnStartupError`'s error for the first failure `error`.
    pub(crate) fn startup(server: &str, error: &McpError) -> Self {
        McpError::Startup {
            server: server.to_owned(),
            reason: unprefixed(server, error),
        }
    }

    /// `failOnStartupError: false` and reconnecting disabled: the first failure, saying why
    /// the entry does not retry.
    pub(crate) fn startup_without_retry(server: &str, error: &McpError) -> Self {
        McpError::Startup {
            server: server.to_owned(),
            reason: format!(
                "{} (reconnect.enabled is false, so the entry does not retry; enable it or start the server first)",
                unprefixed(server, error)
            ),
        }
    }

    /// `failOnStartupError: false`, and the last of `attempts` connections failed with `error`.
    pub(crate) fn gave_up(server: &str, attempts: u32, error: &McpError) -> Self {
        McpError::GaveUp {
            server: server.to_owned(),
            attempts,
            reason: unprefixed(server, error),
        }
    }

    pub(crate) fn config(server: &str, message: &str) -> Self {
        McpError::Config {
            server: server.to_owned(),
            message: message.to_owned(),
        }
    }
}

/// `error`'s text without its `mcp(<server>): ` prefix, to nest in another error of `server`.
fn unprefixed(server: &str, error: &McpError) -> String {
    let text = error.to_string();
    let prefix = format!("mcp({server}): ");
    text.strip_prefix(&prefix).unwrap_or(&text).to_owned()
}

/// The innermost cause of `e`: rmcp's transport errors name its generic types in their own
/// text ("Transport [rmcp::transport::worker::WorkerTransport<…>] error"), while the root
/// cause ("Connection refused", "connection closed") is what a person can act on.
pub(crate) fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    // Some of rmcp's errors keep their cause only in their text, after the type names.
    match text.rfind("] error: ") {
        Some(at) => text[at + "] error: ".len()..].to_owned(),
        None => text,
    }
}

/// The authorization's own message (a login or more scope needed) when `e` is a request the
/// server refused for want of one, without the `mcp(<server>): ` prefix; `None` otherwise.
/// The HTTP transport reports it as an unexpected response, but the server answered: it is
/// not out of reach, and the message says what to do.
pub(crate) fn refusal(server: &str, e: &rmcp::service::ServiceError) -> Option<String> {
    let rmcp::service::ServiceError::TransportSend(e) = e else {
        return None;
    };
    let cause = innermost(e);
    cause
        .strip_prefix("unexpected server response: ")?
        .strip_prefix(&format!("mcp({server}): "))
        .map(str::to_owned)
}
