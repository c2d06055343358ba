//! One ACP session: its own booted composition, its agent, and the session log it writes.

use std::path::{Path, PathBuf};

use cordis_agent_loop::{Agent, AgentLoop, AgentOptions};

use crate::session::open::OpenError;
use cordis_agent_presets::{AgentPresets, PresetError};
use cordis_host::Builtins;
use cordis_host::plan::PlanOptions;
use cordis_host::reload::LiveConfig;
use cordis_runtime::{Context, Policy, Schedule};
use cordis_session::{Session, SessionError};

use super::protocol::{SessionMode, SessionModeState};
use super::rpc::RpcError as Error;

/// The environment variable the bundled `cordis.yml` reads its workspace root from; each
/// session's composition sees its `cwd` there.
pub const WORKSPACE_VAR: &str = "CORDIS_WORKSPACE";

/// The agent id every session's composition runs.
pub const AGENT_ID: &str = "main";

/// What every session boots: one config file, resolved the same way for each.
pub struct Composition<'a> {
    /// The config text: read at start, replaced by each valid edit under `--watch` (new
    /// sessions boot the latest; open ones reload it between prompts).
    pub source: std::sync::Mutex<String>,
    /// Its name, for diagnostics.
    pub file: String,
    /// The plugin table.
    pub builtins: Builtins,
    /// Resolution options.
    pub options: PlanOptions,
    /// The process environment (`CORDIS_WORKSPACE` is replaced per session).
    pub env: &'a (dyn Fn(&str) -> Option<String> + Sync),
    /// The preset a new session joins (`--preset`; `None`: the roster's default).
    pub preset: Option<String>,
}

/// An MCP server a client gave with `session/new` or `session/load`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The client's name for it (made into a valid `server` name: see [`server_name`]).
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
}

/// How an [`McpServer`] is reached: the two transports the `mcp` plugin speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process started in the session's cwd.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set over the `mcp` plugin's scrubbed environment.
        env: Vec<(String, String)>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
}

/// How long a session waits for its MCP servers to start and list their tools.
const MCP_START_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A client's server name as the `mcp` plugin accepts it (`[A-Za-z0-9_-]{1,32}`): other
/// characters become `_`, the rest is cut at 32, an empty name is `server`.
pub fn server_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(cordis_mcp::MAX_SERVER_NAME)
        .collect();
    if cleaned.is_empty() {
        "server".to_owned()
    } else {
        cleaned
    }
}

/// How a session starts.
#[derive(Debug, Clone)]
pub enum Opening {
    /// A new session with this id, logged with the cwd in its header.
    New(String),
    /// A persisted session, resumed; its header's cwd must equal the requested one.
    Load(String),
    /// A new session `id` forked from session `parent` (through its last complete turn),
    /// logged with the cwd in its header.
    Fork {
        /// The session forked.
        parent: String,
        /// The new session's id.
        id: String,
    },
}

/// What a session's editor brings besides its cwd and MCP servers, provided on the
/// composition's root before it boots (so the workspace opens its roots, and each MCP server's
/// handshake declares what the editor shows).
#[derive(Debug, Clone, Default)]
pub struct FrontEnd {
    /// The editor's additional directories (absolute): more workspace roots, each checked to
    /// be an existing directory and canonicalized at boot.
    pub roots: Vec<PathBuf>,
    /// What the editor shows of MCP servers' questions.
    pub elicitation: cordis_mcp::ElicitationModes,
}

/// A booted session: the composition (its own runtime scope tree) and the agent on its log.
pub struct Booted {
    /// The composition; disposing its root ends everything the session owns.
    pub config: LiveConfig,
    /// The session's agent.
    pub agent: Agent,
    /// The presets as modes, with the one the session runs, when the file has a roster.
    pub modes: Option<SessionModeState>,
    /// The session's working directory (its workspace root).
    pub cwd: PathBuf,
}

impl Booted {
    /// The composition's root scope.
    pub fn root(&self) -> &Context {
        self.config.root()
    }
}

/// `-32602` with `message`.
pub fn invalid_params(message: impl Into<String>) -> Error {
    Error::invalid_params(message)
}

