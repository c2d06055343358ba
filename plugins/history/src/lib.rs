//! History reads with an atomic cut: the `history` service serves a session's transcript a page
//! at a time, each tool call and result with its tool's presentation, and on the tail page the
//! projection baseline of exactly the moment the page was cut.
//!
//! # One read
//! [`History::history`]`(session, before_seq, max_messages)`:
//! 1. **Source**: the session open in this process (attached, still appending), else its log read
//!    as it is on disk ([`cordis_session::SessionStore::source`]): no agent is resumed, no lock
//!    taken, nothing repaired, so a writer in another process goes on undisturbed.
//! 2. **Presenter scope**: the live agent's scope key when an agent runs the session; else the
//!    standing scope of the preset the session runs, read from the LOG (a switch beats the
//!    header), asked of the [`StandingScopes`] service; else (no such service, or it refuses:
//!    the preset was deleted or is broken) the global layer. Both awaits happen before the cut.
//! 3. **Cut**: the page and the baseline come from one critical section of the session lock
//!    ([`cordis_session::Session::cut`]), so `projections.asOfSeq` is the seq of the page's last
//!    event by construction, however fast other threads append.
//! 4. **Views**: a `tool/call` gets its tool's presentation (title, kind, input, card) when the
//!    tool is visible in the scope and has a presenter; a `tool/result` gets one when its call
//!    is on the same page. A presenter that fails or panics is logged; the event ships without
//!    a view (clients show a generic card).
//!
//! # Pages
//! Without `before_seq` the page is the tail of the log; with it, the events before that seq.
//! Walking back, `user/message` and `assistant/message` events are counted; the page starts at
//! the `max_messages`-th (default [`cordis_session::DEFAULT_MAX_MESSAGES`] = 50), never between a
//! message and its chunks. `hasMore` says older events exist: ask again with `before_seq` = the
//! first event's seq. Only tail pages carry `projections`.
//!
//! # Errors
//! An unknown session is [`HistoryError::NotFound`]; anything else (no `sessions` service, an
//! unreadable or corrupt log) is [`HistoryError::Internal`], whose text is
//! `history unavailable for session "<id>": <why>`. Nothing else escapes.
//!
//! # Wire shape (`serde_json::to_value(page)`)
//! ```json
//! {"events": [{"event": {"type": "tool/call", "seq": 7, ...},
//!              "view": {"for": "call", "view": {"title": "Read a.rs", "kind": "read", "input": {...}, "card": {"type": "generic"}}}}],
//!  "hasMore": true,
//!  "projections": {"asOfSeq": 7, "values": {"agentPreset": "code", "todos": [...]}}}
//! ```

mod plugin;
mod service;
mod view;

pub use plugin::{HistoryConfig, HistoryPlugin};
pub use service::{
    History, HistoryEntry, HistoryError, HistoryPage, StandingScopes, StandingScopesService,
    ToolView, ViewFor,
};
pub use view::views;
