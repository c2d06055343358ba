//! WebAssembly tool plugins: a third-party tool plugin as a component of the
//! `cordis:plugin/tools@0.1.1` world (`wit/world.wit`), run with no ambient authority.
//!
//! # Why WebAssembly beside dylibs
//! A dylib (`cordis-dylib`) runs in the host process: once loaded it can read every secret and
//! crash the host. A component can only call what the host links for it: the `log` import, and
//! WASI 0.2 interfaces only as its entry's `capabilities` grant them ([`grants`]), and the
//! mediated network ([`http`]): requests the host performs to the hosts the entry allows.
//! Every call runs under fuel, an epoch deadline and memory/table/instance limits ([`limits`]); a trap
//! fails the call, never the host, and the next call gets a fresh instance.
//!
//! # Parts
//! - [`WasmEngine`]: one wasmtime engine (deterministic settings), its epoch ticker and the
//!   content-addressed compiled-artifact [`cache`].
//! - [`Guest`]: a loaded, vetted component (version checked, imports checked against grants).
//! - [`Runner`]: one entry's instance, calls serialized, rebuilt after any trap.
//! - [`WasmPlugin`]: the runtime plugin a host makes of a `*.wasm` entry.
//!
//! # Determinism
//! NaN canonicalization on, no threads, no relaxed SIMD; fuel (not time) is the deterministic
//! limit; clock and randomness exist only when granted, and granted randomness is seeded from
//! the schedule's seed and the entry id, so a seed replays a call byte for byte.

pub mod cache;
mod engine;
mod error;
pub mod grants;
mod guest;
pub mod http;
pub mod limits;
mod plugin;
mod runner;
mod state;

pub use engine::{EPOCH_TICK, WasmEngine};
pub use error::{CallError, LoadError};
pub use grants::{Allowed, Capabilities, FsAccess, Network};
pub use guest::{Described, Guest, WORLD_VERSION};
pub use http::HttpRecord;
pub use limits::Limits;
pub use plugin::{WasmConfig, WasmPlugin};
pub use runner::{Recorded, Runner, RunnerOptions};

/// The WIT of the world guests implement (`wit/world.wit`), for tools that build guests.
pub const WIT: &str = include_str!("../wit/world.wit");
