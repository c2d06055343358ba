//! The scope tree: one node per applied plugin (or explicit child scope), its status and effects.
//!
//! A scope is the unit of undo. Everything registered through a [`Context`] on a scope is an
//! effect of that scope; disposing the scope runs every effect's undo, last registered first, and a
//! child scope is itself an effect of its parent, so children unwind before the parent's earlier
//! registrations. A scope whose plugin waits for services is *pending*; it goes back to pending
//! (unwinding what its apply registered) when one of those services is withdrawn.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::task::AbortHandle;

use crate::context::{Context, Shared};
use crate::effect::{Effect, EffectHandle, EffectId, EffectKind, EffectLabel, Effects, Undo};
use crate::introspect::{EffectCounts, EventFootprint, ScopeInfo, insert_sorted};
use crate::plugin::Runner;

/// Identifies a scope for the lifetime of its runtime; ids grow in creation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScopeId(pub u64);

impl fmt::Display for ScopeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where a scope is in its lifecycle.
///
/// `Pending` → `Loading` (apply running) → `Active` or `Failed`; any of them → `Pending` again
/// when an injected service is withdrawn; anything → `Disposed`, which is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScopeStatus {
    /// Waiting for injected services before `apply` can run, or for the retry of an apply
    /// that deferred ([`crate::Deferred`]).
    Pending,
    /// `apply` is running.
    Loading,
    /// `apply` finished; the scope's registrations are live.
    Active,
    /// `apply` failed, panicked or timed out; what it registered was unwound.
    Failed,
    /// Disposed for good.
    Disposed,
}

impl ScopeStatus {
    /// The lowercase name used in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeStatus::Pending => "pending",
            ScopeStatus::Loading => "loading",
            ScopeStatus::Active => "active",
            ScopeStatus::Failed => "failed",
            ScopeStatus::Disposed => "disposed",
        }
    }
}

impl fmt::Display for ScopeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an apply failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// `apply` returned an error.
    Error,
    /// `apply` panicked.
    Panic,
    /// `apply` did not finish within the scope's timeout.
    Timeout,
}

/// Why a scope is `Failed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ScopeFailure {
    /// How it failed.
    pub kind: FailureKind,
    /// The error or panic message.
    pub message: String,
}

impl ScopeFailure {
    fn describe(&self) -> String {
        match self.kind {
            FailureKind::Error => self.message.clone(),
            FailureKind::Panic => format!("apply panicked: {}", self.message),
            FailureKind::Timeout => self.message.clone(),
        }
    }
}

/// How a scope's last apply came out, as an entry's report shows it: the part of
/// [`ScopeInfo`] a report reads (see [`ScopeHandle::outcome`]). Every field means what the
/// field of the same name in [`ScopeInfo`] means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeOutcome {
    /// The status.
    pub status: ScopeStatus,
    /// Why it failed, if it did.
    pub failure: Option<ScopeFailure>,
    /// The required services a pending scope still waits for, sorted.
    pub missing: Vec<String>,
    /// The contested claims this scope's entry is part of, sorted.
    pub conflicts: Vec<String>,
    /// Why a pending scope waits when it is not for services (its last apply deferred).
    pub waiting: Option<String>,
    /// How long its last apply took. Wall-clock: for people, never for digests.
    pub load_time: Option<Duration>,
}

/// What an unwind turns the scope into.
pub(crate) enum Unwind {
    Dispose,
    Pending,
    /// Back to pending because the apply deferred (see [`crate::Deferred`]), with the reason.
    Deferred(String),
    Failed(ScopeFailure),
}

pub(crate) struct ScopeState {
    pub(crate) status: ScopeStatus,
    pub(crate) failure: Option<ScopeFailure>,
    /// Bumped on every (re)apply and unwind: contexts of an older generation are stale.
    pub(crate) generation: u64,
    pub(crate) effects: Effects,
    pub(crate) apply_task: Option<AbortHandle>,
    /// When the current apply started (set on entering `Loading`).
    pub(crate) apply_started: Option<Instant>,
    /// How long the last apply took, from `Loading` to `Active` or `Failed`.
    pub(crate) load_time: Option<Duration>,
    /// Why a pending scope is waiting, when its last apply deferred.
    pub(crate) waiting: Option<String>,
    /// Applies in a row that deferred; reset when an apply ends any other way.
    pub(crate) deferrals: u32,
    /// The events its applies listened to and dispatched; kept across unwinds, since a failed
    /// apply's dispatches reached listeners all the same.
    pub(crate) events: EventFootprint,
    /// What it was seen to do with names, while its runtime observes them.
    pub(crate) names: crate::NameFootprint,
}

