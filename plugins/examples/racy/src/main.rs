//! `cordis-racy`: the `cordis` command line with one more plugin, `racy/tally`.
//!
//! This is all it takes to embed cordis with your own Rust plugins: build the plugin table and
//! hand it to `cordis::cli::main_with`. Every subcommand (`check`, `stress`, `run`, `call`)
//! then knows the plugin by name.

use std::process::ExitCode;

fn main() -> ExitCode {
    cordis::cli::main_with(&cordis_example_racy::builtins())
}
