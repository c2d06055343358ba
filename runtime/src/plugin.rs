//! Plugins: the unit a host loads. A plugin is applied in its own child scope.
//!
//! # Lifecycle of a plugin
//! 1. `ctx.plugin(p, config)` (or [`Context::plugin_with`] from a type-erased [`Prepared`])
//!    creates a child scope, an effect of the calling scope. Status `Pending`.
//! 2. When every required [`Inject`] names a provided service, the scope turns `Loading` and
//!    `apply` runs in a task of its own, after the schedule's `before-apply` point.
//! 3. `apply` returns `Ok` → `Active`; an error, panic or timeout → `Failed` (what it registered is
//!    unwound; siblings and the host are untouched).
//!    An apply may instead return a [`Deferred`] error: it cannot be active *yet*. What it
//!    registered is unwound, the scope is `Pending` with the reason in [`crate::ScopeInfo`],
//!    and a task of the scope applies it again after the delay the plugin asked for.
//! 4. A required service withdrawn → unwound back to `Pending`; it returns → step 2 again.
//! 5. Disposing the scope (or an ancestor) → `Disposed`, for good.

use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::context::Context;
use crate::effect::EffectKind;
use crate::error::{BoxError, ConfigError, Deferred, panic_message};
use crate::scope::{
    AddError, FailureKind, ScopeFailure, ScopeHandle, ScopeNode, ScopeStatus, Unwind, lock,
};

/// A service a plugin needs before it can apply.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inject {
    /// The service name.
    pub name: Cow<'static, str>,
    /// Required injections keep the plugin pending; optional ones do not.
    pub required: bool,
}

impl Inject {
    /// A service the plugin cannot apply without.
    pub const fn required(name: &'static str) -> Inject {
        Inject {
            name: Cow::Borrowed(name),
            required: true,
        }
    }

    /// A service the plugin uses when present.
    pub const fn optional(name: &'static str) -> Inject {
        Inject {
            name: Cow::Borrowed(name),
            required: false,
        }
    }

    /// A required injection with a runtime name (from a config file).
    pub fn required_named(name: impl Into<String>) -> Inject {
        Inject {
            name: Cow::Owned(name.into()),
            required: true,
        }
    }
}

/// A plugin: a name, a typed config, the services it injects, and an async `apply`.
///
/// `apply` may be called more than once over a scope's life (each time its injected services
/// come back), always with a fresh [`Context`] and the same config.
///
/// # Examples
/// ```
/// use cordis_runtime::prelude::*;
///
/// struct Hello;
/// impl Plugin for Hello {
///     type Config = String;
///     fn name(&self) -> &str { "hello" }
///     async fn apply(&self, ctx: Context, config: &String) -> Result<(), BoxError> {
///         let greeting = config.clone();
///         let _ = ctx.effect("say goodbye", move || drop(greeting));
///         Ok(())
///     }
/// }
/// ```
pub trait Plugin: Send + Sync + 'static {
    /// The configuration this plugin accepts; deserialized from the host's config value.
    type Config: DeserializeOwned + Send + Sync + 'static;

    /// The plugin's name, as the host's plugin table and introspection show it.
    fn name(&self) -> &str;

    /// Services this plugin needs; required ones keep it pending until they exist.
    fn inject(&self) -> &[Inject] {
        &[]
    }

    /// Work to do before any entry of a boot applies, outside the seeded schedule: a host awaits
    /// every entry's preload, then starts the applies. A plugin whose apply waits on the
    /// operating system (a library to open on another thread) does that wait here, so when it
    /// finishes can no longer change the interleaving a seed replays. Keep the result per
    /// [`Context::runtime_id`] of `root` and take it in `apply`; the default does nothing.
    ///
    /// # Cancel safety
    /// The host drops a preload that outlives its entry's timeout. Whatever it started must then
    /// either finish on its own or be found unfinished by `apply` (which fails the entry with a
    /// reason), never leave a half-kept result that `apply` would take as complete.
    fn preload(&self, root: &Context, config: &Self::Config) -> impl Future<Output = ()> + Send {
        let _ = (root, config);
        NoPreload
    }

    /// Services this plugin needs only with some configs (required, in addition to
    /// [`Plugin::inject`]), so a host makes the entry itself wait for them and can name them.
    fn needs(&self, config: &Self::Config) -> Vec<String> {
        let _ = config;
        Vec::new()
    }

    /// Services this plugin provides when applied with `config`, so a host can name an
    /// `inject` cycle (entries that would wait for each other forever) before loading anything.
    /// The default, nothing, only means a cycle through this plugin shows up as pending
    /// entries at run time instead.
    fn provides(&self, config: &Self::Config) -> Vec<String> {
        let _ = config;
        Vec::new()
    }

    /// Names other than services this plugin claims when applied with `config` (tools,
    /// sections, overrides; see [`crate::Claim`]), so a host refuses two entries claiming one
    /// name before anything loads instead of letting the first to register win. State every
    /// name the config determines; names only run time knows are claimed with
    /// [`Context::claim`] (the tool registry does it for every tool).
    fn claims(&self, config: &Self::Config) -> Vec<crate::Claim> {
        let _ = config;
        Vec::new()
    }

    /// Kinds of name (`"tool"`, `"section"`) this plugin may claim at run time beyond what
    /// [`Plugin::claims`] states: an MCP entry's tools, known once its server answers. `None`
    /// (the default) has not said, so a host assumes it may claim names of every kind whose
    /// registry it injects; `Some(vec![])` says [`Plugin::claims`] is the whole story. A
    /// permutation proof explores the relative order of entries whose claims may meet.
    fn open_claims(&self, config: &Self::Config) -> Option<Vec<&'static str>> {
        let _ = config;
        None
    }

    /// What applying with `config` starts outside this process or loads into it (a command, a
    /// library, a connection), one line each, for a person deciding whether to load the entry:
    /// an approval of a composition shows them. The default, nothing, is right for a plugin
    /// that only registers things.
    fn starts(&self, config: &Self::Config) -> Vec<String> {
        let _ = config;
        Vec::new()
    }

    /// What changing this entry's config from `old` to `new` while a session runs would let
    /// happen without a question that did not before, one line each (empty: nothing widens).
    /// `old` is `None` for a new entry, `new` `None` for one removed or disabled. A host refuses
    /// a reload that widens anything: permissions never widen by themselves (a command of the
    /// agent's could have written the file).
    ///
    /// The default: what the entry [`starts`](Plugin::starts) (a command, a library) that it did
    /// not start before. A plugin that decides or grants permissions says more.
    fn widens(&self, old: Option<&Self::Config>, new: Option<&Self::Config>) -> Vec<String> {
        match new {
            Some(new) => started_anew(old.map(|o| self.starts(o)), self.starts(new)),
            None => Vec::new(),
        }
    }

    /// Applies the plugin in `ctx`'s scope: register listeners, services, tools, tasks.
    ///
    /// # Errors
    /// Any error marks the scope failed and unwinds what was registered so far.
    ///
    /// # Cancel safety
    /// The runtime drops an apply that is still running when its entry's timeout passes, its
    /// scope is disposed, or a required service goes away. Everything registered through `ctx`
    /// is an effect of the scope and is unwound with it, so an apply needs care only with what
    /// it does outside `ctx` (a file it writes, a process it does not tie to the scope).
    fn apply<'a>(
        &'a self,
        ctx: Context,
        config: &'a Self::Config,
    ) -> impl Future<Output = Result<(), BoxError>> + Send + 'a;
}