/// Which side of an event a scope took.
#[derive(Debug, Clone, Copy)]
pub(crate) enum EventUse {
    /// Registered a listener.
    Listen,
    /// Dispatched it.
    Emit,
}

/// Where a new scope sits: whether it is a realm of its own, and its place among its siblings
/// (see [`crate::OrderKey`]; `None`: after every placed sibling, in creation order).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Placement {
    pub(crate) own_realm: bool,
    pub(crate) place: Option<u64>,
}

/// One node of the scope tree.
pub(crate) struct ScopeNode {
    pub(crate) id: ScopeId,
    pub(crate) parent: Option<ScopeId>,
    pub(crate) parent_node: Option<Weak<ScopeNode>>,
    pub(crate) name: Arc<str>,
    pub(crate) label: Option<Arc<str>>,
    /// The nearest labelled scope at or above this one, with its label: who holds this
    /// scope's claims (else the scope itself, see [`ScopeNode::claim_owner`]). Fixed at
    /// creation, since labels and parents are.
    pub(crate) labelled_owner: Option<(ScopeId, Arc<str>)>,
    /// The nearest standing scope at or above this one (see [`crate::Context::realm`]).
    pub(crate) realm: Option<ScopeId>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) state: Mutex<ScopeState>,
    pub(crate) runner: Option<Runner>,
    /// The effect id of this scope inside its parent.
    pub(crate) slot: OnceLock<EffectId>,
    /// Its place in canonical listener and guard order (see [`crate::OrderKey`]).
    pub(crate) order: crate::OrderKey,
    /// Children created so far without an explicit place: the next one's place.
    pub(crate) next_child: std::sync::atomic::AtomicU64,
}

/// Locks a mutex, ignoring poison: the one poison-ignoring lock of the workspace.
///
/// Poison only says a thread panicked while holding the guard. Our critical sections keep
/// their data consistent at every step (they run no user callbacks and do not panic midway),
/// so the data behind a poisoned lock is still good, and a plugin's panic, which the runtime
/// contains, must not turn every later lock into a second panic.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why an effect could not be added.
pub(crate) enum AddError<E> {
    /// The scope is disposed, or the context is of an older generation.
    Gone,
    /// The registration itself refused.
    Refused(E),
}

impl ScopeNode {
    pub(crate) fn new(
        shared: Arc<Shared>,
        parent: Option<&Arc<ScopeNode>>,
        name: Arc<str>,
        label: Option<Arc<str>>,
        runner: Option<Runner>,
        status: ScopeStatus,
        Placement { own_realm, place }: Placement,
    ) -> Arc<ScopeNode> {
        let id = shared.next_scope_id();
        let order = match parent {
            None => crate::OrderKey::default(),
            Some(p) => {
                let place = place.unwrap_or_else(|| {
                    // Unplaced children come after every placed one (a plan index), in the
                    // order their parent made them.
                    (1 << 32)
                        + p.next_child
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                });
                p.order.child(place)
            }
        };
        // The nearest labelled scope at or above this one: the parent's answer is already
        // that for everything above it.
        let labelled_owner = match (&label, parent) {
            (Some(label), _) => Some((id, label.clone())),
            (None, Some(p)) => p.labelled_owner.clone(),
            (None, None) => None,
        };
        let realm = if own_realm {
            Some(id)
        } else {
            parent.and_then(|p| p.realm)
        };
        let node = Arc::new(ScopeNode {
            id,
            parent: parent.map(|p| p.id),
            parent_node: parent.map(Arc::downgrade),
            name,
            label,
            labelled_owner,
            realm,
            shared: shared.clone(),
            state: Mutex::new(ScopeState {
                status,
                failure: None,
                generation: 0,
                effects: Effects::default(),
                apply_task: None,
                apply_started: None,
                load_time: None,
                waiting: None,
                deferrals: 0,
                events: EventFootprint::default(),
                names: crate::NameFootprint::default(),
            }),
            runner,
            slot: OnceLock::new(),
            order,
            next_child: std::sync::atomic::AtomicU64::new(0),
        });
        shared.register_scope(&node);
        node
    }

