//! Services: typed values published by name into the runtime by the scope that provides them.
//!
//! A service lives exactly as long as its provider's scope (or the effect handle `provide`
//! returns). Plugins that inject it by name wait, pending, until it exists; when it is withdrawn
//! they unwind back to pending, and they are applied again when it returns — cordis's behaviour.

use std::any::Any;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;

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
    owner: ScopeId,
    owner_plugin: String,
}

/// The runtime's service table and the index of who waits for what.
#[derive(Default)]
pub(crate) struct ServiceTable {
    slots: HashMap<String, Slot>,
    /// Scopes whose plugin requires the service, by service name.
    dependents: HashMap<String, BTreeSet<ScopeId>>,
}

impl ServiceTable {
    pub(crate) fn add_dependent(&mut self, scope: ScopeId, inject: &[Inject]) {
        for i in inject.iter().filter(|i| i.required) {
            self.dependents
                .entry(i.name.to_string())
                .or_default()
                .insert(scope);
        }
    }

    pub(crate) fn forget_dependent(&mut self, scope: ScopeId, inject: &[Inject]) {
        for i in inject.iter().filter(|i| i.required) {
            if let Some(set) = self.dependents.get_mut(i.name.as_ref()) {
                set.remove(&scope);
                if set.is_empty() {
                    self.dependents.remove(i.name.as_ref());
                }
            }
        }
    }

    fn dependents_of(&self, name: &str) -> Vec<ScopeId> {
        self.dependents
            .get(name)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

impl Shared {
    /// The required injections that no one provides yet, sorted.
    pub(crate) fn missing_services(&self, inject: &[Inject]) -> Vec<String> {
        let table = lock(&self.services);
        inject
            .iter()
            .filter(|i| i.required && !table.slots.contains_key(i.name.as_ref()))
            .map(|i| i.name.to_string())
            .collect()
    }

    /// A service appeared: start the pending scopes that wait for it, in scope-id order.
    fn service_provided(&self, name: &str) {
        let dependents = lock(&self.services).dependents_of(name);
        for id in dependents {
            if let Some(node) = self.scope(id) {
                start(&node);
            }
        }
    }

    /// A service went away: unwind the scopes that required it back to pending.
    fn service_withdrawn(&self, name: &str) {
        let dependents = lock(&self.services).dependents_of(name);
        for id in dependents {
            if let Some(node) = self.scope(id)
                && matches!(
                    node.status(),
                    ScopeStatus::Loading | ScopeStatus::Active | ScopeStatus::Failed
                )
            {
                node.unwind(Unwind::Pending);
                // Another provider may have stepped in meanwhile.
                start(&node);
            }
        }
    }
}

impl Context {
    /// Publishes `value` as the service `S::NAME`, owned by this scope.
    ///
    /// # Errors
    /// [`ServiceError::AlreadyProvided`] if another scope provides the name;
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
        let scope = self.node.id;
        let plugin = self.node.name.to_string();
        let undo_shared = Arc::downgrade(&shared);
        let added = self.node.add_effect(
            self.generation,
            EffectKind::Service,
            Cow::Borrowed(name),
            || {
                let mut table = lock(&shared.services);
                if let Some(slot) = table.slots.get(name) {
                    return Err(ServiceError::AlreadyProvided {
                        name: name.to_owned(),
                        owner: slot.owner.0,
                        owner_plugin: slot.owner_plugin.clone(),
                    });
                }
                table.slots.insert(
                    name.to_owned(),
                    Slot {
                        value,
                        type_name: std::any::type_name::<S>(),
                        owner: scope,
                        owner_plugin: plugin,
                    },
                );
                shared.counters.services.fetch_add(1, Ordering::Relaxed);
                Ok(Box::new(move || {
                    let Some(shared) = undo_shared.upgrade() else {
                        return;
                    };
                    let removed = lock(&shared.services).slots.remove(name);
                    if removed.is_some() {
                        shared.counters.services.fetch_sub(1, Ordering::Relaxed);
                        tracing::debug!(service = name, "service withdrawn");
                        shared.service_withdrawn(name);
                    }
                }))
            },
        );
        match added {
            Ok(id) => {
                tracing::debug!(service = name, scope = scope.0, "service provided");
                shared.service_provided(name);
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
        let table = lock(&self.node.shared.services);
        let slot = table
            .slots
            .get(S::NAME)
            .ok_or_else(|| ServiceError::Missing {
                name: S::NAME.to_owned(),
            })?;
        slot.value
            .clone()
            .downcast::<S>()
            .map_err(|_| ServiceError::WrongType {
                name: S::NAME.to_owned(),
                expected: std::any::type_name::<S>(),
                actual: slot.type_name,
            })
    }

    /// True when a service of this name is provided.
    pub fn has_service(&self, name: &str) -> bool {
        lock(&self.node.shared.services).slots.contains_key(name)
    }

    /// The names of all provided services, sorted.
    pub fn service_names(&self) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.node.shared.services)
            .slots
            .keys()
            .cloned()
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
            assert!(err.to_string().contains("already provided by scope 0 (root)"), "{err}");
            assert_eq!(root.get::<Counter>().unwrap().0, 1);
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
