//! `Context`: the cheap handle every plugin works through, and the runtime state it points into.
//!
//! The capabilities live in their own modules, each with its own `impl Context` block: effects
//! (`effect.rs`), plugins (`plugin.rs`), services (`service.rs`), events (`event.rs`,
//! `waterfall.rs`), tasks (`task.rs`) and introspection (`introspect.rs`).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rustc_hash::FxHashMap;
use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::introspect::{Counters, Incident, TraceEvent};
use crate::schedule::Schedule;
use crate::scope::{ScopeId, ScopeNode, ScopeStatus, Unwind, dispose_node, lock};
use crate::service::ServiceTable;

/// A handle on one scope of the tree. Cheap to clone, `Send + Sync`.
///
/// A context is tied to one *generation* of its scope: when the scope's plugin is restarted (an
/// injected service went away and came back), contexts of the old run become stale and every
/// registration through them is undone at once instead of leaking into the new run.
#[derive(Clone)]
pub struct Context {
    pub(crate) node: Arc<ScopeNode>,
    pub(crate) generation: u64,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("scope", &self.node.id)
            .field("plugin", &self.node.name)
            .field("generation", &self.generation)
            .finish()
    }
}

/// State shared by every scope of one runtime.
pub(crate) struct Shared {
    /// Unique per runtime in this process (see [`Context::runtime_id`]).
    id: u64,
    pub(crate) handle: Handle,
    pub(crate) schedule: Schedule,
    next_scope: AtomicU64,
    next_effect: AtomicU64,
    /// Every live scope. Hashed by id (registering and unregistering are the hot half: one
    /// each per scope per boot); [`Shared::live_scopes`] sorts what it lists.
    scopes: Mutex<FxHashMap<ScopeId, Weak<ScopeNode>>>,
    pub(crate) services: Mutex<ServiceTable>,
    pub(crate) claims: Mutex<crate::claim::ClaimTable>,
    pub(crate) listeners: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    pub(crate) counters: Counters,
    loading: AtomicUsize,
    idle_tx: watch::Sender<bool>,
    /// Bumped on every scope status change; `ScopeHandle` waits subscribe to it.
    status_tx: watch::Sender<u64>,
    /// True while no spawned task's future exists.
    pub(crate) tasks_done_tx: watch::Sender<bool>,
    pub(crate) incidents: Mutex<Bounded<Incident>>,
    pub(crate) trace: Mutex<Bounded<TraceEvent>>,
    /// Whether scopes note what they do with names (see [`crate::NameFootprint`]).
    pub(crate) observing: AtomicBool,
    /// Set when the root's disposal begins: the whole runtime is going away, for good.
    closing: AtomicBool,
}