/// `-32603` with `message`.
pub fn internal(message: impl Into<String>) -> Error {
    Error::internal(message)
}

impl Composition<'_> {
    /// Boots the file with `cwd` as the workspace (no agent opened yet), with what the
    /// session's editor brings (`front`) provided first.
    async fn boot_config(
        &self,
        cwd: &Path,
        front: Option<&FrontEnd>,
    ) -> Result<(LiveConfig, cordis_host::loader::BootReport), Error> {
        // The workspace root must exist, or every workspace tool would fail to load.
        let dir = cwd.to_owned();
        let is_dir = tokio::task::spawn_blocking(move || dir.is_dir())
            .await
            .unwrap_or(false);
        if !is_dir {
            return Err(invalid_params(format!(
                "cwd {} is not a directory",
                cwd.display()
            )));
        }
        let roots = match front {
            Some(front) => canonical_roots(front.roots.clone()).await?,
            None => Vec::new(),
        };
        let env = self.env_for(cwd);
        let source = self.source();
        // Fifo: a session's boot is not a stress run; every session boots the same way.
        let root = Context::root_with(Schedule::new(Policy::Fifo, 0));
        if let Some(front) = front {
            let provided = root.provide(front.elicitation).and_then(|_| {
                if roots.is_empty() {
                    Ok(())
                } else {
                    root.provide(cordis_workspace::MoreRoots(roots)).map(|_| ())
                }
            });
            if let Err(e) = provided {
                root.dispose();
                return Err(internal(format!("cannot set up the session: {e}")));
            }
        }
        LiveConfig::boot(
            root,
            &source,
            &self.file,
            &env,
            self.builtins.clone(),
            self.options.clone(),
        )
        .await
        .map_err(|errors| {
            let lines: Vec<String> = errors.diagnostics().iter().map(|d| d.to_string()).collect();
            internal(format!(
                "{} has configuration errors: {}",
                self.file,
                lines.join("; ")
            ))
        })
    }

    /// The config text sessions boot now.
    pub fn source(&self) -> String {
        cordis_runtime::lock(&self.source).clone()
    }

    /// The environment a session working in `cwd` resolves the file with: the process's, with
    /// `CORDIS_WORKSPACE` the session's cwd.
    fn env_for(&self, cwd: &Path) -> impl Fn(&str) -> Option<String> + Sync + '_ {
        let workspace = cwd.display().to_string();
        let outer = self.env;
        move |name: &str| {
            if name == WORKSPACE_VAR {
                Some(workspace.clone())
            } else {
                outer(name)
            }
        }
    }

    /// Takes `source` as the file's text from now on if it loads (`--watch`) and lets nothing
    /// more run without a question than the text it replaces (an agent's own write could have
    /// made the edit: permissions never widen by themselves, for open sessions or new ones);
    /// else the errors, and the last good text stays.
    ///
    /// # Errors
    /// Every configuration error of `source`, or each widening
    /// ([`cordis_host::reload::widenings`]).
    pub async fn adopt(&self, source: String) -> Result<(), cordis_host::ConfigErrors> {
        let load = |text: String| async move {
            cordis_host::reload::load_blocking(
                &text,
                &self.file,
                self.env,
                &self.builtins,
                &self.options,
            )
            .await
        };
        let new = load(source.clone()).await?;
        // The text in force loaded when it was adopted; should it not now (an include gone),
        // nothing is compared against it and the new text must stand on its own.
        if let Ok(old) = load(self.source()).await {
            let widens = cordis_host::reload::widenings(old.plan(), new.plan());
            if !widens.is_empty() {
                return Err(cordis_host::ConfigErrors(widens));
            }
        }
        *cordis_runtime::lock(&self.source) = source;
        Ok(())
    }

    /// Reloads an idle session's composition with the file's text now (the way `run --watch`
    /// does, between prompts): entries whose config changed restart, the rest stay. When the
    /// reload restarted the agent loop (disposing the agent), the agent is opened again on its
    /// session; when it restarted the presets, the agent joins its session's preset again.
    /// Returns the reload's summary line.
    ///
    /// # Errors
    /// The file does not load for this session, or its agent cannot be opened again (the
    /// session keeps what it had, as far as the reload left it).
    pub async fn refresh(&self, booted: &mut Booted, id: &str) -> Result<String, Error> {
        let env = self.env_for(&booted.cwd);
        let source = self.source();
        let summary = booted
            .config
            .reload(&source, &env)
            .await
            .map_err(|errors| {
                let lines: Vec<String> =
                    errors.diagnostics().iter().map(|d| d.to_string()).collect();
                internal(format!("{} does not load: {}", self.file, lines.join("; ")))
            })?;
        let root = booted.root().clone();
        let roster = root.get::<AgentPresets>();
        if booted.agent.context().is_none() {
            if root.get::<AgentLoop>().is_none() {
                return Err(internal(format!(
                    "{} provides no agent after the reload",
                    self.file
                )));
            }
            let preset = booted.agent.session().preset();
            let (agent, _) = open_agent(
                &root,
                preset.as_deref(),
                &booted.cwd,
                &Opening::Load(id.to_owned()),
            )
            .await?;
            booted.agent = agent;
        } else if let Some(roster) = &roster
            && roster.composed_preset(booted.agent.scope_key()).is_none()
        {
            let preset = booted.agent.session().preset();
            let standing = roster
                .standing_key_for(preset.as_deref())
                .await
                .map_err(preset_error)?;
            booted
                .agent
                .rejoin(standing.key)
                .map_err(|e| internal(e.to_string()))?;
        }
        booted.modes = match (&roster, booted.agent.session().preset()) {
            (Some(roster), Some(current)) => Some(modes(roster, current).await),
            _ => None,
        };
        Ok(cordis_host::reload::summary_line(&summary))
    }

    /// True when the file's model takes images (its `llm` entry's `imageInput`): the file is
    /// booted once, in the directory `cordis acp` runs in, and disposed. A file that does not
    /// boot says no.
    pub async fn accepts_images(&self) -> bool {
        let Ok(here) = std::env::current_dir() else {
            return false;
        };
        let Ok((config, _)) = self.boot_config(&here, None).await else {
            return false;
        };
        let root = config.root().clone();
        let accepts = root
            .get::<cordis_llm::Llm>()
            .is_some_and(|llm| llm.accepts_images());
        root.dispose();
        accepts
    }

    /// The sessions of the file's `sessions` entry: one page of its index (see
    /// [`cordis_session::index`]). The file is booted with `cwd` as the workspace to find its
    /// store, and disposed again.
    ///
    /// # Errors
    /// Configuration errors, a file without a `sessions` entry (or one in memory), a bad
    /// cursor, or a root that cannot be read.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped listing leaves its composition undisposed. The server always
    /// awaits it.
    pub async fn list(
        &self,
        cwd: &Path,
        query: cordis_session::ListQuery,
    ) -> Result<cordis_session::SessionPage, Error> {
        let (config, _) = self.boot_config(cwd, None).await?;
        let root = config.root().clone();
        let listed = match root.get::<cordis_session::SessionStore>() {
            None => Err(invalid_params(format!(
                "{} has no `sessions` entry, so it keeps no sessions to list",
                self.file
            ))),
            Some(store) => store.list(query).await.map_err(|e| match e {
                SessionError::BadCursor { .. } => invalid_params(e.to_string()),
                e => internal(e.to_string()),
            }),
        };
        root.dispose();
        listed
    }

    /// Deletes persisted session `id`: its log and its index summary, while holding its
    /// writer lock (so a session open in another process is refused, naming it, and none can
    /// open it while it goes). The file is booted with the current directory as the workspace
    /// to find its store, and disposed again.
    ///
    /// # Errors
    /// Configuration errors, a file without a persistent `sessions` entry, an unknown id, a
    /// session open elsewhere, or a log that cannot be removed.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped deletion leaves its composition undisposed. The server always
    /// awaits it.
    pub async fn delete(&self, id: &str) -> Result<(), Error> {
        let here = std::env::current_dir()
            .map_err(|e| internal(format!("cannot read the current directory: {e}")))?;
        let (config, _) = self.boot_config(&here, None).await?;
        let root = config.root().clone();
        let deleted = match root.get::<cordis_session::SessionStore>() {
            None => Err(invalid_params(format!(
                "{} has no `sessions` entry, so it keeps no sessions to delete",
                self.file
            ))),
            Some(store) => delete_locked(&store, id).await,
        };
        root.dispose();
        deleted
    }

    /// Boots the file for a session working in `cwd` and opens its agent.
    ///
    /// # Errors
    /// Configuration errors, a composition without an agent loop, an unknown or locked session,
    /// a cwd that differs from the persisted one.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped boot leaves a composition undisposed. The server always
    /// awaits it, and disposes what it returns after a disconnect.
    pub async fn boot(
        &self,
        cwd: &Path,
        opening: &Opening,
        mcp_servers: &[McpServer],
        front: &FrontEnd,
    ) -> Result<Booted, Error> {
        let (config, report) = self.boot_config(cwd, Some(front)).await?;
        let root = config.root().clone();
        for e in report
            .entries
            .iter()
            .filter(|e| !e.status.is_as_configured())
        {
            // The session still starts (as `cordis run` does); its log on stderr says what is
            // missing.
            tracing::warn!(
                entry = %e.id,
                plugin = %e.name,
                status = %e.status,
                error = e.error.as_deref().unwrap_or_default(),
                "cordis acp: an entry of the session's composition is not active"
            );
        }
        if root.get::<AgentLoop>().is_none() {
            let problems: Vec<String> = report
                .entries
                .iter()
                .filter(|e| !e.status.is_as_configured())
                .map(|e| {
                    format!(
                        "entry {} ({}) is {}{}",
                        e.id,
                        e.name,
                        e.status,
                        e.error
                            .as_deref()
                            .map(|m| format!(": {m}"))
                            .unwrap_or_default()
                    )
                })
                .collect();
            root.dispose();
            let why = if problems.is_empty() {
                "add `llm`, `sessions` and `agent-loop` entries (see the bundled cordis.yml)"
                    .to_owned()
            } else {
                problems.join("; ")
            };
            return Err(internal(format!(
                "{} provides no agent (no `agent-loop` service): {why}",
                self.file
            )));
        }
        // The client's servers join this session's composition only; their tools register in
        // its registry before the agent exists (or the session log is created).
        if let Err(e) = connect_mcp(&root, cwd, mcp_servers).await {
            root.dispose();
            return Err(e);
        }
        let roster = root.get::<AgentPresets>();
        match open_agent(&root, self.preset.as_deref(), cwd, opening).await {
            Ok((agent, preset)) => {
                let modes = match (&roster, preset) {
                    (Some(roster), Some(current)) => Some(modes(roster, current).await),
                    _ => None,
                };
                Ok(Booted {
                    config,
                    agent,
                    modes,
                    cwd: cwd.to_owned(),
                })
            }
            Err(e) => {
                root.dispose();
                Err(e)
            }
        }
    }
}

