//! One run's view of the source files, shared by the boots of that run.
//!
//! `cordis stress` boots one composition thousands of times; without a snapshot each boot
//! walks up the tree for `.git` (on a blocking thread) and opens every candidate file and
//! skills folder again. Inside [`Snapshot::enter`] the walk, each file read and each folder
//! listing is done once per snapshot (whichever thread asks first) and every later boot in the
//! snapshot takes the same result; outside it nothing is kept and every read is fresh. A
//! snapshot never changes what a boot sees while the files stay as they are: it only skips
//! reading them again.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Kept = Arc<dyn Any + Send + Sync>;

/// What one run read, by what was asked (see the module docs).
#[derive(Clone, Default)]
pub struct Snapshot {
    kept: Arc<Mutex<HashMap<String, Kept>>>,
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
pub(crate) fn get<T: Clone + Send + Sync + 'static>(key: &str) -> Option<T> {
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
pub(crate) fn put<T: Send + Sync + 'static>(key: String, value: T) {
    CURRENT.with(|c| {
        if let Some(snapshot) = c.borrow().as_ref() {
            cordis_runtime::lock(&snapshot.kept)
                .entry(key)
                .or_insert_with(|| Arc::new(value));
        }
    });
}

/// Whether a snapshot is current on this thread.
pub(crate) fn active() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// `compute()`, or the result kept for `key` in the current snapshot (computed and kept the
/// first time). Outside a snapshot, `compute()` every time.
pub fn once<T: Clone + Send + Sync + 'static>(
    key: impl FnOnce() -> String,
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
        let mut calls = 0;
        let mut read = |v: u32| {
            calls += 1;
            v
        };
        // Outside: computed every time.
        assert_eq!(once(|| "k".into(), || read(1)), 1);
        assert_eq!(once(|| "k".into(), || read(2)), 2);
        let snapshot = Snapshot::new();
        snapshot.enter(|| {
            assert_eq!(once(|| "k".into(), || read(3)), 3);
            // Kept: the second read is not done.
            assert_eq!(once(|| "k".into(), || read(4)), 3);
        });
        assert_eq!(calls, 3);
        // Another thread entering the same snapshot sees what was kept.
        let seen = std::thread::scope(|s| {
            s.spawn(|| snapshot.enter(|| once(|| "k".into(), || 9u32)))
                .join()
                .unwrap()
        });
        assert_eq!(seen, 3);
        // Left: fresh again.
        assert_eq!(once(|| "k".into(), || 5u32), 5);
        assert!(!active());
    }
}
