//! Code Mode's pure texts: everything the model reads about `run_code`, computed from tool
//! schemas with no registry, runtime or I/O.
//!
//! # Choosing a function
//! - [`render_sdk`] renders the `tools:sdk` prompt section: instructions for writing programs
//!   plus TypeScript-like declarations of every tool ([`json_schema_to_ts`] translates one JSON
//!   Schema, total and stack-safe).
//! - [`CODE_ONLY_RULE`] is the `tools:code-only` section of a scope presented as `code`;
//!   [`collapsed_call_message`] is the refusal of a direct call it collapses.
//! - [`RunCodeSchema::for_language`] is `run_code`'s own model-facing definition.
//! - [`render_run_result`] and [`render_run_failure`] turn a run's outcome into the one result
//!   the model sees.
//!
//! # Determinism
//! Every text here is a function of its inputs' content, never of their order: tools are sorted
//! by name in UTF-16 code-unit order ([`compare_utf16`]) and JSON object members are read in the
//! `serde_json::Map`'s own (deterministic) order.
//!
//! # Examples
//! ```
//! use cordis_code_mode::{SdkTool, render_sdk};
//! use serde_json::json;
//!
//! let params = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
//! let sdk = render_sdk(&[SdkTool { name: "read", description: "Read a file.", parameters: &params, output_schema: None }]);
//! assert!(sdk.contains("  /** Read a file. */\n  read: {\n    path: string;\n  } & Record<string, JsonValue>;"));
//! ```

mod result;
mod run_code;
mod schema_ts;
mod sdk;

pub use cordis_schema::compare_utf16;
pub use result::{NO_OUTPUT, render_json, render_run_failure, render_run_result};
pub use run_code::{
    CODE_ONLY_RULE, CODE_ONLY_SECTION, CODE_ONLY_SECTION_ORDER, Language, RUN_CODE_NAME,
    RunCodeSchema, SDK_SECTION, SDK_SECTION_ORDER, UnknownLanguage, collapsed_call_message,
};
pub use schema_ts::json_schema_to_ts;
pub use sdk::{SDK_INSTRUCTIONS, SdkTool, render_sdk};