/// The editor's additional directories, checked (each an existing directory; at most
/// [`cordis_workspace::MAX_MORE_ROOTS`]) and canonicalized, on a blocking thread.
async fn canonical_roots(dirs: Vec<PathBuf>) -> Result<Vec<PathBuf>, Error> {
    if dirs.len() > cordis_workspace::MAX_MORE_ROOTS {
        return Err(invalid_params(format!(
            "additionalDirectories has {} entries, more than the {} a session takes",
            dirs.len(),
            cordis_workspace::MAX_MORE_ROOTS
        )));
    }
    let checked = tokio::task::spawn_blocking(move || {
        dirs.into_iter()
            .map(|dir| match std::fs::canonicalize(&dir) {
                Ok(canonical) if canonical.is_dir() => Ok(canonical),
                Ok(_) => Err(format!(
                    "additionalDirectories: {} is not a directory",
                    dir.display()
                )),
                Err(e) => Err(format!("additionalDirectories: {}: {e}", dir.display())),
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| internal(format!("cannot check additionalDirectories: {e}")))?;
    checked.map_err(invalid_params)
}

/// Starts one `mcp` entry per server under `root` and waits until each is active: a server
/// that cannot start (or list its tools) fails the session, naming it.
async fn connect_mcp(root: &Context, cwd: &Path, servers: &[McpServer]) -> Result<(), Error> {
    if servers.is_empty() {
        return Ok(());
    }
    let mut handles = Vec::with_capacity(servers.len());
    for server in servers {
        let name = server_name(&server.name);
        let mut config = match &server.transport {
            McpTransport::Stdio { command, args, env } => {
                let mut config = cordis_mcp::McpConfig::stdio(&name, command.clone(), args.clone());
                config.env = env.iter().cloned().collect();
                config.cwd = Some(cwd.to_owned());
                config
            }
            McpTransport::Http { url, headers } => {
                let mut config = cordis_mcp::McpConfig::stdio(&name, String::new(), Vec::new());
                config.transport = cordis_mcp::TransportKind::Http;
                config.command = None;
                config.url = Some(url.clone());
                config.headers = headers.iter().cloned().collect();
                // No file holds this server: the login goes by its URL.
                config.oauth.login_command = Some(format!(
                    "cordis mcp login --url {}",
                    cordis_runtime::shell_word(url)
                ));
                config
            }
        };
        // An editor's user configured it: a server that does not start is an error they see,
        // not a session that silently lacks its tools.
        config.fail_on_startup_error = true;
        if let Err(e) = config.check() {
            return Err(invalid_params(format!(
                "mcpServers \"{}\": {e}",
                server.name
            )));
        }
        handles.push((server, root.plugin(cordis_mcp::McpPlugin, config)));
    }
    if tokio::time::timeout(MCP_START_LIMIT, root.idle())
        .await
        .is_err()
    {
        return Err(internal(format!(
            "the MCP servers did not start within {} s",
            MCP_START_LIMIT.as_secs()
        )));
    }
    for (server, handle) in handles {
        let status = handle.status();
        if status != cordis_runtime::ScopeStatus::Active {
            // Failed with its error, or pending with what it waits for (a login, say).
            let why = handle
                .failure()
                .map(|f| f.message)
                .or_else(|| handle.info().waiting)
                .unwrap_or_else(|| format!("its entry is {status}"));
            return Err(internal(format!(
                "MCP server \"{}\" did not start: {why}",
                server.name
            )));
        }
    }
    Ok(())
}

/// Every usable preset as a mode (in the roster's listing order), `current` selected.
async fn modes(roster: &AgentPresets, current: String) -> SessionModeState {
    let available = roster
        .list_async()
        .await
        .into_iter()
        .filter(|p| p.broken.is_none())
        .map(|p| SessionMode {
            name: p.name.unwrap_or_else(|| p.id.clone()),
            id: p.id,
            description: p.description,
        })
        .collect();
    SessionModeState {
        current_mode_id: current,
        available_modes: available,
    }
}

/// A preset that cannot be joined: an unknown id is the client's mistake, anything else ours.
fn preset_error(e: PresetError) -> Error {
    match e {
        PresetError::NotFound { .. } => invalid_params(e.to_string()),
        other => internal(other.to_string()),
    }
}

/// Opens (or creates) the session log, checks its cwd, and creates the agent on it through the
/// session core ([`crate::session::open::join_agent`]), joined to its preset when the file has
/// a roster: `preset` (or the roster's default) for a new session, the one its log records for
/// a loaded one. Returns the agent and the preset it joined.
async fn open_agent(
    root: &Context,
    preset: Option<&str>,
    cwd: &Path,
    opening: &Opening,
) -> Result<(Agent, Option<String>), Error> {
    let agents = crate::session::open::agent_loop(root).map_err(|e| internal(e.to_string()))?;
    let (id, preset, _session): (&String, Option<String>, Option<Session>) = match opening {
        Opening::New(id) => (id, preset.map(str::to_owned), None),
        Opening::Load(id) => {
            // Held until the agent has opened the same (shared) session; checked before any
            // agent exists, so a refused load starts nothing.
            let session = open_checked(agents.sessions(), id, cwd).await?;
            (id, session.preset(), Some(session))
        }
        Opening::Fork { parent, id } => {
            let session = crate::acp::server::forked(agents.sessions(), parent, id, cwd).await?;
            (id, session.preset(), Some(session))
        }
    };
    let model = agents
        .llm()
        .default_model()
        .map_or_else(|| "default".to_owned(), str::to_owned);
    let mut options = AgentOptions::new(AGENT_ID, model);
    options.session_id = Some(id.clone());
    options.cwd = Some(cwd.display().to_string());
    let agent = crate::session::open::join_agent(root, options, preset.as_deref())
        .await
        .map_err(|e| match e {
            e if e.is_unknown_preset() => invalid_params(e.to_string()),
            OpenError::Locked { id, holder } => {
                invalid_params(format!("session {id} is open in {holder}"))
            }
            OpenError::NoRoster => internal(
                "--preset needs an `agent-presets` entry in the config (see the bundled cordis.yml)",
            ),
            OpenError::Create(why) => internal(format!("cannot start the agent: {why}")),
            other => internal(other.to_string()),
        })?;
    let joined = crate::session::open::joined_preset(root, &agent);
    Ok((agent, joined))
}

/// How long a deletion waits for the deleted session's writer to let go of its lock file.
const DELETE_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Removes session `id`'s log and index summary from `store` under its writer lock.
async fn delete_locked(store: &cordis_session::SessionStore, id: &str) -> Result<(), Error> {
    let (Some(root), Some(path)) = (store.root().map(Path::to_owned), store.path_of(id)) else {
        return Err(invalid_params(
            "the `sessions` entry keeps sessions in memory; there is no log to delete",
        ));
    };
    let (session, _report) = store.open(id).await.map_err(|e| match e {
        SessionError::NotFound { .. } | SessionError::InvalidId { .. } => {
            Error::not_found(format!("unknown session {id}"))
        }
        SessionError::SessionLocked { pid, .. } => {
            let holder =
                pid.map_or_else(|| "another process".to_owned(), |p| format!("process {p}"));
            invalid_params(format!(
                "session {id} is open in {holder}; close it there first"
            ))
        }
        other => internal(format!("cannot open session {id}: {other}")),
    })?;
    let summary = root
        .join(cordis_session::index::INDEX_DIR)
        .join(format!("{id}.json"));
    let removed = tokio::task::spawn_blocking(move || {
        std::fs::remove_file(&path)?;
        match std::fs::remove_file(&summary) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    })
    .await
    .map_err(|e| internal(format!("deleting session {id} stopped: {e}")))?;
    // The lock goes with the session, after its log: its writer removes the lock file as it
    // ends, which the answer waits for (a bounded wait), so nothing of the session is left.
    drop(session);
    let _ = tokio::task::spawn_blocking(|| cordis_session::settle(DELETE_SETTLE)).await;
    removed.map_err(|e| internal(format!("cannot delete session {id}: {e}")))
}

/// Opens persisted session `id` (taking its lock) and checks it belongs to `cwd`.
async fn open_checked(
    store: &cordis_session::SessionStore,
    id: &str,
    cwd: &Path,
) -> Result<Session, Error> {
    let (session, _report) = store.open(id).await.map_err(|e| match e {
        SessionError::NotFound { .. } | SessionError::InvalidId { .. } => {
            Error::not_found(format!("unknown session {id}"))
        }
        SessionError::SessionLocked { pid, .. } => {
            let holder =
                pid.map_or_else(|| "another process".to_owned(), |p| format!("process {p}"));
            invalid_params(format!("session {id} is open in {holder}"))
        }
        other => internal(format!("cannot open session {id}: {other}")),
    })?;
    match session.header().cwd.as_deref().map(PathBuf::from) {
        Some(saved) if saved.is_absolute() => {
            if saved != cwd {
                return Err(invalid_params(format!(
                    "session {id} belongs to {}, not {}",
                    saved.display(),
                    cwd.display()
                )));
            }
        }
        _ => {
            return Err(invalid_params(format!(
                "session {id} records no absolute cwd, so it cannot be loaded into a workspace"
            )));
        }
    }
    Ok(session)
}
