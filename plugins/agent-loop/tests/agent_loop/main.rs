//! The agent loop's integration tests, one binary: turns, steps, the session log and the
//! reconstructability check (`turns`), Code Mode programs inside a turn (`code_mode`), and compaction's summary request (`compaction`).

mod common;

mod code_mode;
mod compaction;
mod turns;
