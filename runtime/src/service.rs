//! Services: typed values published by name into the runtime by the scope that provides them.
//!
//! A service lives exactly as long as its provider's scope (or the effect handle `provide`
//! returns). Plugins that inject it by name wait, pending, until it exists; when it is withdrawn
//! they unwind back to pending, and they are applied again when it returns — cordis's behaviour.
//!
//! # Determinism
//! Two entries providing one name is a conflict, not a race: the name is *contested* (see
//! [`crate::Claim`]), nobody gets it ([`Context::require`] says so, dependents wait), both
//! entries report the conflict, and when one leaves the other's value is provided.

use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rustc_hash::FxHashMap;

use crate::claim::Claim;
use crate::context::{Context, Shared};
use crate::effect::{EffectHandle, EffectKind};
use crate::error::ServiceError;
use crate::plugin::{Inject, start};
use crate::scope::{AddError, ScopeId, ScopeStatus, Unwind, lock};

/// A value other plugins can look up by name.
pub trait Service: Send + Sync + 'static {
    /// The name plugins inject it by (e.g. `tools`).
    const NAME: &'static str;
}

struct Slot {
    value: Arc<dyn Any + Send + Sync>,
    type_name: &'static str,
    /// The providing scope.
    scope: ScopeId,
    /// The entry it provides for (see [`crate::Claim`]).
    owner: ScopeId,
    owner_label: Arc<str>,
}

/// The runtime's service table and the index of who waits for what.
///
/// Hash maps keyed by name, looked up by `&str` (Fx: the names are ours, not an attacker's).
/// Their order never reaches an output: [`Context::service_names`] sorts, and dependents are
/// kept sorted per name.
#[derive(Default)]
pub(crate) struct ServiceTable {
    /// Every provider of a name; the name is usable only with exactly one.
    slots: FxHashMap<String, Vec<Slot>>,
    /// Scopes whose plugin requires the service, by service name, sorted by id.
    dependents: FxHashMap<String, Vec<ScopeId>>,
}

impl ServiceTable {
    pub(crate) fn add_dependent(&mut self, scope: ScopeId, inject: &[Inject]) {
        for i in inject.iter().filter(|i| i.required) {
            // The name is copied only the first time a scope depends on it.
            match self.dependents.get_mut(i.name.as_ref()) {
                Some(ids) => {
                    if let Err(at) = ids.binary_search(&scope) {
                        ids.insert(at, scope);
                    }
                }
                None => {
                    self.dependents.insert(i.name.to_string(), vec![scope]);
                }
            }
        }
    }

    pub(crate) fn forget_dependent(&mut self, scope: ScopeId, inject: &[Inject]) {
        for i in inject.iter().filter(|i| i.required) {
            if let Some(ids) = self.dependents.get_mut(i.name.as_ref()) {
                if let Ok(at) = ids.binary_search(&scope) {
                    ids.remove(at);
                }
                if ids.is_empty() {
                    self.dependents.remove(i.name.as_ref());
                }
            }
        }
    }

    /// Forgets every dependent at once (the runtime closed; see [`Shared::closing`]).
    pub(crate) fn forget_all_dependents(&mut self) {
        self.dependents = FxHashMap::default();
    }

    /// The one provider of `name`, if exactly one provides it.
    fn sole(&self, name: &str) -> Option<&Slot> {
        match self.slots.get(name).map(Vec::as_slice) {
            Some([slot]) => Some(slot),
            _ => None,
        }
    }

    /// The first scope after `after` (from the start with `None`) that requires `name`.
    fn next_dependent(&self, name: &str, after: Option<ScopeId>) -> Option<ScopeId> {
        let ids = self.dependents.get(name)?;
        let at = match after {
            None => 0,
            Some(after) => ids.partition_point(|id| *id <= after),
        };
        ids.get(at).copied()
    }

    /// The highest scope id that requires `name`, if any does.
    fn last_dependent(&self, name: &str) -> Option<ScopeId> {
        self.dependents
            .get(name)
            .and_then(|ids| ids.last().copied())
    }
}

