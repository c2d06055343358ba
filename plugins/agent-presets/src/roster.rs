//! The `agent-presets` service: discovery, standing mounts and their generations, joining.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use cordis_agent_loop::{Agent, AgentLoop, AgentOptions};
use cordis_runtime::{Context, ScopeHandle, ScopeId, Service, lock};
use cordis_schema::ScopeKey;
use cordis_tools::{RegisterError, ToolRegistry};

use crate::composer::{Composer, Composition, RowReport};
use crate::config::Root;
use crate::discovery::{self, COMPOSITION_FILE, PresetInfo, is_preset_id};
use crate::error::{JoinError, PresetError};

/// A preset's standing mount: which preset, which generation, and the key agents join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The preset id.
    pub preset: String,
    /// Its generation (1 for the first mount in this process; a changed file makes the next).
    pub generation: u64,
    /// The standing scope's registry key: an agent joins by making it its scope's parent.
    pub key: ScopeKey,
    /// Its rows as mounted (all active or disabled), in file order.
    pub rows: Vec<RowReport>,
}

/// The modification time and size of each file a composition was read from.
type Stamp = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

fn stamp_of(files: &[PathBuf]) -> Stamp {
    files
        .iter()
        .map(|f| {
            let meta = std::fs::metadata(f).ok();
            let key = meta.and_then(|m| Some((m.modified().ok()?, m.len())));
            (f.clone(), key)
        })
        .collect()
}

/// A composition read afresh: its file, the resolved rows, and its stamp.
type Prepared = (PathBuf, Arc<dyn Composition>, Stamp);

/// The mounted generation of one preset that new joiners get.
struct Current {
    standing: Standing,
    composition_path: PathBuf,
    stamp: Stamp,
}

/// One preset id's mounts; its async lock makes mounting single-flight per id.
#[derive(Default)]
struct Slot {
    current: Option<Current>,
    /// Generations mounted so far (the next is this plus one).
    mounted: u64,
}

struct Inner {
    ctx: Context,
    composer: Arc<dyn Composer>,
    roots: Vec<Root>,
    default: String,
    tools: Arc<ToolRegistry>,
    slots: Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    /// Every live standing scope (all generations), by key; superseded ones stay until the
    /// roster unwinds, so agents joined to them keep working.
    standing: Mutex<BTreeMap<ScopeKey, (Standing, ScopeHandle)>>,
}

/// A weak [`AgentPresets`].
pub(crate) struct WeakPresets(std::sync::Weak<Inner>);

impl WeakPresets {
    pub(crate) fn upgrade(&self) -> Option<AgentPresets> {
        self.0.upgrade().map(|inner| AgentPresets { inner })
    }
}

/// The `agent-presets` service (see the crate docs). Cheap to clone.
#[derive(Clone)]
pub struct AgentPresets {
    inner: Arc<Inner>,
}

impl Service for AgentPresets {
    const NAME: &'static str = "agent-presets";
}

impl std::fmt::Debug for AgentPresets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentPresets")
            .field("roots", &self.inner.roots)
            .field("default", &self.inner.default)
            .finish_non_exhaustive()
    }
}

impl AgentPresets {
    /// A roster whose standing scopes live under `ctx`'s scope.
    pub fn new(
        ctx: Context,
        composer: Arc<dyn Composer>,
        roots: Vec<Root>,
        default: String,
        tools: Arc<ToolRegistry>,
    ) -> Self {
        AgentPresets {
            inner: Arc::new(Inner {
                ctx,
                composer,
                roots,
                default,
                tools,
                slots: Mutex::default(),
                standing: Mutex::default(),
            }),
        }
    }

    /// A handle that does not keep the roster alive (for callbacks the roster registers).
    pub(crate) fn downgrade(&self) -> WeakPresets {
        WeakPresets(Arc::downgrade(&self.inner))
    }

    /// The preset joined when none is named.
    pub fn default_id(&self) -> &str {
        &self.inner.default
    }

    /// The roots searched, in precedence order.
    pub fn roots(&self) -> &[Root] {
        &self.inner.roots
    }

    /// Every preset, broken ones with their reason, sorted by `order` then id. Reads the
    /// roots afresh each time.
    ///
    /// Reads the file system: call it from a blocking context (or use [`Self::list_async`]).
    pub fn list(&self) -> Vec<PresetInfo> {
        discovery::discover(&self.inner.roots, &*self.inner.composer)
    }

