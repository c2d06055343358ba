//! The scoped tool registry: one global layer plus one layer per scope key, each write an effect
//! of the registering scope.
//!
//! # Visibility
//! A scope sees global tools, then its ancestors' (the nearest scope wins a name), filtered by the
//! intersection of every restriction on its chain; its own tools are added last, shadowing and
//! never filtered (a parent's filter must not strip tools a runtime registered into the child).
//!
//! # Realms
//! A plugin applied under a standing scope made by `Context::child_realm` (an agent preset's)
//! registers into that realm's layer, not the global one ([`ToolRegistry::register`]); so do the
//! scope-state rows (`tool-presentation`, `tool-restrict`, see [`declaring_key`]). An agent
//! joins a preset by binding its scope's parent to the realm's key, and so sees the preset's
//! tools, restrictions and presentation, while agents of other presets see none of them.
//!
//! # Determinism
//! Layers are ordered maps and every list leaving the registry is sorted by UTF-16 code units, so
//! no hash-map or registration order leaks out. The model-facing order is still the assembly's job.
//!
//! A name two entries register in one layer is *contested* (see [`cordis_runtime::Claim`]):
//! withheld from every view (the model sees neither, a call finds neither), reported by both
//! entries, and released to the survivor when one of them leaves — whichever registered first.
//! Guards run in canonical order: by the guarding scope's [`cordis_runtime::OrderKey`], then in
//! registration order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use cordis_code_mode::Language;
use cordis_code_runtime::CodeRuntimeService;
use cordis_runtime::{Claim, Context, EffectHandle, Event, Inject, Schedule, Service};
use cordis_schema::{ScopeKey, ToolSchema};
use cordis_system_prompt::{ToolProviderResult, sort_by_name_utf16};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::arguments::ArgumentSchema;
use crate::definition::{Clearance, ToolCall, ToolDefinition};
use crate::error::RegisterError;
use crate::presentation::{Presentation, PresentationMode};

/// The name reserved for the Code Mode transport tool.
pub const RUN_CODE: &str = cordis_code_mode::RUN_CODE_NAME;

/// Emitted after every change to what some scope can see (`tools/change`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsChange {
    /// The layer that changed; `None` for the global layer.
    pub scope: Option<ScopeKey>,
}

impl Event for ToolsChange {
    const NAME: &'static str = "tools/change";
    type Output = ();
}

/// A filter over the tools a scope inherits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restriction {
    /// Only these inherited tools stay visible.
    pub allow: Option<Vec<String>>,
    /// These inherited tools are hidden.
    pub deny: Option<Vec<String>>,
}

/// A monotonic check after `tools/pre-execute`: `Some(reason)` denies; there is no "allow".
pub type Guard = Arc<dyn Fn(&ToolCall, Option<ScopeKey>) -> Option<String> + Send + Sync>;

/// The approval stage: decides a call whose tool is known, whose arguments match its schema and
/// which every guard let through, before it runs; it may ask a person. One per registry
/// ([`ToolRegistry::set_approval`]); without one every admitted call runs.
pub trait ApprovalStage: Send + Sync + 'static {
    /// `Ok(clearance)` runs the call cleared that far (a call that ran without a question is
    /// [`Clearance::ReadOnly`]); `Err(reason)` refuses it (`DENIED`, the reason for the model).
    ///
    /// # Cancel safety
    /// The future may be dropped (the call was cancelled); nothing may depend on it finishing.
    fn approve(
        &self,
        call: &ToolCall,
        scope: Option<ScopeKey>,
        tool: &ToolDefinition,
    ) -> BoxFuture<'static, Result<Clearance, String>>;
}

struct Compiled {
    allow: Option<BTreeSet<String>>,
    deny: BTreeSet<String>,
    /// Every name it lists, in the order given: checked against the final composition at
    /// assembly, never against what happened to be registered when the row applied.
    names: Vec<String>,
}

impl Compiled {
    fn admits(&self, name: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.contains(name)) && !self.deny.contains(name)
    }
}

/// One registration of a name in a layer: its write id, the entry that made it, the tool.
struct Holder {
    id: u64,
    owner: cordis_runtime::ScopeId,
    tool: Arc<Registered>,
}

/// A registered tool: its definition and its compiled parameters schema.
pub(crate) struct Registered {
    pub(crate) def: ToolDefinition,
    pub(crate) arguments: ArgumentSchema,
}

#[derive(Default)]
pub(crate) struct Layer {
    /// Every registration of each name: usable only while exactly one entry holds it.
    tools: BTreeMap<String, Vec<Holder>>,
    restrictions: BTreeMap<u64, Compiled>,
    /// Guards by the guarding scope's place, then write id.
    guards: BTreeMap<(cordis_runtime::OrderKey, u64), Guard>,
    /// This scope's presentation declaration (write id, mode); at most one.
    pub(crate) mode: Option<(u64, PresentationMode)>,
}

impl Layer {
    /// Each name with its tool, or `None` while the name is contested.
    fn sole_tools(&self) -> impl Iterator<Item = (&String, Option<&Arc<Registered>>)> {
        self.tools
            .iter()
            .map(|(n, holders)| match holders.as_slice() {
                [one] => (n, Some(&one.tool)),
                _ => (n, None),
            })
    }

    fn is_empty(&self) -> bool {
        self.tools.is_empty()
            && self.restrictions.is_empty()
            && self.guards.is_empty()
            && self.mode.is_none()
    }
}

/// What one scope can see.
pub(crate) struct View {
    pub(crate) visible: BTreeMap<String, Arc<Registered>>,
    /// Pre-restriction names, for `toolOrder` validation.
    pub(crate) known: BTreeSet<String>,
}

/// [`View`] borrowed from the store's layers (valid while its lock is held).
struct ViewRef<'a> {
    visible: BTreeMap<&'a str, &'a Arc<Registered>>,
    known: BTreeSet<&'a str>,
}

#[derive(Default)]
pub(crate) struct Store {
    next: u64,
    /// The approval stage (write id, stage); at most one.
    approval: Option<(u64, Arc<dyn ApprovalStage>)>,
    global: Layer,
    scoped: BTreeMap<ScopeKey, Layer>,
    parents: BTreeMap<ScopeKey, ScopeKey>,
}

impl Store {
    pub(crate) fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// `scope` and its ancestors, nearest first.
    fn chain(&self, scope: ScopeKey) -> Vec<ScopeKey> {
        let mut chain = vec![scope];
        let mut at = scope;
        // Binding refuses cycles; the length cap only guards against a logic error here.
        while let Some(&parent) = self.parents.get(&at) {
            if chain.contains(&parent) || chain.len() > self.parents.len() {
                break;
            }
            chain.push(parent);
            at = parent;
        }
        chain
    }

    pub(crate) fn layer_mut(&mut self, scope: Option<ScopeKey>) -> &mut Layer {
        match scope {
            None => &mut self.global,
            Some(key) => self.scoped.entry(key).or_default(),
        }
    }

