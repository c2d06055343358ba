//! Facts about shared JSON values, remembered by identity.
//!
//! A plugin builds its tool schemas once per process and hands the same `Arc<Value>` to every
//! apply, so each boot (each reload, each stress seed) registers the very same allocation
//! again. What the registry and the request header derive from a schema (its compiled
//! validator, its canonical bytes) is then looked up by the allocation's address instead of
//! being derived again by walking the value.
//!
//! # Why an address is a sound key
//! The memo keeps a clone of every `Arc` it has an entry for, so the allocation cannot be freed
//! (and its address reused by another value) while the entry exists; and a value behind an
//! `Arc` that has a second owner cannot be changed (`Arc::get_mut` refuses, `Arc::make_mut`
//! copies). A value that is not shared this way (built per boot) only misses the memo.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// A bounded map from shared JSON values (by identity) to something derived from them.
pub struct IdentityMemo<T> {
    entries: Mutex<BTreeMap<usize, (Arc<Value>, T)>>,
    limit: usize,
}

impl<T: Clone> IdentityMemo<T> {
    /// An empty memo of at most `limit` entries (all are dropped when it is full: the values a
    /// process shares are few and fixed, so only churn, e.g. an MCP server relisting, fills it).
    pub const fn new(limit: usize) -> Self {
        IdentityMemo {
            entries: Mutex::new(BTreeMap::new()),
            limit,
        }
    }

    /// What `value` maps to, if it has an entry.
    pub fn get(&self, value: &Arc<Value>) -> Option<T> {
        let entries = cordis_runtime::lock(&self.entries);
        let (held, derived) = entries.get(&key(value))?;
        debug_assert!(Arc::ptr_eq(held, value));
        Some(derived.clone())
    }

    /// Remembers `derived` for `value`; returns what is remembered (the first insert wins).
    pub fn insert(&self, value: &Arc<Value>, derived: T) -> T {
        let mut entries = cordis_runtime::lock(&self.entries);
        if entries.len() >= self.limit && !entries.contains_key(&key(value)) {
            entries.clear();
        }
        entries
            .entry(key(value))
            .or_insert_with(|| (value.clone(), derived))
            .1
            .clone()
    }

    /// What `value` maps to, derived by `derive` (outside the lock) on a miss.
    pub fn get_or_derive(&self, value: &Arc<Value>, derive: impl FnOnce(&Value) -> T) -> T {
        if let Some(derived) = self.get(value) {
            return derived;
        }
        let derived = derive(value);
        self.insert(value, derived)
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        cordis_runtime::lock(&self.entries).len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn key(value: &Arc<Value>) -> usize {
    Arc::as_ptr(value) as usize
}

/// The canonical bytes ([`crate::canonical_bytes`]) of a shared value, serialized once per
/// allocation.
pub fn shared_canonical_bytes(value: &Arc<Value>) -> Arc<[u8]> {
    static BYTES: IdentityMemo<Arc<[u8]>> = IdentityMemo::new(1024);
    BYTES.get_or_derive(value, |v| crate::canonical_bytes(v).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_entry_is_found_by_identity_and_not_by_equal_content() {
        let memo = IdentityMemo::new(8);
        let a = Arc::new(json!({"type": "object"}));
        let twin = Arc::new(json!({"type": "object"}));
        assert_eq!(memo.get_or_derive(&a, |_| 1), 1);
        assert_eq!(
            memo.get_or_derive(&a.clone(), |_| 2),
            1,
            "same allocation: a hit"
        );
        assert_eq!(memo.get_or_derive(&twin, |_| 3), 3, "equal content: a miss");
        assert_eq!(memo.len(), 2);
    }

    #[test]
    fn an_entry_keeps_its_value_alive_so_an_address_is_never_reused_under_it() {
        let memo = IdentityMemo::new(8);
        let a = Arc::new(json!({"n": 1}));
        let weak = Arc::downgrade(&a);
        memo.insert(&a, "one");
        drop(a);
        assert!(weak.upgrade().is_some(), "the memo holds the allocation");
        // While it is held, no other value can be allocated at its address.
        let b = Arc::new(json!({"n": 2}));
        assert_eq!(memo.get(&b), None);
        // A full memo starts over.
        let small = IdentityMemo::new(1);
        small.insert(&b, 1);
        let c = Arc::new(json!(3));
        small.insert(&c, 2);
        assert_eq!((small.get(&b), small.get(&c)), (None, Some(2)));
    }

    #[test]
    fn shared_bytes_are_the_canonical_bytes() {
        let v = Arc::new(json!({"b": 1, "a": [true, null, "x\"y"]}));
        assert_eq!(
            &*shared_canonical_bytes(&v),
            &crate::canonical_bytes(&v)[..]
        );
        assert!(Arc::ptr_eq(
            &shared_canonical_bytes(&v),
            &shared_canonical_bytes(&v)
        ));
    }
}
