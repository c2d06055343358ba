//! The system-prompt assembly: named, ordered sections with strict `{{variable}}` interpolation,
//! and the canonical model-facing tool list collected from tool providers.
//!
//! The assembly owns the tool order (see [`order_tools`]): it is computed inside
//! [`SystemPrompt::assemble`], before the `system-prompt/assemble` waterfall, so registration
//! order — a load race — is observable nowhere the model can see.
//!
//! # Examples
//!
//! ```
//! use cordis_runtime::prelude::*;
//! use cordis_system_prompt::{AssembleContext, SystemPrompt, SystemPromptConfig, SystemPromptPlugin};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let root = Context::root();
//! let config = SystemPromptConfig { persona: Some("Be brief.".into()), tool_order: None };
//! root.plugin(SystemPromptPlugin, config).settled().await;
//! let prompt = root.get::<SystemPrompt>().unwrap();
//! let assembly = prompt.assemble(AssembleContext::global()).await.unwrap();
//! assert_eq!(assembly.render().unwrap(), "Be brief.");
//! root.dispose();
//! # }
//! ```

mod assembly;
mod error;
mod order;
mod plugin;
mod render;
mod schema;
mod service;

pub use assembly::{
    AssembleContext, AssembledSection, HeaderError, PromptAssembly, TOOL_SEARCH, header_bytes,
    render,
};
pub use error::{AssembleError, RegisterError, RenderError, ToolOrderError};
pub use order::{TOOL_ORDER_REST, ToolOrder, compare_utf16, order_tools, sort_by_name_utf16};
pub use plugin::{PERSONA_ORDER, PERSONA_SECTION, SystemPromptConfig, SystemPromptPlugin};
pub use render::{interpolate, is_variable_name};
pub use schema::{ScopeKey, ToolSchema, canonical_json, canonicalize, is_canonical};
pub use service::{
    AssembleValue, OrderOverrideFn, OverrideFn, Section, SectionFn, SectionText, SystemPrompt,
    SystemPromptAssemble, SystemPromptChange, ToolProviderFn, ToolProviderResult, VariableFn,
};
