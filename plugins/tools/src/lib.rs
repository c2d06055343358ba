//! The scoped tool registry (`tools` service) and the plugin that provides it.
//!
//! Storage is one global layer plus one layer per [`ScopeKey`], linked by
//! [`ToolRegistry::bind_parent`]. Every write — register, restrict, guard, bind — is an effect of
//! the calling [`cordis_runtime::Context`]'s scope, so it unwinds with that scope; a layer left
//! empty is dropped, and each visible change emits [`ToolsChange`].
//!
//! [`ToolRegistry::schemas`] is the capability catalog; what the model sees is the system-prompt
//! assembly's canonical list, to which the registry contributes as one tool provider.
//!
//! Presentation (Code Mode) is scope state too: [`ToolRegistry::present_as`] declares `native`,
//! `code` or `both` for a scope, [`ToolRegistry::mode_for`] reads the nearest declaration; a
//! non-native scope gains the `run_code` transport, which runs a program on the `code-runtime`
//! service with the scope's tools as bindings (each sub-call through the full pipeline and the
//! [`ToolsCodeDispatch`] waterfall). See the `presentation` module's table for what each mode
//! changes; [`ToolPresentationPlugin`] is the composition row that declares one.
//!
//! Registration checks the name ([`check_tool_name`], one rule for every kind of tool) and
//! compiles the parameters schema once; [`ToolRegistry::execute`] checks every call's arguments
//! against it before guards and the handler run, so no tool, built-in or dylib, sees arguments
//! its schema refuses.
//!
//! Writing a tool: [`ToolDefinition::typed`] derives the schema from a Rust argument type; a
//! plugin that only registers tools is a [`ToolSet`] served by [`ToolSetPlugin`].

mod arguments;
pub mod bounded;
mod definition;
mod error;
mod execute;
mod plugin;
mod presentation;
mod registry;
mod run_code;
mod tool_set;
mod turns;
mod typed;

pub use bounded::{HeadTail, MAX_RESULT_TEXT, cut_text};
pub use cordis_schema::{ScopeKey, ToolSchema};
pub use definition::{
    Clearance, Concurrency, Effect, MAX_TOOL_NAME, ToolCall, ToolCallContext, ToolDefinition,
    ToolHandler, ToolOutput, ToolResult, check_tool_name, codes,
};
pub use error::RegisterError;
pub use execute::{Decision, PostExecute, PreExecute, ToolsPostExecute, ToolsPreExecute};
pub use plugin::{
    NoConfig, ToolPresentationConfig, ToolPresentationPlugin, ToolRestrictPlugin, ToolsConfig,
    ToolsConfigError, ToolsPlugin,
};
pub use presentation::{DEFAULT_MAX_PARALLEL_SUB_CALLS, Presentation, PresentationMode};
pub use registry::{
    APPROVAL_STAGE, ApprovalStage, Guard, RUN_CODE, Restriction, ToolRegistry, ToolsChange,
    declaring_key,
};
pub use run_code::{CodeDispatch, DispatchOutcome, ToolsCodeDispatch};
pub use tool_set::{ToolSet, ToolSetPlugin};
pub use typed::{parameters_schema, parse_arguments};

#[cfg(test)]
mod test_support;
