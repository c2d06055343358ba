//! `cordis acp`: the agent as an [Agent Client Protocol](https://agentclientprotocol.com) server
//! on stdio, for editors (Zed first) that run `{"command": "cordis", "args": ["acp"]}`.
//!
//! stdout carries only the protocol (newline-delimited JSON-RPC, through the
//! `agent-client-protocol` crate's v1 connection); logs go to stderr.
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
//! # Never blocking the dispatch loop
//! The crate runs each request handler inside its dispatch loop and waits for it. Our handlers
//! only forward the request (with its responder) to [`server::Server`], one loop that owns every
//! session and polls every piece of work (boots, turns) as a future it holds. A prompt's answer
//! is sent when its turn ends, so `session/cancel` and permission answers keep flowing while a
//! turn runs; `ask` approvals are `session/request_permission` requests awaited by the turn.
//!
//! # MCP servers
//! A session's `mcpServers` (stdio; the `mcp` plugin has no other transport yet) are `mcp`
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
//! records for a loaded one). `session/set_mode` switches a session that has no turn yet (the
//! roster's rule: a history written under one preset is not re-read under another).
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
pub mod server;
pub mod session;
pub mod updates;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, CancelNotification,
    Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest, McpCapabilities,
    NewSessionRequest, PromptCapabilities, PromptRequest, SetSessionModeRequest,
};
use agent_client_protocol::{Agent, Stdio};
use tokio::sync::mpsc;

pub use server::{Job, Server};
pub use session::Composition;

/// The `initialize` answer: the client's version negotiated down to ours, and what we do.
pub fn initialize_response(request: &InitializeRequest) -> InitializeResponse {
    InitializeResponse::new(request.protocol_version.min(ProtocolVersion::LATEST))
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                // Text and resource links only (both required of every agent).
                .prompt_capabilities(PromptCapabilities::new())
                // No MCP transports beyond the protocol's baseline.
                .mcp_capabilities(McpCapabilities::new()),
        )
        .agent_info(Implementation::new("cordis", env!("CARGO_PKG_VERSION")))
}

/// Serves one ACP connection on stdin/stdout until the client closes it.
///
/// # Errors
/// A transport failure (stdio broken mid-message).
pub async fn serve_stdio(
    composition: &Composition<'_>,
) -> Result<(), agent_client_protocol::Error> {
    let (jobs, queued) = mpsc::unbounded_channel::<Job>();
    let forward = move |job: Job| {
        // The server is gone only after the connection closed; dropping the responder then
        // is all that is left to do.
        let _ = jobs.send(job);
    };
    let (f_new, f_load, f_prompt, f_cancel, f_mode) = (
        forward.clone(),
        forward.clone(),
        forward.clone(),
        forward.clone(),
        forward,
    );
    Agent
        .v1()
        .name("cordis")
        .on_receive_request(
            async |request: InitializeRequest, responder, _cx| {
                responder.respond(initialize_response(&request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async |_request: AuthenticateRequest, responder, _cx| {
                // No authentication methods are advertised; accept whatever is asked.
                responder.respond(AuthenticateResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx| {
                f_new(Job::New(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, _cx| {
                f_load(Job::Load(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, _cx| {
                f_prompt(Job::Prompt(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, _cx| {
                f_mode(Job::SetMode(request, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: CancelNotification, _cx| {
                f_cancel(Job::Cancel(note));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(Stdio::new(), async |connection| {
            Server::new(composition, connection).run(queued).await
        })
        .await
}
