//! Tasks owned by scopes: a spawned task is an effect, aborted when its scope unwinds.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};

use futures_util::FutureExt;
use tokio::task::AbortHandle;

use crate::context::{Context, Shared};
use crate::effect::{EffectHandle, EffectKind};
use crate::error::panic_message;
use crate::scope::{ScopeNode, lock};

/// Counts a task while its future exists (finished, aborted or dropped at shutdown alike).
struct TaskGuard(Weak<Shared>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade()
            && shared.counters.tasks.fetch_sub(1, Ordering::AcqRel) == 1
        {
            shared.tasks_done_tx.send_replace(true);
        }
    }
}

/// Wraps `fut` so the runtime counts it as a live task while its future exists (see
/// [`crate::ScopeHandle::tasks_finished`]), for tasks a scope owns outside its effects.
pub(crate) fn counted<F>(shared: &Arc<Shared>, fut: F) -> impl Future<Output = ()> + Send + 'static
where
    F: Future<Output = ()> + Send + 'static,
{
    if shared.counters.tasks.fetch_add(1, Ordering::AcqRel) == 0 {
        shared.tasks_done_tx.send_replace(false);
    }
    let guard = TaskGuard(Arc::downgrade(shared));
    async move {
        let _guard = guard;
        fut.await;
    }
}

pub(crate) fn spawn_in<F>(node: &Arc<ScopeNode>, generation: u64, fut: F) -> EffectHandle
where
    F: Future<Output = ()> + Send + 'static,
{
    let cell: Arc<OnceLock<AbortHandle>> = Arc::new(OnceLock::new());
    let undo_cell = cell.clone();
    let Ok(id) = node.add_effect::<()>(generation, EffectKind::Task, "task".into(), || {
        Ok(Box::new(move || {
            if let Some(h) = undo_cell.get() {
                h.abort();
            }
        }))
    }) else {
        return EffectHandle::inert();
    };
    let shared = &node.shared;
    let weak = Arc::downgrade(node);
    let wrapped = counted(shared, async move {
        let result = AssertUnwindSafe(fut).catch_unwind().await;
        if let Some(node) = weak.upgrade() {
            if let Err(payload) = result {
                let message = panic_message(&*payload);
                tracing::error!(scope = node.id.0, plugin = %node.name, %message, "task panicked");
                node.shared.incident(&node, "task".to_owned(), message);
            }
            node.take_effect(id);
        }
    });
    let handle = crate::observe::spawn_attributed(node, wrapped);
    let _ = cell.set(handle.abort_handle());
    // The scope may have unwound between registering the effect and setting the abort handle.
    if !lock(&node.state).effects.contains(id) {
        handle.abort();
    }
    EffectHandle::new(node, id)
}

/// Spawns in `node` at its current generation (for listeners dispatched from elsewhere).
pub(crate) fn spawn_in_current<F>(node: &Arc<ScopeNode>, fut: F) -> EffectHandle
where
    F: Future<Output = ()> + Send + 'static,
{
    let generation = lock(&node.state).generation;
    spawn_in(node, generation, fut)
}

impl Context {
    /// Spawns `fut` as a task owned by this scope: aborted when the scope unwinds, forgotten
    /// when it finishes. A panic inside is contained and reported as an incident.
    pub fn spawn<F>(&self, fut: F) -> EffectHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        spawn_in(&self.node, self.generation, fut)
    }
}
