//! Observing what each scope does with names, for a permutation proof: the names it claimed,
//! the names it read, and the kinds of name it listed or changed wholesale
//! ([`NameFootprint`]).
//!
//! A plugin that does not state its claims ([`crate::Plugin::open_claims`] `None`) is explored
//! by what it was *seen* to do (dynamic partial-order reduction): a proof boots with
//! [`Context::observe_names`] on, reads each scope's footprint from [`crate::ScopeInfo::names`]
//! and orders two entries only when one touched a name the other wrote.
//!
//! Claims ([`Context::claim`]) and service look-ups ([`Context::require`] and its kin) are
//! noted by the runtime itself. A registry that keeps names of its own notes reads through
//! [`note_read`] and [`note_listing`] (the tool registry and the prompt sections do): those
//! carry no context, so the read is noted for the scope whose apply or task is running
//! ([`Context::spawn`] tasks included; a bare `tokio::spawn` is not seen).
//!
//! # Cost
//! Off unless a proof turned it on: one relaxed atomic load per claim or service look-up, and
//! a missing task-local for registry reads. On, the first use of a name allocates.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use crate::claim::Claim;
use crate::context::Context;
use crate::scope::{ScopeNode, lock};

/// What a scope was seen to do with names while a proof observed it (see the module docs).
///
/// # Determinism
/// Every list is sorted and free of duplicates; claims are kept without their layer (a read in
/// one layer and a write in another are taken to meet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameFootprint {
    /// Names it claimed (wrote): tools, sections, services, ….
    pub writes: Vec<Claim>,
    /// Names it looked up.
    pub reads: Vec<Claim>,
    /// Kinds of name whose whole listing it read (every tool visible, every section).
    pub lists: Vec<Cow<'static, str>>,
    /// Kinds of name it changed without naming one (a tool restriction changes which tools are
    /// visible): met by every read or listing of the kind.
    pub changes: Vec<Cow<'static, str>>,
}

impl NameFootprint {
    /// Whether it was seen to do nothing with names.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
            && self.reads.is_empty()
            && self.lists.is_empty()
            && self.changes.is_empty()
    }

    /// Adds `other`'s names to this one's.
    pub fn union(&mut self, other: &NameFootprint) {
        for c in &other.writes {
            insert(&mut self.writes, c);
        }
        for c in &other.reads {
            insert(&mut self.reads, c);
        }
        for k in &other.lists {
            insert(&mut self.lists, k);
        }
        for k in &other.changes {
            insert(&mut self.changes, k);
        }
    }

    pub(crate) fn note(&mut self, what: Note) {
        match what {
            Note::Write(c) => insert(&mut self.writes, &c),
            Note::Read(c) => insert(&mut self.reads, &c),
            Note::List(k) => insert(&mut self.lists, &k),
            Note::Change(k) => insert(&mut self.changes, &k),
        }
    }
}

fn insert<T: Ord + Clone>(list: &mut Vec<T>, item: &T) {
    if let Err(at) = list.binary_search(item) {
        list.insert(at, item.clone());
    }
}

/// One observation.
pub(crate) enum Note {
    Write(Claim),
    Read(Claim),
    List(Cow<'static, str>),
    Change(Cow<'static, str>),
}

tokio::task_local! {
    /// The scope whose apply or task is running, while its runtime observes names.
    static RUNNING: Weak<ScopeNode>;
}

/// Spawns `fut` on `node`'s runtime, run with `node` as the scope [`note_read`] and
/// [`note_listing`] note for when its runtime observes names (no wrapper otherwise).
pub(crate) fn spawn_attributed<F>(node: &Arc<ScopeNode>, fut: F) -> tokio::task::JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    if node.shared.observing.load(Ordering::Relaxed) {
        node.shared
            .handle
            .spawn(RUNNING.scope(Arc::downgrade(node), fut))
    } else {
        node.shared.handle.spawn(fut)
    }
}

/// The scope whose apply or task is running, if its runtime observes names.
pub(crate) fn running() -> Option<Arc<ScopeNode>> {
    RUNNING.try_with(Weak::upgrade).ok().flatten()
}

fn note_running(what: Note) {
    if let Some(node) = running() {
        node.note_names(what);
    }
}

/// Notes, for the scope running now, that it looked up the name `claim` (present or not).
/// Does nothing unless a proof observes the runtime.
pub fn note_read(claim: Claim) {
    note_running(Note::Read(claim));
}

/// Notes, for the scope running now, that it wrote the name `claim` without claiming it (a
/// registry slot only one may fill, such as the tool registry's approval stage).
pub fn note_write(claim: Claim) {
    note_running(Note::Write(claim));
}

/// Whether a scope of a runtime that observes names is running now: check it before building
/// a costly [`Claim`] to note.
pub fn observing() -> bool {
    RUNNING.try_with(|_| ()).is_ok()
}

/// Notes, for the scope running now, that it read every name of `kind` (a listing).
pub fn note_listing(kind: &'static str) {
    note_running(Note::List(Cow::Borrowed(kind)));
}

/// Notes, for the scope running now, that it changed names of `kind` without naming one.
pub fn note_change(kind: &'static str) {
    note_running(Note::Change(Cow::Borrowed(kind)));
}

impl ScopeNode {
    /// Whether this scope's runtime observes names (check before building a [`Note`]).
    pub(crate) fn observing(&self) -> bool {
        self.shared.observing.load(Ordering::Relaxed)
    }

