//! The SDK for third-party cordis tool plugins, built as a `cdylib` and loaded by the host at
//! run time.
//!
//! Rust's own ABI is not stable across compilers, a panic must not unwind across `extern "C"`,
//! and unloading a Rust library is unsafe. So a plugin talks to the host through a small C ABI
//! ([`abi`], specified in `docs/plugin-abi.md` and `include/cordis_plugin.h`): one exported
//! descriptor, borrowed UTF-8 strings, JSON for structured data, outputs copied through a
//! host-supplied writer, and a status code on every call. The host never unloads a plugin.
//!
//! A plugin author implements [`ToolPlugin`] and calls [`export_plugin!`]; every exported
//! function runs under `catch_unwind`, so a panic becomes the `PANIC` status with its message.
//!
//! # Panics must unwind
//! Build plugins with `panic = "unwind"` (the default). With `panic = "abort"` a panic in the
//! plugin ends the host process; [`export_plugin!`] refuses to compile in that configuration.
//!
//! # Examples
//! A complete plugin with one tool (`crate-type = ["cdylib"]` in its `Cargo.toml`):
//!
//! ```
//! use cordis_plugin_sdk::{Tool, ToolPlugin, Value, export_plugin, json};
//!
//! struct Hello;
//!
//! impl ToolPlugin for Hello {
//!     fn create(_config: Value) -> Result<Self, String> {
//!         Ok(Hello)
//!     }
//!     fn tools(&self) -> Vec<Tool> {
//!         let params = json!({"type": "object", "properties": {"name": {"type": "string"}}});
//!         vec![Tool::new("hello", "Greets someone by name.", params)]
//!     }
//!     fn invoke(&self, _tool: &str, args: Value) -> Result<Value, String> {
//!         let name = args["name"].as_str().ok_or("`name` must be a string")?;
//!         Ok(json!(format!("hello, {name}")))
//!     }
//! }
//!
//! export_plugin!(Hello);
//! ```
#![allow(
    unsafe_code,
    reason = "implements the C ABI plugins export: raw pointers and `extern \"C\"` entry points"
)]

pub mod abi;
mod export;
mod plugin;

#[doc(hidden)]
pub use export::descriptor;
pub use export::{Host, LogLevel};
pub use plugin::{Tool, ToolPlugin};
pub use serde_json::{Value, json};
