//! The `history` service, its page and error types, and the standing-scope seam.

use std::sync::Arc;

use cordis_agent_loop::AgentLoop;
use cordis_presenter::{Presentation, Presenters};
use cordis_runtime::{Context, Service};
use cordis_schema::ScopeKey;
use cordis_session::{
    DEFAULT_MAX_MESSAGES, Projections, SessionError, SessionEvent, SessionSource, SessionStore,
};
use cordis_tools::ToolRegistry;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// Hands a cold reader the standing scope of a preset, so tools registered by the preset
/// present as they did when the session ran. Implemented by the presets plugin.
pub trait StandingScopes: Send + Sync + 'static {
    /// The standing scope key of `preset` (`None`: the default preset), mounting it if needed
    /// but never starting an agent.
    ///
    /// # Errors
    /// Why the preset cannot serve (unknown, deleted, broken): the read then falls back to the
    /// global layer.
    ///
    /// # Cancel safety
    /// The future may be dropped (a history read that was cancelled); an implementation says
    /// what a mount dropped part way leaves behind. The presets plugin's leaves the rows it
    /// started (their applies go on) in a realm it has not recorded, until the roster's own
    /// scope unwinds.
    fn standing_key_for<'a>(
        &'a self,
        preset: Option<&'a str>,
    ) -> BoxFuture<'a, Result<ScopeKey, String>>;
}

/// The [`StandingScopes`] a composition offers, published as the `agent-presets/standing`
/// service: `ctx.provide(StandingScopesService::new(Arc::new(roster)))`.
#[derive(Clone)]
pub struct StandingScopesService {
    inner: Arc<dyn StandingScopes>,
}

impl StandingScopesService {
    /// Wraps `scopes` for publishing.
    pub fn new(scopes: Arc<dyn StandingScopes>) -> Self {
        StandingScopesService { inner: scopes }
    }

    /// The implementation.
    pub fn scopes(&self) -> &Arc<dyn StandingScopes> {
        &self.inner
    }
}

impl std::fmt::Debug for StandingScopesService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandingScopesService")
            .finish_non_exhaustive()
    }
}

impl Service for StandingScopesService {
    const NAME: &'static str = "agent-presets/standing";
}

/// A history read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// No session has this id (an id that cannot name a session included).
    #[error("session \"{session}\" not found")]
    NotFound {
        /// The id asked for.
        session: String,
    },
    /// Anything else: the message names the session and the cause.
    #[error("history unavailable for session \"{session}\": {message}")]
    Internal {
        /// The id asked for.
        session: String,
        /// Why.
        message: String,
    },
}

impl HistoryError {
    /// A stable code for wire protocols: `session-not-found` or `internal`.
    pub fn code(&self) -> &'static str {
        match self {
            HistoryError::NotFound { .. } => "session-not-found",
            HistoryError::Internal { .. } => "internal",
        }
    }

    /// The session the read was for.
    pub fn session(&self) -> &str {
        match self {
            HistoryError::NotFound { session } | HistoryError::Internal { session, .. } => session,
        }
    }

    fn internal(session: &str, message: impl std::fmt::Display) -> Self {
        HistoryError::Internal {
            session: session.to_owned(),
            message: message.to_string(),
        }
    }
}

/// Whether a view describes a call or its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewFor {
    /// A `tool/call` event.
    Call,
    /// A `tool/result` event.
    Result,
}

/// A tool event as people see it: `{"for": "call" | "result", "view": {title, kind, input, ...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    /// What it describes.
    #[serde(rename = "for")]
    pub for_: ViewFor,
    /// The presentation.
    pub view: Presentation,
}

/// One event of a page, with its tool view when it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The event as logged.
    pub event: SessionEvent,
    /// Its tool's presentation (tool events whose tool presents in the read's scope only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ToolView>,
}

/// One page of a session's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPage {
    /// The events, in log order (contiguous seqs).
    pub events: Vec<HistoryEntry>,
    /// True when older events exist: ask again with `before_seq` = the first event's seq.
    pub has_more: bool,
    /// The baseline of the same moment (tail pages only): `asOfSeq` is the last event's seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projections: Option<Projections>,
}