    fn drop_if_empty(&mut self, scope: Option<ScopeKey>) {
        if let Some(key) = scope
            && self.scoped.get(&key).is_some_and(Layer::is_empty)
        {
            self.scoped.remove(&key);
        }
    }

    /// Global tools, then ancestors farthest first (so nearer ones overwrite); not `scope` itself.
    /// A contested name hides what a farther layer has under it and is returned apart.
    /// Borrowed from the layers, so building it copies no name.
    fn inherited(
        &self,
        scope: Option<ScopeKey>,
    ) -> (BTreeMap<&str, &Arc<Registered>>, BTreeSet<&str>) {
        let mut layers: Vec<&Layer> = vec![&self.global];
        if let Some(scope) = scope {
            let chain = self.chain(scope);
            layers.extend(
                chain
                    .iter()
                    .skip(1)
                    .rev()
                    .filter_map(|k| self.scoped.get(k)),
            );
        }
        let mut out: BTreeMap<&str, &Arc<Registered>> = BTreeMap::new();
        let mut contested: BTreeSet<&str> = BTreeSet::new();
        for layer in layers {
            for (n, tool) in layer.sole_tools() {
                match tool {
                    Some(d) => {
                        contested.remove(n.as_str());
                        out.insert(n, d);
                    }
                    None => {
                        out.remove(n.as_str());
                        contested.insert(n);
                    }
                }
            }
        }
        (out, contested)
    }

    /// Every restriction on `scope`'s chain (its own included), borrowed from the layers; a
    /// name is visible only if all of them admit it.
    fn chain_restrictions(&self, scope: ScopeKey) -> Vec<&Compiled> {
        self.chain(scope)
            .iter()
            .filter_map(|k| self.scoped.get(k))
            .flat_map(|l| l.restrictions.values())
            .collect()
    }

    /// What `scope` sees (without `run_code`), borrowed from the layers.
    fn view_ref(&self, scope: Option<ScopeKey>) -> ViewRef<'_> {
        let (inherited, contested) = self.inherited(scope);
        // A contested name is still a name the configuration knows (`toolOrder` may list it).
        let mut known: BTreeSet<&str> = inherited.keys().copied().chain(contested).collect();
        let Some(scope) = scope else {
            return ViewRef {
                visible: inherited,
                known,
            };
        };
        let restrictions = self.chain_restrictions(scope);
        let mut visible: BTreeMap<&str, &Arc<Registered>> = inherited
            .into_iter()
            .filter(|(n, _)| restrictions.iter().all(|r| r.admits(n)))
            .collect();
        if let Some(own) = self.scoped.get(&scope) {
            for (n, tool) in own.sole_tools() {
                known.insert(n);
                match tool {
                    Some(d) => visible.insert(n, d),
                    None => visible.remove(n.as_str()),
                };
            }
        }
        ViewRef { visible, known }
    }

    /// [`Store::view_ref`], owned.
    fn view(&self, scope: Option<ScopeKey>) -> View {
        let view = self.view_ref(scope);
        View {
            visible: view
                .visible
                .into_iter()
                .map(|(n, t)| (n.to_owned(), t.clone()))
                .collect(),
            known: view.known.into_iter().map(str::to_owned).collect(),
        }
    }

    /// The provider result of a native scope: its visible schemas and known names, sorted by
    /// UTF-16 code units, copied out of the layers once.
    fn native_result(&self, scope: Option<ScopeKey>) -> ToolProviderResult {
        let view = self.view_ref(scope);
        let mut known: Vec<String> = view.known.into_iter().map(str::to_owned).collect();
        sort_utf16(&mut known, |s| s);
        let mut schemas: Vec<ToolSchema> = view
            .visible
            .values()
            .map(|r| r.def.schema.clone())
            .collect();
        sort_utf16(&mut schemas, |s| &s.name);
        ToolProviderResult {
            schemas,
            known_names: Some(known),
            unavailable: None,
        }
    }

    /// The names `scope`'s restrictions list that it does not inherit, with the names it does
    /// (sorted); `None` when every listed name is known.
    fn unknown_restricted(&self, scope: Option<ScopeKey>) -> Option<(Vec<String>, Vec<String>)> {
        let scope = scope?;
        let restrictions = self.chain_restrictions(scope);
        // No restriction on the chain names anything: nothing to look up.
        if restrictions.is_empty() {
            return None;
        }
        let (inherited, contested) = self.inherited(Some(scope));
        let mut unknown: Vec<String> = Vec::new();
        for n in restrictions.iter().flat_map(|r| &r.names) {
            if !inherited.contains_key(n.as_str())
                && !contested.contains(n.as_str())
                && !unknown.contains(n)
            {
                unknown.push(n.clone());
            }
        }
        if unknown.is_empty() {
            return None;
        }
        let mut known: Vec<String> = inherited
            .into_keys()
            .chain(contested)
            .map(str::to_owned)
            .collect();
        sort_by_name_utf16(&mut known, |s| s);
        Some((unknown, known))
    }

    /// The nearest presentation declaration on `scope`'s chain.
    fn declared_mode(&self, scope: Option<ScopeKey>) -> Option<PresentationMode> {
        self.chain(scope?)
            .into_iter()
            .find_map(|k| self.scoped.get(&k).and_then(|l| l.mode).map(|(_, m)| m))
    }

    /// Global guards first, then the chain's farthest first.
    fn guards(&self, scope: Option<ScopeKey>) -> Vec<Guard> {
        let mut out: Vec<Guard> = self.global.guards.values().cloned().collect();
        if let Some(scope) = scope {
            for key in self.chain(scope).into_iter().rev() {
                if let Some(layer) = self.scoped.get(&key) {
                    out.extend(layer.guards.values().cloned());
                }
            }
        }
        out
    }
}

pub(crate) struct Inner {
    pub(crate) ctx: Context,
    store: Mutex<Store>,
    /// The default mode and sub-call parallelism.
    pub(crate) presentation: Presentation,
    /// The `run_code` transport, built on first need (one per runtime language).
    run_code: Mutex<Option<(Language, Arc<Registered>)>>,
    /// Itself, for the `run_code` handler (which must not keep the registry alive).
    this: Weak<Inner>,
}

impl Inner {
    fn store(&self) -> MutexGuard<'_, Store> {
        // Only panic-free bookkeeping runs under this lock; user code never does.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `scope` sees: its visible tools, plus `run_code` when its mode is not native.
    pub(crate) fn view(&self, scope: Option<ScopeKey>) -> View {
        self.view_and_mode(scope).0
    }

    /// [`Inner::view`] and the scope's mode, read under one lock, so a `present_as` landing
    /// meanwhile cannot give a view of one mode and a mode of another.
    pub(crate) fn view_and_mode(&self, scope: Option<ScopeKey>) -> (View, PresentationMode) {
        let (mut view, mode) = {
            let store = self.store();
            let mode = store.declared_mode(scope).unwrap_or(self.presentation.mode);
            (store.view(scope), mode)
        };
        if mode != PresentationMode::Native
            && let Some(run_code) = self.run_code()
        {
            view.visible.insert(RUN_CODE.to_owned(), run_code);
            view.known.insert(RUN_CODE.to_owned());
        }
        (view, mode)
    }

