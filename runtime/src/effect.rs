//! Effects: the undo records a scope keeps for everything registered on it.

use std::borrow::Cow;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Weak};

use crate::claim::Claim;
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

/// The effects of one scope in registration order.
///
/// A sorted `Vec`, not a map: effect ids grow, so registration appends, and most scopes hold
/// one or two effects, which a B-tree would give a whole node each. Early removal (a disposed
/// handle) is a binary search and a shift.
#[derive(Default)]
pub(crate) struct Effects(Vec<(EffectId, Effect)>);

impl Effects {
    pub(crate) fn push(&mut self, id: EffectId, effect: Effect) {
        debug_assert!(self.0.last().is_none_or(|(last, _)| *last < id));
        self.0.push((id, effect));
    }

    pub(crate) fn remove(&mut self, id: EffectId) -> Option<Effect> {
        let at = self.0.binary_search_by_key(&id, |(i, _)| *i).ok()?;
        Some(self.0.remove(at).1)
    }

    pub(crate) fn contains(&self, id: EffectId) -> bool {
        self.0.binary_search_by_key(&id, |(i, _)| *i).is_ok()
    }

    /// Every effect, last registered first.
    pub(crate) fn drain_reversed(self) -> impl Iterator<Item = Effect> {
        self.0.into_iter().rev().map(|(_, e)| e)
    }

    pub(crate) fn kinds(&self) -> impl Iterator<Item = EffectKind> + '_ {
        self.0.iter().map(|(_, e)| e.kind)
    }
}

pub(crate) struct Effect {
    pub(crate) kind: EffectKind,
    pub(crate) label: EffectLabel,
    pub(crate) undo: Undo,
}

/// What an effect is called in an incident (`undo of {label}`), read only if its undo panics:
/// a claim's label is its claim, formatted then, so holding a claim costs no label string.
pub(crate) enum EffectLabel {
    /// A label given as text.
    Text(Cow<'static, str>),
    /// A claim, shown as `kind "name"` (its `Display`).
    Claim(Arc<Claim>),
}

impl fmt::Display for EffectLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EffectLabel::Text(text) => f.write_str(text),
            EffectLabel::Claim(claim) => fmt::Display::fmt(claim, f),
        }
    }
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
            (Some(node), Some(id)) => crate::scope::lock(&node.state).effects.contains(id),
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