    /// [`Self::list`] on a blocking thread.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads the roots (a listing already started finishes on its blocking
    /// thread and is discarded).
    pub async fn list_async(&self) -> Vec<PresetInfo> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.list())
            .await
            .unwrap_or_default()
    }

    /// The preset `id` (the default for `None`), broken or not.
    ///
    /// Reads the file system: call it from a blocking context.
    ///
    /// # Errors
    /// [`PresetError::NotFound`] naming the available ids.
    pub fn resolve(&self, id: Option<&str>) -> Result<PresetInfo, PresetError> {
        let id = id.unwrap_or(&self.inner.default);
        discovery::find(&self.inner.roots, id, &*self.inner.composer).ok_or_else(|| {
            PresetError::NotFound {
                id: id.to_owned(),
                available: self.list().into_iter().map(|p| p.id).collect(),
            }
        })
    }

    /// The standing mount of preset `id` (the default for `None`), mounting it first when it
    /// is not mounted or its composition changed since; starts no agent (a cold reader of a
    /// session gets the key its agent joined this way).
    ///
    /// # Errors
    /// [`PresetError::NotFound`]; [`PresetError::Unusable`] for a broken preset, a row that
    /// did not become active, or a row that published a service (the standing scope is then
    /// disposed: nothing of the failed mount remains).
    ///
    /// # Cancel safety
    /// Not cancel safe while mounting: rows applied so far stay; the next call mounts again.
    pub async fn standing_key_for(&self, id: Option<&str>) -> Result<Standing, PresetError> {
        let id = id.unwrap_or(&self.inner.default).to_owned();
        let slot = {
            let mut slots = lock(&self.inner.slots);
            slots.entry(id.clone()).or_default().clone()
        };
        // Single flight: a second caller waits here, then finds the generation the first made.
        let mut slot = slot.lock().await;
        let known = slot
            .current
            .as_ref()
            .map(|c| (c.composition_path.clone(), c.stamp.clone()));
        let this = self.clone();
        let lookup = id.clone();
        let fresh = tokio::task::spawn_blocking(move || this.prepare(&lookup, known))
            .await
            .map_err(|_| PresetError::Gone)??;
        let Some((path, composition, stamp)) = fresh else {
            let current = slot.current.as_ref().ok_or(PresetError::Gone)?;
            return Ok(current.standing.clone());
        };
        let generation = slot.mounted + 1;
        let (standing, scope) = self.mount(&id, &path, &*composition, generation).await?;
        slot.mounted = generation;
        lock(&self.inner.standing).insert(standing.key, (standing.clone(), scope));
        slot.current = Some(Current {
            standing: standing.clone(),
            composition_path: path,
            stamp,
        });
        Ok(standing)
    }

    /// Blocking: finds `id`'s composition; `None` when `known` (the current generation's path
    /// and stamp) still matches, else the resolved composition and its stamp.
    fn prepare(
        &self,
        id: &str,
        known: Option<(PathBuf, Stamp)>,
    ) -> Result<Option<Prepared>, PresetError> {
        let Some(root) = is_preset_id(id)
            .then(|| self.inner.roots.iter().find(|r| r.path.join(id).is_dir()))
            .flatten()
        else {
            return Err(PresetError::NotFound {
                id: id.to_owned(),
                available: self.list().into_iter().map(|p| p.id).collect(),
            });
        };
        let path = root.path.join(id).join(COMPOSITION_FILE);
        if let Some((known_path, known_stamp)) = &known
            && *known_path == path
        {
            let files: Vec<PathBuf> = known_stamp.iter().map(|(f, _)| f.clone()).collect();
            if stamp_of(&files) == *known_stamp {
                return Ok(None);
            }
        }
        let unusable = |reason: String| PresetError::Unusable {
            id: id.to_owned(),
            reason,
            path: path.clone(),
        };
        if let Some(problem) = discovery::composition_problem(&path) {
            return Err(unusable(problem));
        }
        // Stat before and after reading: an edit landing in between is read again, so a stamp
        // never describes content older than itself.
        for _ in 0..3 {
            let before = stamp_of(std::slice::from_ref(&path));
            let composition = self.inner.composer.prepare(&path).map_err(unusable)?;
            let mut files = composition.files();
            if !files.contains(&path) {
                files.insert(0, path.clone());
            }
            let stamp = stamp_of(&files);
            if stamp.iter().find(|(f, _)| *f == path) == before.first() {
                return Ok(Some((path, composition, stamp)));
            }
        }
        Err(unusable(
            "the composition kept changing while it was read".to_owned(),
        ))
    }

    /// Mounts one generation under a new standing realm; on any refusal the realm is disposed.
    async fn mount(
        &self,
        id: &str,
        path: &Path,
        composition: &dyn Composition,
        generation: u64,
    ) -> Result<(Standing, ScopeHandle), PresetError> {
        let unusable = |reason: String| PresetError::Unusable {
            id: id.to_owned(),
            reason,
            path: path.to_owned(),
        };
        // Services are process-wide: a row that declares one would escape the preset.
        let declared: Vec<(String, Vec<String>)> = composition
            .rows()
            .into_iter()
            .filter(|r| !r.provides.is_empty())
            .map(|r| (format!("\"{}\" ({})", r.id, r.name), r.provides))
            .collect();
        if !declared.is_empty() {
            return Err(unusable(services_reason(&declared)));
        }
        let scope = self.inner.ctx.child_realm(&format!("agent-preset:{id}"));
        let Some(sctx) = scope.context() else {
            return Err(PresetError::Gone);
        };
        let before: BTreeSet<String> = sctx.service_names().into_iter().collect();
        let reports = composition.mount(&sctx).await;
        let published: Vec<String> = sctx
            .service_names()
            .into_iter()
            .filter(|s| !before.contains(s))
            .collect();
        // Who holds a service decides (a service another part of the process published
        // meanwhile is not the preset's); the names are the ones that appeared.
        let publishers = publishing_rows(&sctx, scope.id(), &reports);
        if !publishers.is_empty() {
            scope.dispose();
            let rows: Vec<(String, Vec<String>)> = publishers
                .into_iter()
                .enumerate()
                .map(|(i, r)| (r, if i == 0 { published.clone() } else { vec![] }))
                .collect();
            return Err(unusable(services_reason(&rows)));
        }
        let bad: Vec<&RowReport> = reports
            .iter()
            .filter(|r| !r.status.is_as_configured())
            .collect();
        if !bad.is_empty() {
            scope.dispose();
            let lines: Vec<String> = bad
                .iter()
                .map(|r| {
                    let why = r.reason.as_deref().unwrap_or("no reason given");
                    format!("  - {} ({}): {}: {why}", r.id, r.name, r.status)
                })
                .collect();
            return Err(unusable(format!(
                "{} row(s) did not activate:\n{}",
                bad.len(),
                lines.join("\n")
            )));
        }
        let standing = Standing {
            preset: id.to_owned(),
            generation,
            key: ScopeKey::from(scope.id()),
            rows: reports,
        };
        tracing::debug!(
            preset = id,
            generation,
            key = standing.key.0,
            "preset mounted"
        );
        Ok((standing, scope))
    }

    /// Reads and resolves the composition file `file` for [`AgentPresets::mount_prepared`],
    /// off the async threads; nothing is applied, so a caller can show what it would start.
    ///
    /// # Errors
    /// [`PresetError::Unusable`] with why the file cannot be used; [`PresetError::Gone`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is applied (a read already started finishes on its blocking thread
    /// and is discarded).
    pub async fn prepare_file(&self, file: &Path) -> Result<Arc<dyn Composition>, PresetError> {
        let this = self.clone();
        let path = file.to_owned();
        let prepared = tokio::task::spawn_blocking(move || this.inner.composer.prepare(&path))
            .await
            .map_err(|_| PresetError::Gone)?;
        prepared.map_err(|reason| PresetError::Unusable {
            id: file.display().to_string(),
            reason,
            path: file.to_owned(),
        })
    }

    /// Mounts the composition file `file` as a one-off realm parented to `parent` (what
    /// `cordis_mount` does): [`AgentPresets::prepare_file`], then
    /// [`AgentPresets::mount_prepared`].
    ///
    /// # Errors
    /// As those two.
    ///
    /// # Cancel safety
    /// Cancel safe while the file is read; after that as [`AgentPresets::mount_prepared`].
    pub async fn mount_file(
        &self,
        file: &Path,
        parent: ScopeKey,
    ) -> Result<(Standing, ScopeHandle), PresetError> {
        let composition = self.prepare_file(file).await?;
        self.mount_prepared(file, &*composition, parent).await
    }

    /// Mounts `composition` (prepared from `file`) under a new realm whose registry parent is
    /// `parent` (an agent's current parent, so what the composition adds comes on top of its
    /// preset), with the checks of a preset mount (every row active, no row publishing a
    /// service). The caller re-links the agent to the returned key, and disposes the handle to
    /// unmount. Not a preset: the invariant still finds the agent's preset further up the chain.
    ///
    /// # Errors
    /// [`PresetError::Unusable`] naming the rows that did not become active (or that provide a
    /// service), or a registry bind that failed.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped while the rows mount, the new realm stays under the roster's
    /// scope with the rows started so far (their applies go on), bound to no parent and never
    /// handed to the caller, so nothing but the roster's own unwinding disposes it. Calling
    /// again mounts a second realm beside it.
    pub async fn mount_prepared(
        &self,
        file: &Path,
        composition: &dyn Composition,
        parent: ScopeKey,
    ) -> Result<(Standing, ScopeHandle), PresetError> {
        let id = file.display().to_string();
        let (standing, scope) = self.mount(&id, file, composition, 1).await?;
        let bound = scope
            .context()
            .ok_or(RegisterError::ScopeGone)
            .and_then(|ctx| self.inner.tools.bind_parent(&ctx, standing.key, parent));
        if let Err(e) = bound {
            scope.dispose();
            return Err(PresetError::Unusable {
                id,
                reason: e.to_string(),
                path: file.to_owned(),
            });
        }
        Ok((standing, scope))
    }

    /// The preset `scope` joined: the nearest standing scope on its registry chain (a child
    /// agent parented to a joined agent finds its parent's, in the same generation).
    pub fn composed_preset(&self, scope: ScopeKey) -> Option<Standing> {
        let chain = self.inner.tools.chain(scope);
        let standing = lock(&self.inner.standing);
        chain
            .iter()
            .find_map(|k| standing.get(k).map(|(s, _)| s.clone()))
    }

    /// Every live standing mount (all generations), sorted by preset then generation.
    pub fn mounted(&self) -> Vec<Standing> {
        let mut all: Vec<Standing> = lock(&self.inner.standing)
            .values()
            .map(|(s, _)| s.clone())
            .collect();
        all.sort_by(|a, b| (&a.preset, a.generation).cmp(&(&b.preset, b.generation)));
        all
    }

    /// Creates an agent joined to preset `preset` (the default for `None`): mounts it (or finds
    /// its current generation), then creates the agent with its scope parented to the standing
    /// key. If the preset fails, no agent (and no session) is created.
    ///
    /// # Errors
    /// [`JoinError::Preset`] naming the preset and its failing rows; [`JoinError::Create`].
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped while the preset mounts, it leaves what a dropped
    /// [`AgentPresets::standing_key_for`] leaves and no agent; dropped while the agent is
    /// created, the preset stays mounted (the current generation the next join reuses) and the
    /// session is left as a dropped [`AgentLoop::create_agent`] leaves it. Calling again joins
    /// the same preset and creates the agent.
    pub async fn create_agent(
        &self,
        agents: &AgentLoop,
        mut options: AgentOptions,
        preset: Option<&str>,
    ) -> Result<(Agent, Standing), JoinError> {
        let standing = self.standing_key_for(preset).await?;
        options.parent_scope = Some(standing.key.0);
        options.agent_preset = Some(standing.preset.clone());
        let agent = agents.create_agent(options).await?;
        Ok((agent, standing))
    }

    /// Switches a blank agent (idle, no turn in its session) to preset `preset`: re-links its
    /// scope to that preset's standing key and appends `agent-preset/selected` to its session,
    /// which is what [`cordis_session::resolve_session_preset`] reads back.
    ///
    /// # Errors
    /// [`JoinError::MidTurn`], [`JoinError::NotBlank`], [`JoinError::Preset`] (the agent keeps
    /// its preset), [`JoinError::Bind`], [`JoinError::Record`].
    ///
    /// # Cancel safety
    /// The agent changes only after the last await, so a dropped switch leaves it on its old
    /// preset with nothing recorded in its session. The preset's mount is as a dropped
    /// [`AgentPresets::standing_key_for`] leaves it; calling again is equivalent.
    pub async fn switch(&self, agent: &Agent, preset: &str) -> Result<Standing, JoinError> {
        self.switch_when(agent, preset, true).await
    }

    /// Switches an idle agent to preset `preset` even after turns (an editor's mode picker
    /// stays live): as [`AgentPresets::switch`], and the history written so far stays; the next
    /// request carries the new preset's tools and persona, its `request/header` logged with
    /// reason `change` (the header differs), and a load rejoins the last preset selected.
    ///
    /// # Errors
    /// [`JoinError::MidTurn`], [`JoinError::Preset`] (the agent keeps its preset),
    /// [`JoinError::Bind`], [`JoinError::Record`].
    ///
    /// # Cancel safety
    /// As [`AgentPresets::switch`].
    pub async fn switch_any(&self, agent: &Agent, preset: &str) -> Result<Standing, JoinError> {
        self.switch_when(agent, preset, false).await
    }

    /// [`AgentPresets::switch`] (`blank`: only an agent whose session has no turn) or
    /// [`AgentPresets::switch_any`].
    async fn switch_when(
        &self,
        agent: &Agent,
        preset: &str,
        blank: bool,
    ) -> Result<Standing, JoinError> {
        let check = |agent: &Agent| {
            if blank {
                self.check_blank(agent)
            } else if agent.is_busy() {
                Err(JoinError::MidTurn {
                    agent: agent.id().to_owned(),
                })
            } else {
                Ok(())
            }
        };
        check(agent)?;
        let standing = self.standing_key_for(Some(preset)).await?;
        // A turn may have started while the preset mounted.
        check(agent)?;
        agent
            .rejoin(standing.key)
            .map_err(|source| JoinError::Bind {
                agent: agent.id().to_owned(),
                source,
            })?;
        agent
            .session()
            .select_preset(&standing.preset)
            .map_err(|e| JoinError::Record {
                session: agent.session().id().to_owned(),
                message: e.to_string(),
            })?;
        Ok(standing)
    }

    fn check_blank(&self, agent: &Agent) -> Result<(), JoinError> {
        if agent.is_busy() {
            return Err(JoinError::MidTurn {
                agent: agent.id().to_owned(),
            });
        }
        let turns = agent
            .session()
            .with_events(cordis_session::last_turn)
            .unwrap_or(u64::MAX);
        if turns > 0 {
            return Err(JoinError::NotBlank {
                agent: agent.id().to_owned(),
                session: agent.session().id().to_owned(),
                turns,
            });
        }
        Ok(())
    }

    /// The invariant's answer for an assembly of `scope`: `Some(message)` when `scope` is an
    /// agent's (the `agent-loop` service knows it) that joined no preset.
    pub fn unjoined_agent(&self, scope: ScopeKey) -> Option<String> {
        let agents = self.inner.ctx.get::<AgentLoop>()?;
        let agent = agents.agent_by_scope(scope)?;
        if self.composed_preset(scope).is_some() {
            return None;
        }
        Some(format!(
            "agent-presets: agent \"{}\" (scope {}) assembled a prompt without joining any agent preset; create it through the roster (AgentPresets::create_agent), which parents its scope to a preset's standing scope",
            agent.id(),
            scope.0
        ))
    }
}

