//! One entry's connection to its server: connect, list, register (the unit of startup and of
//! every reconnect), then a supervisor keeps it in sync and reconnects.
//!
//! The parts are in the submodules: starting the server and the handshake (`connect`), the
//! tool set and its registration (`tools`), the prompts and resources lists (`relist`), and
//! the task that owns a live connection (`supervise`).

mod connect;
mod relist;
mod supervise;
mod tools;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use cordis_runtime::{Context, EffectHandle};
use cordis_tools::ToolRegistry;
use rmcp::model::Tool;
use rmcp::service::{Peer, RoleClient, RunningService};
use tokio::sync::mpsc;

pub use connect::PASSED_ENV;
pub use relist::TRACE_CATALOG;
pub use tools::{MAX_DESCRIPTION_BYTES, MAX_SCHEMA_BYTES, TRACE_SYNC};

use crate::auth;
use crate::catalog::Catalog;
use crate::config::McpConfig;
use crate::error::McpError;
use crate::handler::{Change, Handler};
use crate::link::Link;
use crate::lock;

/// The most times a connect lists a changing list again before it keeps the last answer (the
/// supervisor follows later changes).
pub const MAX_CONFIRM_LISTS: usize = 4;

/// One live connection.
pub(crate) struct Connection {
    service: RunningService<RoleClient, Handler>,
    changes: mpsc::UnboundedReceiver<Change>,
}

/// The registered tool set: what the server listed (in its order) and the effects.
#[derive(Default)]
struct Generation {
    tools: Vec<(String, Tool)>,
    handles: Vec<EffectHandle>,
}

/// One entry's connection to its server: the tools registered from it and the task that
/// keeps it up.
pub(crate) struct Bridge {
    config: McpConfig,
    ctx: Context,
    registry: Arc<ToolRegistry>,
    pub(crate) link: Arc<Link>,
    current: Mutex<Generation>,
    /// The entry's OAuth tokens, when it uses OAuth.
    pub(crate) auth: Option<Arc<auth::Authorizer>>,
}

impl Bridge {
    /// The bridge of entry `config` (nothing registered, not connected).
    pub(crate) fn new(
        config: &McpConfig,
        ctx: &Context,
        registry: Arc<ToolRegistry>,
        link: Arc<Link>,
        auth: Option<Arc<auth::Authorizer>>,
    ) -> Self {
        Self {
            auth,
            config: config.clone(),
            ctx: ctx.clone(),
            registry,
            link,
            current: Mutex::new(Generation::default()),
        }
    }

    fn server(&self) -> &str {
        &self.config.server
    }

    /// Connect, list, register: the unit of startup and of every reconnect. A failure leaves
    /// no process behind.
    pub(crate) async fn start(&self) -> Result<Connection, McpError> {
        let started = self.try_start().await;
        if started.is_err() {
            self.link.kill();
        }
        started
    }

    async fn try_start(&self) -> Result<Connection, McpError> {
        let connection = self.connect().await?;
        let peer = connection.service.peer().clone();
        let tools = match tokio::time::timeout(self.config.call_timeout(), self.list(&peer)).await {
            Ok(listed) => listed?,
            Err(_) => {
                return Err(McpError::List {
                    server: self.server().to_owned(),
                    reason: format!("no answer within {} ms", self.config.call_timeout_ms),
                });
            }
        };
        let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
        let offers =
            |f: fn(&rmcp::model::ServerCapabilities) -> bool| capabilities.as_ref().is_some_and(f);
        self.link
            .has_resources
            .store(offers(|c| c.resources.is_some()), Ordering::SeqCst);
        *lock(&self.link.peer) = Some(peer.clone());
        let instructions = peer.peer_info().and_then(|i| i.instructions.clone());
        *lock(&self.link.instructions) =
            crate::instructions::bounded(self.server(), instructions.as_deref());
        if let Err(error) = self.install(tools).await {
            *lock(&self.link.peer) = None;
            return Err(error);
        }
        // Optional features: a server whose prompts or resources cannot be listed still
        // serves its tools (the failure is logged and traced).
        self.telling_prompt_changes(async {
            *lock(&self.link.catalog) = Catalog::default();
            if offers(|c| c.prompts.is_some()) {
                self.relist(&peer, Change::Prompts).await;
            }
            if offers(|c| c.resources.is_some()) {
                self.relist(&peer, Change::Resources).await;
            }
        })
        .await;
        self.confirm_lists(&peer, capabilities.as_ref()).await?;
        Ok(connection)
    }

    /// Lists again each list the server says may change (`listChanged`), until an answer
    /// confirms the one taken (at most [`MAX_CONFIRM_LISTS`] times): a server whose list
    /// changes right after a client connects (its first answer is already stale) boots with
    /// its final list, whatever the wall clock did with its `list_changed` notification. A
    /// change made before the server answers the confirming list is part of the boot; one made
    /// later is a re-sync of the running entry (`mcp-sync`).
    async fn confirm_lists(
        &self,
        peer: &Peer<RoleClient>,
        capabilities: Option<&rmcp::model::ServerCapabilities>,
    ) -> Result<(), McpError> {
        let changes = |kind: Option<bool>| kind == Some(true);
        let tools = capabilities
            .and_then(|c| c.tools.as_ref())
            .is_some_and(|t| changes(t.list_changed));
        let prompts = capabilities
            .and_then(|c| c.prompts.as_ref())
            .is_some_and(|p| changes(p.list_changed));
        let resources = capabilities
            .and_then(|c| c.resources.as_ref())
            .is_some_and(|r| changes(r.list_changed));
        for _ in 0..MAX_CONFIRM_LISTS {
            let mut changed = false;
            if tools {
                let listed = match tokio::time::timeout(self.config.call_timeout(), self.list(peer))
                    .await
                {
                    Ok(listed) => listed?,
                    Err(_) => {
                        return Err(McpError::List {
                            server: self.server().to_owned(),
                            reason: format!("no answer within {} ms", self.config.call_timeout_ms),
                        });
                    }
                };
                changed |= self.install(listed).await?;
            }
            let before = {
                let catalog = lock(&self.link.catalog);
                (catalog.prompts.clone(), catalog.resources.clone())
            };
            self.telling_prompt_changes(async {
                if prompts {
                    self.relist(peer, Change::Prompts).await;
                }
                if resources {
                    self.relist(peer, Change::Resources).await;
                }
            })
            .await;
            {
                let catalog = lock(&self.link.catalog);
                changed |= (&catalog.prompts, &catalog.resources) != (&before.0, &before.1);
            }
            if !changed {
                return Ok(());
            }
        }
        tracing::warn!(server = %self.server(), "mcp server's lists kept changing while it connected; keeping the last answers");
        Ok(())
    }
}