impl Shared {
    /// The required injections that no one provides yet, sorted.
    pub(crate) fn missing_services(&self, inject: &[Inject]) -> Vec<String> {
        let table = lock(&self.services);
        inject
            .iter()
            .filter(|i| i.required && table.sole(i.name.as_ref()).is_none())
            .map(|i| i.name.to_string())
            .collect()
    }

    /// True when every required injection has its one provider (what an empty
    /// [`Shared::missing_services`] says, without building the list).
    pub(crate) fn services_ready(&self, inject: &[Inject]) -> bool {
        let table = lock(&self.services);
        inject
            .iter()
            .all(|i| !i.required || table.sole(i.name.as_ref()).is_some())
    }

    /// Calls `each` with every live scope that requires `name`, in scope-id order, without
    /// holding the table while it runs (it may start or unwind scopes, which use the table).
    ///
    /// Walks the index afresh after each call instead of copying it first, visiting what a copy
    /// taken at the start would: a scope that left the index meanwhile is skipped (it was
    /// unregistered), and one that joined during the walk is not visited (ids grow, so it is
    /// past the last id the walk started with).
    fn each_dependent(&self, name: &str, mut each: impl FnMut(Arc<crate::scope::ScopeNode>)) {
        let Some(last) = lock(&self.services).last_dependent(name) else {
            return;
        };
        let mut after = None;
        loop {
            // Its own statement: a guard in a `while let` condition would live through the body.
            let next = lock(&self.services).next_dependent(name, after);
            let Some(id) = next.filter(|id| *id <= last) else {
                break;
            };
            after = Some(id);
            if let Some(node) = self.scope(id) {
                each(node);
            }
        }
    }

    /// A service appeared: start the pending scopes that wait for it, in scope-id order.
    fn service_provided(&self, name: &str) {
        // A closing runtime starts nothing (see `Shared::closing`).
        if self.closing() {
            return;
        }
        self.each_dependent(name, |node| start(&node));
    }

    /// A service went away: unwind the scopes that required it back to pending.
    fn service_withdrawn(&self, name: &str) {
        // A closing runtime disposes those scopes moments later: unwinding them now would only
        // run their undos out of the documented order and try to start them again.
        if self.closing() {
            return;
        }
        self.each_dependent(name, |node| {
            if matches!(
                node.status(),
                ScopeStatus::Loading | ScopeStatus::Active | ScopeStatus::Failed
            ) {
                node.unwind(Unwind::Pending);
                // Another provider may have stepped in meanwhile.
                start(&node);
            }
        });
    }
}

impl Context {
    /// Publishes `value` as the service `S::NAME`, owned by this scope.
    ///
    /// # Errors
    /// [`ServiceError::AlreadyProvided`] if this scope's entry provides the name already (another
    /// entry providing it makes the name contested instead, see the module docs);
    /// [`ServiceError::ScopeGone`] if this context's scope is disposed or restarted.
    pub fn provide<S: Service>(&self, value: S) -> Result<EffectHandle, ServiceError> {
        self.provide_arc(Arc::new(value))
    }