impl Shared {
    pub(crate) fn next_scope_id(&self) -> ScopeId {
        ScopeId(self.next_scope.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn next_effect_id(&self) -> u64 {
        self.next_effect.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn register_scope(&self, node: &Arc<ScopeNode>) {
        lock(&self.scopes).insert(node.id, Arc::downgrade(node));
        self.counters.scopes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn unregister_scope(&self, node: &ScopeNode) {
        if lock(&self.scopes).remove(&node.id).is_some() {
            self.counters.scopes.fetch_sub(1, Ordering::Relaxed);
        }
        // While the runtime closes nobody reads the dependents index (a withdrawn or returning
        // service restarts no one then), and `closed` drops it whole.
        if let Some(runner) = &node.runner
            && !self.closing()
        {
            lock(&self.services).forget_dependent(node.id, &runner.inject);
        }
    }

    /// The root's disposal began: the runtime is going away for good (see [`Shared::closing`]).
    pub(crate) fn begin_closing(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// True once the root's disposal began. A closing runtime skips what only matters to one
    /// that lives on: the dependents of a withdrawn service are not unwound back to pending
    /// (their own disposal, moments later, unwinds them, in the documented order), the
    /// survivor of a contest is not offered to them, and scopes leave the dependents index
    /// wholesale instead of one by one. Undos, their order, claims, counters and incidents are
    /// untouched.
    pub(crate) fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// The root's disposal finished: drops the dependents index scopes did not leave one by
    /// one (see [`Shared::unregister_scope`]).
    pub(crate) fn closed(&self) {
        lock(&self.services).forget_all_dependents();
    }

    pub(crate) fn scope(&self, id: ScopeId) -> Option<Arc<ScopeNode>> {
        lock(&self.scopes).get(&id).and_then(Weak::upgrade)
    }

    /// Every live scope, by id.
    pub(crate) fn live_scopes(&self) -> Vec<Arc<ScopeNode>> {
        let mut live: Vec<Arc<ScopeNode>> = lock(&self.scopes)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        live.sort_unstable_by_key(|n| n.id);
        live
    }

    /// Wakes everyone waiting for a scope status (they re-check their own scope).
    ///
    /// With no one waiting nothing is sent: a waiter subscribes before it checks its scope, so
    /// it sees every change after that check, and the count itself is never read.
    pub(crate) fn status_changed(&self) {
        if self.status_tx.receiver_count() > 0 {
            self.status_tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// A receiver that sees every later status change.
    pub(crate) fn status_rx(&self) -> watch::Receiver<u64> {
        self.status_tx.subscribe()
    }

    pub(crate) fn loading_started(&self) {
        if self.loading.fetch_add(1, Ordering::AcqRel) == 0 {
            self.idle_tx.send_replace(false);
        }
    }

    pub(crate) fn loading_done(&self) {
        if self.loading.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle_tx.send_replace(true);
        }
    }

    pub(crate) fn incident(&self, scope: &ScopeNode, site: String, message: String) {
        lock(&self.incidents).push(Incident {
            scope: scope.id,
            plugin: scope.name.to_string(),
            site,
            message,
        });
    }

    pub(crate) fn trace(&self, event: TraceEvent) {
        lock(&self.trace).push(event);
    }
}

/// How many trace events a runtime keeps (the newest); older ones are counted, not kept, so a
/// long-lived runtime (`--watch`, reloading for days) does not grow without bound.
pub const TRACE_CAPACITY: usize = 65_536;

/// How many incidents a runtime keeps (the newest).
pub const INCIDENT_CAPACITY: usize = 1_024;

/// A log that keeps its newest `capacity` items and counts the ones it let go.
#[derive(Debug)]
pub(crate) struct Bounded<T> {
    items: std::collections::VecDeque<T>,
    capacity: usize,
    dropped: u64,
}

impl<T: Clone> Bounded<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Bounded {
            items: std::collections::VecDeque::new(),
            capacity,
            dropped: 0,
        }
    }

    pub(crate) fn push(&mut self, item: T) {
        if self.items.len() == self.capacity {
            self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back(item);
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    pub(crate) fn to_vec(&self) -> Vec<T> {
        self.items.iter().cloned().collect()
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}

impl Context {
    /// Creates a new runtime and returns a context on its root scope, with the `fifo` schedule.
    ///
    /// # Panics
    /// Outside a tokio runtime. Use [`Context::try_root`] to get `None` instead.
    pub fn root() -> Context {
        Context::root_with(Schedule::fifo())
    }

    /// Like [`Context::root`], returning `None` outside a tokio runtime.
    pub fn try_root(schedule: Schedule) -> Option<Context> {
        let handle = Handle::try_current().ok()?;
        Some(Context::root_on(handle, schedule))
    }

    /// Creates a new runtime whose loads run under `schedule`.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn root_with(schedule: Schedule) -> Context {
        Context::try_root(schedule)
            .expect("Context::root must be called inside a tokio runtime (see Context::try_root)")
    }

    fn root_on(handle: Handle, schedule: Schedule) -> Context {
        static NEXT_RUNTIME: AtomicU64 = AtomicU64::new(1);
        let shared = Arc::new(Shared {
            id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            handle,
            schedule,
            next_scope: AtomicU64::new(0),
            next_effect: AtomicU64::new(0),
            scopes: Mutex::new(FxHashMap::default()),
            services: Mutex::new(ServiceTable::default()),
            claims: Mutex::new(crate::claim::ClaimTable::default()),
            listeners: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            loading: AtomicUsize::new(0),
            idle_tx: watch::Sender::new(true),
            tasks_done_tx: watch::Sender::new(true),
            status_tx: watch::Sender::new(0),
            incidents: Mutex::new(Bounded::new(INCIDENT_CAPACITY)),
            trace: Mutex::new(Bounded::new(TRACE_CAPACITY)),
            observing: AtomicBool::new(false),
            closing: AtomicBool::new(false),
        });
        let node = ScopeNode::new(
            shared,
            None,
            "root".into(),
            None,
            None,
            ScopeStatus::Active,
            crate::scope::Placement::default(),
        );
        Context {
            node,
            generation: 0,
        }
    }

    /// An id of this context's runtime, unique in the process: lets a plugin keep per-runtime
    /// state (for instance what it preloaded) when one plan boots many runtimes.
    pub fn runtime_id(&self) -> u64 {
        self.node.shared.id
    }

    /// Id of this context's scope.
    pub fn scope_id(&self) -> ScopeId {
        self.node.id
    }

    /// Id of the parent scope; `None` on the root.
    pub fn parent_id(&self) -> Option<ScopeId> {
        self.node.parent
    }

    /// Name of the plugin this scope runs (`root` for the root scope).
    pub fn plugin_name(&self) -> &str {
        &self.node.name
    }

    /// This scope's place in canonical listener and guard order (see [`crate::OrderKey`]).
    pub fn order_key(&self) -> &crate::OrderKey {
        &self.node.order
    }

    /// The label the scope was created with (the loader uses the entry id), if any.
    pub fn label(&self) -> Option<&str> {
        self.node.label.as_deref()
    }

    /// The realm this scope lives in: the nearest standing scope made by
    /// [`Context::child_realm`] at or above it, or `None` outside every realm.
    ///
    /// Services stay process-wide; the realm is for registries that keep per-scope layers (the
    /// tool registry puts what a plugin under a preset's standing scope registers into that
    /// scope's layer, so only agents joined to the preset see it).
    pub fn realm(&self) -> Option<ScopeId> {
        self.node.realm
    }

    /// True while this context can still register effects: its scope is not disposed and its
    /// plugin was not restarted since the context was made.
    pub fn is_live(&self) -> bool {
        let st = lock(&self.node.state);
        st.status != ScopeStatus::Disposed && st.generation == self.generation
    }

    /// Status of this context's scope.
    pub fn status(&self) -> ScopeStatus {
        self.node.status()
    }

    /// How many applies of this scope in a row deferred (see [`crate::Deferred`]): 0 on a first
    /// apply, 1 on the first retry, …; an apply that ends any other way resets it. A plugin
    /// derives its backoff and its retry budget from it.
    pub fn deferrals(&self) -> u32 {
        lock(&self.node.state).deferrals
    }

    /// The schedule loads of this runtime run under.
    pub fn schedule(&self) -> &Schedule {
        &self.node.shared.schedule
    }

    /// A context on the root scope of this runtime.
    pub fn root_context(&self) -> Context {
        let mut node = self.node.clone();
        while let Some(parent) = node.parent_node.as_ref().and_then(Weak::upgrade) {
            node = parent;
        }
        let generation = lock(&node.state).generation;
        Context { node, generation }
    }

    /// Disposes this context's scope: every effect unwinds, last first, children before their
    /// parent's earlier effects. Idempotent. On the root this shuts the whole runtime down.
    pub fn dispose(&self) {
        dispose_node(&self.node);
    }

    /// Waits until no scope of the runtime is loading.
    ///
    /// A pending scope whose services appear starts loading synchronously inside the `provide`
    /// call, so "nothing is loading" is a fixpoint: only outside action can start more work.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn idle(&self) {
        let mut rx = self.node.shared.idle_tx.subscribe();
        let _ = rx.wait_for(|idle| *idle).await;
    }

    /// Waits until every spawned task's future is gone. Aborting a task is asynchronous on a
    /// multi-thread runtime (a worker drops the future), so after disposing, await this before
    /// asserting that no task is live.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn tasks_finished(&self) {
        let mut rx = self.node.shared.tasks_done_tx.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }

    /// Unwinds this scope back to pending and, if its services are there, applies it again.
    pub fn restart(&self) {
        if self.node.unwind(Unwind::Pending) {
            crate::plugin::start(&self.node);
        }
    }
}
