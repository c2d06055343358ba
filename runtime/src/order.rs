//! Canonical order of what several scopes register on one list (event listeners, registry
//! guards): by the registering scope's place in the scope tree, never by load time.
//!
//! # Determinism
//! Every scope has an [`OrderKey`]: its parent's key plus its place among its siblings. A host
//! gives each entry's scope its index in the plan ([`crate::PluginOptions::place`]), so the
//! key is the entry's position in the configuration (through its groups), whatever order
//! entries load in; scopes a plugin creates itself come after placed siblings, in the order
//! that plugin created them. Lists sort by the key, then by registration order within one
//! scope: two entries' listeners of one event compose in file order in every schedule.

use std::fmt;
use std::sync::Arc;

/// A scope's place in canonical order: the places of its ancestors' scopes and its own.
/// Compared lexicographically (an ancestor sorts before its descendants).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OrderKey(Arc<[u64]>);

impl OrderKey {
    /// The key of a child at `place` under this key.
    pub(crate) fn child(&self, place: u64) -> OrderKey {
        let mut parts = Vec::with_capacity(self.0.len() + 1);
        parts.extend_from_slice(&self.0);
        parts.push(place);
        OrderKey(parts.into())
    }

    /// The places, root first.
    pub fn places(&self) -> &[u64] {
        &self.0
    }
}

impl fmt::Debug for OrderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OrderKey{:?}", &self.0[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_sort_first_and_siblings_by_place() {
        let root = OrderKey::default();
        let a = root.child(0);
        let b = root.child(1);
        let a_child = a.child(7);
        let mut keys = vec![b.clone(), a_child.clone(), root.clone(), a.clone()];
        keys.sort();
        assert_eq!(keys, [root, a, a_child, b]);
    }
}
