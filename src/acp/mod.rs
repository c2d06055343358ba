//! `cordis acp`: the agent as an [Agent Client Protocol](https://agentclientprotocol.com) server
//! on stdio, for editors (Zed first) that run `{"command": "cordis", "args": ["acp"]}`.
//!
//! stdout carries only the protocol (newline-delimited JSON-RPC 2.0, protocol version 1); logs
//! go to stderr. The messages are our own serde types ([`protocol`]): the
//! `agent-client-protocol` crates turn on `serde_json`'s `preserve_order` for the whole build,
//! which changed what other parts of the workspace print and log.
//!
//! # One composition per session
//! Every `session/new` and `session/load` boots the config file anew: its own root scope, its
//! own tools, approvals and presenters, its own agent. The environment the file is resolved
//! with is the process's, except that `CORDIS_WORKSPACE` is the session's `cwd` — the bundled
//! `cordis.yml` takes its workspace root from it, so each session's tools work in its own
//! directory. Why not one composition with a scope per session: the workspace root, the
//! approver and the client's MCP servers are composition-wide services, and giving them per-session
//! layers would be cleverness every plugin has to get right; separate compositions are
//! separated by construction, and cost one boot (milliseconds) per session.
//!
//! Sessions are persisted by the file's `sessions` entry. Its `root` is resolved against the
//! process's current directory (not the session's cwd), so every session of every connection
//! started from one directory shares one sessions root, and `session/load` finds what an
//! earlier `session/new` wrote. A session's header records its cwd; a load must ask for the
//! same cwd.
//!
//! # Never blocking the reader
//! A reader thread only parses lines ([`rpc`]): requests and notifications go to
//! [`server::Server`], one loop that owns every session and polls every piece of work (boots,
//! turns) as a future it holds; answers to the agent's own requests complete them directly. A
//! prompt's answer is sent when its turn ends, so `session/cancel` and permission answers keep
//! flowing while a turn runs; `ask` approvals are `session/request_permission` requests
//! awaited by the turn.
//!
//! # MCP servers
//! A session's `mcpServers` (stdio and streamable HTTP; SSE is refused) are `mcp`
//! entries started under that session's root: their tools (`mcp__<server>__<tool>`) exist in
//! that session only and stop with it. Each must start and list its tools, or the session is
//! refused naming the server (an editor's user configured it; silently missing tools would be
//! worse). A client's server name becomes a valid `server` name by replacing other characters
//! with `_` ([`session::server_name`]).
//!
//! # Modes
//! When the file has an `agent-presets` roster, each usable preset is a session mode
//! (`modes` in the `session/new` and `session/load` answers; the current one is the preset the
//! session runs: `--preset`, else the roster's default, for a new session; the one its log
//! records for a loaded one). `session/set_mode` switches an idle session, before or after its
//! first turn (editors keep the picker live): the history stays, the next request carries the
//! new preset's tools and persona and logs its `request/header` with reason `change`, and the
//! switch is logged (`agent-preset/selected`), so a load rejoins the last preset chosen.
//!
//! # Updates
//! Each session's agent events go through one [`updates::UpdateMapper`] as they are logged;
//! `session/load` feeds the persisted events through the same mapping first (see
//! [`updates`]), so a replay shows what the live stream showed.
//!
//! # Disconnect
//! At client EOF every agent is disposed: a running turn ends `disposed` in its log, the log
//! is flushed, and every composition is disposed; the process then exits.

pub mod approver;
pub mod elicitor;
pub mod files;
pub mod protocol;
pub mod rpc;
pub mod server;
pub mod session;
pub mod terminals;
pub mod updates;

pub use server::Server;
pub use session::Composition;

use protocol::{
    AgentCapabilities, Implementation, InitializeRequest, InitializeResponse, McpCapabilities,
    PROTOCOL_VERSION, PromptCapabilities, SessionCapabilities, Supported,
};

/// The `initialize` answer: the client's version negotiated down to ours, and what we do
/// (`images`: the composition's model takes images).
pub fn initialize_response(request: &InitializeRequest, images: bool) -> InitializeResponse {
    InitializeResponse {
        protocol_version: request.protocol_version.min(PROTOCOL_VERSION),
        agent_capabilities: AgentCapabilities {
            load_session: true,
            // Text, resource links (both required of every agent), embedded text resources, and
            // images when the model takes them.
            prompt_capabilities: PromptCapabilities {
                image: images,
                audio: false,
                embedded_context: true,
            },
            // stdio servers only (the protocol's baseline).
            mcp_capabilities: McpCapabilities {
                http: true,
                sse: false,
            },
            session_capabilities: SessionCapabilities {
                list: Supported {},
                resume: Supported {},
                close: Supported {},
                fork: Supported {},
                delete: Supported {},
                additional_directories: Supported {},
            },
        },
        auth_methods: Vec::new(),
        agent_info: Implementation {
            name: "cordis".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        },
    }
}

/// Serves one ACP connection on stdin/stdout on `rt` until the client closes it, then
/// disposes every session and flushes what is left to write (joining the I/O threads outside
/// the runtime).
///
/// # Errors
/// The reader or writer thread could not be started, or (`watch`) the file cannot be watched.
pub fn serve_stdio(
    composition: &Composition<'_>,
    rt: &tokio::runtime::Runtime,
    watch: bool,
) -> std::io::Result<()> {
    let (stdio, incoming) = rpc::Stdio::start()?;
    let served = rt.block_on(async {
        let mut server = Server::new(composition, stdio.connection().clone());
        if watch {
            // Made on the runtime: the watcher's events arrive on its tasks.
            let path = std::path::Path::new(&composition.file);
            server = server.watching(
                cordis_host::watch::ConfigWatcher::new(path).map_err(std::io::Error::other)?,
            );
        }
        server.run(incoming).await;
        Ok::<(), std::io::Error>(())
    });
    stdio.finish();
    served
}