    pub(crate) fn status(&self) -> ScopeStatus {
        lock(&self.state).status
    }

    /// Adds an effect if the scope is live at `generation`; `register` runs under the scope lock,
    /// so a disposal cannot slip between the registration and its bookkeeping.
    pub(crate) fn add_effect<E>(
        &self,
        generation: u64,
        kind: EffectKind,
        label: Cow<'static, str>,
        register: impl FnOnce() -> Result<Undo, E>,
    ) -> Result<EffectId, AddError<E>> {
        self.add_labelled_effect(generation, kind, EffectLabel::Text(label), register)
    }

    /// [`ScopeNode::add_effect`] with a label of any form (a claim's is formatted only if its
    /// undo panics).
    pub(crate) fn add_labelled_effect<E>(
        &self,
        generation: u64,
        kind: EffectKind,
        label: EffectLabel,
        register: impl FnOnce() -> Result<Undo, E>,
    ) -> Result<EffectId, AddError<E>> {
        let mut st = lock(&self.state);
        if st.status == ScopeStatus::Disposed || st.generation != generation {
            return Err(AddError::Gone);
        }
        let undo = register().map_err(AddError::Refused)?;
        let id = self.shared.next_effect_id();
        st.effects.push(id, Effect { kind, label, undo });
        self.shared.counters.effect_added();
        Ok(id)
    }

    /// Notes that a context of `generation` used `event` as `how`, if this scope is applying at
    /// that generation: one uncontended lock, and an allocation only the first time an apply
    /// uses an event that way. Returns whether it noted it.
    pub(crate) fn note_event(&self, generation: u64, how: EventUse, event: &'static str) -> bool {
        let mut st = lock(&self.state);
        if st.status != ScopeStatus::Loading || st.generation != generation {
            return false;
        }
        let list = match how {
            EventUse::Listen => &mut st.events.listens,
            EventUse::Emit => &mut st.events.emits,
        };
        insert_sorted(list, event);
        true
    }

    /// Notes a dispatch of `event` this scope caused through another, active scope (a registry
    /// announcing the change this scope made), whatever this scope's status.
    pub(crate) fn note_caused_emit(&self, event: &'static str) {
        insert_sorted(&mut lock(&self.state).events.emits, event);
    }

    /// Removes an effect without running it (it was already undone, or it ended by itself).
    pub(crate) fn take_effect(&self, id: EffectId) -> Option<Effect> {
        let effect = lock(&self.state).effects.remove(id);
        if effect.is_some() {
            self.shared.counters.effect_removed();
        }
        effect
    }

    /// Runs every effect's undo, last first, and moves the scope to the state `to` names.
    /// Returns false when the scope was already disposed. Idempotent.
    pub(crate) fn unwind(self: &Arc<Self>, to: Unwind) -> bool {
        let (effects, task, was_loading, status) = {
            let mut st = lock(&self.state);
            if st.status == ScopeStatus::Disposed {
                return false;
            }
            let was_loading = st.status == ScopeStatus::Loading;
            if let (Unwind::Failed(_), Some(started)) = (&to, st.apply_started.take()) {
                st.load_time = Some(started.elapsed());
            }
            st.generation += 1;
            st.status = match &to {
                Unwind::Dispose => ScopeStatus::Disposed,
                Unwind::Pending | Unwind::Deferred(_) => ScopeStatus::Pending,
                Unwind::Failed(_) => ScopeStatus::Failed,
            };
            st.waiting = None;
            st.failure = None;
            match to {
                Unwind::Failed(f) => {
                    st.failure = Some(f);
                    st.deferrals = 0;
                }
                Unwind::Deferred(reason) => {
                    st.waiting = Some(reason);
                    st.deferrals = st.deferrals.saturating_add(1);
                }
                Unwind::Dispose | Unwind::Pending => st.deferrals = 0,
            }
            (
                std::mem::take(&mut st.effects),
                st.apply_task.take(),
                was_loading,
                st.status,
            )
        };
        // Disposing the root ends the whole runtime for good: from here on, what only a runtime
        // that lives on needs (restarting the dependents of a withdrawn service, keeping the
        // index of who waits for what) is skipped; see `Shared::closing`.
        let closing = status == ScopeStatus::Disposed && self.parent.is_none();
        if closing {
            self.shared.begin_closing();
        }
        if let Some(task) = task {
            task.abort();
        }
        for effect in effects.drain_reversed() {
            self.shared.counters.effect_removed();
            effect.run(self);
        }
        self.shared.status_changed();
        if status == ScopeStatus::Disposed {
            self.shared.unregister_scope(self);
        }
        if closing {
            self.shared.closed();
        }
        if was_loading {
            self.shared.loading_done();
        }
        tracing::debug!(scope = self.id.0, plugin = %self.name, %status, "scope unwound");
        true
    }