/// The future of the default [`Plugin::preload`]: done at its first poll, and of size zero,
/// so boxing it ([`ErasedPlugin::preload_erased`]) allocates nothing.
struct NoPreload;

impl Future for NoPreload {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::task::Poll::Ready(())
    }
}

/// The lines of [`Plugin::widens`] for what `after` starts that `before` (an entry's earlier
/// [`Plugin::starts`], `None` for a new entry) did not.
pub fn started_anew(before: Option<Vec<String>>, after: Vec<String>) -> Vec<String> {
    let before = before.unwrap_or_default();
    after
        .into_iter()
        .filter(|s| !before.contains(s))
        .map(|s| format!("it would start {s}"))
        .collect()
}

/// A type-erased plugin, so a host can instantiate plugins by name from config values.
pub trait ErasedPlugin: Send + Sync + 'static {
    /// See [`Plugin::name`].
    fn name(&self) -> &str;
    /// See [`Plugin::inject`].
    fn inject(&self) -> &[Inject];
    /// Deserializes a config value into this plugin's config type.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the field path that does not fit.
    fn parse_config(
        &self,
        value: &serde_json::Value,
    ) -> Result<Arc<dyn Any + Send + Sync>, ConfigError>;
    /// Applies with a config produced by [`ErasedPlugin::parse_config`].
    fn apply_erased<'a>(
        &'a self,
        ctx: Context,
        config: &'a (dyn Any + Send + Sync),
    ) -> BoxFuture<'a, Result<(), BoxError>>;
    /// See [`Plugin::provides`]; a config of another type provides nothing.
    fn provides_erased(&self, config: &(dyn Any + Send + Sync)) -> Vec<String>;
    /// See [`Plugin::claims`]; a config of another type claims nothing.
    fn claims_erased(&self, config: &(dyn Any + Send + Sync)) -> Vec<crate::Claim>;
    /// See [`Plugin::open_claims`]; a config of another type has not said.
    fn open_claims_erased(&self, config: &(dyn Any + Send + Sync)) -> Option<Vec<&'static str>>;
    /// See [`Plugin::needs`]; a config of another type needs nothing more.
    fn needs_erased(&self, config: &(dyn Any + Send + Sync)) -> Vec<String>;
    /// See [`Plugin::starts`]; a config of another type starts nothing.
    fn starts_erased(&self, config: &(dyn Any + Send + Sync)) -> Vec<String>;
    /// See [`Plugin::widens`]; configs of another type widen nothing.
    fn widens_erased(
        &self,
        old: Option<&(dyn Any + Send + Sync)>,
        new: Option<&(dyn Any + Send + Sync)>,
    ) -> Vec<String>;
    /// See [`Plugin::preload`]; a config of another type preloads nothing.
    fn preload_erased<'a>(
        &'a self,
        root: &'a Context,
        config: &'a (dyn Any + Send + Sync),
    ) -> BoxFuture<'a, ()>;
}

impl<P: Plugin> ErasedPlugin for P {
    fn name(&self) -> &str {
        Plugin::name(self)
    }

    fn inject(&self) -> &[Inject] {
        Plugin::inject(self)
    }

    fn parse_config(
        &self,
        value: &serde_json::Value,
    ) -> Result<Arc<dyn Any + Send + Sync>, ConfigError> {
        parse::<P::Config>(value).map(|c| Arc::new(c) as Arc<dyn Any + Send + Sync>)
    }

    fn provides_erased(&self, config: &(dyn Any + Send + Sync)) -> Vec<String> {
        config
            .downcast_ref::<P::Config>()
            .map(|c| Plugin::provides(self, c))
            .unwrap_or_default()
    }

    fn claims_erased(&self, config: &(dyn Any + Send + Sync)) -> Vec<crate::Claim> {
        config
            .downcast_ref::<P::Config>()
            .map(|c| Plugin::claims(self, c))
            .unwrap_or_default()
    }

