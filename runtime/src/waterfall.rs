//! Waterfall dispatch: each listener receives the value and a [`Next`], and either transforms the
//! value and passes it on (`next.run(value).await`) or returns a replacement without calling
//! `next`, which skips every later listener (a short circuit).
//!
//! This is cordis's waterfall with ownership made explicit: cordis listeners mutate a shared
//! object and call a zero-argument `next()`; here the value moves into `next`, so a listener
//! cannot keep mutating it after handing it on.
//!
//! # Determinism
//! Listeners run in registration order; prepended ones first.

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::context::Context;
use crate::effect::EffectHandle;
use crate::error::{EventError, panic_message};
use crate::listeners::{Entry, Position, add, report_panic};
use crate::scope::lock;

/// A waterfall event: listeners pass a `Value` along the chain.
pub trait Waterfall: Send + Sync + 'static {
    /// The event name, for reports (`system-prompt/assemble`).
    const NAME: &'static str;
    /// The value that flows through the listeners.
    type Value: Send + 'static;
}

type WfFn<W> = Arc<
    dyn Fn(<W as Waterfall>::Value, Next<W>) -> BoxFuture<'static, <W as Waterfall>::Value>
        + Send
        + Sync,
>;

struct WfHandler<W: Waterfall>(WfFn<W>);

impl<W: Waterfall> Clone for WfHandler<W> {
    fn clone(&self) -> Self {
        WfHandler(self.0.clone())
    }
}

/// The rest of the chain after the current listener.
pub struct Next<W: Waterfall> {
    chain: Arc<[Entry<WfHandler<W>>]>,
    index: usize,
    /// Indices of listeners entered and not yet returned, to name the one that panicked.
    stack: Arc<Mutex<Vec<usize>>>,
}

impl<W: Waterfall> Next<W> {
    /// Runs the rest of the chain on `value`; with no listener left, returns `value` unchanged.
    ///
    /// # Cancel safety
    /// Dropping the future drops the value and the listeners' futures where they stand; the
    /// chain keeps no state beyond this one run, so the next emit starts clean. A listener that
    /// changes anything outside the value must itself be cancel safe.
    pub fn run(self, value: W::Value) -> BoxFuture<'static, W::Value> {
        let Some(entry) = self.chain.get(self.index) else {
            return Box::pin(std::future::ready(value));
        };
        let handler = entry.handler.0.clone();
        let index = self.index;
        let stack = self.stack.clone();
        let next = Next {
            chain: self.chain.clone(),
            index: index + 1,
            stack: self.stack.clone(),
        };
        Box::pin(async move {
            lock(&stack).push(index);
            let out = handler(value, next).await;
            lock(&stack).pop();
            out
        })
    }

    /// How many listeners are left after this one.
    pub fn remaining(&self) -> usize {
        self.chain.len().saturating_sub(self.index)
    }
}

