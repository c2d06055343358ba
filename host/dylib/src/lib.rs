//! The host side of the cordis plugin C ABI: open a tool plugin library, check its descriptor,
//! and call it through a safe API. This crate holds all of the host's `unsafe` code.
//!
//! # Why a C ABI, and why libraries are never unloaded
//! Rust's ABI is not stable across compilers and a panic cannot unwind across `extern "C"`, so a
//! plugin exports one C descriptor (see [`cordis_plugin_sdk::abi`] and `docs/plugin-abi.md`) and
//! exchanges JSON through borrowed strings and a host-owned writer. Unloading a Rust library is
//! unsound (thread-local destructors may still point into it), so once the host has called into
//! a library it leaks the handle; [`open`] of the same path returns the same [`Library`].
//!
//! # Where libraries are loaded from
//! Never from the configured path itself: its bytes are read once, hashed (and checked against
//! the entry's pin), copied into the per-user [`Cache`], and loaded from the descriptor of that
//! verified copy; see [`cache`] (the `cordis-artifact-cache` crate, re-exported) for the
//! guarantees.
//!
//! # Calls that never return
//! Call a plugin through [`foreign::spawn`], not on a runtime's blocking pool: a call that
//! times out is abandoned on its thread, and nothing (runtime shutdown, process exit) waits for
//! it. [`foreign::stats`] counts abandoned calls.
//!
//! # Trust
//! Loading runs the library's initialisers and calling it runs its code in this process: the
//! host contains *failures* (status codes, panics the SDK catches, bad JSON), not malice. The
//! caller decides which files may be loaded (the host allows only configured directories).
//!
//! # Examples
//! ```no_run
//! let lib = cordis_dylib::open(std::path::Path::new("/plugins/libtext.so"), None)?;
//! let instance = lib.create("null")?;
//! let tools_json = instance.describe()?;
//! let result_json = instance.invoke("reverse", r#"{"text": "abc"}"#)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![allow(
    unsafe_code,
    reason = "loads plugin libraries and calls their C ABI; the host's only unsafe code"
)]
#![cfg(unix)]

mod call;
pub mod foreign;
mod library;
mod mapped;

pub use call::{CallError, Instance};
/// The per-user artifact cache libraries are copied into (shared with the wasm loader).
pub use cordis_artifact_cache as cache;
pub use cordis_artifact_cache::{Cache, CacheError, PruneOutcome, file_sha256, read_library};
pub use library::{Library, LoadError, open, open_in};
