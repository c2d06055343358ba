//! Sessions: the durable, append-only event log of one agent conversation.
//!
//! A session file is JSONL: the first line is a [`SessionHeader`]
//! (`{"type":"session","version":0,"id",...}`), every other line one [`SessionEvent`]
//! (`{"type","seq","time","data","sourceEventSeqs"?}`) with `seq` equal to its index.
//!
//! # Durability
//! Appends are assigned their `seq` synchronously and handed to a dedicated writer thread (file
//! I/O never runs on async threads). The writer *group-commits*: it writes everything queued,
//! then `fsync`s once, so a burst of appends costs one sync. [`Session::flush`] resolves once
//! every earlier append is on disk. The bound: an append is durable at the latest when the next
//! `flush` returns; the agent loop flushes before every model call, before dispatching tools and
//! at turn end, so no event whose effect left the process can be lost.
//!
//! # One writer
//! A persistent session's writer holds an exclusive advisory lock on `<id>.lock` (which names
//! its pid) for its lifetime; any other opener, in this process or another, gets
//! [`SessionError::SessionLocked`] ("session X is open in process N"). The lock dies with its
//! process, so a crash never leaves a session blocked.
//!
//! # Crash repair
//! [`SessionStore::open`] keeps a complete final event that lost only its newline (and writes
//! the newline), truncates a torn final line, then closes a turn left open with synthetic
//! error `tool/result`s, `step/end` and `turn/end {kind: interrupted}`, and reports both in an
//! [`OpenReport`]. Unknown format versions are refused ([`SessionError::UnsupportedVersion`]).
//!
//! # Projections
//! [`derive_messages`] and [`fold_request_header`] are pure functions of an event slice: the
//! reconstructability invariant re-runs them on a fresh prefix of the log.

pub mod contract;
mod error;
mod event;
mod file;
pub mod index;
mod lock;
mod plugin;
mod project;
mod session;
mod store;

pub use error::SessionError;
pub use event::{
    AgentPresetSelectedData, AssistantChunkData, AssistantMessageData, CompactionData,
    CompactionTrigger, EventData, EventView, GrantData, GrantRevokedData, HeaderReason,
    HookRunData, PermissionsModeData, ProjectionError, RequestHeader, RequestHeaderData,
    SESSION_VERSION, SessionEvent, SessionHeader, StepEndData, StepStartData, ToolApprovalData,
    ToolCallData, ToolCodeDispatchData, ToolCodeDispatchStartData, ToolResultData, TurnEndData,
    TurnEndReason, TurnStartData, UserMessageData, kinds, resolve_session_preset,
};
pub use file::{check_id, write_private};
pub use index::{ListQuery, SessionPage, SessionSummary};
pub use lock::{holder, settle};
pub use plugin::{SessionConfig, SessionPlugin, SessionRootError, project_key, state_dir};
pub use project::{
    ClosingEvent, Cut, DEFAULT_MAX_MESSAGES, MessageEffect, PageBounds, Projections,
    TODO_WRITE_TOOL, closing_events, compaction_message, derive_messages, event_message,
    fold_request_header, header_reason_due, last_turn, open_turn, page_bounds, projection_values,
};
pub use session::Session;
pub use store::{
    CreateOptions, Durability, ForkError, OpenReport, SessionSnapshot, SessionSource, SessionStore,
};
