//! Listener lists shared by events and waterfalls: ordered, prepend-able, snapshot on dispatch.
//!
//! Registration and removal are O(log n); dispatch takes a snapshot (rebuilt only after a change)
//! and calls listeners without holding any lock, so a listener may register or dispose listeners.
//!
//! # Determinism
//! Listeners of one event run in canonical order, never in load order: every
//! [`Position::Front`] listener before every [`Position::Back`] one; within each band by the
//! registering scope's [`crate::OrderKey`] (its entry's place in the configuration); within
//! one scope, back listeners in registration order and front ones in reverse (each prepends).

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use crate::context::{Context, Shared};
use crate::effect::{EffectHandle, EffectKind};
use crate::scope::{AddError, ScopeId, ScopeNode, lock};

/// Where a new listener goes among the existing ones (see the canonical order on
/// [`crate::Event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Position {
    /// After the listeners registered so far by its scope, in the back band (the default).
    #[default]
    Back,
    /// Before the listeners registered so far by its scope, in the front band, which runs
    /// before every back listener (cordis's `prepend`).
    Front,
}

/// Where a listener sits in its list: band, registering scope, then sequence within the scope.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    /// 0 for front listeners, 1 for back ones.
    band: u8,
    scope: crate::OrderKey,
    seq: i64,
}

pub(crate) struct Entry<H> {
    pub(crate) scope: ScopeId,
    pub(crate) plugin: Arc<str>,
    pub(crate) node: Weak<ScopeNode>,
    pub(crate) handler: H,
}

impl<H: Clone> Clone for Entry<H> {
    fn clone(&self) -> Self {
        Entry {
            scope: self.scope,
            plugin: self.plugin.clone(),
            node: self.node.clone(),
            handler: self.handler.clone(),
        }
    }
}

pub(crate) struct List<H> {
    entries: BTreeMap<Key, Entry<H>>,
    front: i64,
    back: i64,
    snapshot: Option<Arc<[Entry<H>]>>,
}

impl<H> Default for List<H> {
    fn default() -> Self {
        List {
            entries: BTreeMap::new(),
            front: 0,
            back: 0,
            snapshot: None,
        }
    }
}

type Shelf<H> = Arc<Mutex<List<H>>>;

impl Shared {
    fn shelf<H: Send + Sync + 'static>(&self) -> Option<Shelf<H>> {
        let map = lock(&self.listeners);
        map.get(&TypeId::of::<H>())
            .and_then(|a| a.clone().downcast::<Mutex<List<H>>>().ok())
    }

    fn shelf_or_create<H: Send + Sync + 'static>(&self) -> Shelf<H> {
        let mut map = lock(&self.listeners);
        let any = map
            .entry(TypeId::of::<H>())
            .or_insert_with(|| {
                Arc::new(Mutex::new(List::<H>::default())) as Arc<dyn Any + Send + Sync>
            })
            .clone();
        any.downcast::<Mutex<List<H>>>()
            .expect("listener lists are keyed by their handler type")
    }

    /// The current listeners for handler type `H`, in dispatch order; `None` when none was
    /// ever registered (an empty list then costs no allocation).
    pub(crate) fn snapshot<H: Clone + Send + Sync + 'static>(&self) -> Option<Arc<[Entry<H>]>> {
        let shelf = self.shelf::<H>()?;
        let mut list = lock(&shelf);
        if let Some(s) = &list.snapshot {
            return Some(s.clone());
        }
        let snap: Arc<[Entry<H>]> = list.entries.values().cloned().collect();
        list.snapshot = Some(snap.clone());
        Some(snap)
    }
}

/// Adds a listener with handler type `H` as an effect of `ctx`'s scope.
pub(crate) fn add<H: Clone + Send + Sync + 'static>(
    ctx: &Context,
    event: &'static str,
    position: Position,
    handler: H,
) -> EffectHandle {
    let shared = &ctx.node.shared;
    let shelf = shared.shelf_or_create::<H>();
    let entry = Entry {
        scope: ctx.node.id,
        plugin: ctx.node.name.clone(),
        node: Arc::downgrade(&ctx.node),
        handler,
    };
    let weak_shared = Arc::downgrade(shared);
    let scope_key = ctx.node.order.clone();
    let added = ctx.node.add_effect::<()>(
        ctx.generation,
        EffectKind::Listener,
        Cow::Borrowed(event),
        || {
            let key = {
                let mut list = lock(&shelf);
                let (band, seq) = match position {
                    Position::Back => {
                        list.back += 1;
                        (1, list.back)
                    }
                    Position::Front => {
                        list.front -= 1;
                        (0, list.front)
                    }
                };
                let key = Key {
                    band,
                    scope: scope_key,
                    seq,
                };
                list.entries.insert(key.clone(), entry);
                list.snapshot = None;
                key
            };
            shared.counters.listeners.fetch_add(1, Ordering::Relaxed);
            let shelf = shelf.clone();
            Ok(Box::new(move || {
                let removed = {
                    let mut list = lock(&shelf);
                    let removed = list.entries.remove(&key).is_some();
                    if removed {
                        list.snapshot = None;
                    }
                    removed
                };
                if let (true, Some(shared)) = (removed, weak_shared.upgrade()) {
                    shared.counters.listeners.fetch_sub(1, Ordering::Relaxed);
                }
            }))
        },
    );
    match added {
        Ok(id) => EffectHandle::new(&ctx.node, id),
        Err(AddError::Gone | AddError::Refused(())) => EffectHandle::inert(),
    }
}

/// Records a contained listener panic.
pub(crate) fn report_panic<H>(shared: &Shared, entry: &Entry<H>, event: &str, message: String) {
    tracing::error!(scope = entry.scope.0, plugin = %entry.plugin, event, %message, "listener panicked");
    if let Some(node) = entry.node.upgrade() {
        shared.incident(&node, format!("listener of \"{event}\""), message);
    }
}
