//! One run's view of the file system, shared by the boots of that run.
//!
//! `cordis stress` boots one composition thousands of times; without a snapshot each boot
//! makes the workspace root absolute (`getcwd`) and opens it, walks up the tree for `.git` (on
//! a blocking thread) and opens every candidate instructions file and skills folder again.
//! Inside [`Snapshot::enter`] the open, the walk, each file read and each folder listing is
//! done once per snapshot (whichever thread asks first) and every later boot in the snapshot
//! takes the same result; outside it nothing is kept and every read is fresh. A snapshot never
//! changes what a boot sees while the files (and the process's current directory, which no
//! part of cordis changes) stay as they are: it only skips reading them again.
//!
//! It lives here, below the `instructions` and `skills` plugins that read through it, so the
//! workspace's own open takes part; `cordis_instructions::Snapshot` is this type.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

type Kept = Arc<dyn Any + Send + Sync>;

/// What a result is kept under: a kind, then the parts the result depends on.
///
/// Every part is written with its length (numbers and tags with a fixed width), so two
/// different lists of parts never make the same key; and building one copies bytes instead of
/// formatting (a path's `Debug` escapes it character by character).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(Vec<u8>);

impl Key {
    /// A key of kind `kind` (`"read"`, `"walk"`): keys of different kinds never meet.
    #[must_use]
    pub fn new(kind: &str) -> Key {
        Key(Vec::with_capacity(96)).bytes(kind.as_bytes())
    }

    /// Adds `bytes`, length first.
    #[must_use]
    pub fn bytes(mut self, bytes: &[u8]) -> Key {
        self.0
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.0.extend_from_slice(bytes);
        self
    }

    /// Adds a string.
    #[must_use]
    pub fn str(self, s: &str) -> Key {
        self.bytes(s.as_bytes())
    }

    /// Adds a path (its bytes as the OS holds them).
    #[must_use]
    pub fn path(self, path: &Path) -> Key {
        self.bytes(path.as_os_str().as_encoded_bytes())
    }

    /// Adds a number.
    #[must_use]
    pub fn num(mut self, n: u64) -> Key {
        self.0.extend_from_slice(&n.to_le_bytes());
        self
    }

    /// Adds a one-byte tag (which variant or whether an optional part follows).
    #[must_use]
    pub fn tag(mut self, tag: u8) -> Key {
        self.0.push(tag);
        self
    }

    /// Adds an optional path: a tag, then the path when there is one.
    #[must_use]
    pub fn opt_path(self, path: Option<&Path>) -> Key {
        match path {
            None => self.tag(0),
            Some(path) => self.tag(1).path(path),
        }
    }
}

/// What one run read, by what was asked (see the module docs).
#[derive(Clone, Default)]
pub struct Snapshot {
    kept: Arc<Mutex<HashMap<Key, Kept>>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("kept", &cordis_runtime::lock(&self.kept).len())
            .finish()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Snapshot>> = const { RefCell::new(None) };
}

/// Puts back the snapshot that was current before [`Snapshot::enter`] (also on unwinding).
struct Restore(Option<Snapshot>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

impl Snapshot {
    /// An empty snapshot.
    #[must_use]
    pub fn new() -> Self {
        Snapshot::default()
    }

    /// Runs `f` with this snapshot current on this thread: reads in `f` (on this thread, as a
    /// current-thread runtime's tasks are) go through it.
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        f()
    }

    /// How many results are kept.
    #[must_use]
    pub fn len(&self) -> usize {
        cordis_runtime::lock(&self.kept).len()
    }

    /// Whether nothing is kept yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The result kept for `key` in the current snapshot; `None` outside one or when not kept.
pub fn get<T: Clone + Send + Sync + 'static>(key: &Key) -> Option<T> {
    CURRENT.with(|c| {
        let current = c.borrow();
        let kept = cordis_runtime::lock(&current.as_ref()?.kept)
            .get(key)?
            .clone();
        kept.downcast_ref::<T>().cloned()
    })
}

/// Keeps `value` for `key` in the current snapshot (nothing outside one). The first value
/// kept for a key stays.
pub fn put<T: Send + Sync + 'static>(key: Key, value: T) {
    CURRENT.with(|c| {
        if let Some(snapshot) = c.borrow().as_ref() {
            cordis_runtime::lock(&snapshot.kept)
                .entry(key)
                .or_insert_with(|| Arc::new(value));
        }
    });
}

/// Whether a snapshot is current on this thread.
#[must_use]
pub fn active() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// `compute()`, or the result kept for `key` in the current snapshot (computed and kept the
/// first time). Outside a snapshot, `compute()` every time (and no key is built).
pub fn once<T: Clone + Send + Sync + 'static>(
    key: impl FnOnce() -> Key,
    compute: impl FnOnce() -> T,
) -> T {
    if !active() {
        return compute();
    }
    let key = key();
    if let Some(kept) = get::<T>(&key) {
        return kept;
    }
    let value = compute();
    put(key, value.clone());
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_kept_inside_a_snapshot_only_and_shared_across_threads() {
        let k = || Key::new("k");
        let mut calls = 0;
        let mut read = |v: u32| {
            calls += 1;
            v
        };
        // Outside: computed every time.
        assert_eq!(once(k, || read(1)), 1);
        assert_eq!(once(k, || read(2)), 2);
        let snapshot = Snapshot::new();
        snapshot.enter(|| {
            assert_eq!(once(k, || read(3)), 3);
            // Kept: the second read is not done.
            assert_eq!(once(k, || read(4)), 3);
            // Another key is another result.
            assert_eq!(once(|| Key::new("k").num(1), || read(6)), 6);
        });
        assert_eq!(calls, 4);
        // Another thread entering the same snapshot sees what was kept.
        let seen = std::thread::scope(|s| {
            s.spawn(|| snapshot.enter(|| once(k, || 9u32)))
                .join()
                .unwrap()
        });
        assert_eq!(seen, 3);
        // Left: fresh again.
        assert_eq!(once(k, || 5u32), 5);
        assert!(!active());
    }

    #[test]
    fn keys_of_different_parts_differ() {
        // The same bytes split differently, or a part moved between tags, never collide.
        assert_ne!(Key::new("a").str("bc"), Key::new("ab").str("c"));
        assert_ne!(
            Key::new("k").str("a").str("b"),
            Key::new("k").str("a\0\0\0\0\0\0\0\0b")
        );
        assert_ne!(Key::new("k").str("ab"), Key::new("k").str("a").str("b"));
        assert_ne!(
            Key::new("k").opt_path(None).num(1),
            Key::new("k").opt_path(Some(Path::new(""))).num(1)
        );
        assert_ne!(
            Key::new("k").path(Path::new("/a")),
            Key::new("k").path(Path::new("/b"))
        );
        assert_eq!(
            Key::new("k").path(Path::new("/a")).num(7),
            Key::new("k").path(Path::new("/a")).num(7)
        );
    }
}
