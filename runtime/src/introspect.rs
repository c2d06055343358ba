//! Introspection and leak accounting: what scopes exist, what each holds, what went wrong.
//!
//! The live counts are kept where the resource lives (a listener is counted while it sits in a
//! listener list, a task while its future exists), not derived from effect bookkeeping, so a
//! broken undo shows up as a non-zero count after the root is disposed.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::context::Context;
use crate::effect::EffectKind;
use crate::scope::{ScopeFailure, ScopeId, ScopeStatus, lock};

/// Live resource counters of one runtime.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) scopes: AtomicUsize,
    pub(crate) effects: AtomicUsize,
    pub(crate) listeners: AtomicUsize,
    pub(crate) services: AtomicUsize,
    pub(crate) tasks: AtomicUsize,
}

impl Counters {
    pub(crate) fn effect_added(&self) {
        self.effects.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn effect_removed(&self) {
        self.effects.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many resources of each kind are live in a runtime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveCounts {
    /// Scopes not yet disposed (the root counts until it is disposed).
    pub scopes: usize,
    /// Effects registered on any scope.
    pub effects: usize,
    /// Event and waterfall listeners in listener lists.
    pub listeners: usize,
    /// Services in the service table.
    pub services: usize,
    /// Spawned tasks whose futures still exist.
    pub tasks: usize,
}

impl LiveCounts {
    /// True when nothing is live: what disposing the root must leave.
    pub fn is_zero(&self) -> bool {
        *self == LiveCounts::default()
    }
}

/// Effects of one scope, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EffectCounts {
    /// All effects.
    pub total: usize,
    /// Listener effects.
    pub listeners: usize,
    /// Service effects.
    pub services: usize,
    /// Child scopes.
    pub scopes: usize,
    /// Spawned tasks.
    pub tasks: usize,
    /// Other effects.
    pub custom: usize,
}

impl EffectCounts {
    pub(crate) fn add(&mut self, kind: EffectKind) {
        self.total += 1;
        match kind {
            EffectKind::Listener => self.listeners += 1,
            EffectKind::Service => self.services += 1,
            EffectKind::Scope => self.scopes += 1,
            EffectKind::Task => self.tasks += 1,
            EffectKind::Custom => self.custom += 1,
        }
    }
}

/// A snapshot of one scope, for tables and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeInfo {
    /// The scope id.
    pub id: ScopeId,
    /// The parent's id (`None` for the root).
    pub parent: Option<ScopeId>,
    /// The plugin name.
    pub plugin: String,
    /// The creation label (the loader's entry id).
    pub label: Option<String>,
    /// The status.
    pub status: ScopeStatus,
    /// Why it failed, if it did.
    pub failure: Option<ScopeFailure>,
    /// Its live effects by kind.
    pub effects: EffectCounts,
    /// The required services a pending scope still waits for, sorted.
    pub missing: Vec<String>,
    /// The contested claims this scope's entry is part of (see [`crate::Claim`]): each names
    /// every entry holding the name, so all of them report the same text. Sorted.
    pub conflicts: Vec<String>,
    /// Why a pending scope waits when it is not for services: its last apply deferred (see
    /// [`crate::Deferred`]) and a retry is scheduled.
    pub waiting: Option<String>,
    /// How long its last apply took (`None` until one finished). Wall-clock: for people, never
    /// for digests.
    pub load_time: Option<std::time::Duration>,
    /// The events it listened to and dispatched while applying (see [`EventFootprint`]).
    pub events: EventFootprint,
    /// What it was seen to do with names while its runtime observed them (see
    /// [`crate::NameFootprint`]; empty otherwise).
    pub names: crate::NameFootprint,
}

/// The events a scope listened to and dispatched while it was applying (status `Loading`),
/// over every apply it ran: what a permutation proof needs to know that two entries' order
/// matters through an event (an event dispatched during an apply reaches only the listeners
/// registered so far).
///
/// Waterfalls are left out: their listeners run after load, in canonical order. Dispatches
/// from a scope that is already active (a registry announcing a change another entry caused)
/// are left out too: they belong to whoever caused them, not to the registry's apply.
///
/// # Determinism
/// Both lists are sorted and free of duplicates, whatever order the apply touched them in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFootprint {
    /// Names of the events it registered a listener for (`on`, `on_answer`, `on_async`,
    /// `listen`).
    pub listens: Vec<&'static str>,
    /// Names of the events it dispatched (`emit`, `parallel`, `serial`, `bail`).
    pub emits: Vec<&'static str>,
}

impl EventFootprint {
    /// Whether it neither listened nor dispatched.
    pub fn is_empty(&self) -> bool {
        self.listens.is_empty() && self.emits.is_empty()
    }

