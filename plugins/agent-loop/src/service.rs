//! The `agent-loop` service: creates agents and finds them by id.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cordis_conversation::Llm;
use cordis_runtime::{Context, Service};
use cordis_session::{CreateOptions, SessionError, SessionStore};
use cordis_system_prompt::SystemPrompt;
use cordis_tools::{RegisterError, ToolRegistry};

use crate::agent::{Agent, Deps};
use crate::config::{AgentOptions, LoopSettings};

/// Creating an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateAgentError {
    /// An agent with this id exists.
    #[error("agent \"{0}\" already exists")]
    Duplicate(String),
    /// The agent's session could not be opened.
    #[error("agent \"{id}\": {source}")]
    Session {
        /// The agent id.
        id: String,
        /// Why.
        source: SessionError,
    },
    /// Binding the parent scope failed.
    #[error("agent \"{id}\": {source}")]
    Bind {
        /// The agent id.
        id: String,
        /// Why.
        source: RegisterError,
    },
    /// The loop's scope is gone.
    #[error("agent \"{0}\": the agent loop is disposed")]
    Gone(String),
}

/// The agent loop service.
pub struct AgentLoop {
    ctx: Context,
    llm: Arc<Llm>,
    prompt: Arc<SystemPrompt>,
    tools: Arc<ToolRegistry>,
    sessions: Arc<SessionStore>,
    settings: LoopSettings,
    agents: Arc<Mutex<BTreeMap<String, Agent>>>,
}

impl Service for AgentLoop {
    const NAME: &'static str = "agent-loop";
}

impl std::fmt::Debug for AgentLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLoop")
            .field("settings", &self.settings)
            .field("agents", &self.agent_ids())
            .finish_non_exhaustive()
    }
}

impl AgentLoop {
    /// A loop whose agents live under `ctx`'s scope, using these services.
    pub fn new(
        ctx: Context,
        llm: Arc<Llm>,
        prompt: Arc<SystemPrompt>,
        tools: Arc<ToolRegistry>,
        sessions: Arc<SessionStore>,
        settings: LoopSettings,
    ) -> Self {
        let agents: Arc<Mutex<BTreeMap<String, Agent>>> = Arc::default();
        let weak = Arc::downgrade(&agents);
        let _ = ctx.effect("agent-loop agents", move || {
            if let Some(agents) = weak.upgrade() {
                let all = std::mem::take(&mut *cordis_runtime::lock(&agents));
                for agent in all.values() {
                    agent.mark_disposed();
                }
            }
        });
        AgentLoop {
            ctx,
            llm,
            prompt,
            tools,
            sessions,
            settings,
            agents,
        }
    }

    /// The settings agents of this loop share.
    pub fn settings(&self) -> LoopSettings {
        self.settings
    }

    /// Creates an agent: its own child scope (its registry scope key), parent-bound when
    /// `options.parent_scope` is set, and its session opened (or created, crash-repaired).
    ///
    /// # Errors
    /// A duplicate id, a session that cannot be opened, a failed bind.
    ///
    /// # Cancel safety
    /// Its only await opens the session, so a dropped call makes no agent and no scope; the
    /// session is left as a dropped [`SessionStore::open_or_create_with`] leaves it (a file
    /// created with its header, or an open's repairs written). Calling again with the same
    /// options creates the agent on that session.
    pub async fn create_agent(&self, options: AgentOptions) -> Result<Agent, CreateAgentError> {
        let id = options.id.clone();
        if self.agent(&id).is_some() {
            return Err(CreateAgentError::Duplicate(id));
        }
        let session_id = options.session_id.clone().unwrap_or_else(|| id.clone());
        let mut create = CreateOptions::default();
        if let Some(preset) = &options.agent_preset {
            create = create.agent_preset(preset.clone());
        }
        if let Some(cwd) = &options.cwd {
            create = create.cwd(cwd.clone());
        }
        let (session, report) = self
            .sessions
            .open_or_create_with(&session_id, create)
            .await
            .map_err(|source| CreateAgentError::Session {
                id: id.clone(),
                source,
            })?;
        if let Some(repaired) = report.describe() {
            tracing::warn!("session {session_id}: {repaired}");
        }
        let scope = self.ctx.child_scope(&format!("agent:{id}"));
        let Some(actx) = scope.context() else {
            return Err(CreateAgentError::Gone(id));
        };
        let mut parent_bind = None;
        if let Some(parent) = options.parent() {
            let key = cordis_system_prompt::ScopeKey::from(scope.id());
            match self.tools.bind_parent(&actx, key, parent) {
                Ok(handle) => parent_bind = Some(handle),
                Err(source) => {
                    scope.dispose();
                    return Err(CreateAgentError::Bind { id, source });
                }
            }
        }
        let deps = Deps {
            ctx: self.ctx.clone(),
            llm: self.llm.clone(),
            prompt: self.prompt.clone(),
            tools: self.tools.clone(),
        };
        let agent = Agent::new(
            id.clone(),
            scope,
            session,
            deps,
            options.call_config(),
            self.settings,
            parent_bind,
        );
        {
            let mut agents = cordis_runtime::lock(&self.agents);
            if agents.contains_key(&id) {
                agent.dispose();
                return Err(CreateAgentError::Duplicate(id));
            }
            agents.insert(id.clone(), agent.clone());
        }
        agent.restore_permissions();
        agent.restore_call_config();
        // Disposing the agent (or the loop) forgets it and ends a running turn as `disposed`,
        // and the approvals service forgets its mode and grants.
        let weak = Arc::downgrade(&self.agents);
        let handle = agent.clone();
        let approvals = self.ctx.get::<cordis_approvals::Approvals>();
        let _ = actx.effect("agent", move || {
            handle.mark_disposed();
            if let Some(approvals) = &approvals {
                approvals.forget(handle.scope_key());
            }
            if let Some(agents) = weak.upgrade() {
                cordis_runtime::lock(&agents).remove(handle.id());
            }
        });
        Ok(agent)
    }

    /// The agent `id`.
    pub fn agent(&self, id: &str) -> Option<Agent> {
        cordis_runtime::lock(&self.agents).get(id).cloned()
    }

    /// The agent whose registry scope is `key` (the scope a tool call was dispatched for).
    pub fn agent_by_scope(&self, key: cordis_system_prompt::ScopeKey) -> Option<Agent> {
        cordis_runtime::lock(&self.agents)
            .values()
            .find(|a| a.scope_key() == key)
            .cloned()
    }

    /// The `llm` service agents of this loop call.
    pub fn llm(&self) -> &Arc<Llm> {
        &self.llm
    }

    /// The `sessions` service agents of this loop log to.
    pub fn sessions(&self) -> &Arc<SessionStore> {
        &self.sessions
    }

    /// The `tools` service agents of this loop dispatch through.
    pub fn tools(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// Ids of every agent, sorted.
    pub fn agent_ids(&self) -> Vec<String> {
        cordis_runtime::lock(&self.agents).keys().cloned().collect()
    }
}
