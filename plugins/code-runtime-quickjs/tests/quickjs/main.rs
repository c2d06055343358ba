//! The QuickJS engine's tests, one binary: the engine alone (`runs`), `run_code` through the
//! tool registry's pipeline (`registry`), and Code Mode's SDK and result texts around a run on
//! the engine (`code_mode`).

mod code_mode;
mod registry;
mod runs;
