//! The agent loop's integration tests, one binary: turns, steps, the session log and the
//! reconstructability check (`turns`), and Code Mode programs inside a turn (`code_mode`).

mod common;

mod code_mode;
mod turns;
