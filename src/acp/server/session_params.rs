//! What `session/new` and `session/load` (and `session/list`) accept of a session's place:
//! an absolute cwd, absolute additional directories, and the client's MCP servers.

use std::path::PathBuf;

use serde_json::Value;

use crate::acp::rpc::RpcError;
use crate::acp::session::{McpServer, McpTransport, invalid_params};

/// The session's cwd, which must be absolute (it becomes the workspace root).
pub(super) fn absolute_cwd(cwd: &std::path::Path) -> Result<PathBuf, RpcError> {
    if cwd.is_absolute() {
        Ok(cwd.to_owned())
    } else {
        Err(invalid_params(format!(
            "cwd must be an absolute path, got \"{}\"",
            cwd.display()
        )))
    }
}

/// What `session/new` and `session/load` accept beyond the cwd: additional directories that
/// are absolute paths, at most [`cordis_workspace::MAX_MORE_ROOTS`] (more workspace roots; the
/// boot checks that each is a directory), and the client's MCP servers.
fn check_extras(dirs: &[PathBuf], mcp_servers: &[Value]) -> Result<Vec<McpServer>, RpcError> {
    if let Some(relative) = dirs.iter().find(|d| !d.is_absolute()) {
        return Err(invalid_params(format!(
            "additionalDirectories must be absolute paths, got \"{}\"",
            relative.display()
        )));
    }
    if dirs.len() > cordis_workspace::MAX_MORE_ROOTS {
        return Err(invalid_params(format!(
            "additionalDirectories has {} entries, more than the {} a session takes",
            dirs.len(),
            cordis_workspace::MAX_MORE_ROOTS
        )));
    }
    mcp_servers.iter().map(mcp_server).collect()
}

/// One `mcpServers` entry: stdio (`{name, command, args, env: [{name, value}]}`, with no
/// `type` or `type: "stdio"`) and streamable HTTP (`{type: "http", name, url, headers:
/// [{name, value}]}`) are accepted; SSE (a deprecated transport) is refused.
fn mcp_server(server: &Value) -> Result<McpServer, RpcError> {
    #[derive(serde::Deserialize)]
    struct Stdio {
        name: String,
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: Vec<Variable>,
    }
    #[derive(serde::Deserialize)]
    struct Http {
        name: String,
        url: String,
        #[serde(default)]
        headers: Vec<Variable>,
    }
    #[derive(serde::Deserialize)]
    struct Variable {
        name: String,
        value: String,
    }
    let name = server["name"].as_str().unwrap_or("?");
    let bad = |e: serde_json::Error| invalid_params(format!("mcpServers \"{name}\": {e}"));
    let pairs = |vars: Vec<Variable>| vars.into_iter().map(|v| (v.name, v.value)).collect();
    match server.get("type").and_then(Value::as_str) {
        None | Some("stdio") => {
            let s: Stdio = serde_json::from_value(server.clone()).map_err(bad)?;
            Ok(McpServer {
                name: s.name,
                transport: McpTransport::Stdio {
                    command: s.command,
                    args: s.args,
                    env: pairs(s.env),
                },
            })
        }
        Some("http") => {
            let h: Http = serde_json::from_value(server.clone()).map_err(bad)?;
            Ok(McpServer {
                name: h.name,
                transport: McpTransport::Http {
                    url: h.url,
                    headers: pairs(h.headers),
                },
            })
        }
        Some("sse") => Err(invalid_params(format!(
            "mcpServers \"{name}\": SSE servers are not supported (mcpCapabilities.sse is false); use the server's streamable HTTP endpoint"
        ))),
        Some(other) => Err(invalid_params(format!(
            "mcpServers \"{name}\": unknown transport \"{other}\"; stdio and http are supported"
        ))),
    }
}

/// The cwd, MCP servers and additional directories of a `session/new` or `session/load`,
/// checked.
pub(super) fn checked_place(
    cwd: &std::path::Path,
    dirs: &[PathBuf],
    mcp_servers: &[Value],
) -> Result<(PathBuf, Vec<McpServer>, Vec<PathBuf>), RpcError> {
    absolute_cwd(cwd)
        .and_then(|cwd| check_extras(dirs, mcp_servers).map(|m| (cwd, m, dirs.to_vec())))
}
