//! The client side of the protocol: the server's notifications (list changes, progress, a
//! finished URL elicitation) and its requests (roots, elicitation, sampling), and what the
//! client declares at the handshake.

use std::sync::Arc;

use cordis_runtime::Context;
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion,
    RootsCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::elicit::{ElicitationModes, McpPageDone, TRACE_ELICITATION};
use crate::link::Link;
use crate::progress::{self, McpProgress};
use crate::sampling::TRACE_SAMPLING;
use crate::{elicit, roots, sampling};

/// Ends one elicitation's pause of the waits, however the answer ends (even dropped).
pub(crate) struct Resume<'a>(&'a tokio::sync::watch::Sender<usize>);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// What changed on the server, by its `list_changed` notification (in the order a burst of
/// them is handled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Change {
    Tools,
    Prompts,
    Resources,
}

/// Receives the server's notifications and answers its requests.
pub(crate) struct Handler {
    pub(crate) changes: mpsc::UnboundedSender<Change>,
    pub(crate) link: Arc<Link>,
    /// The entry's context: the workspace root is looked up here, progress emitted here.
    pub(crate) ctx: Context,
    /// Whether sampling is declared and answered (the entry's `sampling`).
    pub(crate) sampling: bool,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changes.send(Change::Tools);
        std::future::ready(())
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changes.send(Change::Prompts);
        std::future::ready(())
    }

    fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // A page the user was asked to open is done with (URL elicitation); rmcp does not know
        // the method yet.
        if notification.method == "notifications/elicitation/complete"
            && let Some(id) = notification
                .params
                .as_ref()
                .and_then(|p| p.get("elicitationId"))
                .and_then(Value::as_str)
        {
            self.ctx.emit(McpPageDone {
                server: self.link.server.clone(),
                id: progress::cut(id.to_owned(), 256),
            });
        }
        std::future::ready(())
    }

    fn on_resource_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changes.send(Change::Resources);
        std::future::ready(())
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let event = {
            let mut calls = self.link.calls.lock().await;
            let Some(pending) = calls.get_mut(&params.progress_token) else {
                return;
            };
            // The request's wait starts again (a full channel already says so).
            let _ = pending.tick.try_send(());
            let Some(waiting) = pending.call.as_mut() else {
                return;
            };
            progress::advance(
                waiting,
                &self.link.server,
                params.progress,
                params.total,
                params.message,
            )
        };
        if let Some(event) = event
            && self.ctx.listener_count::<McpProgress>() > 0
        {
            self.ctx.emit(event);
        }
    }

    /// Form mode through the front end's [`Elicitation`](crate::Elicitation) service; declined (and traced) when
    /// there is none. See the `elicit` module.
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        // The server's requests wait on the user, not on it: their waits pause meanwhile.
        self.link.asking.send_modify(|n| *n += 1);
        let _resume = Resume(&self.link.asking);
        let (result, outcome) = elicit::answer(&self.ctx, &self.link.server, request).await;
        tracing::info!(server = %self.link.server, %outcome, "mcp elicitation");
        self.ctx.trace(
            TRACE_ELICITATION,
            format!("{}: {outcome}", self.link.server),
        );
        Ok(result)
    }

    // Sampling is deprecated by SEP-2577 like roots; servers (and the conformance suite)
    // still ask for it over the initialize-handshake protocol.
    #[allow(
        deprecated,
        reason = "sampling is deprecated by SEP-2577; servers still ask for it"
    )]
    /// Through the composition's model after the user allowed it; see the `sampling` module.
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        if !self.sampling {
            return Err(rmcp::ErrorData::method_not_found::<
                rmcp::model::CreateMessageRequestMethod,
            >());
        }
        let params = serde_json::to_value(&params)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        // The user's answer is the server's wait, not the server's: its waits pause meanwhile.
        self.link.asking.send_modify(|n| *n += 1);
        let _resume = Resume(&self.link.asking);
        let answered = sampling::answer(&self.ctx, &self.link.server, params).await;
        let outcome = match &answered {
            Ok(result) => format!(
                "answered by {} ({} bytes)",
                result["model"].as_str().unwrap_or_default(),
                result["content"]["text"].as_str().map_or(0, str::len)
            ),
            Err((_, why)) => format!("refused: {why}"),
        };
        tracing::info!(server = %self.link.server, %outcome, "mcp sampling");
        self.ctx
            .trace(TRACE_SAMPLING, format!("{}: {outcome}", self.link.server));
        match answered {
            Ok(result) => serde_json::from_value(result)
                .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None)),
            Err((code, message)) => Err(rmcp::ErrorData::new(
                rmcp::model::ErrorCode(code),
                message,
                None,
            )),
        }
    }

    // Roots are deprecated by SEP-2577 for the stateless protocol; this client speaks the
    // initialize-handshake protocol, where servers (and the conformance suite) still use them.
    #[allow(
        deprecated,
        reason = "roots are deprecated by SEP-2577 for the stateless protocol only"
    )]
    /// The workspace root, when a `workspace` service is up (read at each request, so a
    /// server asking again sees the current one); no roots otherwise.
    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ListRootsResult, rmcp::ErrorData>> + Send + '_
    {
        let roots = self
            .ctx
            .get::<cordis_workspace::Workspace>()
            .map(|ws| vec![roots::root(ws.root())])
            .unwrap_or_default();
        std::future::ready(Ok(rmcp::model::ListRootsResult::new(roots)))
    }

    fn get_info(&self) -> ClientConfig {
        // The initialize-handshake protocol: list_changed arrives as a plain notification
        // (newer versions deliver it only on a listen subscription). Declared is what is
        // implemented: roots (never changing while connected, so no `listChanged`), the
        // elicitation modes the session's front end shows (its `ElicitationModes`; without
        // them, both when a front end answers and neither when none does), sampling unless the
        // entry turns it off (refused without an approver or a model).
        let mut capabilities = ClientCapabilities::default();
        let mut roots = RootsCapabilities::default();
        roots.list_changed = Some(false);
        capabilities.roots = Some(roots);
        let modes = self.ctx.get::<ElicitationModes>().map_or_else(
            || {
                let answered = self.ctx.get::<elicit::Elicitation>().is_some();
                ElicitationModes {
                    forms: answered,
                    pages: answered,
                }
            },
            |modes| *modes,
        );
        if modes.forms || modes.pages {
            let mut elicitation = rmcp::model::ElicitationCapability::default();
            if modes.forms {
                elicitation.form = Some(rmcp::model::FormElicitationCapability::default());
            }
            if modes.pages {
                elicitation.url = Some(rmcp::model::UrlElicitationCapability::default());
            }
            capabilities.elicitation = Some(elicitation);
        }
        if self.sampling {
            capabilities.sampling = Some(rmcp::model::SamplingCapability::default());
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("cordis", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}
