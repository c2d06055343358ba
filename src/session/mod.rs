//! The session core, front-end neutral: a session's life written once. The terminal
//! (`cordis run`), the editor bridge (`cordis acp`) and the page (`cordis serve`) are adapters
//! over it: they open sessions here ([`open`]), make ids here ([`id`]), read a session as its
//! [`transcript`] model, follow sessions other processes write ([`follow`]), and count usage
//! here ([`usage`]). Slash commands are one registry ([`commands`]: the terminal completes
//! them, ACP advertises them), with MCP servers' prompts as more of them ([`prompts`]).

pub mod commands;
pub mod follow;
pub mod id;
pub mod mcp_content;
pub mod open;
pub mod prompts;
pub mod transcript;
pub mod usage;