/// Rows (`"id" (plugin)`) whose scopes, or scopes under them, hold a service.
fn publishing_rows(ctx: &Context, standing: ScopeId, reports: &[RowReport]) -> Vec<String> {
    let scopes = ctx.scopes();
    let parent: BTreeMap<ScopeId, Option<ScopeId>> =
        scopes.iter().map(|s| (s.id, s.parent)).collect();
    let rows: BTreeMap<ScopeId, &RowReport> = reports
        .iter()
        .filter_map(|r| r.scope.map(|s| (s, r)))
        .collect();
    let mut out: Vec<String> = Vec::new();
    for info in scopes.iter().filter(|s| s.effects.services > 0) {
        let mut at = Some(info.id);
        let mut row = None;
        while let Some(id) = at {
            if id == standing {
                break;
            }
            if row.is_none()
                && let Some(r) = rows.get(&id)
            {
                row = Some(format!("\"{}\" ({})", r.id, r.name));
            }
            at = parent.get(&id).copied().flatten();
        }
        if at == Some(standing) {
            let name = row.unwrap_or_else(|| format!("scope {}", info.id.0));
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

fn services_reason(rows: &[(String, Vec<String>)]) -> String {
    let names: Vec<&str> = rows.iter().map(|(r, _)| r.as_str()).collect();
    let mut services: Vec<&str> = rows
        .iter()
        .flat_map(|(_, s)| s.iter().map(String::as_str))
        .collect();
    services.sort_unstable();
    services.dedup();
    format!(
        "row(s) {} published process-global service(s) [{}]; a preset row must not provide a service (services are process-wide): move the row to the host composition (cordis.yml)",
        names.join(", "),
        services.join(", ")
    )
}

impl cordis_history::StandingScopes for AgentPresets {
    fn standing_key_for<'a>(
        &'a self,
        preset: Option<&'a str>,
    ) -> futures_util::future::BoxFuture<'a, Result<ScopeKey, String>> {
        Box::pin(async move {
            AgentPresets::standing_key_for(self, preset)
                .await
                .map(|s| s.key)
                .map_err(|e| e.to_string())
        })
    }
}