    /// The required services this scope waits for while it is `status`, sorted.
    fn missing_while(&self, status: ScopeStatus) -> Vec<String> {
        match (&self.runner, status) {
            (Some(r), ScopeStatus::Pending) => self.shared.missing_services(&r.inject),
            _ => Vec::new(),
        }
    }

    pub(crate) fn outcome(&self) -> ScopeOutcome {
        let st = lock(&self.state);
        ScopeOutcome {
            status: st.status,
            failure: st.failure.clone(),
            missing: self.missing_while(st.status),
            conflicts: self.shared.conflicts_of(self.id),
            waiting: match st.status {
                ScopeStatus::Pending => st.waiting.clone(),
                _ => None,
            },
            load_time: st.load_time,
        }
    }

    pub(crate) fn info(&self) -> ScopeInfo {
        let st = lock(&self.state);
        let mut effects = EffectCounts::default();
        for kind in st.effects.kinds() {
            effects.add(kind);
        }
        let missing = self.missing_while(st.status);
        ScopeInfo {
            id: self.id,
            parent: self.parent,
            // `String::from`, not `to_string`: no formatting machinery for a copy.
            plugin: String::from(&*self.name),
            label: self.label.as_deref().map(String::from),
            status: st.status,
            failure: st.failure.clone(),
            effects,
            missing,
            conflicts: self.shared.conflicts_of(self.id),
            waiting: match st.status {
                ScopeStatus::Pending => st.waiting.clone(),
                _ => None,
            },
            load_time: st.load_time,
            events: st.events.clone(),
            names: st.names.clone(),
        }
    }
}

/// A handle on a child scope: its status, and the means to dispose it.
///
/// Dropping the handle does nothing; the scope lives until it or an ancestor is disposed.
#[derive(Clone)]
pub struct ScopeHandle {
    pub(crate) node: Arc<ScopeNode>,
}

impl fmt::Debug for ScopeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeHandle")
            .field("id", &self.node.id)
            .field("plugin", &self.node.name)
            .field("status", &self.status())
            .finish()
    }
}

impl ScopeHandle {
    /// The scope's id.
    pub fn id(&self) -> ScopeId {
        self.node.id
    }

    /// The plugin name the scope was created for.
    pub fn plugin_name(&self) -> &str {
        &self.node.name
    }

    /// The scope's current status.
    pub fn status(&self) -> ScopeStatus {
        self.node.status()
    }

    /// Why the scope failed, when it is `Failed`.
    pub fn failure(&self) -> Option<ScopeFailure> {
        lock(&self.node.state).failure.clone()
    }

    /// Introspection record of this scope.
    pub fn info(&self) -> ScopeInfo {
        self.node.info()
    }

    /// What an entry's report needs of this scope (status, failure, conflicts, missing
    /// services, why it waits, load time): the same values as [`ScopeHandle::info`], without
    /// copying its footprints and effect counts.
    pub fn outcome(&self) -> ScopeOutcome {
        self.node.outcome()
    }

    /// A context on this scope at its current generation, unless it is disposed.
    pub fn context(&self) -> Option<Context> {
        let st = lock(&self.node.state);
        (st.status != ScopeStatus::Disposed).then(|| Context {
            node: self.node.clone(),
            generation: st.generation,
        })
    }