    /// The tool `name` visible in `scope` ([`Inner::view`]`.visible[name]`), found without
    /// copying the view out of the store.
    pub(crate) fn visible_tool(
        &self,
        scope: Option<ScopeKey>,
        name: &str,
    ) -> Option<Arc<Registered>> {
        if name == RUN_CODE {
            // Only the transport has this name (registering it is refused); whether a scope
            // sees it depends on its mode.
            return self.view(scope).visible.get(name).cloned();
        }
        self.store()
            .view_ref(scope)
            .visible
            .get(name)
            .map(|t| (*t).clone())
    }

    /// The nearest declaration on `scope`'s chain, else the default.
    pub(crate) fn mode_for(&self, scope: Option<ScopeKey>) -> PresentationMode {
        self.store()
            .declared_mode(scope)
            .unwrap_or(self.presentation.mode)
    }

    /// The `run_code` transport for the loaded runtime's language (JavaScript without one).
    fn run_code(&self) -> Option<Arc<Registered>> {
        let language = self
            .ctx
            .get::<CodeRuntimeService>()
            .and_then(|rt| Language::from_runtime(rt.0.language()).ok())
            .unwrap_or(Language::JavaScript);
        let mut cached = self.run_code.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((lang, registered)) = cached.as_ref()
            && *lang == language
        {
            return Some(registered.clone());
        }
        match crate::run_code::transport(self.this.clone(), language) {
            Ok(registered) => {
                *cached = Some((language, registered.clone()));
                Some(registered)
            }
            Err(error) => {
                tracing::error!(%error, "the run_code transport does not compile");
                None
            }
        }
    }

    pub(crate) fn guards(&self, scope: Option<ScopeKey>) -> Vec<Guard> {
        self.store().guards(scope)
    }

    pub(crate) fn approval(&self) -> Option<Arc<dyn ApprovalStage>> {
        self.store().approval.as_ref().map(|(_, s)| s.clone())
    }

    /// The registry as a tool provider of the prompt assembly.
    pub(crate) fn provider_result(&self, scope: Option<ScopeKey>) -> ToolProviderResult {
        {
            let store = self.store();
            if let Some((unknown, known)) = store.unknown_restricted(scope) {
                return ToolProviderResult {
                    unavailable: Some(
                        RegisterError::UnknownRestricted { unknown, known }.to_string(),
                    ),
                    ..ToolProviderResult::default()
                };
            }
            // A native scope (every scope by default) has no `run_code` and needs no runtime:
            // its result is read straight from the layers, under the lock that read the mode.
            if store.declared_mode(scope).unwrap_or(self.presentation.mode)
                == PresentationMode::Native
            {
                return store.native_result(scope);
            }
        }
        let (view, mode) = self.view_and_mode(scope);
        if mode != PresentationMode::Native && self.ctx.get::<CodeRuntimeService>().is_none() {
            // Checked at use time, so a native deployment needs no runtime.
            return ToolProviderResult {
                unavailable: Some(format!(
                    "tools: mode \"{mode}\" requires a code runtime: load the `code-runtime` plugin or present this scope as \"native\""
                )),
                ..ToolProviderResult::default()
            };
        }
        if mode == PresentationMode::Code {
            // Collapsed: the model receives run_code alone, so a toolOrder naming any other
            // tool fails the assembly.
            let schemas = view
                .visible
                .get(RUN_CODE)
                .map(|r| vec![r.def.schema.clone()])
                .unwrap_or_default();
            return ToolProviderResult {
                schemas,
                known_names: Some(vec![RUN_CODE.to_owned()]),
                unavailable: None,
            };
        }
        let mut known: Vec<String> = view.known.into_iter().collect();
        sort_utf16(&mut known, |s| s);
        ToolProviderResult {
            schemas: schemas_of(&view.visible),
            known_names: Some(known),
            unavailable: None,
        }
    }
}

fn schemas_of(visible: &BTreeMap<String, Arc<Registered>>) -> Vec<ToolSchema> {
    let mut out: Vec<ToolSchema> = visible.values().map(|r| r.def.schema.clone()).collect();
    sort_utf16(&mut out, |s| &s.name);
    out
}

/// Sorts `items`, which are in byte order (drawn from an ordered map), by UTF-16 code units.
///
/// Byte order is code point order, and so is UTF-16 order for names without a character
/// outside the Basic Multilingual Plane (whose surrogates sort below U+E000..U+FFFF); such a
/// character is the only one UTF-8 writes with a lead byte of 0xF0 or more. Without one, the
/// items are already in order and the (slow, code unit by code unit) sort is skipped.
fn sort_utf16<T>(items: &mut [T], name: impl Fn(&T) -> &str) {
    if items.iter().any(|t| name(t).bytes().any(|b| b >= 0xF0)) {
        sort_by_name_utf16(items, name);
    }
}

/// The layer a plugin running under `ctx` writes to by default: its realm's, else the global
/// one (`None`).
pub(crate) fn realm_key(ctx: &Context) -> Option<ScopeKey> {
    ctx.realm().map(ScopeKey::from)
}

/// The layer a scope-state row (a presentation, a restriction) declares for: its realm's, else
/// its own scope's (a standing scope that agents join by parenting).
pub fn declaring_key(ctx: &Context) -> ScopeKey {
    ScopeKey::from(ctx.realm().unwrap_or_else(|| ctx.scope_id()))
}

/// The kind of name of the registry's one approval stage in a permutation proof's observations
/// ([`ToolRegistry::set_approval`] reads and writes it).
pub const APPROVAL_STAGE: &str = "approval stage";

/// Notes a look-up of the tool `name` for a permutation proof (see
/// [`cordis_runtime::NameFootprint`]); nothing unless a proof observes the runtime.
fn note_tool_read(name: &str) {
    if cordis_runtime::observing() {
        cordis_runtime::note_read(Claim::tool(name));
    }
}

/// The `tools` service.
#[derive(Clone)]
pub struct ToolRegistry {
    pub(crate) inner: Arc<Inner>,
}

impl Service for ToolRegistry {
    const NAME: &'static str = "tools";
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let store = self.inner.store();
        f.debug_struct("ToolRegistry")
            .field("global_tools", &store.global.tools.len())
            .field("scoped_layers", &store.scoped.len())
            .finish_non_exhaustive()
    }
}

impl ToolRegistry {
    /// What a plugin that registers tools injects: the registry, required.
    pub const INJECT: &'static [Inject] = &[Inject::required(Self::NAME)];

    /// A registry whose events and waterfalls go through `ctx` (the scope that owns it), with
    /// every scope native unless it declares otherwise.
    pub fn new(ctx: Context) -> Self {
        Self::with_presentation(ctx, Presentation::default())
    }

