//! Facade over the workspace, so the integration tests in `tests/` reach every crate.

pub use cordis_host as host;
pub use cordis_runtime as runtime;
pub use cordis_system_prompt as system_prompt;
pub use cordis_tools as tools;
