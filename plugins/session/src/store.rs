//! `SessionStore`: the `sessions` service that creates and opens sessions under a root directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cordis_runtime::Service;
use serde::Deserialize;

use crate::error::SessionError;
use crate::event::{SESSION_VERSION, SessionEvent, SessionHeader, TurnEndReason};
use crate::file::{self, Sync, check_id};
use crate::index::{ListQuery, SessionPage, SessionSummary};
use crate::lock;
use crate::project::{Cut, Marks, cut_of};
use crate::session::{Session, WeakSession, Writer, now_ms};

/// How appends reach the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// Group commit with `fsync` per batch (the default).
    #[default]
    Fsync,
    /// Written, never synced: survives a process crash, not a power loss (benchmarks).
    None,
}

/// What opening a session repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Bytes of a torn final line that were truncated.
    pub truncated_bytes: Option<u64>,
    /// True when the final event was complete but for its newline (kept; the newline written).
    pub newline_repaired: bool,
    /// Seqs of the events appended to close a turn left open (`turn/end {interrupted}` last).
    pub repaired: Vec<u64>,
    /// True when the session did not exist and was created.
    pub created: bool,
    /// The id the log's header names when it differs from the file's name (a copied log): the
    /// session is opened under the file's name, which the header's id does not change.
    pub header_id: Option<String>,
}

