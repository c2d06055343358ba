//! The `mcp` plugin's integration tests, one binary (a link each was most of their build):
//! `auth` (OAuth against the in-repo authorization server) and `http` (the streamable-HTTP
//! transport against a hand-written server). Run one with `cargo test -p cordis-mcp --test mcp
//! auth::`.

mod auth;
mod http;
mod support;