    /// A registry with these presentation settings (the `tools` entry's `mode` and
    /// `maxParallelSubCalls`).
    pub fn with_presentation(ctx: Context, presentation: Presentation) -> Self {
        ToolRegistry {
            inner: Arc::new_cyclic(|this| Inner {
                ctx,
                store: Mutex::new(Store::default()),
                presentation,
                run_code: Mutex::new(None),
                this: this.clone(),
            }),
        }
    }

    /// Registers a tool as an effect of `ctx`'s scope: into the layer of `ctx`'s realm when it
    /// lives in one (see [`Context::realm`]: a preset's standing scope, so only agents joined to
    /// that preset see the tool), else into the global layer.
    ///
    /// # Errors
    /// An invalid definition, a duplicate name in that layer, or a dead scope.
    pub fn register(
        &self,
        ctx: &Context,
        def: ToolDefinition,
    ) -> Result<EffectHandle, RegisterError> {
        self.register_in(ctx, realm_key(ctx), def)
    }

    /// Registers a tool (global, or into `ctx`'s realm, as [`Self::register`]) the way a
    /// plugin's `apply` should: a seeded schedule point ([`Schedule::BEFORE_REGISTER`], so
    /// randomized schedules interleave registrations across plugins), a
    /// [`Schedule::TRACE_REGISTER`] trace naming the tool, then [`Self::register`].
    ///
    /// # Errors
    /// As [`Self::register`].
    ///
    /// # Cancel safety
    /// Dropping it before the registration registers nothing.
    pub async fn register_scheduled(
        &self,
        ctx: &Context,
        def: ToolDefinition,
    ) -> Result<EffectHandle, RegisterError> {
        ctx.schedule().point(Schedule::BEFORE_REGISTER).await;
        ctx.trace(Schedule::TRACE_REGISTER, def.name().to_owned());
        self.register(ctx, def)
    }

    /// Registers a tool into `scope`'s layer as an effect of `ctx`'s scope.
    ///
    /// # Errors
    /// An invalid definition, a duplicate name in that layer, or a dead scope.
    pub fn register_scoped(
        &self,
        ctx: &Context,
        scope: ScopeKey,
        def: ToolDefinition,
    ) -> Result<EffectHandle, RegisterError> {
        self.register_in(ctx, Some(scope), def)
    }

    fn register_in(
        &self,
        ctx: &Context,
        scope: Option<ScopeKey>,
        def: ToolDefinition,
    ) -> Result<EffectHandle, RegisterError> {
        // Compiled once here, so every call is checked without reparsing the schema.
        let arguments = def.compile()?;
        let tool = Arc::new(Registered { def, arguments });
        let owner = ctx.claim_owner();
        // Held beside the registration, so both entries of a contest report it.
        let claim = ctx.claim(Claim::tool(tool.def.name()).in_space(scope.map(|k| k.0)));
        let released = claim.clone();
        // The undo finds the name in the tool itself, so no copy of it is kept. Weakly: the
        // layer owns the tool (the undo's scope must not keep its handler alive), and while
        // the holder is in the layer the tool is alive, so a failed upgrade means none is left.
        let registered = Arc::downgrade(&tool);
        let written = self.write(
            ctx,
            scope,
            "tools tool",
            true,
            move |store| {
                let id = store.next_id();
                let layer = store.layer_mut(scope);
                let name = tool.def.name();
                let holder = |tool| Holder { id, owner, tool };
                if let Some(holders) = layer.tools.get_mut(name) {
                    if holders.iter().any(|h| h.owner == owner) {
                        // One entry registering a name twice is that entry's own mistake.
                        let name = name.to_owned();
                        return Err(match scope {
                            None => RegisterError::DuplicateGlobal { name },
                            Some(_) => RegisterError::DuplicateScoped { name },
                        });
                    }
                    holders.push(holder(tool));
                } else {
                    layer.tools.insert(name.to_owned(), vec![holder(tool)]);
                }
                Ok(id)
            },
            move |store, id| {
                if let Some(tool) = registered.upgrade()
                    && let Some(layer) = store.layer_mut_existing(scope)
                    && let Some(holders) = layer.tools.get_mut(tool.def.name())
                {
                    holders.retain(|h| h.id != id);
                    if holders.is_empty() {
                        layer.tools.remove(tool.def.name());
                    }
                }
                released.dispose();
            },
        );
        if written.is_err() {
            claim.dispose();
        }
        written
    }

    /// Narrows what `scope` inherits; the scope's own tools are never hidden.
    ///
    /// # Determinism
    /// The names are checked when the scope is assembled, against everything it inherits then
    /// (a name no entry registers fails that assembly, like an unknown `toolOrder` name), not
    /// against what happened to be registered when the restriction was made.
    ///
    /// # Errors
    /// An empty filter, a filter naming `run_code`, or a dead scope.
    pub fn restrict(
        &self,
        ctx: &Context,
        scope: ScopeKey,
        restriction: Restriction,
    ) -> Result<EffectHandle, RegisterError> {
        cordis_runtime::note_change("tool");
        let Restriction { allow, deny } = restriction;
        let deny = deny.unwrap_or_default();
        if allow.is_none() && deny.is_empty() {
            return Err(RegisterError::EmptyRestriction);
        }
        let named: Vec<&String> = allow.iter().flatten().chain(deny.iter()).collect();
        if named.iter().any(|n| n.as_str() == RUN_CODE) {
            return Err(RegisterError::RestrictRunCode);
        }
        let compiled = Compiled {
            allow: allow.as_ref().map(|a| a.iter().cloned().collect()),
            deny: deny.iter().cloned().collect(),
            names: named.into_iter().cloned().collect(),
        };
        self.write(
            ctx,
            Some(scope),
            "tools restriction",
            true,
            move |store| {
                let id = store.next_id();
                store
                    .layer_mut(Some(scope))
                    .restrictions
                    .insert(id, compiled);
                Ok(id)
            },
            move |store, id| {
                if let Some(layer) = store.layer_mut_existing(Some(scope)) {
                    layer.restrictions.remove(&id);
                }
            },
        )
    }

    /// Adds a guard for calls in `scope` (`None`: every call); it can only deny.
    ///
    /// # Errors
    /// [`RegisterError::ScopeGone`] when `ctx`'s scope is no longer live.
    pub fn guard(
        &self,
        ctx: &Context,
        scope: Option<ScopeKey>,
        guard: impl Fn(&ToolCall, Option<ScopeKey>) -> Option<String> + Send + Sync + 'static,
    ) -> Result<EffectHandle, RegisterError> {
        let guard: Guard = Arc::new(guard);
        let place = ctx.order_key().clone();
        // Guards do not change visibility, so no `tools/change`.
        self.write(
            ctx,
            scope,
            "tools guard",
            false,
            move |store| {
                let key = (place, store.next_id());
                store.layer_mut(scope).guards.insert(key.clone(), guard);
                Ok(key)
            },
            move |store, key| {
                if let Some(layer) = store.layer_mut_existing(scope) {
                    layer.guards.remove(&key);
                }
            },
        )
    }