    fn open_claims_erased(&self, config: &(dyn Any + Send + Sync)) -> Option<Vec<&'static str>> {
        config
            .downcast_ref::<P::Config>()
            .and_then(|c| Plugin::open_claims(self, c))
    }

    fn needs_erased(&self, config: &(dyn Any + Send + Sync)) -> Vec<String> {
        config
            .downcast_ref::<P::Config>()
            .map(|c| Plugin::needs(self, c))
            .unwrap_or_default()
    }

    fn starts_erased(&self, config: &(dyn Any + Send + Sync)) -> Vec<String> {
        config
            .downcast_ref::<P::Config>()
            .map(|c| Plugin::starts(self, c))
            .unwrap_or_default()
    }

    fn widens_erased(
        &self,
        old: Option<&(dyn Any + Send + Sync)>,
        new: Option<&(dyn Any + Send + Sync)>,
    ) -> Vec<String> {
        let old = old.and_then(|c| c.downcast_ref::<P::Config>());
        let new = new.and_then(|c| c.downcast_ref::<P::Config>());
        Plugin::widens(self, old, new)
    }

    fn preload_erased<'a>(
        &'a self,
        root: &'a Context,
        config: &'a (dyn Any + Send + Sync),
    ) -> BoxFuture<'a, ()> {
        match config.downcast_ref::<P::Config>() {
            Some(config) => Box::pin(Plugin::preload(self, root, config)),
            None => Box::pin(NoPreload),
        }
    }

    fn apply_erased<'a>(
        &'a self,
        ctx: Context,
        config: &'a (dyn Any + Send + Sync),
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        match config.downcast_ref::<P::Config>() {
            Some(config) => Box::pin(self.apply(ctx, config)),
            None => Box::pin(async move {
                Err(format!(
                    "plugin \"{}\" was given a config of the wrong type",
                    Plugin::name(self)
                )
                .into())
            }),
        }
    }
}

/// Deserializes `value` as `T`, naming the failing field path.
///
/// An absent config (`null`) is tried as `null` first, then as an empty map, so plugins whose
/// config is a struct of defaults load without a `config:` key.
fn parse<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, ConfigError> {
    let attempt = |v: &serde_json::Value| {
        serde_path_to_error::deserialize::<_, T>(v).map_err(|e| ConfigError {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })
    };
    match attempt(value) {
        Err(first) if value.is_null() => {
            // A struct config with required fields says which one is missing; any other
            // mismatch is better explained by the null error.
            attempt(&serde_json::Value::Object(Default::default())).map_err(|second| {
                if second.message.starts_with("missing field") {
                    second
                } else {
                    first
                }
            })
        }
        other => other,
    }
}

/// A plugin with its config, ready to apply. Cheap to clone (every part is shared), so one
/// prepared entry can be applied in many runtimes.
#[derive(Clone)]
pub struct Prepared {
    /// The plugin.
    pub plugin: Arc<dyn ErasedPlugin>,
    /// Its parsed config.
    pub config: Arc<dyn Any + Send + Sync>,
    /// The plugin's name, shared by every scope applied from this value.
    name: Arc<str>,
}

impl Prepared {
    /// Pairs a typed plugin with its config.
    pub fn new<P: Plugin>(plugin: P, config: P::Config) -> Prepared {
        Prepared::erased(Arc::new(plugin), Arc::new(config))
    }

    /// Pairs a type-erased plugin with a config it parsed (see [`ErasedPlugin::parse_config`]).
    pub fn erased(plugin: Arc<dyn ErasedPlugin>, config: Arc<dyn Any + Send + Sync>) -> Prepared {
        let name = plugin.name().into();
        Prepared {
            plugin,
            config,
            name,
        }
    }
}

/// Parses `value` as `plugin`'s config.
///
/// # Errors
/// A [`ConfigError`] with the field path.
pub fn prepare(
    plugin: Arc<dyn ErasedPlugin>,
    value: &serde_json::Value,
) -> Result<Prepared, ConfigError> {
    let config = plugin.parse_config(value)?;
    Ok(Prepared::erased(plugin, config))
}

/// How to apply a plugin, beyond the plugin itself.
#[derive(Debug, Clone, Default)]
pub struct PluginOptions {
    /// A label for introspection and traces (the loader passes the entry id).
    pub label: Option<String>,
    /// Services required in addition to the plugin's own injections.
    pub inject: Vec<Inject>,
    /// Fail the apply if it takes longer (needs a runtime with time enabled).
    pub timeout: Option<Duration>,
    /// The scope's place among its siblings in canonical listener and guard order (the loader
    /// passes the entry's index in its plan); `None`: after every placed sibling, in creation
    /// order. See [`crate::OrderKey`].
    pub place: Option<u64>,
}

/// A plugin written as a plain async function of its context and config.
pub struct FnPlugin<C, F> {
    name: String,
    inject: Vec<Inject>,
    f: F,
    _config: PhantomData<fn() -> C>,
}

impl<C, F, Fut> FnPlugin<C, F>
where
    C: DeserializeOwned + Clone + Send + Sync + 'static,
    F: Fn(Context, C) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    /// Wraps `f` as a plugin called `name`.
    pub fn new(name: impl Into<String>, f: F) -> Self {
        FnPlugin {
            name: name.into(),
            inject: Vec::new(),
            f,
            _config: PhantomData,
        }
    }

    /// Adds an injection.
    pub fn inject(mut self, inject: Inject) -> Self {
        self.inject.push(inject);
        self
    }
}

