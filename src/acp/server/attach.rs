//! Wiring a booted session to the connection: its updates stream to the editor, and what the
//! editor does (approvals, files, terminals, forms) serves the session's tools.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use cordis_agent_loop::AgentEvent;
use cordis_approvals::ApproverService;
use cordis_llm::Llm;
use cordis_presenter::Presenters;
use cordis_runtime::Context;
use cordis_tools::ToolRegistry;
use cordis_workspace::FileRouteService;
use serde_json::json;

use super::Live;
use super::commands::available_commands;
use super::initialize::Editor;
use super::replay::replay_log;
use crate::acp::approver::EditorApprover;
use crate::acp::elicitor::EditorElicitor;
use crate::acp::files::{EditorFiles, EditorFs};
use crate::acp::protocol::{AvailableCommand, SessionNotification, SessionUpdate};
use crate::acp::rpc::{Connection, RpcError};
use crate::acp::session::Booted;
use crate::acp::terminals::EditorTerminals;
use crate::acp::updates::{LiveViews, UpdateMapper};

/// Where a session's updates go: `session/update` notifications naming it.
#[derive(Clone)]
struct Updates {
    connection: Connection,
    session_id: String,
}

impl Updates {
    /// Sends `update` to the editor.
    fn send(&self, update: SessionUpdate) {
        self.connection.notify(
            "session/update",
            SessionNotification {
                session_id: self.session_id.clone(),
                update,
            },
        );
    }
}

/// When a call that may change files behind the editor's back last started (see `files`).
type ChangingSince = Arc<Mutex<Option<SystemTime>>>;

/// Wires a booted session to the connection: with `replay` (a load), sends the whole log
/// through the mapper first (see [`replay_log`]); then streams every later event of its agent
/// the same way, and answers `ask` by asking the editor. A failed replay disposes the
/// composition.
pub(super) async fn attach(
    booted: Booted,
    id: String,
    cwd: PathBuf,
    connection: &Connection,
    replay: bool,
    editor: Editor,
) -> Result<Live, RpcError> {
    let root = booted.root().clone();
    let presenters: Option<Arc<Presenters>> = root.get::<Presenters>();
    let window = root.get::<Llm>().and_then(|llm| llm.context_window());
    let mut mapper = UpdateMapper::new(cwd.clone())
        .with_terminal_meta(editor.terminal_meta)
        .with_context_window(window)
        .with_costs(crate::session::usage::CostMeter::of_agent(&booted.agent))
        // A call waits for the approvals stage's decision (and its turn) before it runs: it is
        // announced `pending` (on a replay too, which tells the story as it was streamed).
        .with_decisions(root.get::<cordis_approvals::Approvals>().is_some())
        .titled(
            !replay
                && booted.agent.session().with_events(|events| {
                    events
                        .iter()
                        .any(|e| e.kind == cordis_session::kinds::USER_MESSAGE)
                }),
        );
    let updates = Updates {
        connection: connection.clone(),
        session_id: id.clone(),
    };
    if replay && let Err(e) = replay_log(&root, &id, &mut mapper, |u| updates.send(u)).await {
        root.dispose();
        return Err(e);
    }
    let mapper = Arc::new(Mutex::new(mapper));
    let changing_since = route_to_editor(&root, connection, &id, editor);
    let views = LiveViews {
        scope: booted.agent.scope_key(),
        tools: root.get::<ToolRegistry>(),
        presenters: presenters.clone(),
    };
    // Called synchronously as each event is logged, so every update of a turn is queued
    // before the turn's answer (one outgoing queue keeps them in order).
    let commands = stream_side_updates(&root, &mapper, &updates);
    stream_decisions(&root, &mapper, &updates, booted.agent.scope_key());
    let agent_id = booted.agent.id().to_owned();
    stream_agent_events(
        &root,
        agent_id,
        mapper,
        updates,
        views,
        editor.fs,
        changing_since,
    );
    let approver = EditorApprover {
        connection: connection.clone(),
        session_id: id.clone(),
        presenters,
        cwd,
    };
    if let Err(e) = root.provide(ApproverService(Arc::new(approver))) {
        tracing::warn!(session = %id, "cannot provide the editor approver: {e}");
    }
    Ok(Live {
        id,
        opening: 0,
        booted,
        busy: None,
        stale: false,
        commands,
    })
}

