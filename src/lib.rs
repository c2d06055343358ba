//! Facade over the workspace: the runtime, so the integration tests in `tests/` see every crate.

pub use cordis_runtime as runtime;