impl<C, F, Fut> Plugin for FnPlugin<C, F>
where
    C: DeserializeOwned + Clone + Send + Sync + 'static,
    F: Fn(Context, C) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    type Config = C;

    fn name(&self) -> &str {
        &self.name
    }

    fn inject(&self) -> &[Inject] {
        &self.inject
    }

    fn apply<'a>(
        &'a self,
        ctx: Context,
        config: &'a C,
    ) -> impl Future<Output = Result<(), BoxError>> + Send + 'a {
        (self.f)(ctx, config.clone())
    }
}

/// What a plugin scope needs to (re)apply.
pub(crate) struct Runner {
    pub(crate) prepared: Prepared,
    /// Plugin injections plus extra ones, sorted and deduplicated.
    pub(crate) inject: Vec<Inject>,
    pub(crate) timeout: Option<Duration>,
}

impl Context {
    /// Applies `plugin` with `config` in a new child scope.
    ///
    /// Returns at once; the apply runs in its own task. Await [`ScopeHandle::settled`] or
    /// [`Context::idle`] to see the outcome.
    pub fn plugin<P: Plugin>(&self, plugin: P, config: P::Config) -> ScopeHandle {
        self.plugin_with(Prepared::new(plugin, config), PluginOptions::default())
    }

    /// Applies a plain async function as a plugin called `name`.
    pub fn plugin_fn<C, F, Fut>(&self, name: &str, f: F, config: C) -> ScopeHandle
    where
        C: DeserializeOwned + Clone + Send + Sync + 'static,
        F: Fn(Context, C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.plugin(FnPlugin::new(name, f), config)
    }

    /// Applies a prepared (type-erased) plugin with options in a new child scope.
    pub fn plugin_with(&self, prepared: Prepared, options: PluginOptions) -> ScopeHandle {
        // The extra injections' vector takes the plugin's own (one allocation at most).
        let mut inject = options.inject;
        inject.extend_from_slice(prepared.plugin.inject());
        inject.sort();
        inject.dedup_by(|a, b| a.name == b.name && a.required == b.required);
        let name = prepared.name.clone();
        let runner = Runner {
            prepared,
            inject,
            timeout: options.timeout,
        };
        let node = self.child_node(
            name,
            options.label.map(Into::into),
            Some(runner),
            false,
            options.place,
        );
        if let Some(runner) = &node.runner {
            lock(&self.node.shared.services).add_dependent(node.id, &runner.inject);
        }
        start(&node);
        ScopeHandle { node }
    }

    /// Creates an active child scope with no plugin: a place to hang registrations that must
    /// unwind together (an agent's scope, a preset's standing scope).
    pub fn child_scope(&self, name: &str) -> ScopeHandle {
        let node = self.child_node(name.into(), None, None, false, None);
        start(&node);
        ScopeHandle { node }
    }

    /// Like [`Context::child_scope`], at `place` among its siblings in canonical listener
    /// order (see [`crate::OrderKey`]): a host's group entry.
    pub fn child_scope_at(&self, name: &str, place: u64) -> ScopeHandle {
        let node = self.child_node(name.into(), None, None, false, Some(place));
        start(&node);
        ScopeHandle { node }
    }

    /// Like [`Context::child_scope`], but the new scope is a realm of its own: it and every
    /// scope created under it report it from [`Context::realm`] (a preset's standing scope).
    pub fn child_realm(&self, name: &str) -> ScopeHandle {
        let node = self.child_node(name.into(), None, None, true, None);
        start(&node);
        ScopeHandle { node }
    }

    fn child_node(
        &self,
        name: Arc<str>,
        label: Option<Arc<str>>,
        runner: Option<Runner>,
        own_realm: bool,
        place: Option<u64>,
    ) -> Arc<ScopeNode> {
        let shared = self.node.shared.clone();
        let node = ScopeNode::new(
            shared,
            Some(&self.node),
            name,
            label,
            runner,
            ScopeStatus::Pending,
            crate::scope::Placement { own_realm, place },
        );
        let child = node.clone();
        let added = self.node.add_effect::<()>(
            self.generation,
            EffectKind::Scope,
            Cow::Borrowed("scope"),
            || {
                Ok(Box::new(move || {
                    child.unwind(Unwind::Dispose);
                }))
            },
        );
        match added {
            Ok(id) => {
                let _ = node.slot.set(id);
            }
            Err(AddError::Gone | AddError::Refused(())) => {
                node.unwind(Unwind::Dispose);
            }
        }
        node
    }
}