impl Context {
    /// Adds a waterfall listener for `W` at `position`.
    pub fn on_waterfall<W, F, Fut>(&self, position: Position, f: F) -> EffectHandle
    where
        W: Waterfall,
        F: Fn(W::Value, Next<W>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = W::Value> + Send + 'static,
    {
        let handler: WfFn<W> = Arc::new(move |v, next| Box::pin(f(v, next)));
        add(self, W::NAME, position, WfHandler(handler))
    }

    /// Number of listeners of waterfall `W`.
    pub fn waterfall_listener_count<W: Waterfall>(&self) -> usize {
        self.node
            .shared
            .snapshot::<WfHandler<W>>()
            .map_or(0, |c| c.len())
    }

    /// Runs `value` through the listeners of `W` and returns what comes out.
    ///
    /// # Errors
    /// [`EventError::ListenerPanicked`] when a listener panics: the value it held is gone.
    ///
    /// # Cancel safety
    /// Dropping the future drops the value and the listeners' futures.
    pub async fn waterfall<W: Waterfall>(&self, value: W::Value) -> Result<W::Value, EventError> {
        let Some(chain) = self
            .node
            .shared
            .snapshot::<WfHandler<W>>()
            .filter(|c| !c.is_empty())
        else {
            return Ok(value);
        };
        let stack = Arc::new(Mutex::new(Vec::new()));
        let next = Next {
            chain: chain.clone(),
            index: 0,
            stack: stack.clone(),
        };
        match std::panic::AssertUnwindSafe(next.run(value))
            .catch_unwind()
            .await
        {
            Ok(v) => Ok(v),
            Err(payload) => {
                let message = panic_message(&*payload);
                let index = lock(&stack).last().copied().unwrap_or(0);
                let entry = &chain[index];
                report_panic(&self.node.shared, entry, W::NAME, message.clone());
                let owner = entry.node.upgrade().map_or_else(
                    || entry.plugin.to_string(),
                    |n| n.claim_owner().1.to_string(),
                );
                Err(EventError::ListenerPanicked {
                    event: W::NAME,
                    scope: entry.scope.0,
                    entry: owner,
                    plugin: entry.plugin.to_string(),
                    message,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::EventError;
    use crate::prelude::*;
    use crate::testing::both_runtimes;

    struct Build;
    impl Waterfall for Build {
        const NAME: &'static str = "test/build";
        type Value = Vec<&'static str>;
    }

    both_runtimes! {
        async fn each_listener_may_change_the_value_and_call_next() {
            let root = Context::root();
            let _ = root.on_waterfall::<Build, _, _>(Position::Back, |mut v, next| async move {
                v.push("a");
                next.run(v).await
            });
            let _ = root.on_waterfall::<Build, _, _>(Position::Back, |mut v, next| async move {
                v.push("b");
                let mut out = next.run(v).await;
                out.push("after-b");
                out
            });
            let out = root.waterfall::<Build>(vec!["start"]).await.unwrap();
            assert_eq!(out, ["start", "a", "b", "after-b"]);
            root.dispose();
            assert!(root.live().is_zero());
        }

        async fn a_listener_that_returns_without_next_short_circuits_the_rest() {
            let root = Context::root();
            let ran = Arc::new(Mutex::new(Vec::new()));
            let r = ran.clone();
            let _ = root.on_waterfall::<Build, _, _>(Position::Back, move |_, _next| {
                r.lock().unwrap().push("replacer");
                async move { vec!["replacement"] }
            });
            let r = ran.clone();
            let _ = root.on_waterfall::<Build, _, _>(Position::Back, move |v, next| {
                r.lock().unwrap().push("later");
                next.run(v)
            });
            let out = root.waterfall::<Build>(vec!["original"]).await.unwrap();
            assert_eq!(out, ["replacement"]);
            assert_eq!(*ran.lock().unwrap(), ["replacer"], "later listeners are skipped");
            root.dispose();
        }

        async fn a_prepended_listener_runs_first_and_no_listener_returns_the_value() {
            let root = Context::root();
            assert_eq!(root.waterfall::<Build>(vec!["x"]).await.unwrap(), ["x"]);
            let _ = root.on_waterfall::<Build, _, _>(Position::Back, |mut v, next| async move { v.push("back"); next.run(v).await });
            let _ = root.on_waterfall::<Build, _, _>(Position::Front, |mut v, next| async move { v.push("front"); next.run(v).await });
            assert_eq!(root.waterfall::<Build>(vec![]).await.unwrap(), ["front", "back"]);
            root.dispose();
        }

        async fn a_panicking_waterfall_listener_is_an_error_naming_its_scope() {
            let root = Context::root();
            let _ = root.on_waterfall::<Build, _, _>(Position::Back, |v, next| next.run(v));
            let child = root.child_scope("broken");
            let _ = child.context().unwrap().on_waterfall::<Build, _, _>(Position::Back, |_v, _next| async move {
                panic!("waterfall listener exploded")
            });
            let err = root.waterfall::<Build>(vec![]).await.unwrap_err();
            let EventError::ListenerPanicked { plugin, message, event, .. } = err;
            assert_eq!((plugin.as_str(), event), ("broken", "test/build"));
            assert!(message.contains("exploded"));
            assert_eq!(root.incidents().len(), 1);
            child.dispose();
            assert_eq!(root.waterfall::<Build>(vec!["ok"]).await.unwrap(), ["ok"]);
            root.dispose();
        }
    }
}