    /// Waits until the scope is not `Loading` and returns the status it settled in.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future only stops the wait.
    pub async fn settled(&self) -> ScopeStatus {
        self.wait_until(|s| s != ScopeStatus::Loading).await
    }

    /// Waits until the scope reaches `status` (or is disposed).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_for(&self, status: ScopeStatus) -> ScopeStatus {
        self.wait_until(|s| s == status || s == ScopeStatus::Disposed)
            .await
    }

    /// Waits until this scope's status satisfies `done`, re-checking on every status change of
    /// the runtime (one notification channel per runtime, not per scope, keeps scopes small).
    async fn wait_until(&self, done: impl Fn(ScopeStatus) -> bool) -> ScopeStatus {
        let mut changes = self.node.shared.status_rx();
        loop {
            let status = self.status();
            if done(status) {
                return status;
            }
            if changes.changed().await.is_err() {
                return self.status();
            }
        }
    }

    /// Disposes the scope: unwinds its effects (children first) and removes it from its parent.
    /// Idempotent.
    pub fn dispose(&self) {
        dispose_node(&self.node);
    }

    /// The effect this scope is inside its parent, as a generic handle.
    pub fn as_effect(&self) -> EffectHandle {
        EffectHandle {
            node: self.node.parent_node.clone().unwrap_or_default(),
            id: self.node.slot.get().copied(),
        }
    }
}