/// Starts a pending scope if its required services are all there.
pub(crate) fn start(node: &Arc<ScopeNode>) {
    let Some(runner) = &node.runner else {
        let mut st = lock(&node.state);
        if st.status == ScopeStatus::Pending {
            st.generation += 1;
            st.status = ScopeStatus::Active;
            drop(st);
            node.shared.status_changed();
        }
        return;
    };
    let shared = &node.shared;
    if !shared.services_ready(&runner.inject) {
        return;
    }
    let started = std::time::Instant::now();
    let generation = {
        let mut st = lock(&node.state);
        if st.status != ScopeStatus::Pending {
            return;
        }
        st.generation += 1;
        st.status = ScopeStatus::Loading;
        st.apply_started = Some(started);
        st.generation
    };
    shared.loading_started();
    node.shared.status_changed();

    let ctx = Context {
        node: node.clone(),
        generation,
    };
    let task_node = node.clone();
    let prepared = runner.prepared.clone();
    let timeout = runner.timeout;
    let fut = async move {
        let node = task_node;
        node.shared
            .schedule
            .point(crate::Schedule::BEFORE_APPLY)
            .await;
        ctx.trace(crate::Schedule::TRACE_APPLY, "");
        let apply =
            AssertUnwindSafe(prepared.plugin.apply_erased(ctx, &*prepared.config)).catch_unwind();
        let outcome = match timeout {
            // The limit counts from here, after the `before-apply` point (as a timeout made here
            // would), on tokio's clock (paused in tests, as `tokio::time::timeout`'s is).
            Some(limit) => {
                match ApplyDeadline::new(apply, tokio::time::Instant::now() + limit).await {
                    Some(outcome) => outcome.map_err(|p| panic_message(&*p)).map(Some),
                    None => Ok(None),
                }
            }
            None => apply.await.map_err(|p| panic_message(&*p)).map(Some),
        };
        let end = match outcome {
            Ok(Some(Ok(()))) => End::Active,
            Ok(Some(Err(error))) => match error.downcast::<Deferred>() {
                Ok(deferred) => End::Deferred(*deferred),
                Err(error) => End::Failed(ScopeFailure {
                    kind: FailureKind::Error,
                    message: error.to_string(),
                }),
            },
            Err(message) => End::Failed(ScopeFailure {
                kind: FailureKind::Panic,
                message,
            }),
            Ok(None) => End::Failed(ScopeFailure {
                kind: FailureKind::Timeout,
                message: format!(
                    "apply did not finish within {} ms (timeout)",
                    timeout.unwrap_or_default().as_millis()
                ),
            }),
        };
        finish(&node, generation, end);
    };
    // A span no subscriber wants costs nothing to skip; `Instrumented` would enter and exit it
    // on every poll.
    let span = tracing::info_span!("scope", id = node.id.0, plugin = %node.name);
    let task = if span.is_disabled() {
        crate::observe::spawn_attributed(node, fut)
    } else {
        crate::observe::spawn_attributed(node, fut.instrument(span))
    };
    let mut st = lock(&node.state);
    if st.generation == generation && st.status == ScopeStatus::Loading {
        st.apply_task = Some(task.abort_handle());
    }
}

/// An apply bounded by its entry's timeout, like `tokio::time::timeout` but arming no timer
/// for an apply that never waits on anything but the seeded schedule (almost every apply).
///
/// A timer is only needed while the apply waits for something outside it. Each poll polls the
/// apply first (finishing in time wins, as with `tokio::time::timeout`); when it returns
/// `Pending`:
/// - if a schedule point woke this task itself during that poll ([`crate::schedule`]'s
///   self-wake), the task is already queued to be polled again, so no timer is needed to be
///   polled again; every [`CLOCK_EVERY`]th such pend reads the clock, so an apply that only
///   ever yields (a loop of registrations) still fails once its time is up;
/// - otherwise the apply waits for an outside event: the timer is armed for the deadline
///   and from then on polled after the apply as
///   `tokio::time::timeout` does (unconstrained by tokio's cooperative budget, as `timeout`
///   polls it when the apply spent the budget).
///
/// A pend is only taken for a schedule yield when the waker the point woke is the one this
/// future was polled with; a combinator that substitutes wakers makes the pend look like an
/// outside wait, which only arms the timer (the old cost), never skips it.
///
/// The deadline is on tokio's clock, so a paused clock (tests) stops it as it stopped
/// `tokio::time::timeout`.
struct ApplyDeadline<F> {
    apply: F,
    deadline: tokio::time::Instant,
    timer: Option<std::pin::Pin<Box<tokio::task::Unconstrained<tokio::time::Sleep>>>>,
    yields: u32,
}

/// How many schedule-yield pends an [`ApplyDeadline`] lets pass between clock reads.
const CLOCK_EVERY: u32 = 64;

impl<F: Future + Unpin> ApplyDeadline<F> {
    fn new(apply: F, deadline: tokio::time::Instant) -> Self {
        ApplyDeadline {
            apply,
            deadline,
            timer: None,
            yields: 0,
        }
    }
}

