//! Effects: the undo records a scope keeps for everything registered on it.

use std::borrow::Cow;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Weak};

use crate::context::Context;
use crate::error::panic_message;
use crate::scope::{AddError, ScopeNode};

/// Identifies one effect; ids grow, so a scope's effects iterate in registration order.
pub(crate) type EffectId = u64;

/// The undo half of an effect.
pub(crate) type Undo = Box<dyn FnOnce() + Send + 'static>;

/// What kind of registration an effect undoes, for leak accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectKind {
    /// An event or waterfall listener.
    Listener,
    /// A provided service.
    Service,
    /// A child scope.
    Scope,
    /// A spawned task.
    Task,
    /// Anything else: a user `ctx.effect(...)`, or a registration a plugin owns (tools, sections).
    Custom,
}

pub(crate) struct Effect {
    pub(crate) kind: EffectKind,
    pub(crate) label: Cow<'static, str>,
    pub(crate) undo: Undo,
}

impl Effect {
    /// Runs the undo; a panic is contained and reported as an incident of `scope`.
    pub(crate) fn run(self, scope: &ScopeNode) {
        let Effect { label, undo, .. } = self;
        if let Err(payload) = catch_unwind(AssertUnwindSafe(undo)) {
            let message = panic_message(&*payload);
            tracing::error!(scope = scope.id.0, plugin = %scope.name, effect = %label, %message, "effect undo panicked");
            scope
                .shared
                .incident(scope, format!("undo of {label}"), message);
        }
    }
}

/// A handle on one effect: disposing it runs its undo now and forgets it.
///
/// Dropping the handle does nothing; the effect stays until its scope unwinds.
#[derive(Debug, Clone, Default)]
pub struct EffectHandle {
    pub(crate) node: Weak<ScopeNode>,
    pub(crate) id: Option<EffectId>,
}

impl EffectHandle {
    /// True while the effect is registered.
    pub fn is_live(&self) -> bool {
        match (self.node.upgrade(), self.id) {
            (Some(node), Some(id)) => crate::scope::lock(&node.state).effects.contains_key(&id),
            _ => false,
        }
    }

    /// Undoes the effect now. Idempotent.
    pub fn dispose(&self) {
        if let (Some(node), Some(id)) = (self.node.upgrade(), self.id)
            && let Some(effect) = node.take_effect(id)
        {
            effect.run(&node);
        }
    }

    pub(crate) fn inert() -> Self {
        EffectHandle::default()
    }

    pub(crate) fn new(node: &Arc<ScopeNode>, id: EffectId) -> Self {
        EffectHandle {
            node: Arc::downgrade(node),
            id: Some(id),
        }
    }
}

impl Context {
    /// Registers `undo` to run when this scope unwinds (or when the returned handle is disposed).
    ///
    /// If the scope is already disposed, or this context is stale (its plugin was restarted),
    /// `undo` runs at once and the handle is inert: a late registration never leaks.
    pub fn effect(
        &self,
        label: impl Into<Cow<'static, str>>,
        undo: impl FnOnce() + Send + 'static,
    ) -> EffectHandle {
        self.effect_of_kind(EffectKind::Custom, label.into(), undo)
    }

    /// Like [`Context::effect`], with the kind used for leak accounting.
    pub fn effect_of_kind(
        &self,
        kind: EffectKind,
        label: impl Into<Cow<'static, str>>,
        undo: impl FnOnce() + Send + 'static,
    ) -> EffectHandle {
        let mut undo = Some(undo);
        match self
            .node
            .add_effect::<()>(self.generation, kind, label.into(), || {
                Ok(Box::new(undo.take().expect("called once")))
            }) {
            Ok(id) => EffectHandle::new(&self.node, id),
            Err(AddError::Gone | AddError::Refused(())) => {
                if let Some(undo) = undo {
                    undo();
                }
                EffectHandle::inert()
            }
        }
    }
}