impl OpenReport {
    /// What opening repaired or noticed, as one sentence for a person; `None` when nothing.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(bytes) = self.truncated_bytes {
            parts.push(format!(
                "cut a torn last line of {bytes} bytes (a write the process did not finish)"
            ));
        }
        if self.newline_repaired {
            parts.push("wrote the newline its last event was missing".to_owned());
        }
        if !self.repaired.is_empty() {
            parts.push(format!(
                "closed the turn left open as interrupted ({} events appended)",
                self.repaired.len()
            ));
        }
        if let Some(id) = &self.header_id {
            parts.push(format!(
                "its header names session {id:?}; it is opened under its file's name"
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// The header values of a session being created (all optional; `Default` is none of them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CreateOptions {
    /// The working directory the session belongs to.
    pub cwd: Option<String>,
    /// The session it was forked from.
    pub parent_session: Option<String>,
    /// The agent preset it is created with (the header's `agentPreset`).
    pub agent_preset: Option<String>,
}

impl CreateOptions {
    /// With the working directory.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// With the parent session.
    #[must_use]
    pub fn parent_session(mut self, id: impl Into<String>) -> Self {
        self.parent_session = Some(id.into());
        self
    }

    /// With the agent preset recorded in the header.
    #[must_use]
    pub fn agent_preset(mut self, preset: impl Into<String>) -> Self {
        self.agent_preset = Some(preset.into());
        self
    }
}

/// A persisted session as a reader found it on disk: frozen, never repaired, never resumed.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSnapshot {
    header: SessionHeader,
    events: Vec<SessionEvent>,
}

impl SessionSnapshot {
    /// The header line.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The events read.
    pub fn events(&self) -> &[SessionEvent] {
        &self.events
    }

    /// The preset the session runs (see [`crate::resolve_session_preset`]).
    pub fn preset(&self) -> Option<String> {
        crate::event::resolve_session_preset(&self.header, &self.events)
    }

    /// The history cut of the snapshot (as [`Session::cut`]; the baseline is a fold of the
    /// events read, so `as_of_seq` is the last one's seq).
    pub fn cut(&self, before_seq: Option<u64>, max_messages: usize) -> Cut {
        cut_of(
            &self.header,
            &self.events,
            Marks::scan(&self.events),
            before_seq,
            max_messages,
        )
    }
}

/// Why a session could not be forked ([`SessionStore::fork`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// No session has the parent's id.
    #[error("cannot fork session {id}: no such session")]
    UnknownParent {
        /// The parent id asked for.
        id: String,
    },
    /// The seq asked for is past the parent's last event.
    #[error("cannot fork session {id} at seq {seq}: {}", beyond(*len))]
    BeyondLog {
        /// The parent.
        id: String,
        /// The seq asked for.
        seq: u64,
        /// How many events the parent has.
        len: u64,
    },
    /// The parent has no complete turn at or before the seq asked for.
    #[error("cannot fork session {id}{}: it has no complete turn to fork{}", at_of(*seq), through(*seq))]
    NothingToFork {
        /// The parent.
        id: String,
        /// The seq asked for (`None`: the parent's end).
        seq: Option<u64>,
    },
    /// Reading the parent or creating the fork failed.
    #[error(transparent)]
    Session(#[from] SessionError),
}

fn beyond(len: u64) -> String {
    match len.checked_sub(1) {
        Some(last) => format!("its log ends at seq {last}"),
        None => "its log has no events".to_owned(),
    }
}

fn at_of(seq: Option<u64>) -> String {
    seq.map_or_else(String::new, |s| format!(" at seq {s}"))
}

fn through(seq: Option<u64>) -> String {
    seq.map_or_else(String::new, |s| format!(" through seq {s}"))
}

/// How many of `events` a fork through `at` (`None`: the last event) copies: everything
/// through `at`, except that a turn still open at `at` is left out whole (cut back to before
/// its `turn/start`), so a fork never starts mid-turn. Events between turns (a preset or
/// permission change, a compaction) are kept.
///
/// # Errors
/// `at` past the last event, no complete turn in the copy, or a malformed turn event.
pub(crate) fn fork_point(
    id: &str,
    events: &[SessionEvent],
    at: Option<u64>,
) -> Result<u64, ForkError> {
    let len = events.len() as u64;
    let nothing = || ForkError::NothingToFork {
        id: id.to_owned(),
        seq: at,
    };
    let end = match at {
        Some(seq) if seq >= len => {
            return Err(ForkError::BeyondLog {
                id: id.to_owned(),
                seq,
                len,
            });
        }
        Some(seq) => seq + 1,
        None => len,
    };
    let mut prefix = &events[..end as usize];
    if crate::project::open_turn(prefix)
        .map_err(SessionError::from)?
        .is_some()
    {
        let start = prefix
            .iter()
            .rposition(|e| e.kind == crate::event::kinds::TURN_START)
            .ok_or_else(nothing)?;
        prefix = &prefix[..start];
    }
    if !prefix
        .iter()
        .any(|e| e.kind == crate::event::kinds::TURN_END)
    {
        return Err(nothing());
    }
    Ok(prefix.len() as u64)
}

/// Where a session's history is read from.
#[derive(Debug, Clone)]
pub enum SessionSource {
    /// Open in this process (by an agent or anyone else): still appending.
    Attached(Session),
    /// Persisted and not open here: the file as read (another process may be writing it).
    Detached(SessionSnapshot),
}

impl SessionSource {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.header().id
    }

    /// The header line.
    pub fn header(&self) -> &SessionHeader {
        match self {
            SessionSource::Attached(s) => s.header(),
            SessionSource::Detached(s) => s.header(),
        }
    }

    /// The preset the session runs, from its log (see [`crate::resolve_session_preset`]).
    pub fn preset(&self) -> Option<String> {
        match self {
            SessionSource::Attached(s) => s.preset(),
            SessionSource::Detached(s) => s.preset(),
        }
    }

    /// The history cut: for an attached session one critical section of its lock
    /// ([`Session::cut`]), for a detached one a fold of the snapshot.
    pub fn cut(&self, before_seq: Option<u64>, max_messages: usize) -> Cut {
        match self {
            SessionSource::Attached(s) => s.cut(before_seq, max_messages),
            SessionSource::Detached(s) => s.cut(before_seq, max_messages),
        }
    }
}

/// The `sessions` service.
///
/// A session open through this store is shared: opening its id again returns the same
/// [`Session`] (no second writer on one file, no repair of a turn that is still running). Any
/// other writer, another store or another process, gets [`SessionError::SessionLocked`]: a
/// persistent session's writer holds an exclusive lock on `<id>.lock` while it has handles.
#[derive(Clone)]
pub struct SessionStore {
    root: Option<PathBuf>,
    durability: Durability,
    live: Arc<Mutex<HashMap<String, WeakSession>>>,
    /// In-memory sessions are kept for the store's lifetime (there is no file to reopen).
    kept: Arc<Mutex<HashMap<String, Session>>>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("root", &self.root)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

impl Service for SessionStore {
    const NAME: &'static str = "sessions";
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SessionError> + Send + 'static,
) -> Result<T, SessionError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| SessionError::Writer(format!("blocking task failed: {e}")))?
}