    /// Installs the approval stage (run after the guards, before the handler) as an effect of
    /// `ctx`'s scope.
    ///
    /// # Errors
    /// [`RegisterError::ApprovalTaken`] when another stage is installed; a dead scope.
    pub fn set_approval(
        &self,
        ctx: &Context,
        stage: Arc<dyn ApprovalStage>,
    ) -> Result<EffectHandle, RegisterError> {
        if cordis_runtime::observing() {
            // Only one stage: whoever sets it first decides whether the other is refused.
            let slot = Claim::new(APPROVAL_STAGE, "tools");
            cordis_runtime::note_read(slot.clone());
            cordis_runtime::note_write(slot);
        }
        self.write(
            ctx,
            None,
            "tools approval stage",
            false,
            move |store| {
                if store.approval.is_some() {
                    return Err(RegisterError::ApprovalTaken);
                }
                let id = store.next_id();
                store.approval = Some((id, stage));
                Ok(id)
            },
            move |store, id| {
                if store.approval.as_ref().is_some_and(|(i, _)| *i == id) {
                    store.approval = None;
                }
            },
        )
    }

    /// The effect class and confinement of the tool `name` visible in `scope`, if there is one.
    pub fn effect(&self, name: &str, scope: Option<ScopeKey>) -> Option<(crate::Effect, bool)> {
        note_tool_read(name);
        self.inner
            .visible_tool(scope, name)
            .map(|r| (r.def.effect, r.def.confined))
    }

    /// Makes `parent` the parent of `child` (once), as an effect of `ctx`'s scope.
    ///
    /// # Errors
    /// `child` already bound, a cycle, or a dead scope.
    pub fn bind_parent(
        &self,
        ctx: &Context,
        child: ScopeKey,
        parent: ScopeKey,
    ) -> Result<EffectHandle, RegisterError> {
        // A layer's parents decide what it inherits, and binding reads the bound ones.
        cordis_runtime::note_change("tool");
        cordis_runtime::note_listing("tool");
        self.write(
            ctx,
            Some(child),
            "tools scope parent",
            true,
            move |store| {
                if let Some(&existing) = store.parents.get(&child) {
                    return Err(RegisterError::ParentAlreadyBound {
                        child,
                        parent: existing,
                    });
                }
                if store.chain(parent).contains(&child) {
                    return Err(RegisterError::ParentCycle { child, parent });
                }
                store.parents.insert(child, parent);
                Ok(())
            },
            move |store, ()| {
                if store.parents.get(&child) == Some(&parent) {
                    store.parents.remove(&child);
                }
            },
        )
    }

    /// `scope` and the parents bound above it, nearest first.
    pub fn chain(&self, scope: ScopeKey) -> Vec<ScopeKey> {
        cordis_runtime::note_listing("tool");
        self.inner.store().chain(scope)
    }

    /// The parent bound to `scope`, if any.
    pub fn parent_of(&self, scope: ScopeKey) -> Option<ScopeKey> {
        cordis_runtime::note_listing("tool");
        self.inner.store().parents.get(&scope).copied()
    }

    /// True when `scope` has a layer (it is dropped when its last entry unwinds).
    pub fn has_layer(&self, scope: ScopeKey) -> bool {
        cordis_runtime::note_listing("tool");
        self.inner.store().scoped.contains_key(&scope)
    }

    /// The capability catalog of `scope`: visible schemas, sorted by UTF-16 code units.
    pub fn schemas(&self, scope: Option<ScopeKey>) -> Vec<ToolSchema> {
        cordis_runtime::note_listing("tool");
        schemas_of(&self.inner.view(scope).visible)
    }

    /// The visible tool `name` in `scope`.
    pub fn get(&self, name: &str, scope: Option<ScopeKey>) -> Option<ToolSchema> {
        note_tool_read(name);
        self.inner
            .visible_tool(scope, name)
            .map(|r| r.def.schema.clone())
    }

    /// What this registry offers the prompt assembly for `scope`: schemas plus known names.
    pub fn provide_for(&self, scope: Option<ScopeKey>) -> ToolProviderResult {
        cordis_runtime::note_listing("tool");
        self.inner.provider_result(scope)
    }

    /// The write primitive: `apply` under the lock; on success its undo becomes an effect of
    /// `ctx`'s scope, labelled `label` (`tools <what>`). An emptied layer is dropped, and
    /// `tools/change` follows every change.
    pub(crate) fn write<K: Send + 'static>(
        &self,
        ctx: &Context,
        scope: Option<ScopeKey>,
        label: &'static str,
        notify: bool,
        apply: impl FnOnce(&mut Store) -> Result<K, RegisterError>,
        undo: impl FnOnce(&mut Store, K) + Send + 'static,
    ) -> Result<EffectHandle, RegisterError> {
        if !ctx.is_live() {
            return Err(RegisterError::ScopeGone);
        }
        let key = {
            let mut store = self.inner.store();
            let result = apply(&mut store);
            // A failed write may have created the layer it meant to fill.
            store.drop_if_empty(scope);
            result?
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let handle = ctx.effect(label, move || {
            let Some(inner) = weak.upgrade() else {
                return;
            };
            {
                let mut store = inner.store();
                undo(&mut store, key);
                store.drop_if_empty(scope);
            }
            if notify {
                inner.ctx.emit(ToolsChange { scope });
            }
        });
        if notify {
            self.inner.ctx.emit(ToolsChange { scope });
        }
        Ok(handle)
    }
}

impl Store {
    pub(crate) fn layer_mut_existing(&mut self, scope: Option<ScopeKey>) -> Option<&mut Layer> {
        match scope {
            None => Some(&mut self.global),
            Some(key) => self.scoped.get_mut(&key),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use cordis_runtime::Context;

    use super::*;
    use crate::test_support::{names, tool};

    fn key(ctx: &Context) -> ScopeKey {
        ScopeKey::from(ctx.scope_id())
    }

    #[tokio::test]
    async fn scope_disposal_removes_its_tools_and_drops_the_emptied_layer() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let agent = root.child_scope("agent");
        let actx = agent.context().unwrap();
        let a = key(&actx);
        let _ = reg.register(&root, tool("global")).unwrap();
        let _ = reg.register_scoped(&actx, a, tool("mine")).unwrap();
        assert!(reg.has_layer(a));
        assert_eq!(names(&reg.schemas(Some(a))), ["global", "mine"]);
        agent.dispose();
        assert!(!reg.has_layer(a), "an emptied layer is dropped");
        assert_eq!(names(&reg.schemas(Some(a))), ["global"]);
        root.dispose();
        assert_eq!(names(&reg.schemas(None)), Vec::<String>::new());
        assert!(root.live().is_zero());
    }

    #[tokio::test]
    async fn a_plugin_under_a_realm_registers_into_that_realm_and_only_its_joiners_see_it() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.register(&root, tool("global")).unwrap();
        let standing = root.child_realm("preset:a");
        let s = key(&standing.context().unwrap());
        let row = standing.context().unwrap().child_scope("row");
        let rctx = row.context().unwrap();
        let _ = reg.register(&rctx, tool("mine")).unwrap();
        // The same name in another realm is another layer: no collision.
        let other = root.child_realm("preset:b");
        let o = key(&other.context().unwrap());
        let _ = reg
            .register(&other.context().unwrap(), tool("mine"))
            .unwrap();
        assert_eq!(names(&reg.schemas(None)), ["global"], "not global");
        let (joined, stranger, joined_b) = (ScopeKey(1_000), ScopeKey(1_001), ScopeKey(1_002));
        let _ = reg.bind_parent(&root, joined, s).unwrap();
        let _ = reg.bind_parent(&root, joined_b, o).unwrap();
        assert_eq!(names(&reg.schemas(Some(joined))), ["global", "mine"]);
        assert_eq!(names(&reg.schemas(Some(stranger))), ["global"]);
        assert_eq!(reg.chain(joined), [joined, s]);
        // Presentation and restriction rows declare for the realm too.
        assert_eq!(declaring_key(&rctx), s);
        assert_eq!(declaring_key(&root), key(&root));
        row.dispose();
        assert_eq!(names(&reg.schemas(Some(joined))), ["global"]);
        assert_eq!(names(&reg.schemas(Some(joined_b))), ["global", "mine"]);
        root.dispose();
    }