    /// Adds `other`'s events to this one's.
    pub fn union(&mut self, other: &EventFootprint) {
        for &name in &other.listens {
            insert_sorted(&mut self.listens, name);
        }
        for &name in &other.emits {
            insert_sorted(&mut self.emits, name);
        }
    }

    /// The events one of the two dispatches and the other listens to, sorted: why their order
    /// matters, empty when it does not through events.
    pub fn meets(&self, other: &EventFootprint) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (from, to) in [(self, other), (other, self)] {
            for &name in &from.emits {
                if to.listens.binary_search(&name).is_ok() {
                    insert_sorted(&mut out, name);
                }
            }
        }
        out
    }
}

/// Inserts `name` into the sorted `list` unless it is there; allocates only when it is new.
pub(crate) fn insert_sorted(list: &mut Vec<&'static str>, name: &'static str) {
    if let Err(at) = list.binary_search(&name) {
        list.insert(at, name);
    }
}

/// Something that went wrong without failing a scope: a panicking listener, undo or task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    /// The scope the failing code belongs to.
    pub scope: ScopeId,
    /// That scope's plugin name.
    pub plugin: String,
    /// Where it happened (`listener of "x"`, `undo of listener`, `task`).
    pub site: String,
    /// The panic or error message.
    pub message: String,
}

/// One step of a load, recorded in order, so tests can compare runs of the same seed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceEvent {
    /// What happened (`apply`, or what a plugin passed to [`Context::trace`], e.g. `register`).
    pub kind: Cow<'static, str>,
    /// The scope it happened in.
    pub scope: ScopeId,
    /// The scope's label if it has one (the loader's entry id), else its plugin name.
    pub label: Arc<str>,
    /// What a plugin passed as detail (e.g. the tool name); empty for `apply`.
    pub detail: String,
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{} {}", self.kind, self.label)
        } else {
            write!(f, "{} {}: {}", self.kind, self.label, self.detail)
        }
    }
}

impl Context {
    /// Live resource counts of the whole runtime.
    pub fn live(&self) -> LiveCounts {
        let c = &self.node.shared.counters;
        LiveCounts {
            scopes: c.scopes.load(Ordering::Relaxed),
            effects: c.effects.load(Ordering::Relaxed),
            listeners: c.listeners.load(Ordering::Relaxed),
            services: c.services.load(Ordering::Relaxed),
            tasks: c.tasks.load(Ordering::Relaxed),
        }
    }

    /// Every live scope of the runtime, by id.
    pub fn scopes(&self) -> Vec<ScopeInfo> {
        self.node
            .shared
            .live_scopes()
            .iter()
            .map(|n| n.info())
            .collect()
    }

    /// Introspection record of this context's scope.
    pub fn info(&self) -> ScopeInfo {
        self.node.info()
    }

    /// Contained failures (panicking listeners, undos, tasks) so far, in order: the newest
    /// [`INCIDENT_CAPACITY`](crate::INCIDENT_CAPACITY) of them.
    pub fn incidents(&self) -> Vec<Incident> {
        lock(&self.node.shared.incidents).to_vec()
    }

    /// Records a step in the runtime's trace (e.g. `register` with a tool name).
    pub fn trace(&self, kind: impl Into<Cow<'static, str>>, detail: impl Into<String>) {
        let label = self
            .node
            .label
            .clone()
            .unwrap_or_else(|| self.node.name.clone());
        self.node.shared.trace(TraceEvent {
            kind: kind.into(),
            scope: self.node.id,
            label,
            detail: detail.into(),
        });
    }

    /// The trace events of one kind as `label: detail` lines, in order (e.g. every `register`).
    pub fn trace_details(&self, kind: &str) -> Vec<String> {
        lock(&self.node.shared.trace)
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| format!("{}: {}", e.label, e.detail))
            .collect()
    }

    /// The trace so far, in order: the newest
    /// [`TRACE_CAPACITY`](crate::TRACE_CAPACITY) events.
    pub fn trace_events(&self) -> Vec<TraceEvent> {
        lock(&self.node.shared.trace).to_vec()
    }

    /// How many trace events and incidents the runtime has let go to stay within its bounds.
    pub fn introspection_dropped(&self) -> (u64, u64) {
        (
            lock(&self.node.shared.trace).dropped(),
            lock(&self.node.shared.incidents).dropped(),
        )
    }
}

#[cfg(test)]
mod bounded_tests {
    use crate::TRACE_CAPACITY;
    use crate::prelude::*;

    #[tokio::test]
    async fn the_trace_keeps_only_its_newest_events() {
        let root = Context::root();
        for i in 0..TRACE_CAPACITY + 10 {
            root.trace("step", i.to_string());
        }
        let events = root.trace_events();
        assert_eq!(events.len(), TRACE_CAPACITY);
        assert_eq!(events[0].detail, "10");
        assert_eq!(root.introspection_dropped(), (10, 0));
    }
}
