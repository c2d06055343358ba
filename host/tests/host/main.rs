//! The host's integration tests, one binary: random `cordis.yml` text never panics the reader
//! (`config_fuzz`), and hot reload through the public API (`reload`).

mod config_fuzz;
mod reload;