    /// An entry scope labelled `label`, as the loader makes one.
    fn entry(root: &Context, label: &str) -> Context {
        use cordis_runtime::{FnPlugin, PluginOptions, Prepared};
        let handle = root.plugin_with(
            Prepared::new(FnPlugin::new(label, |_, ()| async { Ok(()) }), ()),
            PluginOptions {
                label: Some(label.to_owned()),
                ..PluginOptions::default()
            },
        );
        handle.context().unwrap()
    }

    #[tokio::test]
    async fn a_name_two_entries_register_is_withheld_in_either_order_and_released_to_the_survivor()
    {
        for first_one in [true, false] {
            let root = Context::root();
            let reg = ToolRegistry::new(root.clone());
            let (one, two) = (entry(&root, "one"), entry(&root, "two"));
            root.idle().await;
            let order = if first_one {
                [&one, &two]
            } else {
                [&two, &one]
            };
            for ctx in order {
                let _ = reg.register(ctx, tool("echo")).unwrap();
                let _ = reg
                    .register(ctx, tool(&format!("own_{}", ctx.label().unwrap())))
                    .unwrap();
            }
            assert_eq!(names(&reg.schemas(None)), ["own_one", "own_two"]);
            assert!(reg.get("echo", None).is_none());
            // toolOrder may still list the name: it is known, only withheld.
            let known = reg.provide_for(None).known_names.unwrap();
            assert_eq!(known, ["echo", "own_one", "own_two"]);
            let claim = Claim::tool("echo");
            assert_eq!(root.claim_holders(&claim), ["one", "two"]);
            // One entry registering the name twice is still its own error.
            let err = reg.register(&one, tool("echo")).unwrap_err();
            assert!(
                matches!(err, RegisterError::DuplicateGlobal { .. }),
                "{err}"
            );
            assert_eq!(root.claim_holders(&claim), ["one", "two"]);
            // A call of it says it is contested, and by whom, not that no such tool exists.
            let call = ToolCall {
                call_id: "c".into(),
                name: "echo".into(),
                arguments: serde_json::json!({}),
            };
            let r = reg.execute(call, None).await;
            assert_eq!(r.code.as_deref(), Some(crate::codes::UNKNOWN_TOOL));
            assert_eq!(
                r.content,
                "tool \"echo\" is contested: entries one and two each register it, so neither is offered until one of them leaves (cordis check names them)"
            );
            two.dispose();
            assert_eq!(names(&reg.schemas(None)), ["echo", "own_one"]);
            assert_eq!(reg.get("echo", None).unwrap().description, "echo tool");
            assert_eq!(root.claim_holders(&claim), ["one"]);
            root.dispose();
            assert!(root.live().is_zero());
        }
    }

    #[tokio::test]
    async fn guards_run_in_their_entries_place_order_whatever_order_they_were_added_in() {
        use cordis_runtime::{FnPlugin, PluginOptions, Prepared};
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let placed = |label: &str, place: u64| {
            root.plugin_with(
                Prepared::new(FnPlugin::new(label, |_, ()| async { Ok(()) }), ()),
                PluginOptions {
                    label: Some(label.to_owned()),
                    place: Some(place),
                    ..PluginOptions::default()
                },
            )
            .context()
            .unwrap()
        };
        let (late, early) = (placed("late", 1), placed("early", 0));
        root.idle().await;
        let _ = reg.guard(&late, None, |_, _| Some("late".into())).unwrap();
        let _ = reg
            .guard(&early, None, |_, _| Some("early".into()))
            .unwrap();
        let call = ToolCall {
            call_id: "c".into(),
            name: "t".into(),
            arguments: serde_json::json!({}),
        };
        let reasons: Vec<String> = reg
            .inner
            .guards(None)
            .iter()
            .filter_map(|g| g(&call, None))
            .collect();
        assert_eq!(reasons, ["early", "late"]);
        root.dispose();
    }

