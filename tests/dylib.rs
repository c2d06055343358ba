//! The plugin-library tests: one test binary (they load libraries into the test process, so
//! they share it with each other and with nothing else). `tests/dylib_hang.rs` is apart: it
//! leaves hung plugin threads in its process on purpose.

mod common;

mod dylib_cache;
mod dylib_foreign_stats;
mod dylib_plugins;
mod dylib_replay;
mod permute_dylib;
mod reload_dylib;
