//! Opening a session's agent: which session (a new one, a named one, or this project's newest),
//! and the agent on it, joined to its preset through the roster when the composition has one
//! (plain without). Every front end opens sessions here.

use cordis_agent_loop::{Agent, AgentLoop, AgentOptions, CreateAgentError};
use cordis_agent_presets::{AgentPresets, JoinError};
use cordis_runtime::Context;
use cordis_session::{ListQuery, SessionError, SessionStore};

/// Why no agent was opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The composition runs no agent loop.
    #[error(
        "the configuration provides no `agent-loop` service: add `llm`, `sessions` and `agent-loop` entries (see the bundled cordis.yml)"
    )]
    NoAgentLoop,
    /// A preset was asked for, but the composition has no roster.
    #[error(
        "choosing a preset needs an `agent-presets` entry in the config (see the bundled cordis.yml)"
    )]
    NoRoster,
    /// The session is open (locked) in another process.
    #[error("session {id} is open in {holder}")]
    Locked {
        /// The session.
        id: String,
        /// `process PID`, or `another process`.
        holder: String,
    },
    /// The preset cannot be joined (the roster's error says which and why).
    #[error(transparent)]
    Preset(Box<JoinError>),
    /// The agent could not be created on the session.
    #[error("{0}")]
    Create(String),
}

impl OpenError {
    /// The preset asked for is not one of the roster's (the caller's mistake, not the
    /// composition's).
    pub fn is_unknown_preset(&self) -> bool {
        matches!(self, OpenError::Preset(e) if matches!(**e, JoinError::Preset(cordis_agent_presets::PresetError::NotFound { .. })))
    }

    fn of_create(e: CreateAgentError) -> OpenError {
        match e {
            CreateAgentError::Session {
                source: SessionError::SessionLocked { id, pid },
                ..
            } => OpenError::Locked {
                id,
                holder: pid
                    .map_or_else(|| "another process".to_owned(), |p| format!("process {p}")),
            },
            other => OpenError::Create(other.to_string()),
        }
    }
}

/// The preset the agent's scope is joined to now: its live chain, not the log's record (`None`
/// without a roster).
pub fn joined_preset(root: &Context, agent: &Agent) -> Option<String> {
    root.get::<AgentPresets>()
        .and_then(|roster| roster.composed_preset(agent.scope_key()))
        .map(|s| s.preset)
}

/// The agent loop of the composition at `root`.
///
/// # Errors
/// [`OpenError::NoAgentLoop`].
pub fn agent_loop(root: &Context) -> Result<std::sync::Arc<AgentLoop>, OpenError> {
    root.get::<AgentLoop>().ok_or(OpenError::NoAgentLoop)
}

/// Creates the agent `options` describe on its session (created with `options.cwd` in its
/// header when new), joined to `preset` (`None`: the roster's default, or the one a resumed
/// log records) through the roster when the composition has one, else plain.
///
/// # Errors
/// No agent loop; a preset asked for without a roster; a preset that cannot be joined; a
/// session locked by another process or that cannot be opened.
pub async fn join_agent(
    root: &Context,
    options: AgentOptions,
    preset: Option<&str>,
) -> Result<Agent, OpenError> {
    let agents = agent_loop(root)?;
    match root.get::<AgentPresets>() {
        Some(roster) => match roster.create_agent(&agents, options, preset).await {
            Ok((agent, _)) => Ok(agent),
            Err(JoinError::Create(e)) => Err(OpenError::of_create(e)),
            Err(other) => Err(OpenError::Preset(Box::new(other))),
        },
        None if preset.is_some() => Err(OpenError::NoRoster),
        None => agents
            .create_agent(options)
            .await
            .map_err(OpenError::of_create),
    }
}

/// The project a terminal session belongs to: the directory it was started in, absolute (what
/// its header records and `--continue` and `cordis sessions --cwd` match).
pub fn project_dir() -> Option<String> {
    let here = std::env::current_dir().ok()?;
    Some(
        std::path::absolute(&here)
            .unwrap_or(here)
            .display()
            .to_string(),
    )
}

/// `dir` as a session header records a project: absolute, as given (a relative `dir` is taken
/// from the current directory).
pub fn as_project(dir: &std::path::Path) -> String {
    std::path::absolute(dir)
        .unwrap_or_else(|_| dir.to_owned())
        .display()
        .to_string()
}

/// The id of the most recently written session of project `cwd` (`None`: it has none yet).
///
/// # Errors
/// The store's index cannot be read.
pub async fn newest_of_project(
    store: &SessionStore,
    cwd: &str,
) -> Result<Option<String>, SessionError> {
    let page = store.list(ListQuery::first(1).cwd(cwd)).await?;
    Ok(page.sessions.into_iter().next().map(|s| s.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_newest_session_of_a_project_is_never_another_projects() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(
            Some(dir.path().to_owned()),
            cordis_session::Durability::None,
        );
        for (id, cwd) in [("a1", "/a"), ("b1", "/b"), ("a2", "/a")] {
            store
                .create_with(id, cordis_session::CreateOptions::default().cwd(cwd))
                .await
                .unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(
            newest_of_project(&store, "/b").await.unwrap().as_deref(),
            Some("b1")
        );
        assert_eq!(
            newest_of_project(&store, "/a").await.unwrap().as_deref(),
            Some("a2")
        );
        assert_eq!(newest_of_project(&store, "/c").await.unwrap(), None);
    }
}
