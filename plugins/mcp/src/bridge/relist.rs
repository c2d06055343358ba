//! The server's prompts, resources and resource templates listed again (at connect and on
//! their `list_changed`), and front ends told when the prompt list changed.

use rmcp::model::PaginatedRequestParams;
use rmcp::service::{Peer, RoleClient};

use super::Bridge;
use crate::catalog::{self, McpPromptsChanged, to_values};
use crate::error::McpError;
use crate::handler::Change;
use crate::lock;

/// The trace kind of a prompts or resources re-list after its `list_changed` notification.
pub const TRACE_CATALOG: &str = "mcp-catalog";

impl Bridge {
    /// Runs `work`, which may change the catalog, and tells front ends when the prompt list is
    /// not what it was ([`McpPromptsChanged`]: their commands change).
    pub(super) async fn telling_prompt_changes<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let before = lock(&self.link.catalog).prompts.clone();
        let out = work.await;
        if lock(&self.link.catalog).prompts != before {
            self.link.claim_prompt_commands();
            self.ctx.emit(McpPromptsChanged {
                server: self.server().to_owned(),
            });
        }
        out
    }

    /// Lists prompts, or resources and templates, again and replaces them in the catalog; a
    /// failure keeps the previous lists. Traces `mcp-catalog` with `<server>: prompts
    /// applied` / `resources kept (…)`.
    pub(super) async fn relist(&self, peer: &Peer<RoleClient>, what: Change) {
        let server = self.server();
        let limit = self.config.call_timeout();
        let timed_out = |what: &'static str| McpError::Catalog {
            server: server.to_owned(),
            what,
            reason: format!("no answer within {} ms", limit.as_millis()),
        };
        let outcome: Result<(), McpError> = match what {
            Change::Prompts => {
                let listed = tokio::time::timeout(
                    limit,
                    catalog::list_all(
                        server,
                        "prompts",
                        |cursor| async move {
                            let page = peer
                                .list_prompts(cursor.map(|c| {
                                    PaginatedRequestParams::default().with_cursor(Some(c))
                                }))
                                .await
                                .map_err(|e| e.to_string())?;
                            Ok((to_values(&page.prompts), page.next_cursor))
                        },
                        catalog::prompt,
                        |p| &p.name,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err(timed_out("prompts")));
                listed.map(|prompts| lock(&self.link.catalog).prompts = prompts)
            }
            // Tools re-sync through `resync`.
            Change::Tools => return,
            Change::Resources => {
                let resources = tokio::time::timeout(
                    limit,
                    catalog::list_all(
                        server,
                        "resources",
                        |cursor| async move {
                            let page = peer
                                .list_resources(cursor.map(|c| {
                                    PaginatedRequestParams::default().with_cursor(Some(c))
                                }))
                                .await
                                .map_err(|e| e.to_string())?;
                            Ok((to_values(&page.resources), page.next_cursor))
                        },
                        catalog::resource,
                        |r| &r.uri,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err(timed_out("resources")));
                let templates = tokio::time::timeout(
                    limit,
                    catalog::list_all(
                        server,
                        "resources/templates",
                        |cursor| async move {
                            let page = peer
                                .list_resource_templates(cursor.map(|c| {
                                    PaginatedRequestParams::default().with_cursor(Some(c))
                                }))
                                .await
                                .map_err(|e| e.to_string())?;
                            Ok((to_values(&page.resource_templates), page.next_cursor))
                        },
                        catalog::template,
                        |t| &t.uri_template,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err(timed_out("resources/templates")));
                // Each list is replaced on its own: many servers offer resources but no
                // templates (and answer that method with an error).
                let mut catalog = lock(&self.link.catalog);
                let listed = resources.map(|r| catalog.resources = r);
                match templates {
                    Ok(t) => catalog.templates = t,
                    Err(error) => {
                        tracing::debug!(server, %error, "mcp resource templates could not be listed; keeping the previous list");
                    }
                }
                listed
            }
        };
        let noun = if what == Change::Prompts {
            "prompts"
        } else {
            "resources"
        };
        let detail = match outcome {
            Ok(()) => format!("{server}: {noun} applied"),
            Err(error) => {
                tracing::warn!(server, %error, "mcp {noun} could not be listed; keeping the previous list");
                format!("{server}: {noun} kept ({error})")
            }
        };
        self.ctx.trace(TRACE_CATALOG, detail);
    }
}
