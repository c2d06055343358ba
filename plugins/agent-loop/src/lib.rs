//! The agent loop: agents, their turns, and the reconstructability invariant.
//!
//! # A turn
//! `turn/start` → `user/message` → per step: assemble the prompt for the agent's registry scope
//! (*before* `step/start`, so an assembly failure opens no step) → `step/start` (the
//! reconstruction boundary) → the request header `{config, system?, tools?}`, logged as
//! `request/header` on the first request of this loop instance (`initial`, or `resume` when the
//! log has one) and afterwards only when it differs (`change`, or `tool-load` when it only appends
//! tools a `tool_search` loaded: see the `deferred-tools` plugin) → the frozen request to the
//! `llm` service → `assistant/chunk`s → `assistant/message` → `tool/call`s, dispatched through the
//! registry with the agent's scope (in parallel up to `maxParallelTools`, results committed in
//! call order) → `tool/result`s → `step/end`; again while the model called tools → `turn/end`.
//!
//! Any failure closes the turn balanced (error results for unanswered calls, `step/end` when a
//! step is open, `turn/end {kind: error, step, message}`), emits exactly one [`AgentError`], and
//! the agent returns to idle. [`Agent::cancel`] and disposal end the turn with `aborted` and
//! `disposed`.
//!
//! # Reconstructability invariant
//! Before each model call (on by default in debug builds and tests; `invariant: true` in release)
//! the request actually handed to the adapter — after every `llm/request` listener — must equal
//! what a fresh fold of the log yields: messages derived from the prefix before this step's
//! `step/start`, config/system/tools from the latest `request/header`. A mismatch fails the turn
//! with a message naming the diverging field.

mod agent;
pub mod budget;
pub mod compaction;
mod config;
mod events;
mod invariant;
mod permissions;
mod plugin;
mod service;

pub use agent::{Agent, CompactError, TurnError};
pub use config::{AgentLoopConfig, AgentOptions, Budget, CompactionConfig, LoopSettings};
pub use events::{AgentError, AgentEvent, AgentHook, AgentNotice, AgentState, HookPoint, Moment};
pub use invariant::check_request;
pub use permissions::{Permissions, PermissionsError, grant_data, replay as replay_permissions};
pub use plugin::AgentLoopPlugin;
pub use service::{AgentLoop, CreateAgentError};
