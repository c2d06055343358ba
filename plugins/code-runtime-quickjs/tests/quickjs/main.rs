//! The QuickJS engine's tests, one binary: the engine alone (`runs`) and `run_code` through the
//! tool registry's pipeline (`registry`).

mod registry;
mod runs;
