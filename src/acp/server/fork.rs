//! `session/fork`: a new session whose history is another's, booted in the client's cwd.
//!
//! The fork copies the parent's log through its last complete turn (a turn still running is
//! left out) into a new session of the cwd, whose first request logs `request/header {reason:
//! fork}`; the parent is only read, so it may be open anywhere, this connection included. The
//! answer is `session/new`'s: the new id, with the modes and options of the preset the parent
//! runs.

use std::path::Path;

use cordis_session::{ForkError, Session, SessionError, SessionStore};

use super::attach::attach;
use super::session_params::checked_place;
use super::{Done, Server, respond_error};
use crate::acp::protocol::LoadSessionRequest;
use crate::acp::rpc::{Reply, RpcError};
use crate::acp::session::{Opening, internal, invalid_params};

/// Forks session `parent` (at its end) into the new session `id` of `cwd` in `store`, held
/// open for the agent that joins it.
///
/// # Errors
/// An unknown parent (`-32002`), a parent without a complete turn (`-32602`), or the store
/// failing (`-32603`).
pub(crate) async fn forked(
    store: &SessionStore,
    parent: &str,
    id: &str,
    cwd: &Path,
) -> Result<Session, RpcError> {
    let cwd = Some(cwd.display().to_string());
    store
        .fork(parent, None, id, cwd)
        .await
        .map_err(|e| match e {
            ForkError::UnknownParent { .. } => {
                RpcError::not_found(format!("unknown session {parent}"))
            }
            e @ (ForkError::BeyondLog { .. } | ForkError::NothingToFork { .. }) => {
                invalid_params(e.to_string())
            }
            ForkError::Session(SessionError::InvalidId { .. }) => {
                RpcError::not_found(format!("unknown session {parent}"))
            }
            other => internal(format!("cannot fork session {parent}: {other}")),
        })
}

impl<'c> Server<'c> {
    /// `session/fork`: checks the cwd and MCP servers, then forks the session, boots the fork
    /// and attaches it (answered as `session/new` is).
    pub(super) fn fork_session(&mut self, req: LoadSessionRequest, reply: Reply) {
        let (cwd, mcp, dirs) =
            match checked_place(&req.cwd, &req.additional_directories, &req.mcp_servers) {
                Ok(checked) => checked,
                Err(e) => return respond_error(reply, e),
            };
        let composition = self.composition;
        let connection = self.connection.clone();
        let editor = self.editor;
        let front = editor.front(dirs);
        let parent = req.session_id;
        self.work.push(Box::pin(async move {
            let id = crate::session::id::new_id();
            let opening = Opening::Fork {
                parent,
                id: id.clone(),
            };
            let live = match composition.boot(&cwd, &opening, &mcp, &front).await {
                Ok(b) => attach(b, id, cwd, &connection, false, editor).await,
                Err(e) => Err(e),
            };
            Done::Created(live, reply)
        }));
    }
}
