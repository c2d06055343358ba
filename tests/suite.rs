//! The root integration tests but the plugin-library ones: one test binary (linking one binary
//! instead of one per file was most of a 2-core CI build), each file a module named for what it
//! tests. Run one file's tests with `cargo test --test suite cli_run::`. The plugin-library
//! tests are `tests/dylib.rs` (they load libraries into the test process) and
//! `tests/dylib_hang.rs` (it leaves hung plugin threads in its process on purpose).

mod cli_acp_common;
mod common;
/// The OAuth authorization server fixture the `mcp` plugin's tests use.
#[path = "../plugins/mcp/tests/support/oauth.rs"]
mod oauth_fixture;

mod acp_sdk;
mod approvals_unasked;
mod cli_acp;
mod cli_acp_props;
mod cli_call;
mod cli_check;
mod cli_code_mode;
mod cli_history;
mod cli_hostile;
mod cli_include;
mod cli_plugin;
mod cli_presets;
mod cli_program_name;
mod cli_run;
mod cli_stress_ci;
mod cli_stress_progress;
mod cli_terminal;
mod cli_watch;
mod cli_workspace_agent;
mod compaction;
mod hooks;
mod instructions_skills;
mod loader_schedule;
mod mcp_auth;
mod mcp_cli;
mod mcp_conformance;
mod mcp_determinism;
mod mcp_everything;
mod permute_code_mode;
mod permute_events;
mod permute_silent;
mod permute_tool_order;
mod preload_phase;
mod presets;
mod presets_determinism;
mod readme_commands;
mod runtime_lifecycle;
mod serde_json_order;
mod serve_fork;
mod serve_live;
mod serve_progress;
mod serve_web;
mod session_fork;
mod sessions_contract;
mod snapshots;
mod stress_exercise;
mod stress_sources;
mod tool_search;
mod trust_init;
mod usage_accounting;
mod wasm;
mod wasm_http;