    /// Like [`Context::provide`] for a value already in an `Arc`.
    ///
    /// # Errors
    /// As [`Context::provide`].
    pub fn provide_arc<S: Service>(&self, value: Arc<S>) -> Result<EffectHandle, ServiceError> {
        let shared = self.node.shared.clone();
        let name = S::NAME;
        if self.node.observing() {
            self.node
                .note_names(crate::observe::Note::Write(Claim::service(name)));
        }
        let scope = self.node.id;
        let (owner, owner_label) = self.node.claim_owner();
        let undo_shared = Arc::downgrade(&shared);
        let claim = Arc::new(Claim::service(name));
        // How many provide the name once this one does.
        let mut providers = 0;
        let added = self.node.add_effect(
            self.generation,
            EffectKind::Service,
            Cow::Borrowed(name),
            || {
                let mut table = lock(&shared.services);
                let slots = table.slots.entry(name.to_owned()).or_default();
                if let Some(mine) = slots.iter().find(|s| s.owner == owner) {
                    // One entry providing a name twice is that entry's own (deterministic) bug.
                    return Err(ServiceError::AlreadyProvided {
                        name: name.to_owned(),
                        owner: mine.owner_label.to_string(),
                    });
                }
                slots.push(Slot {
                    value,
                    type_name: std::any::type_name::<S>(),
                    scope,
                    owner,
                    owner_label: owner_label.clone(),
                });
                providers = slots.len();
                drop(table);
                let _ = shared.hold(&self.node, &claim);
                shared.counters.services.fetch_add(1, Ordering::Relaxed);
                Ok(Box::new(move || {
                    let Some(shared) = undo_shared.upgrade() else {
                        return;
                    };
                    let left = {
                        let mut table = lock(&shared.services);
                        let Some(slots) = table.slots.get_mut(name) else {
                            return;
                        };
                        let Some(at) = slots.iter().position(|s| s.scope == scope) else {
                            return;
                        };
                        slots.remove(at);
                        let left = slots.len();
                        if left == 0 {
                            table.slots.remove(name);
                        }
                        left
                    };
                    shared.release(&claim, owner);
                    shared.counters.services.fetch_sub(1, Ordering::Relaxed);
                    match left {
                        0 => {
                            tracing::debug!(service = name, "service withdrawn");
                            shared.service_withdrawn(name);
                        }
                        // The survivor of a contest gets the name.
                        1 => shared.service_provided(name),
                        _ => {}
                    }
                }))
            },
        );
        match added {
            Ok(id) => {
                match providers {
                    1 => {
                        tracing::debug!(service = name, scope = scope.0, "service provided");
                        shared.service_provided(name);
                    }
                    2 => {
                        // Contested now: whoever used the first provider waits again.
                        tracing::debug!(service = name, scope = scope.0, "service contested");
                        shared.service_withdrawn(name);
                    }
                    _ => {}
                }
                Ok(EffectHandle::new(&self.node, id))
            }
            Err(AddError::Gone) => Err(ServiceError::ScopeGone {
                name: name.to_owned(),
            }),
            Err(AddError::Refused(e)) => Err(e),
        }
    }

    /// The service `S::NAME`, if provided (and of type `S`).
    pub fn get<S: Service>(&self) -> Option<Arc<S>> {
        self.require::<S>().ok()
    }

    /// The service `S::NAME`.
    ///
    /// # Errors
    /// [`ServiceError::Missing`] when nobody provides it; [`ServiceError::WrongType`] when the
    /// name is taken by another type.
    pub fn require<S: Service>(&self) -> Result<Arc<S>, ServiceError> {
        self.node.note_service_read(S::NAME);
        let table = lock(&self.node.shared.services);
        let slot = match table.slots.get(S::NAME).map(Vec::as_slice) {
            None | Some([]) => {
                return Err(ServiceError::Missing {
                    name: S::NAME.to_owned(),
                });
            }
            Some([slot]) => slot,
            Some(contested) => {
                let mut holders: Vec<&str> = contested.iter().map(|s| &*s.owner_label).collect();
                holders.sort_unstable();
                return Err(ServiceError::Contested {
                    name: S::NAME.to_owned(),
                    holders: crate::claim::quoted_list(&holders),
                });
            }
        };
        slot.value
            .clone()
            .downcast::<S>()
            .map_err(|_| ServiceError::WrongType {
                name: S::NAME.to_owned(),
                expected: std::any::type_name::<S>(),
                actual: slot.type_name,
            })
    }

    /// True when a service of this name is provided (by exactly one entry: a contested name is
    /// nobody's).
    pub fn has_service(&self, name: &str) -> bool {
        self.node.note_service_read(name);
        lock(&self.node.shared.services).sole(name).is_some()
    }

