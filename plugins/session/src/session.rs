//! `Session`: the in-memory log, its message cache, and the handle on its writer.

use cordis_runtime::lock;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use cordis_conversation::History;

use crate::error::SessionError;
use crate::event::{EventData, RequestHeader, SessionEvent, SessionHeader, TurnEndReason};
use crate::file::Cmd;
use crate::project::{Cut, Marks, closing_events, cut_of, event_message, fold_request_header};

/// The writer of a persistent session: its queue, and the token its lock watches.
pub(crate) struct Writer {
    pub(crate) tx: mpsc::Sender<Cmd>,
    /// Dropped with the last handle: the lock then knows the session is shutting down.
    pub(crate) alive: Arc<()>,
}

struct State {
    events: Vec<SessionEvent>,
    /// `event_message` of every event so far: the live cache (the invariant never trusts it),
    /// shared with every request built from it.
    messages: History,
    /// Where the projections' events are (kept on append, like `messages`).
    marks: Marks,
}

struct Inner {
    header: SessionHeader,
    state: Mutex<State>,
    writer: Option<Mutex<mpsc::Sender<Cmd>>>,
    _alive: Option<Arc<()>>,
}

/// One session: append-only events, shared by clones.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.inner.header.id)
            .field("events", &self.len())
            .field("persistent", &self.inner.writer.is_some())
            .finish()
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A weak handle, for the store's table of live sessions.
#[derive(Clone)]
pub(crate) struct WeakSession(std::sync::Weak<Inner>);

impl WeakSession {
    pub(crate) fn upgrade(&self) -> Option<Session> {
        self.0.upgrade().map(|inner| Session { inner })
    }
}

impl Session {
    pub(crate) fn downgrade(&self) -> WeakSession {
        WeakSession(Arc::downgrade(&self.inner))
    }

    pub(crate) fn from_parts(
        header: SessionHeader,
        events: Vec<SessionEvent>,
        writer: Option<Writer>,
    ) -> Result<Session, SessionError> {
        let mut messages = History::new();
        for e in &events {
            event_message(e)?.apply(&mut messages);
        }
        let marks = Marks::scan(&events);
        let (tx, alive) = writer.map(|w| (w.tx, w.alive)).unzip();
        Ok(Session {
            inner: Arc::new(Inner {
                header,
                state: Mutex::new(State {
                    events,
                    messages,
                    marks,
                }),
                writer: tx.map(Mutex::new),
                _alive: alive,
            }),
        })
    }

    /// A session kept in memory only (tests, benchmarks, throwaway agents).
    pub fn in_memory(id: impl Into<String>) -> Session {
        let header = SessionHeader {
            kind: "session".into(),
            version: crate::event::SESSION_VERSION,
            id: id.into(),
            created_at: now_ms(),
            cwd: None,
            parent_session: None,
            forked_at: None,
            agent_preset: None,
        };
        Session::from_parts(header, Vec::new(), None).unwrap_or_else(|_| unreachable!())
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.inner.header.id
    }

    /// The header line.
    pub fn header(&self) -> &SessionHeader {
        &self.inner.header
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        lock(&self.inner.state).events.len()
    }

    /// True when no event was appended yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends an event; returns its seq. The line is queued for the writer (see
    /// [`Session::flush`] for durability).
    ///
    /// # Errors
    /// [`SessionError::Writer`] when the writer thread is gone; a payload that does not fit
    /// its kind ([`SessionError::Projection`]).
    pub fn append_raw(
        &self,
        kind: &str,
        data: serde_json::Value,
        sources: Option<Vec<u64>>,
    ) -> Result<u64, SessionError> {
        let mut st = lock(&self.inner.state);
        let event = SessionEvent {
            kind: kind.to_owned(),
            seq: st.events.len() as u64,
            time: now_ms(),
            data,
            source_event_seqs: sources,
        };
        let message = event_message(&event)?;
        if let Some(writer) = &self.inner.writer {
            let mut line = serde_json::to_vec(&event)
                .map_err(|e| SessionError::Writer(format!("serializing an event: {e}")))?;
            line.push(b'\n');
            lock(writer)
                .send(Cmd::Line(line))
                .map_err(|_| SessionError::Writer("the writer thread is gone".into()))?;
        }
        let seq = event.seq;
        message.apply(&mut st.messages);
        let index = st.events.len();
        st.marks.note(index, &event);
        st.events.push(event);
        Ok(seq)
    }

