//! The `cordis` application: the command line ([`cli`]) and the standard plugin table
//! ([`builtins`]) over the generic host. It re-exports the crates it composes so the
//! cross-crate tests in `tests/` reach all of them through one name.

pub mod acp;
pub mod builtins;
pub mod cli;
pub mod exercise;
pub mod serve;
pub mod session;
pub mod testing;

pub use cordis_host as host;
pub use cordis_host::Builtins;
pub use cordis_runtime as runtime;
pub use cordis_system_prompt as system_prompt;
pub use cordis_tools as tools;