impl SessionStore {
    /// A store writing `<root>/<id>.jsonl`; `None` keeps sessions in memory (for the store's
    /// lifetime).
    pub fn new(root: Option<PathBuf>, durability: Durability) -> Self {
        SessionStore {
            root,
            durability,
            live: Arc::new(Mutex::new(HashMap::new())),
            kept: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn live(&self, id: &str) -> Option<Session> {
        let mut live = cordis_runtime::lock(&self.live);
        live.retain(|_, w| w.upgrade().is_some());
        live.get(id).and_then(WeakSession::upgrade)
    }

    fn remember(&self, session: &Session) {
        if self.root.is_none() {
            cordis_runtime::lock(&self.kept).insert(session.id().to_owned(), session.clone());
        }
        cordis_runtime::lock(&self.live).insert(session.id().to_owned(), session.downgrade());
    }

    /// The root directory, if persistent.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The file of session `id`.
    pub fn path_of(&self, id: &str) -> Option<PathBuf> {
        self.root.as_ref().map(|r| r.join(format!("{id}.jsonl")))
    }

    fn sync(&self) -> Sync {
        match self.durability {
            Durability::Fsync => Sync::Data,
            Durability::None => Sync::Never,
        }
    }

    /// Creates session `id`.
    ///
    /// # Errors
    /// An invalid id, an existing file, or I/O.
    ///
    /// # Cancel safety
    /// As [`SessionStore::create_with`].
    pub async fn create(
        &self,
        id: &str,
        cwd: Option<String>,
        parent_session: Option<String>,
    ) -> Result<Session, SessionError> {
        self.create_with(
            id,
            CreateOptions {
                cwd,
                parent_session,
                agent_preset: None,
            },
        )
        .await
    }

    /// Creates session `id` with the header values of `options` (its preset included).
    ///
    /// # Errors
    /// As [`SessionStore::create`].
    ///
    /// # Cancel safety
    /// Not cancel safe for a store with a root: the blocking creation, once spawned, runs to the
    /// end without the caller, so the file is still written with its header (and no events),
    /// then its writer stops and lets go of the lock. Calling `create` again then fails
    /// with [`SessionError::AlreadyExists`]; [`SessionStore::open`] (or `open_or_create`) opens
    /// the empty session. An in-memory store creates without awaiting: nothing to cancel.
    pub async fn create_with(
        &self,
        id: &str,
        options: CreateOptions,
    ) -> Result<Session, SessionError> {
        check_id(id)?;
        let header = SessionHeader {
            kind: "session".into(),
            version: SESSION_VERSION,
            id: id.to_owned(),
            created_at: now_ms(),
            cwd: options.cwd,
            parent_session: options.parent_session,
            forked_at: None,
            agent_preset: options.agent_preset,
        };
        if self.live(id).is_some() {
            return Err(SessionError::AlreadyExists {
                path: format!("(open in this process) {id}"),
            });
        }
        let session = match self.path_of(id) {
            None => Session::from_parts(header, Vec::new(), None)?,
            Some(path) => {
                let sync = self.sync();
                blocking(move || {
                    let alive = Arc::new(());
                    let lock = lock::acquire(&path, &header.id, &alive)?;
                    file::create(&path, &header, &[])?;
                    let tx = file::writer(path, sync, lock)?;
                    Session::from_parts(header, Vec::new(), Some(Writer { tx, alive }))
                })
                .await?
            }
        };
        self.remember(&session);
        Ok(session)
    }

    /// Opens session `id` (the live one when this store has it open): repairs the end of the
    /// file and closes a turn left open with `turn/end {interrupted}` (see [`OpenReport`]).
    ///
    /// # Errors
    /// A missing file, [`SessionError::SessionLocked`] when another writer has it open, an
    /// unsupported version, a corrupt line, or I/O.
    ///
    /// # Cancel safety
    /// Safe to call again, but a dropped call is not undone: the blocking open, once spawned,
    /// runs to the end without the caller (the torn end of the file is repaired, the lock is
    /// taken and let go again when the unused session drops), and a closing `turn/end` already
    /// queued is still written. The next `open` opens the same session, but its [`OpenReport`]
    /// does not list the repairs the dropped call made, and a call made while the abandoned
    /// open still holds the lock fails with [`SessionError::SessionLocked`] naming this process.
    pub async fn open(&self, id: &str) -> Result<(Session, OpenReport), SessionError> {
        check_id(id)?;
        if let Some(session) = self.live(id) {
            return Ok((session, OpenReport::default()));
        }
        let Some(path) = self.path_of(id) else {
            return Err(SessionError::NotFound {
                path: format!("(in-memory store) {id}"),
            });
        };
        let sync = self.sync();
        let owned_id = id.to_owned();
        let (session, truncated, newline_repaired, header_id) = blocking(move || {
            if !path.exists() {
                return Err(SessionError::NotFound {
                    path: path.display().to_string(),
                });
            }
            // Locked before reading: no other writer can be appending while the log is read.
            let alive = Arc::new(());
            let lock = lock::acquire(&path, &owned_id, &alive)?;
            let log = file::read(&path)?;
            let tx = file::writer(path, sync, lock)?;
            Ok((
                Session::from_parts(log.header, log.events, Some(Writer { tx, alive }))?,
                log.truncated,
                log.newline_repaired,
                log.header_id,
            ))
        })
        .await?;
        self.remember(&session);
        let repaired = session.close_open_turn(TurnEndReason::Interrupted, "INTERRUPTED")?;
        if !repaired.is_empty() {
            session.flush().await?;
        }
        Ok((
            session,
            OpenReport {
                truncated_bytes: truncated,
                newline_repaired,
                repaired,
                created: false,
                header_id,
            },
        ))
    }

    /// The session `id` for a reader: the live one when this store has it open, else its file
    /// read as it is ([`SessionSource::Detached`]) without the writer lock, repair or resume,
    /// so a writer in another process is neither blocked nor disturbed.
    ///
    /// # Errors
    /// [`SessionError::NotFound`] for an id with no session (an invalid id included, since no
    /// session can have it), an unsupported version, a corrupt line, or I/O.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads (a read already started finishes on its blocking thread and
    /// is discarded).
    pub async fn source(&self, id: &str) -> Result<SessionSource, SessionError> {
        if check_id(id).is_err() {
            return Err(SessionError::NotFound {
                path: format!("(invalid id) {id}"),
            });
        }
        if let Some(session) = self.live(id) {
            return Ok(SessionSource::Attached(session));
        }
        let Some(path) = self.path_of(id) else {
            return Err(SessionError::NotFound {
                path: format!("(in-memory store) {id}"),
            });
        };
        let (header, events) = blocking(move || crate::file::read_only(&path)).await?;
        Ok(SessionSource::Detached(SessionSnapshot { header, events }))
    }

    /// Forks session `parent` into a new session `id` of working directory `cwd`: the new log
    /// starts with a copy of the parent's events through seq `at` (`None`: its end), seqs and
    /// times unchanged, and its header names the parent (`parentSession`) and how many events
    /// it copied (`forkedAt`). A fork never starts mid-turn: a turn still open at `at` is left
    /// out whole, so the copy ends with the last complete turn at or before `at` (and whatever
    /// followed that turn up to `at` outside any turn). The parent is only read, never written
    /// or locked: a parent open in another process forks as its file reads now.
    ///
    /// The fork's first request logs `request/header {reason: fork}`; its messages are the
    /// parent's up to the fork, so its bytes extend the parent's last request's.
    ///
    /// # Errors
    /// [`ForkError::UnknownParent`], [`ForkError::BeyondLog`] (`at` past the parent's last
    /// event), [`ForkError::NothingToFork`] (no complete turn to copy), or, as
    /// [`SessionStore::create`], an invalid or existing `id` and I/O.
    ///
    /// # Cancel safety
    /// As [`SessionStore::create_with`]: a creation dropped part way may still leave the fork's
    /// file.
    pub async fn fork(
        &self,
        parent: &str,
        at: Option<u64>,
        id: &str,
        cwd: Option<String>,
    ) -> Result<Session, ForkError> {
        check_id(id)?;
        let source = match self.source(parent).await {
            Ok(source) => source,
            Err(SessionError::NotFound { .. }) => {
                return Err(ForkError::UnknownParent {
                    id: parent.to_owned(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let (parent_header, mut events) = match source {
            SessionSource::Attached(s) => (s.header().clone(), s.events()),
            SessionSource::Detached(s) => (s.header, s.events),
        };
        let n = fork_point(parent, &events, at)?;
        events.truncate(n as usize);
        let header = SessionHeader {
            kind: "session".into(),
            version: SESSION_VERSION,
            id: id.to_owned(),
            created_at: now_ms(),
            cwd,
            parent_session: Some(parent_header.id),
            forked_at: Some(n),
            agent_preset: parent_header.agent_preset,
        };
        if self.live(id).is_some() {
            return Err(SessionError::AlreadyExists {
                path: format!("(open in this process) {id}"),
            }
            .into());
        }
        let session = match self.path_of(id) {
            None => Session::from_parts(header, events, None)?,
            Some(path) => {
                let sync = self.sync();
                blocking(move || {
                    let alive = Arc::new(());
                    let lock = lock::acquire(&path, &header.id, &alive)?;
                    file::create(&path, &header, &events)?;
                    let tx = file::writer(path, sync, lock)?;
                    Session::from_parts(header, events, Some(Writer { tx, alive }))
                })
                .await?
            }
        };
        self.remember(&session);
        Ok(session)
    }

    /// A page of this store's sessions (see [`crate::index`]): newest first, filtered by
    /// working directory, from a cursor. An in-memory store lists none.
    ///
    /// # Errors
    /// The root cannot be read (a root not made yet holds none), or a cursor no listing gave.
    ///
    /// # Cancel safety
    /// Cancel safe: a listing already started finishes on its blocking thread and is
    /// discarded (the summaries it refreshed stay valid).
    pub async fn list(&self, query: ListQuery) -> Result<SessionPage, SessionError> {
        let Some(root) = self.root.clone() else {
            return Ok(SessionPage::default());
        };
        blocking(move || crate::index::list(&root, &query)).await
    }

    /// The `limit` sessions written last, of every working directory.
    ///
    /// # Errors
    /// As [`SessionStore::list`].
    pub async fn recent(&self, limit: usize) -> Result<Vec<SessionSummary>, SessionError> {
        Ok(self.list(ListQuery::first(limit)).await?.sessions)
    }

    /// Opens session `id`, creating it when it does not exist (in memory: always creates).
    ///
    /// # Errors
    /// As [`SessionStore::open`] and [`SessionStore::create`].
    ///
    /// # Cancel safety
    /// As [`SessionStore::open_or_create_with`].
    pub async fn open_or_create(&self, id: &str) -> Result<(Session, OpenReport), SessionError> {
        self.open_or_create_with(id, CreateOptions::default()).await
    }

    /// Opens session `id`, creating it with `options` when it does not exist (an existing
    /// session keeps its header: `options` apply to a creation only).
    ///
    /// # Errors
    /// As [`SessionStore::open`] and [`SessionStore::create`].
    ///
    /// # Cancel safety
    /// As [`SessionStore::open`] or [`SessionStore::create_with`], whichever it chose: a creation
    /// dropped part way still leaves the session's file, so calling again opens that session
    /// (its report then says `created: false`).
    pub async fn open_or_create_with(
        &self,
        id: &str,
        options: CreateOptions,
    ) -> Result<(Session, OpenReport), SessionError> {
        let exists = self.live(id).is_some() || self.path_of(id).is_some_and(|p| p.exists());
        if exists {
            self.open(id).await
        } else {
            let session = self.create_with(id, options).await?;
            Ok((
                session,
                OpenReport {
                    created: true,
                    ..Default::default()
                },
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        AssistantMessageData, PermissionsModeData, StepEndData, StepStartData, TurnEndData,
        TurnStartData, UserMessageData,
    };

    /// Appends turn `turn`: its user message, one step answering `answer`, and (when `end`)
    /// its `turn/end`.
    fn turn(s: &Session, turn: u64, end: bool) {
        s.append(&TurnStartData { turn }, None).unwrap();
        s.append(
            &UserMessageData {
                turn,
                content: format!("question {turn}"),
                prompt: None,
            },
            None,
        )
        .unwrap();
        s.append(&StepStartData { turn, step: 1 }, None).unwrap();
        s.append(
            &AssistantMessageData {
                turn,
                step: 1,
                content: format!("answer {turn}"),
                tool_calls: vec![],
                usage: None,
                reasoning: None,
            },
            None,
        )
        .unwrap();
        if end {
            s.append(&StepEndData { turn, step: 1 }, None).unwrap();
            s.append(
                &TurnEndData {
                    turn,
                    reason: TurnEndReason::Completed,
                },
                None,
            )
            .unwrap();
        }
    }

    /// Two complete turns (seqs 0..=5 and 6..=11), then an open third (12..=15).
    fn log() -> Vec<SessionEvent> {
        let s = Session::in_memory("p");
        turn(&s, 1, true);
        turn(&s, 2, true);
        turn(&s, 3, false);
        s.events()
    }

    #[test]
    fn a_fork_point_never_falls_mid_turn() {
        let events = log();
        // The end: the open third turn is left out.
        assert_eq!(fork_point("p", &events, None).unwrap(), 12);
        // On a turn/end: through it.
        assert_eq!(fork_point("p", &events, Some(5)).unwrap(), 6);
        assert_eq!(fork_point("p", &events, Some(11)).unwrap(), 12);
        // Inside the second turn: cut back to the end of the first.
        for seq in 6..=10 {
            assert_eq!(fork_point("p", &events, Some(seq)).unwrap(), 6, "seq {seq}");
        }
        assert_eq!(fork_point("p", &events, Some(15)).unwrap(), 12);
    }

    #[test]
    fn a_fork_point_keeps_what_follows_a_turn_outside_any_turn() {
        let s = Session::in_memory("p");
        turn(&s, 1, true);
        let mode = s
            .append(
                &PermissionsModeData {
                    mode: "auto".into(),
                },
                None,
            )
            .unwrap();
        assert_eq!(fork_point("p", &s.events(), None).unwrap(), mode + 1);
    }

    #[test]
    fn a_fork_point_past_the_log_or_without_a_complete_turn_is_refused() {
        let events = log();
        let beyond = fork_point("p", &events, Some(16)).unwrap_err();
        assert!(
            matches!(
                beyond,
                ForkError::BeyondLog {
                    seq: 16,
                    len: 16,
                    ..
                }
            ),
            "{beyond:?}"
        );
        assert_eq!(
            beyond.to_string(),
            "cannot fork session p at seq 16: its log ends at seq 15"
        );
        for at in [Some(0), Some(4)] {
            let nothing = fork_point("p", &events, at).unwrap_err();
            assert!(
                matches!(nothing, ForkError::NothingToFork { .. }),
                "{nothing:?}"
            );
        }
        assert!(matches!(
            fork_point("p", &[], None),
            Err(ForkError::NothingToFork { seq: None, .. })
        ));
    }

    #[tokio::test]
    async fn a_fork_copies_the_parents_complete_turns_and_never_writes_the_parent() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(Some(dir.path().to_owned()), Durability::None);
        let parent = store
            .create_with("p", CreateOptions::default().agent_preset("coder"))
            .await
            .unwrap();
        turn(&parent, 1, true);
        turn(&parent, 2, true);
        turn(&parent, 3, false);
        parent.flush().await.unwrap();
        let parent_path = store.path_of("p").unwrap();
        let before = std::fs::read(&parent_path).unwrap();
        // Another store (as another process would) holds the parent's writer lock: forking
        // only reads.
        let other = SessionStore::new(Some(dir.path().to_owned()), Durability::None);
        let fork = other
            .fork("p", Some(8), "f", Some("/here".into()))
            .await
            .unwrap();
        let header = fork.header();
        assert_eq!(header.parent_session.as_deref(), Some("p"));
        assert_eq!(header.forked_at, Some(6));
        assert_eq!(header.cwd.as_deref(), Some("/here"));
        assert_eq!(header.agent_preset.as_deref(), Some("coder"));
        assert_eq!(fork.events(), parent.events()[..6].to_vec());
        fork.flush().await.unwrap();
        drop(fork);
        // The file holds the copy with its seqs and reads back the same.
        let (_, read) = file::read_only(&other.path_of("f").unwrap()).unwrap();
        assert_eq!(read, parent.events()[..6].to_vec());
        let whole = store.fork("p", None, "g", None).await.unwrap();
        assert_eq!(whole.header().forked_at, Some(12));
        assert_eq!(whole.messages(), {
            let s = Session::in_memory("x");
            turn(&s, 1, true);
            turn(&s, 2, true);
            s.messages()
        });
        assert_eq!(std::fs::read(&parent_path).unwrap(), before);
    }

    #[tokio::test]
    async fn forking_an_unknown_session_or_onto_an_existing_one_fails_typed() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(Some(dir.path().to_owned()), Durability::None);
        let err = store.fork("nope", None, "f", None).await.unwrap_err();
        assert!(matches!(err, ForkError::UnknownParent { .. }), "{err:?}");
        assert_eq!(err.to_string(), "cannot fork session nope: no such session");
        let parent = store.create("p", None, None).await.unwrap();
        turn(&parent, 1, true);
        parent.flush().await.unwrap();
        store.create("taken", None, None).await.unwrap();
        let err = store.fork("p", None, "taken", None).await.unwrap_err();
        assert!(
            matches!(err, ForkError::Session(SessionError::AlreadyExists { .. })),
            "{err:?}"
        );
        // In memory: the parent is the live one.
        let memory = SessionStore::new(None, Durability::None);
        let parent = memory.create("p", None, None).await.unwrap();
        turn(&parent, 1, true);
        let fork = memory.fork("p", None, "f", None).await.unwrap();
        assert_eq!(fork.events(), parent.events());
    }
}
