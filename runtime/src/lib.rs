//! The cordis-style plugin runtime: a tree of scopes, each owning the effects it registered.
//!
//! A [`Context`] is a cheap handle on one node of the scope tree. Plugins are applied in child
//! scopes ([`Context::plugin`]); everything a scope registers — listeners, services, child scopes,
//! spawned tasks, user effects — is undone, last first, when the scope is disposed. Services are
//! typed and named; a plugin that injects one stays pending until it exists. Events dispatch in
//! cordis's five modes (emit, parallel, serial, bail, waterfall). The [`Schedule`] perturbs task
//! interleaving at named points from a seed, so load-order races can be replayed.
//!
//! This crate knows nothing of tools or agents.
//!
//! # Examples
//!
//! ```
//! use cordis_runtime::prelude::*;
//!
//! struct Greeting(String);
//! impl Service for Greeting { const NAME: &'static str = "greeting"; }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let root = Context::root();
//! let provider = root.plugin_fn("provider", |ctx, _: ()| async move {
//!     ctx.provide(Greeting("hello".into()))?;
//!     Ok(())
//! }, ());
//! root.idle().await;
//! assert_eq!(provider.status(), ScopeStatus::Active);
//! assert_eq!(root.get::<Greeting>().unwrap().0, "hello");
//! root.dispose();
//! assert!(root.live().is_zero());
//! # }
//! ```

mod claim;
mod context;
mod effect;
mod error;
mod event;
mod host_event;
mod introspect;
mod listeners;
mod observe;
mod order;
mod plugin;
mod schedule;
mod scope;
mod service;
mod shell;
mod task;
mod waterfall;

pub use claim::{Claim, conflict_message, prose_list, quoted_list};
pub use context::{Context, INCIDENT_CAPACITY, TRACE_CAPACITY};
pub use effect::{EffectHandle, EffectKind};
pub use error::{BoxError, ConfigError, Deferred, EventError, ServiceError, panic_message};
pub use event::{Event, Handler, Position};
pub use host_event::{ConfigReloaded, Offered};
pub use introspect::{EffectCounts, EventFootprint, Incident, LiveCounts, ScopeInfo, TraceEvent};
pub use observe::{NameFootprint, note_change, note_listing, note_read, note_write, observing};
pub use order::OrderKey;
pub use plugin::{
    ErasedPlugin, FnPlugin, Inject, Plugin, PluginOptions, Prepared, prepare, started_anew,
};
pub use schedule::{Policy, PolicyParseError, Schedule};
pub use scope::{FailureKind, ScopeFailure, ScopeHandle, ScopeId, ScopeOutcome, ScopeStatus, lock};
pub use service::Service;
pub use shell::{shell_line, shell_word};
pub use waterfall::{Next, Waterfall};

/// The names most users need, for `use cordis_runtime::prelude::*`.
pub mod prelude {
    pub use crate::{
        BoxError, Context, Event, Inject, Plugin, Position, ScopeHandle, ScopeStatus, Service,
        Waterfall,
    };
}

#[cfg(test)]
mod testing;