impl<F: Future + Unpin> Future for ApplyDeadline<F> {
    /// `None`: the limit passed first.
    type Output = Option<F::Output>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        let this = self.get_mut();
        crate::schedule::clear_self_wake();
        if let Poll::Ready(out) = std::pin::Pin::new(&mut this.apply).poll(cx) {
            return Poll::Ready(Some(out));
        }
        if this.timer.is_none() {
            if crate::schedule::self_woken(cx.waker()) {
                this.yields = this.yields.wrapping_add(1);
                if !this.yields.is_multiple_of(CLOCK_EVERY) {
                    return Poll::Pending;
                }
                if tokio::time::Instant::now() < this.deadline {
                    return Poll::Pending;
                }
                return Poll::Ready(None);
            }
            this.timer = Some(Box::pin(tokio::task::unconstrained(
                tokio::time::sleep_until(this.deadline),
            )));
        }
        match this.timer.as_mut().map(|t| t.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

/// How an apply ended.
enum End {
    Active,
    Deferred(Deferred),
    Failed(ScopeFailure),
}

/// Records the outcome of the apply of `generation`, unless the scope moved on meanwhile.
fn finish(node: &Arc<ScopeNode>, generation: u64, end: End) {
    {
        let mut st = lock(&node.state);
        if st.generation != generation || st.status != ScopeStatus::Loading {
            return;
        }
        st.apply_task = None;
        if let End::Active = end {
            st.status = ScopeStatus::Active;
            st.deferrals = 0;
            st.load_time = st.apply_started.take().map(|t| t.elapsed());
        }
    }
    match end {
        End::Active => {
            node.shared.status_changed();
            node.shared.loading_done();
        }
        End::Deferred(Deferred {
            reason,
            retry_after,
        }) => {
            tracing::debug!(scope = node.id.0, plugin = %node.name, %reason, "plugin deferred");
            node.unwind(Unwind::Deferred(reason));
            schedule_retry(node, retry_after);
        }
        End::Failed(failure) => {
            tracing::debug!(scope = node.id.0, plugin = %node.name, error = %failure, "plugin failed");
            node.unwind(Unwind::Failed(failure));
        }
    }
}

/// Applies a deferred scope again after `delay`, from a task the scope owns: any unwind
/// (disposal, a withdrawn service) aborts it, and it does nothing if the scope moved on.
fn schedule_retry(node: &Arc<ScopeNode>, delay: Duration) {
    let mut st = lock(&node.state);
    if st.status != ScopeStatus::Pending || st.waiting.is_none() {
        return;
    }
    let generation = st.generation;
    let weak = Arc::downgrade(node);
    let retry = crate::task::counted(&node.shared, async move {
        tokio::time::sleep(delay).await;
        let Some(node) = weak.upgrade() else { return };
        {
            let mut st = lock(&node.state);
            if st.generation != generation || st.status != ScopeStatus::Pending {
                return;
            }
            // This task is finishing; `start` stores the new apply's handle.
            st.apply_task = None;
        }
        start(&node);
    });
    st.apply_task = Some(node.shared.handle.spawn(retry).abort_handle());
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::prelude::*;
    use crate::testing::both_runtimes;

    struct Marker;
    impl Service for Marker {
        const NAME: &'static str = "marker";
    }

    /// Applies `prepared` under `root` with a 20 ms limit and waits (30 s at most) for it to
    /// fail; its failure.
    async fn fails_by_its_20_ms_limit(root: &Context, prepared: Prepared) -> ScopeFailure {
        let h = root.plugin_with(
            prepared,
            PluginOptions {
                timeout: Some(Duration::from_millis(20)),
                ..Default::default()
            },
        );
        let settled = tokio::time::timeout(Duration::from_secs(30), h.settled())
            .await
            .expect("the apply's timeout never fired");
        assert_eq!(settled, ScopeStatus::Failed);
        h.failure().expect("a failed scope says why")
    }

    both_runtimes! {
        async fn a_realm_reaches_every_scope_under_it_and_no_other() {
            let root = Context::root();
            assert_eq!(root.realm(), None);
            let standing = root.child_realm("standing");
            let sctx = standing.context().unwrap();
            assert_eq!(sctx.realm(), Some(standing.id()));
            let seen = Arc::new(Mutex::new(None));
            let s2 = seen.clone();
            let row = sctx.plugin_fn("row", move |ctx, (): ()| {
                let s2 = s2.clone();
                async move {
                    let inner = ctx.child_scope("inner");
                    *s2.lock().unwrap() = Some((ctx.realm(), inner.context().unwrap().realm()));
                    Ok(())
                }
            }, ());
            assert_eq!(row.settled().await, ScopeStatus::Active);
            let want = Some(standing.id());
            assert_eq!(*seen.lock().unwrap(), Some((want, want)));
            // A realm inside a realm is its own.
            let nested = sctx.child_realm("nested");
            assert_eq!(nested.context().unwrap().realm(), Some(nested.id()));
            // A plain sibling scope is outside it.
            assert_eq!(root.child_scope("plain").context().unwrap().realm(), None);
            root.dispose();
        }

        async fn a_plugin_applies_in_a_child_scope_and_becomes_active() {
            let root = Context::root();
            let h = root.plugin_fn("hello", |ctx, n: u32| async move {
                let _ = ctx.effect("n", move || { let _ = n; });
                Ok(())
            }, 3);
            assert_eq!(h.settled().await, ScopeStatus::Active);
            assert_eq!(h.info().effects.custom, 1);
            assert_eq!(h.info().parent, Some(root.scope_id()));
            root.dispose();
            assert_eq!(h.status(), ScopeStatus::Disposed);
            assert!(root.live().is_zero(), "{:?}", root.live());
        }

        async fn a_failing_apply_marks_only_its_scope_failed_and_unwinds_it() {
            let root = Context::root();
            let undone = Arc::new(AtomicUsize::new(0));
            let u = undone.clone();
            let bad = root.plugin_fn("bad", move |ctx, _: ()| {
                let u = u.clone();
                async move {
                    let _ = ctx.effect("x", move || { u.fetch_add(1, Ordering::SeqCst); });
                    Err("disk on fire".into())
                }
            }, ());
            let good = root.plugin_fn("good", |_, _: ()| async { Ok(()) }, ());
            root.idle().await;
            assert_eq!(bad.status(), ScopeStatus::Failed);
            let failure = bad.failure().unwrap();
            assert_eq!(failure.kind, FailureKind::Error);
            assert_eq!(failure.to_string(), "disk on fire");
            assert_eq!(undone.load(Ordering::SeqCst), 1, "registrations before the failure unwound");
            assert_eq!(bad.info().effects.total, 0);
            assert_eq!(good.status(), ScopeStatus::Active);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn a_panicking_apply_is_contained() {
            let root = Context::root();
            let bad = root.plugin_fn("panics", |_, _: ()| async { panic!("kaboom") }, ());
            let good = root.plugin_fn("good", |_, _: ()| async { Ok(()) }, ());
            root.idle().await;
            assert_eq!(bad.status(), ScopeStatus::Failed);
            assert_eq!(bad.failure().unwrap().kind, FailureKind::Panic);
            assert!(bad.failure().unwrap().to_string().contains("kaboom"));
            assert_eq!(good.status(), ScopeStatus::Active);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn disposing_a_deferred_scope_aborts_its_retry() {
            let root = Context::root();
            let applies = Arc::new(AtomicUsize::new(0));
            let a = applies.clone();
            let h = root.plugin_fn("down", move |_, _: ()| {
                let a = a.clone();
                async move {
                    a.fetch_add(1, Ordering::SeqCst);
                    Err(Deferred::new("server down", Duration::from_secs(3600)).into())
                }
            }, ());
            root.idle().await;
            assert_eq!(h.status(), ScopeStatus::Pending);
            assert_eq!(h.info().waiting.as_deref(), Some("server down"));
            assert!(h.failure().is_none());
            assert_eq!(applies.load(Ordering::SeqCst), 1);
            h.dispose();
            // The retry timer is a task of the scope: were it not aborted, this would wait an hour.
            tokio::time::timeout(Duration::from_secs(30), root.tasks_finished())
                .await
                .expect("the retry task outlived the disposal");
            assert_eq!(h.status(), ScopeStatus::Disposed);
            assert_eq!(h.info().waiting, None);
            root.dispose();
            assert!(root.live().is_zero(), "{:?}", root.live());
        }

        async fn a_hanging_apply_times_out_as_failed() {
            let root = Context::root();
            let prepared = Prepared::new(
                FnPlugin::new("hang", |_, _: ()| async {
                    std::future::pending::<()>().await;
                    Ok(())
                }),
                (),
            );
            let h = root.plugin_with(prepared, PluginOptions {
                timeout: Some(Duration::from_millis(20)),
                ..Default::default()
            });
            assert_eq!(h.settled().await, ScopeStatus::Failed);
            let f = h.failure().unwrap();
            assert_eq!(f.kind, FailureKind::Timeout);
            assert!(f.message.contains("20 ms"), "{f}");
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn an_apply_that_waits_after_schedule_yields_still_times_out() {
            // The schedule's yields arm no timer; the real wait after them must.
            let root = Context::root_with(crate::Schedule::new(crate::Policy::Random, 3));
            let prepared = Prepared::new(
                FnPlugin::new("yields-then-hangs", |ctx: Context, _: ()| async move {
                    for _ in 0..40 {
                        ctx.schedule().point(crate::Schedule::BEFORE_REGISTER).await;
                    }
                    std::future::pending::<()>().await;
                    Ok(())
                }),
                (),
            );
            let f = fails_by_its_20_ms_limit(&root, prepared).await;
            assert_eq!(f.kind, FailureKind::Timeout);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn an_apply_that_only_ever_yields_to_the_schedule_still_times_out() {
            let root = Context::root_with(crate::Schedule::new(crate::Policy::Random, 5));
            let prepared = Prepared::new(
                FnPlugin::new("spins", |ctx: Context, _: ()| async move {
                    loop {
                        ctx.schedule().point(crate::Schedule::BEFORE_REGISTER).await;
                    }
                }),
                (),
            );
            let f = fails_by_its_20_ms_limit(&root, prepared).await;
            assert_eq!(f.kind, FailureKind::Timeout);
            assert!(f.message.contains("20 ms"), "{f}");
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn a_plugin_goes_pending_active_pending_active_as_its_service_comes_and_goes() {
            let root = Context::root();
            let applies = Arc::new(Mutex::new(Vec::new()));
            let a = applies.clone();
            let dependent = root.plugin(
                FnPlugin::new("dependent", move |ctx: Context, _: ()| {
                    let a = a.clone();
                    async move {
                        let m = ctx.require::<Marker>()?;
                        a.lock().unwrap().push(Arc::strong_count(&m));
                        let _ = ctx.effect("uses marker", || {});
                        Ok(())
                    }
                })
                .inject(Inject::required("marker")),
                (),
            );
            root.idle().await;
            assert_eq!(dependent.status(), ScopeStatus::Pending);
            assert_eq!(dependent.info().missing, ["marker"]);

            let provider = root.plugin_fn("provider", |ctx, _: ()| async move {
                ctx.provide(Marker)?;
                Ok(())
            }, ());
            root.idle().await;
            assert_eq!(provider.status(), ScopeStatus::Active);
            assert_eq!(dependent.status(), ScopeStatus::Active);
            let first_id = dependent.id();

            provider.dispose();
            assert_eq!(dependent.status(), ScopeStatus::Pending);
            assert_eq!(dependent.info().effects.total, 0, "unwound back to pending");
            assert!(!root.has_service("marker"));

            let _again = root.plugin_fn("provider", |ctx, _: ()| async move {
                ctx.provide(Marker)?;
                Ok(())
            }, ());
            root.idle().await;
            assert_eq!(dependent.status(), ScopeStatus::Active);
            assert_eq!(dependent.id(), first_id, "same scope, applied again");
            assert_eq!(applies.lock().unwrap().len(), 2);
            root.dispose();
            assert!(root.live().is_zero(), "{:?}", root.live());
        }

        async fn optional_injections_do_not_block() {
            let root = Context::root();
            let h = root.plugin(
                FnPlugin::new("opt", |_, _: ()| async { Ok(()) }).inject(Inject::optional("nobody")),
                (),
            );
            assert_eq!(h.settled().await, ScopeStatus::Active);
            root.dispose();
        }

        async fn disposing_a_loading_scope_aborts_its_apply() {
            let root = Context::root();
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let rx = Arc::new(Mutex::new(Some(rx)));
            let resumed = Arc::new(AtomicUsize::new(0));
            let started = Arc::new(AtomicUsize::new(0));
            let (r, st) = (resumed.clone(), started.clone());
            let h = root.plugin_fn("slow", move |ctx, _: ()| {
                let rx = rx.lock().unwrap().take();
                let (r, st) = (r.clone(), st.clone());
                async move {
                    st.fetch_add(1, Ordering::SeqCst);
                    if let Some(rx) = rx { let _ = rx.await; }
                    r.fetch_add(1, Ordering::SeqCst);
                    let _ = ctx.effect("late", || {});
                    Ok(())
                }
            }, ());
            // Abort stops a task between polls, not inside one: wait until the apply is parked
            // at its await (on a multi-thread runtime it may be mid-poll on another worker; a
            // resume from inside that poll is the late-effect case, tested on its own below).
            while started.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(h.status(), ScopeStatus::Loading);
            h.dispose();
            let _ = tx.send(());
            root.idle().await;
            // Give an apply that was wrongly left running every chance to resume.
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(h.status(), ScopeStatus::Disposed);
            // Aborted: the apply never ran past its await, so it registered nothing.
            assert_eq!(resumed.load(Ordering::SeqCst), 0);
            assert_eq!(root.live().effects, 0, "{:?}", root.live());
            root.dispose();
            assert!(root.live().is_zero(), "{:?}", root.live());
        }

        async fn an_effect_added_to_a_disposed_scope_is_undone_at_once() {
            let root = Context::root();
            let kept: Arc<Mutex<Option<Context>>> = Arc::new(Mutex::new(None));
            let k = kept.clone();
            let h = root.plugin_fn("keeper", move |ctx, _: ()| {
                let k = k.clone();
                async move {
                    *k.lock().unwrap() = Some(ctx);
                    Ok(())
                }
            }, ());
            root.idle().await;
            assert_eq!(h.status(), ScopeStatus::Active);
            h.dispose();
            let late = kept.lock().unwrap().take().unwrap();
            let undone = Arc::new(AtomicUsize::new(0));
            let u = undone.clone();
            let _ = late.effect("late", move || { u.fetch_add(1, Ordering::SeqCst); });
            assert_eq!(undone.load(Ordering::SeqCst), 1);
            assert_eq!(root.live().effects, 0, "{:?}", root.live());
            root.dispose();
            assert!(root.live().is_zero(), "{:?}", root.live());
        }

        async fn a_config_value_is_parsed_with_the_field_path_in_errors() {
            #[derive(serde::Deserialize, Clone)]
            #[allow(dead_code, reason = "the fields exist to be deserialized; only the error is read")]
            struct Cfg { timeout: u64, #[serde(default)] name: String }
            let plugin: Arc<dyn ErasedPlugin> = Arc::new(FnPlugin::new("cfg", |_, _: Cfg| async { Ok(()) }));
            let err = prepare(plugin.clone(), &serde_json::json!({"timeout": "soon"})).err().unwrap();
            assert_eq!(err.path, "timeout");
            assert!(err.to_string().starts_with("config.timeout: invalid type: string \"soon\""), "{err}");
            assert!(prepare(plugin.clone(), &serde_json::json!({"timeout": 5})).is_ok());
            let missing = prepare(plugin, &serde_json::Value::Null).err().unwrap();
            assert!(missing.to_string().contains("timeout"), "{missing}");
            let unit: Arc<dyn ErasedPlugin> = Arc::new(FnPlugin::new("unit", |_, _: ()| async { Ok(()) }));
            assert!(prepare(unit, &serde_json::Value::Null).is_ok());
        }
    }

    /// The apply's limit is on tokio's clock, as `tokio::time::timeout`'s was: with the clock
    /// paused, an apply that takes longer in real time than its limit (a slow machine) but no
    /// tokio time at all still finishes.
    #[tokio::test(start_paused = true)]
    async fn the_apply_limit_is_on_tokios_clock_not_the_wall_clock() {
        let root = Context::root_with(crate::Schedule::new(crate::Policy::Random, 5));
        let prepared = Prepared::new(
            FnPlugin::new("slow", |ctx: Context, _: ()| async move {
                for _ in 0..200 {
                    // Real time passes (a busy machine); tokio's paused clock does not.
                    std::thread::sleep(Duration::from_micros(200));
                    ctx.schedule().point(crate::Schedule::BEFORE_REGISTER).await;
                }
                Ok(())
            }),
            (),
        );
        let h = root.plugin_with(
            prepared,
            PluginOptions {
                timeout: Some(Duration::from_millis(10)),
                ..Default::default()
            },
        );
        assert_eq!(h.settled().await, ScopeStatus::Active, "{:?}", h.failure());
        root.dispose();
        assert!(root.live().is_zero());
    }

    #[tokio::test(start_paused = true)]
    async fn a_deferred_apply_waits_with_its_reason_and_is_retried_until_it_succeeds() {
        let root = Context::root();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let h = root.plugin_fn(
            "flaky",
            move |ctx: Context, _: ()| {
                let s = s.clone();
                async move {
                    let n = ctx.deferrals();
                    s.lock().unwrap().push(n);
                    let _ = ctx.effect("half-done", || {});
                    if n < 2 {
                        let reason = format!("server down (attempt {n})");
                        return Err(Deferred::new(reason, Duration::from_secs(5)).into());
                    }
                    Ok(())
                }
            },
            (),
        );
        let start = tokio::time::Instant::now();
        root.idle().await;
        let info = h.info();
        assert_eq!(info.status, ScopeStatus::Pending);
        assert_eq!(info.waiting.as_deref(), Some("server down (attempt 0)"));
        assert!(info.missing.is_empty());
        assert_eq!(
            info.effects.total, 0,
            "what the deferred apply registered is unwound"
        );
        assert!(h.failure().is_none());

        // Paused time: the clock moves only when every task waits, so this lands between retries.
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(h.status(), ScopeStatus::Pending);
        assert_eq!(h.info().waiting.as_deref(), Some("server down (attempt 1)"));

        assert_eq!(h.wait_for(ScopeStatus::Active).await, ScopeStatus::Active);
        assert_eq!(*seen.lock().unwrap(), [0, 1, 2]);
        assert!(
            start.elapsed() >= Duration::from_secs(10),
            "each retry waited its delay"
        );
        let info = h.info();
        assert_eq!(info.waiting, None);
        assert_eq!(info.effects.total, 1);
        root.dispose();
        assert!(root.live().is_zero(), "{:?}", root.live());
    }
}