    /// Notes a look-up of the service `name`, unless this scope requires it (a required
    /// service is waited for, so who provided it first cannot matter).
    pub(crate) fn note_service_read(&self, name: &str) {
        if !self.observing() {
            return;
        }
        let required = self.runner.as_ref().is_some_and(|r| {
            r.inject
                .iter()
                .any(|i| i.required && i.name.as_ref() == name)
        });
        if !required {
            self.note_names(Note::Read(Claim::service(name)));
        }
    }

    /// Notes `what` in this scope's [`NameFootprint`] when its runtime observes names.
    pub(crate) fn note_names(&self, what: Note) {
        if !self.shared.observing.load(Ordering::Relaxed) {
            return;
        }
        let what = match what {
            Note::Write(c) => Note::Write(c.in_space(None)),
            Note::Read(c) => Note::Read(c.in_space(None)),
            other => other,
        };
        lock(&self.state).names.note(what);
    }
}

impl Context {
    /// Turns on (or off) observing what every scope of this runtime does with names (see
    /// [`NameFootprint`]); applies started before it was turned on are not attributed.
    pub fn observe_names(&self, on: bool) {
        self.node.shared.observing.store(on, Ordering::Relaxed);
    }

    /// Whether this runtime observes names.
    pub fn observes_names(&self) -> bool {
        self.node.shared.observing.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;
    use crate::testing::both_runtimes;
    use crate::{FnPlugin, PluginOptions, Prepared};

    struct Beta;
    impl Service for Beta {
        const NAME: &'static str = "beta";
    }

    /// An entry that claims a tool, looks a service up, and notes a registry read from its
    /// apply and from a task it spawns (which adds a permit to `ran` once it has noted: on a
    /// multi-thread runtime it may run after the runtime is idle).
    fn entry(root: &Context, ran: &Arc<tokio::sync::Semaphore>) -> crate::ScopeHandle {
        let ran = ran.clone();
        let plugin = FnPlugin::new("observed", move |ctx: Context, ()| {
            let ran = ran.clone();
            async move {
                drop(ctx.claim(Claim::tool("mine")));
                let _ = ctx.get::<Beta>();
                note_listing("section");
                drop(ctx.spawn(async move {
                    note_read(Claim::tool("theirs"));
                    ran.add_permits(1);
                }));
                Ok(())
            }
        });
        root.plugin_with(
            Prepared::new(plugin, ()),
            PluginOptions {
                label: Some("e".to_owned()),
                ..PluginOptions::default()
            },
        )
    }

    both_runtimes! {
        async fn an_observing_runtime_notes_claims_lookups_and_registry_reads_for_the_running_scope() {
            let root = Context::root();
            root.observe_names(true);
            let ran = Arc::new(tokio::sync::Semaphore::new(0));
            let scope = entry(&root, &ran);
            root.idle().await;
            ran.acquire().await.unwrap().forget();
            let names = scope.info().names;
            assert_eq!(names.writes, [Claim::tool("mine")]);
            assert_eq!(names.reads, [Claim::service("beta"), Claim::tool("theirs")]);
            assert_eq!(names.lists, ["section"]);
            assert!(root.info().names.is_empty());
            root.dispose();
        }

        async fn a_runtime_that_does_not_observe_notes_nothing() {
            let root = Context::root();
            let ran = Arc::new(tokio::sync::Semaphore::new(0));
            let scope = entry(&root, &ran);
            root.idle().await;
            ran.acquire().await.unwrap().forget();
            assert!(scope.info().names.is_empty());
            assert!(!observing(), "no scope is running here");
            root.dispose();
        }
    }
}