    /// Appends a typed event; returns its seq.
    ///
    /// # Errors
    /// As [`Session::append_raw`].
    pub fn append<D: EventData>(
        &self,
        data: &D,
        sources: Option<Vec<u64>>,
    ) -> Result<u64, SessionError> {
        let value = serde_json::to_value(data)
            .map_err(|e| SessionError::Writer(format!("serializing {}: {e}", D::KIND)))?;
        self.append_raw(D::KIND, value, sources)
    }

    /// Resolves once every earlier append is written (and synced, unless durability is `none`).
    ///
    /// # Errors
    /// [`SessionError::Writer`] when a write or sync failed.
    ///
    /// # Cancel safety
    /// Cancel safe: the appends stay queued.
    pub async fn flush(&self) -> Result<(), SessionError> {
        let Some(writer) = &self.inner.writer else {
            return Ok(());
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        lock(writer)
            .send(Cmd::Flush(tx))
            .map_err(|_| SessionError::Writer("the writer thread is gone".into()))?;
        rx.await
            .map_err(|_| SessionError::Writer("the writer thread is gone".into()))?
            .map_err(SessionError::Writer)
    }

    /// Runs `f` on the events (under the session lock: keep it short, do not append).
    pub fn with_events<R>(&self, f: impl FnOnce(&[SessionEvent]) -> R) -> R {
        f(&lock(&self.inner.state).events)
    }

    /// A copy of every event.
    pub fn events(&self) -> Vec<SessionEvent> {
        self.with_events(<[SessionEvent]>::to_vec)
    }

    /// The conversation so far, from the live cache (the loop's request messages): a shared
    /// snapshot, O(1).
    pub fn messages(&self) -> History {
        lock(&self.inner.state).messages.clone()
    }

    /// One history read: the page of [`crate::page_bounds`] and, without `before_seq`, the
    /// projection baseline, taken in ONE critical section of the session lock.
    ///
    /// Appends come from other threads, so reading the events and then the baseline in two
    /// steps could pair a page cut at N with values folded to N+1. Here both come from the
    /// same slice, and `as_of_seq` is the last served event's seq by construction. The work
    /// under the lock is the page copy; the baseline reads the append-maintained marks (O(1)).
    pub fn cut(&self, before_seq: Option<u64>, max_messages: usize) -> Cut {
        let st = lock(&self.inner.state);
        cut_of(
            &self.inner.header,
            &st.events,
            st.marks,
            before_seq,
            max_messages,
        )
    }

    /// The messages and the seq the next event will get, read atomically (the boundary).
    pub fn boundary(&self) -> (u64, History) {
        let st = lock(&self.inner.state);
        (st.events.len() as u64, st.messages.clone())
    }

    /// The latest logged request header.
    ///
    /// # Errors
    /// A malformed header event.
    pub fn request_header(&self) -> Result<Option<RequestHeader>, SessionError> {
        Ok(self.with_events(fold_request_header)?)
    }

    /// Records that the session runs preset `preset` from now on (`agent-preset/selected`);
    /// returns its seq. [`crate::resolve_session_preset`] reads it back.
    ///
    /// # Errors
    /// As [`Session::append`].
    pub fn select_preset(&self, preset: &str) -> Result<u64, SessionError> {
        self.append(
            &crate::event::AgentPresetSelectedData {
                agent_preset: preset.to_owned(),
            },
            None,
        )
    }

    /// The preset this session runs now (see [`crate::resolve_session_preset`]), read under
    /// the session lock.
    pub fn preset(&self) -> Option<String> {
        self.with_events(|events| crate::event::resolve_session_preset(&self.inner.header, events))
    }

    /// Closes a turn left open, balanced (see [`crate::closing_events`]); returns the seqs
    /// appended (none when no turn is open).
    ///
    /// # Errors
    /// A malformed event of the open turn, or an append failure.
    pub fn close_open_turn(
        &self,
        reason: TurnEndReason,
        code: &str,
    ) -> Result<Vec<u64>, SessionError> {
        let closing = self.with_events(|events| closing_events(events, reason, code))?;
        closing
            .into_iter()
            .map(|c| self.append_raw(c.kind, c.data, c.sources))
            .collect()
    }
}