    #[tokio::test]
    async fn a_restriction_is_checked_against_the_final_composition_whenever_it_was_made() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        // Made before the tool it names exists (a row that applied first): not an error yet.
        let _ = reg
            .restrict(
                &root,
                ScopeKey(9),
                Restriction {
                    allow: None,
                    deny: Some(vec!["x".into()]),
                },
            )
            .unwrap();
        let unavailable = reg.provide_for(Some(ScopeKey(9))).unavailable.unwrap();
        assert_eq!(
            unavailable,
            "tools.restrict() names unknown global tool(s) \"x\"; known global tools: (none)"
        );
        let _ = reg.register(&root, tool("x")).unwrap();
        let _ = reg.register(&root, tool("y")).unwrap();
        let result = reg.provide_for(Some(ScopeKey(9)));
        assert!(result.unavailable.is_none(), "{:?}", result.unavailable);
        assert_eq!(names(&result.schemas), ["y"]);
        root.dispose();
    }

    #[tokio::test]
    async fn a_failed_write_does_not_leave_an_empty_layer() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.bind_parent(&root, ScopeKey(9), ScopeKey(8)).unwrap();
        let err = reg
            .bind_parent(&root, ScopeKey(8), ScopeKey(9))
            .unwrap_err();
        assert!(matches!(err, RegisterError::ParentCycle { .. }), "{err}");
        assert!(!reg.has_layer(ScopeKey(8)));
        root.dispose();
    }

    #[tokio::test]
    async fn the_nearest_scope_wins_a_name() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let (parent, child) = (ScopeKey(1), ScopeKey(2));
        let _ = reg.bind_parent(&root, child, parent).unwrap();
        let described = |d: &str| {
            let mut t = tool("bash");
            t.schema.description = d.to_owned();
            t
        };
        let _ = reg.register(&root, described("global")).unwrap();
        assert_eq!(reg.get("bash", Some(child)).unwrap().description, "global");
        let _ = reg
            .register_scoped(&root, parent, described("parent"))
            .unwrap();
        assert_eq!(reg.get("bash", Some(child)).unwrap().description, "parent");
        let own = reg
            .register_scoped(&root, child, described("child"))
            .unwrap();
        assert_eq!(reg.get("bash", Some(child)).unwrap().description, "child");
        assert_eq!(reg.get("bash", Some(parent)).unwrap().description, "parent");
        assert_eq!(reg.get("bash", None).unwrap().description, "global");
        own.dispose();
        assert_eq!(reg.get("bash", Some(child)).unwrap().description, "parent");
        root.dispose();
    }

    #[tokio::test]
    async fn restrictions_intersect_along_the_chain_and_never_hide_own_tools() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let (parent, child) = (ScopeKey(1), ScopeKey(2));
        let _ = reg.bind_parent(&root, child, parent).unwrap();
        for n in ["a", "b", "c", "d"] {
            let _ = reg.register(&root, tool(n)).unwrap();
        }
        let _ = reg.register_scoped(&root, child, tool("own")).unwrap();
        let allow = |names: &[&str]| Restriction {
            allow: Some(names.iter().map(|s| (*s).to_owned()).collect()),
            deny: None,
        };
        let _ = reg
            .restrict(&root, parent, allow(&["a", "b", "c"]))
            .unwrap();
        let _ = reg.restrict(&root, child, allow(&["b", "c", "d"])).unwrap();
        let deny = reg
            .restrict(
                &root,
                child,
                Restriction {
                    allow: None,
                    deny: Some(vec!["c".into()]),
                },
            )
            .unwrap();
        assert_eq!(names(&reg.schemas(Some(child))), ["b", "own"]);
        assert_eq!(names(&reg.schemas(Some(parent))), ["a", "b", "c"]);
        // The known names stay pre-restriction, so toolOrder may list a restricted tool.
        let provided = reg.provide_for(Some(child));
        assert_eq!(provided.known_names.unwrap(), ["a", "b", "c", "d", "own"]);
        deny.dispose();
        assert_eq!(names(&reg.schemas(Some(child))), ["b", "c", "own"]);
        root.dispose();
    }

    #[tokio::test]
    async fn restrict_rejects_an_empty_filter_run_code_and_unknown_names() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let s = ScopeKey(3);
        let _ = reg.register(&root, tool("bash")).unwrap();
        let _ = reg.register(&root, tool("alpha")).unwrap();
        let err = reg.restrict(&root, s, Restriction::default()).unwrap_err();
        assert_eq!(err, RegisterError::EmptyRestriction);
        assert!(
            err.to_string()
                .starts_with("tools.restrict({}) is a no-op: "),
            "{err}"
        );
        let err = reg
            .restrict(
                &root,
                s,
                Restriction {
                    allow: None,
                    deny: Some(vec![]),
                },
            )
            .unwrap_err();
        assert_eq!(err, RegisterError::EmptyRestriction);
        let err = reg
            .restrict(
                &root,
                s,
                Restriction {
                    allow: None,
                    deny: Some(vec![RUN_CODE.into()]),
                },
            )
            .unwrap_err();
        assert_eq!(err, RegisterError::RestrictRunCode);
        let _ = reg
            .restrict(
                &root,
                s,
                Restriction {
                    allow: Some(vec!["x".into(), "bash".into()]),
                    deny: None,
                },
            )
            .unwrap();
        assert_eq!(
            reg.provide_for(Some(s)).unavailable.unwrap(),
            "tools.restrict() names unknown global tool(s) \"x\"; known global tools: alpha, bash"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn reserved_empty_and_duplicate_names_are_rejected() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        assert_eq!(
            reg.register(&root, tool(RUN_CODE)).unwrap_err().to_string(),
            "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
        );
        assert_eq!(
            reg.register_scoped(&root, ScopeKey(1), tool(RUN_CODE))
                .unwrap_err(),
            RegisterError::ReservedRunCode
        );
        assert_eq!(
            reg.register(&root, tool("<unlisted-tools>")).unwrap_err(),
            RegisterError::ReservedRest
        );
        assert_eq!(
            reg.register(&root, tool("")).unwrap_err(),
            RegisterError::EmptyName
        );
        let _ = reg.register(&root, tool("bash")).unwrap();
        assert_eq!(
            reg.register(&root, tool("bash")).unwrap_err().to_string(),
            "tool \"bash\" is already registered (for a per-agent variant, register through that agent's `agent.ctx` instead)"
        );
        let _ = reg
            .register_scoped(&root, ScopeKey(1), tool("bash"))
            .unwrap();
        assert_eq!(
            reg.register_scoped(&root, ScopeKey(1), tool("bash"))
                .unwrap_err()
                .to_string(),
            "tool \"bash\" is already registered in this scope"
        );
        let mut bad = tool("bad");
        bad.schema.parameters = serde_json::json!({"type": "string"}).into();
        assert_eq!(
            reg.register(&root, bad).unwrap_err().to_string(),
            "tool \"bad\" parameters must be a JSON Schema object with \"type\": \"object\""
        );
        let mut bad = tool("bad");
        bad.schema.parameters = serde_json::json!([]).into();
        assert!(reg.register(&root, bad).is_err());
        let zero = tool("zero").with_timeout(std::time::Duration::ZERO);
        assert!(matches!(
            reg.register(&root, zero),
            Err(RegisterError::ZeroTimeout { .. })
        ));
        root.dispose();
    }

    #[tokio::test]
    async fn parents_bind_once_without_cycles_and_unwind_with_their_scope() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let binder = root.child_scope("binder");
        let bctx = binder.context().unwrap();
        let (a, b, c) = (ScopeKey(1), ScopeKey(2), ScopeKey(3));
        let _ = reg.bind_parent(&bctx, b, a).unwrap();
        let _ = reg.bind_parent(&bctx, c, b).unwrap();
        assert!(matches!(
            reg.bind_parent(&bctx, b, c),
            Err(RegisterError::ParentAlreadyBound { .. })
        ));
        assert_eq!(
            reg.bind_parent(&bctx, a, c).unwrap_err(),
            RegisterError::ParentCycle {
                child: a,
                parent: c
            }
        );
        assert!(matches!(
            reg.bind_parent(&bctx, a, a),
            Err(RegisterError::ParentCycle { .. })
        ));
        binder.dispose();
        assert_eq!(reg.parent_of(b), None);
        assert_eq!(
            reg.bind_parent(&bctx, b, a).unwrap_err(),
            RegisterError::ScopeGone
        );
        root.dispose();
    }

    #[tokio::test]
    async fn every_visible_change_emits_tools_change() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let _ = root.on::<ToolsChange>(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
        });
        let h = reg.register(&root, tool("a")).unwrap();
        let g = reg.guard(&root, None, |_, _| None).unwrap();
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "guards do not change visibility"
        );
        h.dispose();
        g.dispose();
        assert_eq!(count.load(Ordering::SeqCst), 2);
        root.dispose();
    }

    /// The provider result of a native scope as the general path computes it: the owned view,
    /// fully sorted by UTF-16 code units.
    fn reference_result(reg: &ToolRegistry, scope: Option<ScopeKey>) -> (Vec<String>, Vec<String>) {
        let view = reg.inner.view(scope);
        let mut known: Vec<String> = view.known.into_iter().collect();
        sort_by_name_utf16(&mut known, |s| s);
        let mut schemas: Vec<String> = view.visible.into_keys().collect();
        sort_by_name_utf16(&mut schemas, |s| s);
        (schemas, known)
    }

    #[tokio::test]
    async fn the_native_fast_path_gives_what_the_general_view_gives_after_every_change() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let (parent, child) = (ScopeKey(1), ScopeKey(2));
        let (one, two) = (entry(&root, "one"), entry(&root, "two"));
        root.idle().await;
        let check = |when: &str| {
            for scope in [None, Some(parent), Some(child)] {
                let fast = reg.provide_for(scope);
                assert!(fast.unavailable.is_none(), "{when}: {:?}", fast.unavailable);
                let got = (names(&fast.schemas), fast.known_names.unwrap());
                assert_eq!(got, reference_result(&reg, scope), "{when}, {scope:?}");
            }
        };
        let _ = reg.bind_parent(&root, child, parent).unwrap();
        let mut handles = Vec::new();
        for n in ["\u{FF5E}", "b", "\u{1F600}", "a", "\u{E000}x"] {
            handles.push(reg.register(&root, tool(n)).unwrap());
            check(&format!("after registering {n:?}"));
        }
        // A contested name: withheld, still known.
        let _ = reg.register(&one, tool("echo")).unwrap();
        let contest = reg.register(&two, tool("echo")).unwrap();
        check("contested");
        let _ = reg
            .register_scoped(&root, parent, tool("\u{1F601}"))
            .unwrap();
        let own = reg.register_scoped(&root, child, tool("b")).unwrap();
        let deny = reg
            .restrict(
                &root,
                child,
                Restriction {
                    allow: None,
                    deny: Some(vec!["a".into(), "\u{FF5E}".into()]),
                },
            )
            .unwrap();
        check("scoped tools and a restriction");
        assert_eq!(
            names(&reg.provide_for(Some(child)).schemas),
            ["b", "\u{1F600}", "\u{1F601}", "\u{E000}x"],
            "restricted, own tool shadowing, astral names before the private use area"
        );
        contest.dispose();
        own.dispose();
        deny.dispose();
        check("after withdrawals");
        for h in handles.drain(..2) {
            h.dispose();
        }
        check("after removing tools");
        root.dispose();
    }

    #[tokio::test]
    async fn a_registration_does_not_keep_its_tool_alive_past_the_registry() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let probe = Arc::new(());
        let held = probe.clone();
        let def = ToolDefinition::new(tool("t").schema, move |_, _| {
            let _ = &held;
            async { Ok(crate::ToolOutput::new("")) }
        });
        let handle = reg.register(&root, def).unwrap();
        assert_eq!(Arc::strong_count(&probe), 2);
        // The registering scope still holds the registration's undo; the tool goes with the
        // registry that owned it.
        drop(reg);
        assert_eq!(Arc::strong_count(&probe), 1);
        handle.dispose();
        root.dispose();
    }

    #[test]
    fn the_utf16_sort_skips_only_names_already_in_order() {
        let mut ascii = vec!["a", "b", "c"];
        sort_utf16(&mut ascii, |s| s);
        assert_eq!(ascii, ["a", "b", "c"]);
        // In byte order, an astral character sorts after U+FF5E; in UTF-16, before.
        let mut astral = vec!["a", "\u{FF5E}", "\u{1F600}"];
        sort_utf16(&mut astral, |s| s);
        assert_eq!(astral, ["a", "\u{1F600}", "\u{FF5E}"]);
    }

    #[tokio::test]
    async fn schemas_sort_by_utf16_code_units() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        for n in ["\u{FF5E}", "\u{1F600}", "b", "a"] {
            let _ = reg.register(&root, tool(n)).unwrap();
        }
        assert_eq!(
            names(&reg.schemas(None)),
            ["a", "b", "\u{1F600}", "\u{FF5E}"]
        );
        root.dispose();
    }

    #[tokio::test]
    async fn a_parameters_value_that_is_not_a_valid_schema_is_refused_at_registration() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let with = |parameters: serde_json::Value| {
            let mut t = tool("bad");
            t.schema.parameters = parameters.into();
            t
        };
        let err = reg
            .register(
                &root,
                with(serde_json::json!({"type": "object", "properties": {"a": {"type": "text"}}})),
            )
            .unwrap_err();
        assert!(
            matches!(err, RegisterError::InvalidSchema { .. }),
            "{err:?}"
        );
        // `validate` checks the same, so a plugin can vet a whole list before registering any.
        let probe =
            with(serde_json::json!({"type": "object", "properties": {"a": {"type": "text"}}}));
        assert_eq!(probe.validate().unwrap_err(), err);
        assert!(
            err.to_string()
                .starts_with("tool \"bad\" parameters are not a valid JSON Schema: "),
            "{err}"
        );
        let err = reg
            .register(
                &root,
                with(serde_json::json!({"type": "object", "required": "a"})),
            )
            .unwrap_err();
        assert!(
            matches!(err, RegisterError::InvalidSchema { .. }),
            "{err:?}"
        );
        // No reference is fetched: a schema must be self-contained.
        let err = reg
            .register(
                &root,
                with(serde_json::json!({"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}})),
            )
            .unwrap_err();
        assert!(
            matches!(err, RegisterError::InvalidSchema { .. }),
            "{err:?}"
        );
        let local = serde_json::json!({
            "type": "object",
            "$defs": {"s": {"type": "string"}},
            "properties": {"a": {"$ref": "#/$defs/s"}}
        });
        let _ = reg.register(&root, with(local)).unwrap();
        root.dispose();
    }

    #[tokio::test]
    async fn one_name_rule_refuses_whitespace_control_and_overlong_names() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        assert_eq!(
            reg.register(&root, tool("has space"))
                .unwrap_err()
                .to_string(),
            "invalid tool name \"has space\": names are 1 to 128 bytes without whitespace or control characters"
        );
        for bad in ["tab\t", "nl\n", "bell\u{7}", &"x".repeat(129)] {
            assert!(
                matches!(
                    crate::check_tool_name(bad),
                    Err(RegisterError::InvalidName { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(crate::check_tool_name(&"x".repeat(128)).is_ok());
        assert!(crate::check_tool_name("\u{1F600}").is_ok());
        root.dispose();
    }

    #[tokio::test]
    async fn register_scheduled_traces_the_tool_name() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.register_scheduled(&root, tool("traced")).await.unwrap();
        assert_eq!(reg.get("traced", None).unwrap().name, "traced");
        let traced = root.trace_details(Schedule::TRACE_REGISTER);
        assert_eq!(traced.len(), 1);
        assert!(traced[0].ends_with(": traced"), "{traced:?}");
        root.dispose();
    }
}
