//! The session log's integration tests, one binary: the log's format and replay (`log`),
//! history reads (`history`), the writer lock across processes (`lock`), kill -9 at random
//! points (`crash`) and the preset a session records (`preset`). `crash` and `lock` re-run this
//! binary with `--exact <module>::<child test>` as the second process.

mod common;

mod crash;
mod history;
mod lock;
mod log;
mod preset;
