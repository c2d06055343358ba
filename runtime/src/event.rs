//! Typed events with cordis's dispatch modes: emit, parallel, serial and bail.
//!
//! Choose the mode by what the emitter needs back:
//! - [`Context::emit`]: nothing; listeners run now, async ones as tasks of their own scope.
//! - [`Context::parallel`]: wait until every listener finished, running async ones concurrently.
//! - [`Context::serial`]: listeners one after another; the first `Some` result wins.
//! - [`Context::bail`]: like serial, synchronous, over synchronous listeners only.
//! - waterfall (see `waterfall.rs`): each listener transforms a value and calls `next`.
//!
//! A panicking listener is contained: it is reported (tracing and [`Context::incidents`]) and
//! dispatch goes on with the next listener.
//!
//! # Determinism
//! Listeners run in registration order (prepended ones first, latest prepend first).

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, join_all};

use crate::context::Context;
use crate::effect::EffectHandle;
use crate::error::panic_message;
pub use crate::listeners::Position;
use crate::listeners::{Entry, add, report_panic};

/// An event type: its payload is the type itself.
pub trait Event: Send + Sync + 'static {
    /// The event name, for reports (`tools/change`).
    const NAME: &'static str;
    /// What a listener may answer in `serial` and `bail` dispatch (`()` for notifications).
    type Output: Send + 'static;
}

type SyncFn<E> = dyn Fn(&E) -> Option<<E as Event>::Output> + Send + Sync;
type AsyncFn<E> = dyn Fn(Arc<E>) -> BoxFuture<'static, Option<<E as Event>::Output>> + Send + Sync;

/// A listener of event `E`.
pub enum Handler<E: Event> {
    /// Runs inline during dispatch.
    Sync(Arc<SyncFn<E>>),
    /// Returns a future; awaited by `parallel`/`serial`, spawned by `emit`, skipped by `bail`.
    Async(Arc<AsyncFn<E>>),
}

impl<E: Event> Clone for Handler<E> {
    fn clone(&self) -> Self {
        match self {
            Handler::Sync(f) => Handler::Sync(f.clone()),
            Handler::Async(f) => Handler::Async(f.clone()),
        }
    }
}

impl<E: Event> Handler<E> {
    /// A synchronous listener that may answer.
    pub fn sync(f: impl Fn(&E) -> Option<E::Output> + Send + Sync + 'static) -> Self {
        Handler::Sync(Arc::new(f))
    }

    /// An asynchronous listener that may answer.
    pub fn future<F, Fut>(f: F) -> Self
    where
        F: Fn(Arc<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<E::Output>> + Send + 'static,
    {
        Handler::Async(Arc::new(move |e| Box::pin(f(e))))
    }
}

impl Context {
    /// Listens to `E` with a synchronous callback.
    pub fn on<E: Event>(&self, f: impl Fn(&E) + Send + Sync + 'static) -> EffectHandle {
        self.listen(
            Position::Back,
            Handler::sync(move |e| {
                f(e);
                None
            }),
        )
    }

    /// Listens to `E` with a synchronous callback whose answer counts in `serial`/`bail`.
    pub fn on_answer<E: Event>(
        &self,
        f: impl Fn(&E) -> Option<E::Output> + Send + Sync + 'static,
    ) -> EffectHandle {
        self.listen(Position::Back, Handler::sync(f))
    }

    /// Listens to `E` with an async callback.
    pub fn on_async<E, F, Fut>(&self, f: F) -> EffectHandle
    where
        E: Event,
        F: Fn(Arc<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.listen(
            Position::Back,
            Handler::future(move |e| {
                let fut = f(e);
                async move {
                    fut.await;
                    None
                }
            }),
        )
    }

    /// Adds a listener at `position`; it is removed when this scope unwinds.
    pub fn listen<E: Event>(&self, position: Position, handler: Handler<E>) -> EffectHandle {
        add(self, E::NAME, position, handler)
    }

    fn entries<E: Event>(&self) -> Arc<[Entry<Handler<E>>]> {
        self.node.shared.snapshot::<Handler<E>>()
    }

    /// Number of listeners of `E`.
    pub fn listener_count<E: Event>(&self) -> usize {
        self.entries::<E>().len()
    }

    fn call_sync<E: Event>(&self, entry: &Entry<Handler<E>>, f: &SyncFn<E>, event: &E) -> Option<E::Output> {
        match catch_unwind(AssertUnwindSafe(|| f(event))) {
            Ok(out) => out,
            Err(p) => {
                report_panic(&self.node.shared, entry, E::NAME, panic_message(&*p));
                None
            }
        }
    }

    async fn call_async<E: Event>(
        &self,
        entry: &Entry<Handler<E>>,
        event: Arc<E>,
    ) -> Option<E::Output> {
        match &entry.handler {
            Handler::Sync(f) => self.call_sync(entry, &**f, &event),
            Handler::Async(f) => {
                let f = f.clone();
                match AssertUnwindSafe(async move { f(event).await })
                    .catch_unwind()
                    .await
                {
                    Ok(out) => out,
                    Err(p) => {
                        report_panic(&self.node.shared, entry, E::NAME, panic_message(&*p));
                        None
                    }
                }
            }
        }
    }

    /// Dispatches `event` to every listener and returns at once (cordis `emit`).
    ///
    /// Synchronous listeners run before this returns; async ones are spawned as tasks of the
    /// scope that registered them.
    pub fn emit<E: Event>(&self, event: E) {
        let entries = self.entries::<E>();
        if entries.is_empty() {
            return;
        }
        let event = Arc::new(event);
        for entry in entries.iter() {
            match &entry.handler {
                Handler::Sync(f) => {
                    self.call_sync(entry, &**f, &event);
                }
                Handler::Async(_) => {
                    let Some(node) = entry.node.upgrade() else {
                        continue;
                    };
                    let this = self.clone();
                    let entry = entry.clone();
                    let event = event.clone();
                    let _ = crate::task::spawn_in_current(&node, async move {
                        this.call_async(&entry, event).await;
                    });
                }
            }
        }
    }

    /// Dispatches `event` to every listener concurrently and waits for all (cordis `parallel`).
    ///
    /// # Cancel safety
    /// Dropping the future drops the listener futures still running.
    pub async fn parallel<E: Event>(&self, event: E) {
        let entries = self.entries::<E>();
        let event = Arc::new(event);
        join_all(entries.iter().map(|entry| self.call_async(entry, event.clone()))).await;
    }

    /// Dispatches `event` to listeners one at a time; the first `Some` answer wins (cordis
    /// `serial`).
    ///
    /// # Cancel safety
    /// Dropping the future stops before the next listener.
    pub async fn serial<E: Event>(&self, event: E) -> Option<E::Output> {
        let entries = self.entries::<E>();
        let event = Arc::new(event);
        for entry in entries.iter() {
            if let Some(out) = self.call_async(entry, event.clone()).await {
                return Some(out);
            }
        }
        None
    }

    /// Dispatches `event` synchronously; the first `Some` answer wins (cordis `bail`).
    /// Async listeners are skipped: use [`Context::serial`] for them.
    pub fn bail<E: Event>(&self, event: &E) -> Option<E::Output> {
        let entries = self.entries::<E>();
        for entry in entries.iter() {
            if let Handler::Sync(f) = &entry.handler {
                if let Some(out) = self.call_sync(entry, &**f, event) {
                    return Some(out);
                }
            }
        }
        None
    }
}