/// The `history` service. Cheap to build from any context of the composition
/// ([`History::new`]); every read looks up the services it uses, so it follows reloads.
#[derive(Clone)]
pub struct History {
    ctx: Context,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").finish_non_exhaustive()
    }
}

impl Service for History {
    const NAME: &'static str = "history";
}

impl History {
    /// A history reader over the services visible from `ctx` (`sessions` required at read
    /// time; `agent-loop`, `tools`, `presenter`, `agent-presets/standing` used when present).
    pub fn new(ctx: Context) -> Self {
        History { ctx }
    }

    /// The `history` service `ctx` sees, or one built over `ctx` when no entry provides it.
    pub fn of(ctx: &Context) -> Self {
        ctx.get::<History>()
            .map_or_else(|| History::new(ctx.clone()), |h| (*h).clone())
    }

    /// One page of session `session_id`'s history (see the crate docs for the rules):
    /// `before_seq` pages back from that seq, `max_messages` (default 50; 0 counts as 1) is
    /// how many user and assistant messages the page holds.
    ///
    /// # Errors
    /// [`HistoryError::NotFound`] for an unknown session; [`HistoryError::Internal`] for
    /// anything else.
    ///
    /// # Cancel safety
    /// Cancel safe unless it mounts a preset: reading the log only reads (a read already
    /// started finishes on its blocking thread and is discarded); dropped while
    /// [`History::presenter_scope`] mounts a preset, it leaves what that leaves. Calling again is
    /// equivalent.
    pub async fn history(
        &self,
        session_id: &str,
        before_seq: Option<u64>,
        max_messages: Option<usize>,
    ) -> Result<HistoryPage, HistoryError> {
        let store = self.ctx.get::<SessionStore>().ok_or_else(|| {
            HistoryError::internal(session_id, "the composition has no `sessions` service")
        })?;
        let source = store.source(session_id).await.map_err(|e| match e {
            SessionError::NotFound { .. } => HistoryError::NotFound {
                session: session_id.to_owned(),
            },
            other => HistoryError::internal(session_id, other),
        })?;
        // Awaited before the cut: nothing may run between the page and its baseline.
        let scope = self.presenter_scope(&source).await;
        let cut = source.cut(before_seq, max_messages.unwrap_or(DEFAULT_MAX_MESSAGES));
        let tools = self.ctx.get::<ToolRegistry>();
        let presenters = self.ctx.get::<Presenters>();
        let views = crate::view::views(&cut.events, scope, tools.as_deref(), presenters.as_deref());
        Ok(HistoryPage {
            events: cut
                .events
                .into_iter()
                .zip(views)
                .map(|(event, view)| HistoryEntry { event, view })
                .collect(),
            has_more: cut.has_more,
            projections: cut.projections,
        })
    }

    /// The scope a read of `source` presents tools in: the live agent's; else the standing
    /// scope of the preset its log says it runs; else `None`, the global layer.
    ///
    /// # Cancel safety
    /// Cancel safe while a live agent answers (nothing is awaited) or the preset's standing
    /// scope is current. Not cancel safe while it mounts the preset: the rows started so far
    /// stay (their applies go on) in a realm the roster has not recorded, until the roster's own
    /// scope unwinds; the next call mounts the preset afresh beside it.
    pub async fn presenter_scope(&self, source: &SessionSource) -> Option<ScopeKey> {
        let id = source.id();
        if let Some(agents) = self.ctx.get::<AgentLoop>() {
            let live = agents
                .agent_ids()
                .into_iter()
                .filter_map(|a| agents.agent(&a))
                .find(|a| a.session().id() == id);
            if let Some(agent) = live {
                return Some(agent.scope_key());
            }
        }
        let roster = self.ctx.get::<StandingScopesService>()?;
        let preset = source.preset();
        match roster.scopes().standing_key_for(preset.as_deref()).await {
            Ok(key) => Some(key),
            Err(why) => {
                tracing::warn!(
                    session = %id,
                    preset = preset.as_deref().unwrap_or("(default)"),
                    "history: the preset's standing scope is unavailable ({why}); tools present from the global layer"
                );
                None
            }
        }
    }
}