/// Routes to the editor what it said it does (`editor`): MCP servers' questions, commands,
/// file reads and writes. Returns when a call last changed files behind its back.
fn route_to_editor(
    root: &Context,
    connection: &Connection,
    id: &str,
    editor: Editor,
) -> ChangingSince {
    let Editor {
        fs,
        terminals,
        forms,
        pages,
        ..
    } = editor;
    // With an editor that shows forms or pages, MCP servers' questions go to it (else they
    // are declined, with the reason traced).
    if forms || pages {
        let elicitor = EditorElicitor {
            connection: connection.clone(),
            session_id: id.to_owned(),
            forms,
            pages,
        };
        if let Err(e) = root.provide(cordis_mcp::Elicitation(Arc::new(elicitor))) {
            tracing::warn!(session = %id, "cannot ask the editor for MCP servers: {e}");
        }
    }
    // A page the editor showed is done with: the editor is told, by the server's id.
    if pages {
        let connection = connection.clone();
        let _ = root.on::<cordis_mcp::McpPageDone>(move |e| {
            connection.notify("elicitation/complete", json!({"elicitationId": e.id}));
        });
    }
    // With an editor that runs commands, a full-access `bash` runs them there.
    if terminals {
        let host = EditorTerminals {
            connection: connection.clone(),
            session_id: id.to_owned(),
        };
        if let Err(e) = root.provide(cordis_tool_shell::CommandHostService(Arc::new(host))) {
            tracing::warn!(session = %id, "cannot run commands in the editor's terminal: {e}");
        }
    }
    // With an editor that reads or writes files, the file tools go through it.
    let changing_since = Arc::new(Mutex::new(None));
    if fs.any() {
        let files = EditorFiles {
            connection: connection.clone(),
            session_id: id.to_owned(),
            fs,
            changing_since: changing_since.clone(),
        };
        if let Err(e) = root.provide(FileRouteService(Arc::new(files))) {
            tracing::warn!(session = %id, "cannot route the file tools through the editor: {e}");
        }
    }
    changing_since
}

/// Streams what is not logged: MCP servers' progress and prompt changes, commands' output.
/// Returns the session's last announced slash commands, which the prompts listener keeps.
fn stream_side_updates(
    root: &Context,
    mapper: &Arc<Mutex<UpdateMapper>>,
    updates: &Updates,
) -> Arc<Mutex<Option<Vec<AvailableCommand>>>> {
    // An MCP server's progress on a running call (not logged; the result follows).
    let progress_mapper = mapper.clone();
    let progress_send = updates.clone();
    let _ = root.on::<cordis_mcp::McpProgress>(move |e| {
        let update = cordis_runtime::lock(&progress_mapper).mcp_progress(
            &e.call_id,
            e.progress,
            e.total,
            e.message.as_deref(),
        );
        if let Some(update) = update {
            progress_send.send(update);
        }
    });
    // An MCP server's prompts changed (its list, a reconnect): the commands are announced
    // again when they differ from the last announcement. (The listener holds the root; the
    // root's disposal drops it.)
    let commands = Arc::new(Mutex::new(None));
    let announced = commands.clone();
    let commands_send = updates.clone();
    let scope = root.clone();
    let _ = root.on::<cordis_mcp::McpPromptsChanged>(move |_| {
        let mut last = cordis_runtime::lock(&announced);
        let now = available_commands(&scope);
        if last.as_ref().is_some_and(|last| *last != now) {
            *last = Some(now.clone());
            commands_send.send(SessionUpdate::AvailableCommandsUpdate {
                available_commands: now,
            });
        }
    });
    // A running command's output, as it arrives (not logged; the result follows).
    let live_mapper = mapper.clone();
    let live_send = updates.clone();
    let _ = root.on::<cordis_tool_shell::CommandOutput>(move |e| {
        let update = cordis_runtime::lock(&live_mapper).live_output(&e.call_id, &e.text);
        if let Some(update) = update {
            live_send.send(update);
        }
    });
    commands
}

/// Streams the approvals stage's decisions on the calls of the agent's scope `scope`: an
/// allowed call runs now (`in_progress`; it was announced `pending`).
fn stream_decisions(
    root: &Context,
    mapper: &Arc<Mutex<UpdateMapper>>,
    updates: &Updates,
    scope: cordis_tools::ScopeKey,
) {
    let mapper = mapper.clone();
    let updates = updates.clone();
    let _ = root.on::<cordis_approvals::ApprovalDecided>(move |e| {
        if e.scope != Some(scope) {
            return;
        }
        let update = cordis_runtime::lock(&mapper).decided(&e.call_id, e.allowed);
        if let Some(update) = update {
            updates.send(update);
        }
    });
}

/// Streams agent `agent_id`'s events as they are logged, and notes (with an editor that reads
/// files, `fs`) when a call may change files behind the editor's back.
fn stream_agent_events(
    root: &Context,
    agent_id: String,
    mapper: Arc<Mutex<UpdateMapper>>,
    updates: Updates,
    views: LiveViews,
    fs: EditorFs,
    changing_since: ChangingSince,
) {
    let _ = root.on::<AgentEvent>(move |e| {
        if e.agent != agent_id {
            return;
        }
        if fs.read
            && let cordis_session::EventView::ToolCall(call) = e.event.view()
        {
            // A call that may change files behind the editor's back (not the file tools,
            // which write through it): from now on, a file changed on disk is read from disk
            // (see `files`).
            let harmless = views
                .tools
                .as_ref()
                .and_then(|t| t.effect(&call.name, Some(views.scope)))
                .is_some_and(|(effect, _)| effect.is_harmless());
            let through_editor = fs.write
                && [cordis_tool_fs::WRITE_FILE, cordis_tool_fs::EDIT_FILE]
                    .contains(&call.name.as_str());
            if !harmless && !through_editor {
                *cordis_runtime::lock(&changing_since) = Some(SystemTime::now());
            }
        }
        let updates_now = cordis_runtime::lock(&mapper).map_live(&e.event, &views);
        for update in updates_now {
            // The editor shows what it sent; the echo is for replays only.
            if !matches!(update, SessionUpdate::UserMessageChunk { .. }) {
                updates.send(update);
            }
        }
    });
}