    /// The names of all provided (uncontested) services, sorted.
    pub fn service_names(&self) -> Vec<String> {
        if self.node.observing() {
            self.node
                .note_names(crate::observe::Note::List("service".into()));
        }
        let table = lock(&self.node.shared.services);
        let mut names: Vec<String> = table
            .slots
            .iter()
            .filter(|(_, slots)| slots.len() == 1)
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::ServiceError;
    use crate::prelude::*;
    use crate::testing::both_runtimes;

    struct Counter(u32);
    impl Service for Counter {
        const NAME: &'static str = "counter";
    }
    struct Impostor;
    impl Service for Impostor {
        const NAME: &'static str = "counter";
    }

    both_runtimes! {
        async fn a_service_is_withdrawn_when_its_scope_ends() {
            let root = Context::root();
            let child = root.child_scope("provider");
            child.context().unwrap().provide(Counter(7)).unwrap();
            assert_eq!(root.get::<Counter>().unwrap().0, 7);
            assert_eq!(root.service_names(), ["counter"]);
            assert_eq!(root.live().services, 1);
            child.dispose();
            assert!(root.get::<Counter>().is_none());
            assert_eq!(root.live().services, 0);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn a_second_provider_of_the_same_name_is_refused() {
            let root = Context::root();
            root.provide(Counter(1)).unwrap();
            let err = root.provide(Counter(2)).unwrap_err();
            assert!(matches!(err, ServiceError::AlreadyProvided { .. }));
            assert_eq!(err.to_string(), "service \"counter\" is provided twice by entry \"root\"");
            assert_eq!(root.get::<Counter>().unwrap().0, 1);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn two_entries_providing_one_name_contest_it_until_one_leaves() {
            use crate::{FnPlugin, PluginOptions, Prepared};
            let root = Context::root();
            let entry = |label: &str, n: u32| {
                root.plugin_with(
                    Prepared::new(
                        FnPlugin::new(label, move |ctx: Context, ()| async move {
                            ctx.provide(Counter(n))?;
                            Ok(())
                        }),
                        (),
                    ),
                    PluginOptions { label: Some(label.to_owned()), ..PluginOptions::default() },
                )
            };
            let user = root.plugin(
                FnPlugin::new("user", |ctx: Context, ()| async move {
                    assert!(ctx.get::<Counter>().is_some());
                    Ok(())
                })
                .inject(Inject::required("counter")),
                (),
            );
            let (b, a) = (entry("b", 2), entry("a", 1));
            root.idle().await;
            // Both entries are active and report one conflict; nobody gets the service.
            assert_eq!(a.status(), ScopeStatus::Active);
            assert_eq!(b.status(), ScopeStatus::Active);
            assert_eq!(a.info().conflicts, b.info().conflicts);
            assert!(a.info().conflicts[0].contains("service \"counter\" is claimed by entries \"a\" and \"b\""), "{:?}", a.info().conflicts);
            let err = root.require::<Counter>().err().unwrap();
            assert_eq!(err.to_string(), "service \"counter\" is contested: entries \"a\" and \"b\" all provide it");
            assert!(!root.has_service("counter"));
            assert_eq!(user.status(), ScopeStatus::Pending);
            assert_eq!(user.info().missing, ["counter"]);
            // The survivor is released when the other leaves.
            b.dispose();
            root.idle().await;
            assert_eq!(root.get::<Counter>().unwrap().0, 1);
            assert_eq!(user.status(), ScopeStatus::Active);
            assert!(a.info().conflicts.is_empty());
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn a_service_of_another_type_under_the_name_is_reported() {
            let root = Context::root();
            root.provide_arc(Arc::new(Impostor)).unwrap();
            let err = root.require::<Counter>().err().unwrap();
            assert!(matches!(err, ServiceError::WrongType { .. }), "{err}");
            root.dispose();
        }

        async fn providing_from_a_disposed_scope_fails_cleanly() {
            let root = Context::root();
            let child = root.child_scope("gone");
            let ctx = child.context().unwrap();
            child.dispose();
            assert!(matches!(ctx.provide(Counter(1)), Err(ServiceError::ScopeGone { .. })));
            assert!(root.get::<Counter>().is_none());
            root.dispose();
            assert!(root.live().is_zero());
        }
    }
}