/// Disposes a node through its parent's effect table, so the parent forgets it too.
pub(crate) fn dispose_node(node: &Arc<ScopeNode>) {
    if let (Some(parent), Some(slot)) = (
        node.parent_node.as_ref().and_then(Weak::upgrade),
        node.slot.get(),
    ) && let Some(effect) = parent.take_effect(*slot)
    {
        effect.run(&parent);
        return;
    }
    node.unwind(Unwind::Dispose);
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::prelude::*;
    use crate::testing::both_runtimes;

    type Recorder = (
        Arc<Mutex<Vec<String>>>,
        Box<dyn Fn(&str) -> Box<dyn FnOnce() + Send>>,
    );

    fn recorder() -> Recorder {
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        (
            log,
            Box::new(move |name: &str| {
                let l = l.clone();
                let name = name.to_owned();
                Box::new(move || l.lock().unwrap().push(name)) as Box<dyn FnOnce() + Send>
            }),
        )
    }

    both_runtimes! {
        async fn effects_undo_in_reverse_registration_order() {
            let root = Context::root();
            let (log, undo) = recorder();
            let _ = root.effect("a", undo("a"));
            let _ = root.effect("b", undo("b"));
            let _ = root.effect("c", undo("c"));
            root.dispose();
            assert_eq!(*log.lock().unwrap(), ["c", "b", "a"]);
            root.dispose();
            assert_eq!(log.lock().unwrap().len(), 3, "disposal is idempotent");
            assert!(root.live().is_zero(), "{:?}", root.live());
        }

        async fn children_unwind_before_their_parents_earlier_effects() {
            let root = Context::root();
            let (log, undo) = recorder();
            let _ = root.effect("root-1", undo("root-1"));
            let outer = root.child_scope("outer");
            let octx = outer.context().unwrap();
            let _ = octx.effect("outer-1", undo("outer-1"));
            let inner = octx.child_scope("inner");
            let _ = inner.context().unwrap().effect("inner-1", undo("inner-1"));
            let _ = octx.effect("outer-2", undo("outer-2"));
            let _ = root.effect("root-2", undo("root-2"));
            root.dispose();
            assert_eq!(
                *log.lock().unwrap(),
                ["root-2", "outer-2", "inner-1", "outer-1", "root-1"]
            );
            assert_eq!(inner.status(), ScopeStatus::Disposed);
            assert!(root.live().is_zero());
        }

        async fn disposing_a_child_removes_it_from_its_parent() {
            let root = Context::root();
            let (log, undo) = recorder();
            let child = root.child_scope("child");
            let _ = child.context().unwrap().effect("x", undo("x"));
            assert_eq!(root.info().effects.scopes, 1);
            child.dispose();
            child.dispose();
            assert_eq!(*log.lock().unwrap(), ["x"]);
            assert_eq!(root.info().effects.total, 0);
            assert_eq!(root.live().scopes, 1);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn an_effect_on_a_disposed_scope_is_undone_at_once() {
            let root = Context::root();
            let child = root.child_scope("child");
            let ctx = child.context().unwrap();
            child.dispose();
            let (log, undo) = recorder();
            let handle = ctx.effect("late", undo("late"));
            assert_eq!(*log.lock().unwrap(), ["late"]);
            assert!(!handle.is_live());
            assert!(!ctx.is_live());
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn an_effect_handle_undoes_early_and_only_once() {
            let root = Context::root();
            let (log, undo) = recorder();
            let h = root.effect("x", undo("x"));
            assert!(h.is_live());
            h.dispose();
            h.dispose();
            root.dispose();
            assert_eq!(*log.lock().unwrap(), ["x"]);
        }

        async fn disposing_the_root_undoes_each_effect_once_in_order_and_reapplies_nothing() {
            use std::sync::atomic::{AtomicUsize, Ordering};

            use crate::FnPlugin;

            struct Store;
            impl Service for Store {
                const NAME: &'static str = "store";
            }
            let root = Context::root();
            let log = Arc::new(Mutex::new(Vec::<String>::new()));
            let applies = Arc::new(AtomicUsize::new(0));
            // An entry that notes `label`, a hidden child's effect and `label/last`; the
            // provider provides the store between its first and last effect.
            let entry = |label: &'static str, provides: bool| {
                let (log, applies) = (log.clone(), applies.clone());
                let note = move |tag: String| {
                    let log = log.clone();
                    move || log.lock().unwrap().push(tag)
                };
                let plugin = FnPlugin::new(label, move |ctx: Context, ()| {
                    applies.fetch_add(1, Ordering::SeqCst);
                    let _ = ctx.effect("first", note(label.to_owned()));
                    let provided: Result<(), BoxError> = if provides {
                        ctx.provide(Store).map(drop).map_err(Into::into)
                    } else {
                        let inner = ctx.child_scope("inner");
                        let _ = inner
                            .context()
                            .unwrap()
                            .effect("inner", note(format!("{label}/inner")));
                        Ok(())
                    };
                    let _ = ctx.effect("last", note(format!("{label}/last")));
                    async move { provided }
                });
                if provides { plugin } else { plugin.inject(Inject::required("store")) }
            };
            // A dependent made before its provider unwinds after it, one made after it before.
            let early = root.plugin(entry("early", false), ());
            let provider = root.plugin(entry("provider", true), ());
            let late = root.plugin(entry("late", false), ());
            root.idle().await;
            for h in [&early, &provider, &late] {
                assert_eq!(h.status(), ScopeStatus::Active);
            }
            assert_eq!(applies.load(Ordering::SeqCst), 3);

            root.dispose();
            root.idle().await;
            root.tasks_finished().await;
            // Last registered first, children before their parent's earlier effects: the
            // provider's withdrawal does not unwind `early` ahead of its turn.
            assert_eq!(
                *log.lock().unwrap(),
                [
                    "late/last",
                    "late/inner",
                    "late",
                    "provider/last",
                    "provider",
                    "early/last",
                    "early/inner",
                    "early",
                ]
            );
            assert_eq!(applies.load(Ordering::SeqCst), 3, "nothing applied again");
            for h in [&early, &provider, &late] {
                assert_eq!(h.status(), ScopeStatus::Disposed);
            }
            assert!(root.live().is_zero(), "{:?}", root.live());
            assert!(root.incidents().is_empty());
        }

        async fn a_panicking_undo_is_contained_and_the_rest_still_run() {
            let root = Context::root();
            let (log, undo) = recorder();
            let _ = root.effect("a", undo("a"));
            let _ = root.effect("boom", || panic!("undo exploded"));
            let _ = root.effect("c", undo("c"));
            root.dispose();
            assert_eq!(*log.lock().unwrap(), ["c", "a"]);
            let incidents = root.incidents();
            assert_eq!(incidents.len(), 1);
            assert!(incidents[0].message.contains("undo exploded"));
            assert!(root.live().is_zero());
        }
    }
}
