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
use crate::scope::EventUse;

/// An event type: its payload is the type itself.
///
/// # Determinism
/// Listeners of one event (and of one waterfall) run in canonical order, whatever order their
/// entries loaded in: every [`Position::Front`] listener before every [`Position::Back`] one;
/// within each band by the registering scope's [`crate::OrderKey`] — the entry's place in the
/// configuration, so two entries' listeners compose in file order — and within one scope in
/// registration order (front listeners in reverse: each prepends).
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
        let handle = add(self, E::NAME, position, handler);
        let _ = self
            .node
            .note_event(self.generation, EventUse::Listen, E::NAME);
        handle
    }

    /// Notes a dispatch of `E` in this scope's [`crate::EventFootprint`] if it is applying.
    /// While a proof observes names, a dispatch from a scope that is not applying (a registry
    /// announcing a change) is noted for the scope whose apply or task caused it.
    fn note_emit<E: Event>(&self) {
        let noted = self
            .node
            .note_event(self.generation, EventUse::Emit, E::NAME);
        if !noted
            && self.node.observing()
            && let Some(running) = crate::observe::running()
            && !Arc::ptr_eq(&running, &self.node)
        {
            running.note_caused_emit(E::NAME);
        }
    }

    /// The listeners of `E` in dispatch order; `None`: none was ever registered.
    fn entries<E: Event>(&self) -> Option<Arc<[Entry<Handler<E>>]>> {
        self.node.shared.snapshot::<Handler<E>>()
    }

    /// Number of listeners of `E`.
    pub fn listener_count<E: Event>(&self) -> usize {
        self.entries::<E>().map_or(0, |e| e.len())
    }

    fn call_sync<E: Event>(
        &self,
        entry: &Entry<Handler<E>>,
        f: &SyncFn<E>,
        event: &E,
    ) -> Option<E::Output> {
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
        // Noted even with no listener: one registered later is what order changes.
        self.note_emit::<E>();
        let Some(entries) = self.entries::<E>().filter(|e| !e.is_empty()) else {
            return;
        };
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
        self.note_emit::<E>();
        let Some(entries) = self.entries::<E>() else {
            return;
        };
        let event = Arc::new(event);
        join_all(
            entries
                .iter()
                .map(|entry| self.call_async(entry, event.clone())),
        )
        .await;
    }

    /// Dispatches `event` to listeners one at a time; the first `Some` answer wins (cordis
    /// `serial`).
    ///
    /// # Cancel safety
    /// Dropping the future stops before the next listener.
    pub async fn serial<E: Event>(&self, event: E) -> Option<E::Output> {
        self.note_emit::<E>();
        let entries = self.entries::<E>()?;
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
        self.note_emit::<E>();
        let entries = self.entries::<E>()?;
        for entry in entries.iter() {
            if let Handler::Sync(f) = &entry.handler
                && let Some(out) = self.call_sync(entry, &**f, event)
            {
                return Some(out);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use crate::Handler;
    use crate::prelude::*;
    use crate::testing::both_runtimes;

    struct Ping(u32);
    impl Event for Ping {
        const NAME: &'static str = "test/ping";
        type Output = String;
    }

    fn log() -> Arc<Mutex<Vec<String>>> {
        Arc::new(Mutex::new(Vec::new()))
    }

    both_runtimes! {
        async fn emit_calls_listeners_in_order_with_prepended_first() {
            let root = Context::root();
            let seen = log();
            for name in ["a", "b"] {
                let s = seen.clone();
                let _ = root.on::<Ping>(move |p| s.lock().unwrap().push(format!("{name}{}", p.0)));
            }
            let s = seen.clone();
            let _ = root.listen::<Ping>(Position::Front, Handler::sync(move |p: &Ping| {
                s.lock().unwrap().push(format!("first{}", p.0));
                None
            }));
            root.emit(Ping(1));
            assert_eq!(*seen.lock().unwrap(), ["first1", "a1", "b1"]);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn listeners_run_in_their_entries_place_order_not_in_load_order() {
            use crate::{FnPlugin, PluginOptions, Prepared};
            // Entries placed 0, 1, 2 apply in the reverse order (each waits for the service the
            // next one provides), so they register their listeners last-placed first.
            struct Go;
            impl crate::Service for Go { const NAME: &'static str = "go"; }
            let root = Context::root();
            let seen = log();
            for (place, label) in [(2u64, "c"), (1, "b"), (0, "a")] {
                let s = seen.clone();
                let mut plugin = FnPlugin::new(label, move |ctx: Context, ()| {
                    let s = s.clone();
                    async move {
                        let s2 = s.clone();
                        let _ = ctx.on::<Ping>(move |_| s2.lock().unwrap().push(format!("{label}1")));
                        let _ = ctx.on::<Ping>(move |_| s.lock().unwrap().push(format!("{label}2")));
                        Ok(())
                    }
                });
                if place < 2 {
                    plugin = plugin.inject(Inject::required("go"));
                }
                let _ = root.plugin_with(
                    Prepared::new(plugin, ()),
                    PluginOptions { label: Some(label.into()), place: Some(place), ..PluginOptions::default() },
                );
            }
            root.idle().await;
            root.provide(Go).unwrap();
            root.idle().await;
            root.emit(Ping(0));
            assert_eq!(*seen.lock().unwrap(), ["a1", "a2", "b1", "b2", "c1", "c2"]);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn listeners_die_with_their_scope() {
            let root = Context::root();
            let hits = Arc::new(AtomicUsize::new(0));
            let child = root.child_scope("listener");
            let h = hits.clone();
            let _ = child.context().unwrap().on::<Ping>(move |_| { h.fetch_add(1, Ordering::SeqCst); });
            root.emit(Ping(0));
            assert_eq!(root.listener_count::<Ping>(), 1);
            child.dispose();
            root.emit(Ping(0));
            assert_eq!(hits.load(Ordering::SeqCst), 1);
            assert_eq!(root.listener_count::<Ping>(), 0);
            assert_eq!(root.live().listeners, 0);
            root.dispose();
        }

        async fn bail_returns_the_first_answer_and_skips_the_rest() {
            let root = Context::root();
            let later = Arc::new(AtomicUsize::new(0));
            let _ = root.on_answer::<Ping>(|_| None);
            let _ = root.on_answer::<Ping>(|p| (p.0 > 1).then(|| format!("big {}", p.0)));
            let l = later.clone();
            let _ = root.on_answer::<Ping>(move |_| { l.fetch_add(1, Ordering::SeqCst); Some("late".into()) });
            assert_eq!(root.bail(&Ping(5)).as_deref(), Some("big 5"));
            assert_eq!(later.load(Ordering::SeqCst), 0, "listeners after the answer do not run");
            assert_eq!(root.bail(&Ping(1)).as_deref(), Some("late"));
            root.dispose();
        }

        async fn serial_awaits_async_listeners_one_at_a_time() {
            let root = Context::root();
            let seen = log();
            let s = seen.clone();
            let _ = root.listen::<Ping>(Position::Back, Handler::future(move |p: Arc<Ping>| {
                let s = s.clone();
                async move {
                    tokio::task::yield_now().await;
                    s.lock().unwrap().push(format!("slow{}", p.0));
                    None
                }
            }));
            let s = seen.clone();
            let _ = root.listen::<Ping>(Position::Back, Handler::sync(move |p: &Ping| {
                s.lock().unwrap().push(format!("fast{}", p.0));
                Some("answer".into())
            }));
            assert_eq!(root.serial(Ping(2)).await.as_deref(), Some("answer"));
            assert_eq!(*seen.lock().unwrap(), ["slow2", "fast2"]);
            root.dispose();
        }

        async fn parallel_waits_for_every_listener() {
            let root = Context::root();
            let hits = Arc::new(AtomicUsize::new(0));
            for _ in 0..3 {
                let h = hits.clone();
                let _ = root.on_async::<Ping, _, _>(move |_| {
                    let h = h.clone();
                    async move {
                        tokio::task::yield_now().await;
                        h.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
            root.parallel(Ping(0)).await;
            assert_eq!(hits.load(Ordering::SeqCst), 3);
            root.dispose();
            assert!(root.live().is_zero(), "{:?}", root.live());
        }

        async fn an_apply_records_the_events_it_listens_to_and_dispatches_and_an_active_scope_does_not() {
            struct Pong;
            impl Event for Pong { const NAME: &'static str = "test/pong"; type Output = (); }
            struct Later;
            impl Event for Later { const NAME: &'static str = "test/later"; type Output = (); }
            let root = Context::root();
            let scope = root.plugin_fn("both-sides", |ctx: Context, ()| async move {
                let _ = ctx.on::<Ping>(|_| {});
                let _ = ctx.on_answer::<Ping>(|_| None);
                let _ = ctx.on_async::<Pong, _, _>(|_| async {});
                // Dispatched with no listener at all: still part of the footprint.
                ctx.emit(Later);
                ctx.emit(Ping(1));
                let _ = ctx.bail(&Ping(2));
                ctx.parallel(Pong).await;
                let _ = ctx.serial(Ping(3)).await;
                Ok(())
            }, ());
            root.idle().await;
            assert_eq!(scope.status(), ScopeStatus::Active);
            let events = scope.info().events;
            assert_eq!(events.listens, ["test/ping", "test/pong"]);
            assert_eq!(events.emits, ["test/later", "test/ping", "test/pong"]);
            // After its apply, what the scope does is not its apply's footprint.
            let ctx = scope.context().unwrap();
            ctx.emit(Later);
            let _ = ctx.on::<Later>(|_| {});
            assert_eq!(scope.info().events, events);
            assert!(root.info().events.is_empty(), "the root never applies");
            root.dispose();
            assert!(root.live().is_zero(), "{:?}", root.live());
        }

        async fn footprints_meet_where_one_dispatches_what_the_other_listens_to() {
            use crate::EventFootprint;
            let emitter = EventFootprint { listens: vec![], emits: vec!["a", "b"] };
            let listener = EventFootprint { listens: vec!["b", "c"], emits: vec![] };
            assert_eq!(emitter.meets(&listener), ["b"]);
            assert_eq!(listener.meets(&emitter), ["b"]);
            let other = EventFootprint { listens: vec!["x"], emits: vec!["y"] };
            assert!(emitter.meets(&other).is_empty() && listener.meets(&other).is_empty());
            let mut all = emitter.clone();
            all.union(&listener);
            all.union(&emitter);
            assert_eq!(all, EventFootprint { listens: vec!["b", "c"], emits: vec!["a", "b"] });
        }

        async fn a_panicking_listener_is_contained_and_reported() {
            let root = Context::root();
            let child = root.child_scope("grumpy");
            let _ = child.context().unwrap().on::<Ping>(|_| panic!("listener blew up"));
            let hits = Arc::new(AtomicUsize::new(0));
            let h = hits.clone();
            let _ = root.on::<Ping>(move |_| { h.fetch_add(1, Ordering::SeqCst); });
            root.emit(Ping(0));
            assert_eq!(hits.load(Ordering::SeqCst), 1, "the next listener still ran");
            let incidents = root.incidents();
            assert_eq!(incidents.len(), 1);
            assert_eq!(incidents[0].plugin, "grumpy");
            assert_eq!(incidents[0].site, "listener of \"test/ping\"");
            assert!(incidents[0].message.contains("listener blew up"));
            assert_eq!(root.serial(Ping(0)).await, None);
            assert_eq!(root.incidents().len(), 2);
            root.dispose();
        }

        async fn emit_spawns_async_listeners_as_tasks_of_their_scope() {
            let root = Context::root();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let tx = Arc::new(Mutex::new(Some(tx)));
            let _ = root.on_async::<Ping, _, _>(move |p| {
                let tx = tx.clone();
                async move {
                    if let Some(tx) = tx.lock().unwrap().take() { let _ = tx.send(p.0); }
                }
            });
            root.emit(Ping(9));
            assert_eq!(rx.await.unwrap(), 9);
            root.dispose();
            root.tasks_finished().await;
            assert!(root.live().is_zero(), "{:?}", root.live());
        }
    }
}
