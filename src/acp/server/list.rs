//! `session/list`: the sessions persisted under this directory, a page at a time.

use std::path::PathBuf;

use super::session_params::absolute_cwd;
use super::{Done, Server, respond_error};
use crate::acp::protocol::{ListSessionsRequest, ListSessionsResponse, SessionInfo};
use crate::acp::rpc::{Reply, RpcError};
use crate::acp::session::{Composition, internal};

impl<'c> Server<'c> {
    /// `session/list`: checks the cwd (when given), then reads the page.
    pub(super) fn list_sessions(&mut self, req: ListSessionsRequest, reply: Reply) {
        let cwd = match req.cwd.as_deref().map(absolute_cwd).transpose() {
            Ok(cwd) => cwd,
            Err(e) => return respond_error(reply, e),
        };
        let composition = self.composition;
        self.work.push(Box::pin(async move {
            Done::Listed(list(composition, cwd, req.cursor).await, reply)
        }));
    }
}

/// How many sessions one `session/list` page holds.
const LIST_PAGE: usize = 50;

/// A page of the sessions of `cwd` (all, without one), from `cursor`. Sessions whose header
/// records no working directory (`cordis run` in a composition without a workspace) are left
/// out: a listing entry must have one, and `session/load` could not open them.
async fn list(
    composition: &Composition<'_>,
    cwd: Option<PathBuf>,
    cursor: Option<String>,
) -> Result<ListSessionsResponse, RpcError> {
    let here = match &cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir()
            .map_err(|e| internal(format!("cannot read the current directory: {e}")))?,
    };
    let mut query = cordis_session::ListQuery::first(LIST_PAGE);
    query.cwd = cwd.map(|c| c.display().to_string());
    query.cursor = cursor;
    let page = composition.list(&here, query).await?;
    Ok(ListSessionsResponse {
        sessions: page
            .sessions
            .into_iter()
            .filter_map(|s| {
                Some(SessionInfo {
                    session_id: s.id,
                    cwd: s.cwd?,
                    title: s.title,
                    updated_at: Some(crate::cli::sessions::iso8601(s.modified)),
                })
            })
            .collect(),
        next_cursor: page.next_cursor,
    })
}
