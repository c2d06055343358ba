//! The sessions index: what a listing shows of each session (id, working directory, title,
//! created and last written, preset, model, turns), kept in one small summary file per log in
//! the root's `.index/` folder, so a listing reads summaries instead of whole logs.
//!
//! A summary is a cache of its log, never a second statement of it: it records how many bytes
//! of the log it folded (and the header it folded them under), and a listing folds whatever was
//! appended since, then writes the summary back (to a temporary file renamed over the old one,
//! so a reader never sees half of one). A log that got shorter or whose header changed (a log
//! replaced by another of the same name) is folded anew; a summary that cannot be read or
//! written costs speed, never correctness. Nothing else maintains it, so every process that
//! lists — `cordis sessions`, the terminal's `--resume` picker, ACP's `session/list` — shares
//! one rule and one result.
//!
//! Order: newest first by the log's modification time, a tie to the greater id; the cursor of a
//! page names the last session it held, and the next page starts after it.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::error::SessionError;
use crate::event::{
    AgentPresetSelectedData, RequestHeaderData, SessionEvent, SessionHeader, UserMessageData, kinds,
};
use crate::file::{self, check_id};

/// The folder of the root holding the summaries.
pub const INDEX_DIR: &str = ".index";
/// The summary format; a summary of another version is folded anew.
const SUMMARY_VERSION: u32 = 1;
/// The longest title, in characters (a longer first message is cut with `…`).
pub const TITLE_CHARS: usize = 60;
/// The most sessions one page holds.
pub const MAX_PAGE: usize = 1000;

/// One session as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionSummary {
    /// The id (its file's name).
    pub id: String,
    /// When its log was last written.
    pub modified: SystemTime,
    /// When it was created, milliseconds since the Unix epoch (its header's).
    pub created_at: u64,
    /// The working directory it belongs to (its header's).
    pub cwd: Option<String>,
    /// Its first user message, on one line, at most [`TITLE_CHARS`] characters.
    pub title: Option<String>,
    /// Its agent preset now: the last switch, else the one it was created with.
    pub preset: Option<String>,
    /// The model of its latest request header.
    pub model: Option<String>,
    /// How many turns it has.
    pub turns: usize,
}

/// What to list: sessions of one working directory or all, from a cursor, at most `limit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListQuery {
    /// Only sessions whose header names this working directory (exactly).
    pub cwd: Option<String>,
    /// Where the previous page ended ([`SessionPage::next_cursor`]).
    pub cursor: Option<String>,
    /// The most sessions on the page (at least 1, at most [`MAX_PAGE`]).
    pub limit: usize,
}

impl ListQuery {
    /// The first `limit` sessions of every working directory.
    pub fn first(limit: usize) -> Self {
        ListQuery {
            cwd: None,
            cursor: None,
            limit,
        }
    }

    /// Only the sessions of `cwd`.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// From `cursor` on.
    #[must_use]
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPage {
    /// The sessions, newest first.
    pub sessions: Vec<SessionSummary>,
    /// The cursor of the next page, when there may be one.
    pub next_cursor: Option<String>,
}

/// Where a page ended: the last session's modification time (nanoseconds since the epoch) and
/// id, written `<nanos>.<id>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Cursor {
    nanos: u128,
    id: String,
}

impl Cursor {
    fn parse(text: &str) -> Result<Self, SessionError> {
        let bad = || SessionError::BadCursor {
            cursor: text.chars().take(80).collect(),
        };
        let (nanos, id) = text.split_once('.').ok_or_else(bad)?;
        let nanos = nanos.parse::<u128>().map_err(|_| bad())?;
        check_id(id).map_err(|_| bad())?;
        Ok(Cursor {
            nanos,
            id: id.to_owned(),
        })
    }

    fn render(&self) -> String {
        format!("{}.{}", self.nanos, self.id)
    }
}

fn nanos(time: SystemTime) -> u128 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// What the index keeps of a log: the facts a listing shows, and how far into the log they
/// were folded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Folded {
    version: u32,
    /// The header the events were folded under (a different one means another log).
    header: SessionHeader,
    /// Bytes of the log folded: the header line and every complete event line after it.
    bytes: u64,
    /// The seq the next event must have.
    next_seq: u64,
    title: Option<String>,
    preset: Option<String>,
    model: Option<String>,
    turns: usize,
}

impl Folded {
    fn new(header: SessionHeader, bytes: u64) -> Self {
        Folded {
            version: SUMMARY_VERSION,
            preset: header.agent_preset.clone(),
            header,
            bytes,
            next_seq: 0,
            title: None,
            model: None,
            turns: 0,
        }
    }

    /// Takes one event in; `false` when its seq is not the next one (the log is not the one
    /// this summary folded).
    fn fold(&mut self, event: &SessionEvent) -> bool {
        if event.seq != self.next_seq {
            return false;
        }
        self.next_seq += 1;
        match event.kind.as_str() {
            kinds::TURN_START => self.turns += 1,
            kinds::USER_MESSAGE if self.title.is_none() => {
                if let Ok(data) = event.data_as::<UserMessageData>() {
                    self.title = title_of(&data.content);
                }
            }
            kinds::AGENT_PRESET_SELECTED => {
                if let Ok(data) = event.data_as::<AgentPresetSelectedData>() {
                    self.preset = Some(data.agent_preset);
                }
            }
            kinds::REQUEST_HEADER => {
                if let Ok(data) = event.data_as::<RequestHeaderData>() {
                    self.model = Some(data.header.config.model);
                }
            }
            _ => {}
        }
        true
    }

    fn summary(&self, modified: SystemTime) -> SessionSummary {
        SessionSummary {
            id: self.header.id.clone(),
            modified,
            created_at: self.header.created_at,
            cwd: self.header.cwd.clone(),
            title: self.title.clone(),
            preset: self.preset.clone(),
            model: self.model.clone(),
            turns: self.turns,
        }
    }
}

/// A first message as a title: whitespace runs as one space, at most [`TITLE_CHARS`]
/// characters; none for a message of only whitespace.
pub fn title_of(text: &str) -> Option<String> {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return None;
    }
    Some(match line.char_indices().nth(TITLE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    })
}

/// The summary file of session `id` under `root`.
fn summary_path(root: &Path, id: &str) -> PathBuf {
    root.join(INDEX_DIR).join(format!("{id}.json"))
}

/// The logs under `root`, newest first (a tie to the greater id); none for a root not made yet.
fn logs(root: &Path) -> Result<Vec<(Cursor, SystemTime, PathBuf)>, SessionError> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        // The default root is made by the first session.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(SessionError::Io {
                path: root.display().to_string(),
                source,
            });
        }
    };
    let mut found: Vec<(Cursor, SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let path = e.path();
            let id = path
                .file_name()?
                .to_str()?
                .strip_suffix(".jsonl")?
                .to_owned();
            check_id(&id).ok()?;
            // `DirEntry::metadata` does not follow a link: a link in the root is not a log.
            let meta = e.metadata().ok().filter(std::fs::Metadata::is_file)?;
            let modified = meta.modified().ok()?;
            Some((
                Cursor {
                    nanos: nanos(modified),
                    id,
                },
                modified,
                path,
            ))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    Ok(found)
}

/// Lists the sessions under `root` (blocking).
pub(crate) fn list(root: &Path, query: &ListQuery) -> Result<SessionPage, SessionError> {
    let cursor = query.cursor.as_deref().map(Cursor::parse).transpose()?;
    let limit = query.limit.clamp(1, MAX_PAGE);
    let found = logs(root)?;
    let mut page = SessionPage::default();
    let mut more = false;
    for (key, modified, path) in found {
        if cursor.as_ref().is_some_and(|c| key >= *c) {
            continue;
        }
        let Some(folded) = refresh(root, &key.id, &path) else {
            continue; // not a log this build reads: `cordis history` names why
        };
        if query
            .cwd
            .as_ref()
            .is_some_and(|cwd| folded.header.cwd.as_ref() != Some(cwd))
        {
            continue;
        }
        if page.sessions.len() == limit {
            more = true;
            break;
        }
        page.sessions.push(folded.summary(modified));
    }
    if more {
        page.next_cursor = page.sessions.last().map(|s| {
            Cursor {
                nanos: nanos(s.modified),
                id: s.id.clone(),
            }
            .render()
        });
    }
    Ok(page)
}

/// The summary of the log at `path`, brought up to date with its end and written back when it
/// changed; `None` for a file that is not a log this build reads.
fn refresh(root: &Path, id: &str, path: &Path) -> Option<Folded> {
    let at = summary_path(root, id);
    let cached = read_summary(&at)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Folded>(&bytes).ok())
        .filter(|f| f.version == SUMMARY_VERSION);
    let mut reader = BufReader::new(file::open_for_reading(path).ok()?);
    let mut first = Vec::new();
    read_line(&mut reader, &mut first).ok()?;
    if first.last() != Some(&b'\n') {
        return None; // a header still being written, or none
    }
    let (header, _) = file::parse_header(path, &first[..first.len() - 1]).ok()?;
    let len = reader.get_ref().metadata().ok()?.len();
    let mut folded = match cached {
        Some(f) if f.header == header && f.bytes <= len => {
            if f.bytes == len {
                return Some(f);
            }
            reader.seek(SeekFrom::Start(f.bytes)).ok()?;
            f
        }
        _ => Folded::new(header, first.len() as u64),
    };
    let before = folded.clone();
    let mut line = Vec::new();
    loop {
        line.clear();
        read_line(&mut reader, &mut line).ok()?;
        if line.last() != Some(&b'\n') {
            break; // the end, or a line still being written: the next listing folds it
        }
        let event: SessionEvent = serde_json::from_slice(&line[..line.len() - 1]).ok()?;
        if !folded.fold(&event) {
            return None;
        }
        folded.bytes += line.len() as u64;
    }
    if folded != before {
        // Best effort: a summary not written is folded again next time.
        let _ = write_summary(&at, &folded);
    }
    Some(folded)
}

/// The longest event line a search reads whole (a longer message's text is not searched), so a
/// search holds at most this much of a log in memory at once.
pub const MAX_SEARCH_LINE: usize = 4 * 1024 * 1024;
/// The characters an excerpt shows on each side of a match.
const HIT_CONTEXT: usize = 30;

/// What to search for: sessions whose user or assistant messages contain `text`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GrepQuery {
    /// The text, matched case-insensitively.
    pub text: String,
    /// Only sessions whose header names this working directory (exactly).
    pub cwd: Option<String>,
    /// The most sessions to return (at least 1, at most [`MAX_PAGE`]).
    pub limit: usize,
}

impl GrepQuery {
    /// The first `limit` sessions (newest first) whose messages contain `text`.
    pub fn new(text: impl Into<String>, limit: usize) -> Self {
        GrepQuery {
            text: text.into(),
            cwd: None,
            limit,
        }
    }

    /// Only the sessions of `cwd`.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}

/// One session a search found, with its first matching message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GrepHit {
    /// The session, as a listing shows it.
    pub summary: SessionSummary,
    /// The seq of its first message that matched.
    pub seq: u64,
    /// Whose message it is: `user` or `assistant`.
    pub role: &'static str,
    /// The match with a little text around it, on one line.
    pub excerpt: String,
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrepResult {
    /// The sessions found, newest first.
    pub hits: Vec<GrepHit>,
    /// How many logs were read.
    pub searched: usize,
    /// True when the limit cut the list: another session matches too.
    pub cut: bool,
}

/// Searches the logs under `root`, newest first, for user and assistant messages containing
/// `query.text` (case-insensitive), stopping once `query.limit` sessions are found and one more
/// shows the list was cut (blocking).
///
/// Logs are read line by line, holding at most [`MAX_SEARCH_LINE`] bytes of one; only message
/// lines are parsed, and a line that cannot contain the text (checked on its raw bytes when the
/// text is ASCII without characters JSON escapes) is not. The sessions found are described
/// through the index (their summaries), so a hit costs no second read of an indexed log.
///
/// # Errors
/// The root cannot be read (a root not made yet holds none).
pub fn grep(root: &Path, query: &GrepQuery) -> Result<GrepResult, SessionError> {
    let limit = query.limit.clamp(1, MAX_PAGE);
    let needle = Needle::new(&query.text);
    let mut out = GrepResult::default();
    let mut line = Vec::new();
    for (key, modified, path) in logs(root)? {
        let Some(found) = search_log(&path, &needle, query.cwd.as_deref(), &mut line) else {
            continue;
        };
        out.searched += 1;
        let Some((seq, role, excerpt)) = found else {
            continue;
        };
        if out.hits.len() == limit {
            out.cut = true;
            break;
        }
        let Some(folded) = refresh(root, &key.id, &path) else {
            continue;
        };
        out.hits.push(GrepHit {
            summary: folded.summary(modified),
            seq,
            role,
            excerpt,
        });
    }
    Ok(out)
}

/// The text searched for, lowercased, and whether raw lines can be screened for it.
struct Needle {
    lower: String,
    /// The ASCII bytes to screen raw lines with, when JSON writes the text verbatim.
    raw: Option<Vec<u8>>,
}

impl Needle {
    fn new(text: &str) -> Self {
        let lower = text.to_lowercase();
        let verbatim =
            lower.is_ascii() && !lower.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20);
        Needle {
            raw: verbatim.then(|| lower.as_bytes().to_vec()),
            lower,
        }
    }

    /// False when `line` cannot hold the text.
    fn may_match(&self, line: &[u8]) -> bool {
        match &self.raw {
            Some(raw) if !raw.is_empty() => {
                line.windows(raw.len()).any(|w| w.eq_ignore_ascii_case(raw))
            }
            _ => true,
        }
    }

    /// The excerpt around the text's first occurrence in `content`, if it occurs.
    fn find(&self, content: &str) -> Option<String> {
        let lower = content.to_lowercase();
        let at = lower.find(&self.lower)?;
        // Lowercasing kept the byte offsets (ASCII and most text): show the original.
        let text = if lower.len() == content.len() && content.is_char_boundary(at) {
            content
        } else {
            &lower
        };
        let before: Vec<char> = text[..at].chars().rev().take(HIT_CONTEXT).collect();
        let rest = &text[at..];
        let matched = self.lower.chars().count();
        let after: String = rest.chars().take(matched + HIT_CONTEXT).collect();
        let mut shown: String = before.into_iter().rev().collect();
        let cut_front = shown.len() < at;
        shown.push_str(&after);
        let mut shown = shown.split_whitespace().collect::<Vec<_>>().join(" ");
        if cut_front {
            shown.insert(0, '…');
        }
        if after.len() < rest.len() {
            shown.push('…');
        }
        Some(shown)
    }
}

/// Searches one log: `None` when it is not a log this build reads or belongs to another
/// `cwd`; else its first matching message (`seq`, role, excerpt), if any.
fn search_log(
    path: &Path,
    needle: &Needle,
    cwd: Option<&str>,
    line: &mut Vec<u8>,
) -> Option<Option<(u64, &'static str, String)>> {
    const USER: &[u8] = br#"{"type":"user/message","#;
    const ASSISTANT: &[u8] = br#"{"type":"assistant/message","#;
    let mut reader = BufReader::new(file::open_for_reading(path).ok()?);
    if bounded_line(&mut reader, line).ok()?? {
        let (header, _) = file::parse_header(path, line).ok()?;
        if cwd.is_some_and(|cwd| header.cwd.as_deref() != Some(cwd)) {
            return None;
        }
    } else {
        return None;
    }
    while let Some(whole) = bounded_line(&mut reader, line).ok()? {
        let role = if line.starts_with(USER) {
            "user"
        } else if line.starts_with(ASSISTANT) {
            "assistant"
        } else {
            continue;
        };
        if !whole || !needle.may_match(line) {
            continue;
        }
        let Ok(event) = serde_json::from_slice::<SessionEvent>(line) else {
            continue;
        };
        let content = match role {
            "user" => event.data_as::<UserMessageData>().map(|d| d.content),
            _ => event
                .data_as::<crate::event::AssistantMessageData>()
                .map(|d| d.content),
        };
        if let Some(excerpt) = content.ok().and_then(|c| needle.find(&c)) {
            return Some(Some((event.seq, role, excerpt)));
        }
    }
    Some(None)
}

/// Reads the next complete line into `line` (without its newline), keeping at most
/// [`MAX_SEARCH_LINE`] bytes of it: `Some(true)` for a line read whole, `Some(false)` for a
/// longer one (`line` then holds its first bytes only, enough to tell its kind), `None` at the
/// end (a last line without its newline is still being written and is left out).
fn bounded_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    line.clear();
    let mut whole = true;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(None);
        }
        let newline = buf.iter().position(|b| *b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        let room = MAX_SEARCH_LINE.saturating_sub(line.len());
        if chunk.len() > room {
            whole = false;
        }
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = newline.map_or(buf.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(Some(whole));
        }
    }
}

/// Reads one line (with its newline, when it has one) into `line`.
fn read_line(reader: &mut BufReader<std::fs::File>, line: &mut Vec<u8>) -> std::io::Result<()> {
    reader.read_until(b'\n', line).map(drop)
}

/// Writes `folded` to `at`, the user's alone, through a file aside renamed over it
/// ([`crate::write_private`]).
fn write_summary(at: &Path, folded: &Folded) -> std::io::Result<()> {
    let dir = at.parent().unwrap_or(Path::new("."));
    let name = at.file_name().and_then(|n| n.to_str()).unwrap_or("summary");
    let bytes = serde_json::to_vec(folded).map_err(std::io::Error::other)?;
    crate::write_private(dir, name, &bytes)
}

/// The most a summary file may hold (one is a few hundred bytes; a larger file there is not
/// one of ours, and is folded anew rather than read).
const MAX_SUMMARY_BYTES: u64 = 64 * 1024;

/// Reads the summary at `path`: a regular file (a link there is not followed) of at most
/// [`MAX_SUMMARY_BYTES`].
fn read_summary(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
    );
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SUMMARY_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_SUMMARY_BYTES {
        return Err(std::io::Error::other("too large to be a summary"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionStore;
    use crate::{Durability, TurnStartData};

    fn store(dir: &Path) -> SessionStore {
        SessionStore::new(Some(dir.to_path_buf()), Durability::None)
    }

    fn user(s: &crate::Session, turn: u64, text: &str) {
        s.append(&TurnStartData { turn }, None).unwrap();
        s.append(
            &UserMessageData {
                turn,
                content: text.into(),
                prompt: None,
            },
            None,
        )
        .unwrap();
    }

    fn touch(path: &Path, secs: u64) {
        let file = std::fs::File::options().append(true).open(path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
            .unwrap();
    }

    #[tokio::test]
    async fn grep_finds_user_and_assistant_text_newest_first_and_says_when_the_limit_cut() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        for (i, (id, text)) in [
            ("old", "Fix the Parser please"),
            ("mid", "nothing here"),
            ("new", "the parser again"),
        ]
        .into_iter()
        .enumerate()
        {
            let s = store
                .create_with(id, crate::CreateOptions::default())
                .await
                .unwrap();
            user(&s, 1, text);
            s.flush().await.unwrap();
            touch(&dir.path().join(format!("{id}.jsonl")), 100 + i as u64);
        }
        let s = store
            .create_with("answer", crate::CreateOptions::default())
            .await
            .unwrap();
        user(&s, 1, "hello");
        s.append(
            &crate::AssistantMessageData {
                turn: 1,
                step: 1,
                content: "I rewrote the PARSER \"module\"".into(),
                tool_calls: Vec::new(),
                usage: None,
                reasoning: None,
            },
            None,
        )
        .unwrap();
        s.flush().await.unwrap();
        touch(&dir.path().join("answer.jsonl"), 50);

        let found = grep(dir.path(), &GrepQuery::new("parser", 10)).unwrap();
        let ids: Vec<&str> = found.hits.iter().map(|h| h.summary.id.as_str()).collect();
        assert_eq!(ids, ["new", "old", "answer"]);
        assert_eq!((found.searched, found.cut), (4, false));
        assert_eq!(found.hits[1].excerpt, "Fix the Parser please");
        assert_eq!((found.hits[2].role, found.hits[2].seq), ("assistant", 2));
        // A text JSON escapes is still found (parsed, not screened on raw bytes).
        let quoted = grep(dir.path(), &GrepQuery::new("parser \"MODULE\"", 10)).unwrap();
        assert_eq!(quoted.hits.len(), 1);
        // The cap: one more match exists.
        let capped = grep(dir.path(), &GrepQuery::new("PARSER", 2)).unwrap();
        assert_eq!(capped.hits.len(), 2);
        assert!(capped.cut);
        let exact = grep(dir.path(), &GrepQuery::new("PARSER", 3)).unwrap();
        assert!(!exact.cut);
        assert!(
            grep(dir.path(), &GrepQuery::new("absent", 10))
                .unwrap()
                .hits
                .is_empty()
        );
    }

    #[test]
    fn a_line_longer_than_the_cap_is_skipped_not_held() {
        let long = vec![b'x'; MAX_SEARCH_LINE + 10];
        let mut text = long.clone();
        text.extend_from_slice(b"\nshort\npartial");
        let mut reader = std::io::BufReader::new(&text[..]);
        let mut line = Vec::new();
        assert_eq!(bounded_line(&mut reader, &mut line).unwrap(), Some(false));
        assert_eq!(line.len(), MAX_SEARCH_LINE);
        assert_eq!(bounded_line(&mut reader, &mut line).unwrap(), Some(true));
        assert_eq!(line, b"short");
        assert_eq!(bounded_line(&mut reader, &mut line).unwrap(), None);
    }

    #[tokio::test]
    async fn a_listing_folds_only_what_was_appended_since_the_summary() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let s = store
            .create_with("a", crate::CreateOptions::default().cwd("/w"))
            .await
            .unwrap();
        user(&s, 1, "first   words\nhere");
        s.flush().await.unwrap();
        let page = list(dir.path(), &ListQuery::first(10)).unwrap();
        assert_eq!(page.sessions.len(), 1);
        assert_eq!(page.sessions[0].title.as_deref(), Some("first words here"));
        assert_eq!(page.sessions[0].cwd.as_deref(), Some("/w"));
        assert_eq!(page.sessions[0].turns, 1);
        let at = summary_path(dir.path(), "a");
        let saved: Folded = serde_json::from_slice(&read_summary(&at).unwrap()).unwrap();
        let log_len = std::fs::metadata(dir.path().join("a.jsonl")).unwrap().len();
        assert_eq!(saved.bytes, log_len);
        // A summary claiming a fact the log does not hold shows that the listing trusts the
        // folded part and reads only the rest.
        let mut planted = saved.clone();
        planted.title = Some("planted".into());
        write_summary(&at, &planted).unwrap();
        user(&s, 2, "second");
        s.flush().await.unwrap();
        let page = list(dir.path(), &ListQuery::first(10)).unwrap();
        assert_eq!(page.sessions[0].title.as_deref(), Some("planted"));
        assert_eq!(page.sessions[0].turns, 2);
        // A log shorter than its summary is folded anew.
        planted.bytes = log_len * 10;
        write_summary(&at, &planted).unwrap();
        let page = list(dir.path(), &ListQuery::first(10)).unwrap();
        assert_eq!(page.sessions[0].title.as_deref(), Some("first words here"));
    }

    #[tokio::test]
    async fn pages_filter_by_cwd_and_continue_from_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        for (i, cwd) in ["/a", "/b", "/a", "/a", "/b"].iter().enumerate() {
            let id = format!("s{i}");
            let s = store
                .create_with(&id, crate::CreateOptions::default().cwd(*cwd))
                .await
                .unwrap();
            user(&s, 1, &format!("message {i}"));
            s.flush().await.unwrap();
            drop(s);
            touch(&dir.path().join(format!("{id}.jsonl")), 1000 + i as u64);
        }
        let ids = |p: &SessionPage| p.sessions.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
        let first = list(dir.path(), &ListQuery::first(2).cwd("/a")).unwrap();
        assert_eq!(ids(&first), ["s3", "s2"]);
        let cursor = first.next_cursor.clone().unwrap();
        let second = list(dir.path(), &ListQuery::first(2).cwd("/a").after(cursor)).unwrap();
        assert_eq!(ids(&second), ["s0"]);
        assert_eq!(second.next_cursor, None);
        let all = list(dir.path(), &ListQuery::first(10)).unwrap();
        assert_eq!(ids(&all), ["s4", "s3", "s2", "s1", "s0"]);
        assert!(matches!(
            list(dir.path(), &ListQuery::first(2).after("nonsense")),
            Err(SessionError::BadCursor { .. })
        ));
    }

    #[tokio::test]
    async fn the_preset_and_model_are_the_latest_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let s = store
            .create_with("p", crate::CreateOptions::default().agent_preset("plan"))
            .await
            .unwrap();
        s.flush().await.unwrap();
        let page = list(dir.path(), &ListQuery::first(1)).unwrap();
        assert_eq!(page.sessions[0].preset.as_deref(), Some("plan"));
        assert_eq!(page.sessions[0].model, None);
        s.append(
            &AgentPresetSelectedData {
                agent_preset: "code".into(),
            },
            None,
        )
        .unwrap();
        s.flush().await.unwrap();
        let page = list(dir.path(), &ListQuery::first(1)).unwrap();
        assert_eq!(page.sessions[0].preset.as_deref(), Some("code"));
    }

    #[tokio::test]
    async fn a_link_or_a_huge_file_in_place_of_a_summary_is_neither_followed_nor_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let s = store.create("a", Some("/w".into()), None).await.unwrap();
        user(&s, 1, "hello");
        s.flush().await.unwrap();
        let index = dir.path().join(INDEX_DIR);
        std::fs::create_dir(&index).unwrap();
        // A link planted at the summary's name, pointing at a file of someone else's.
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "keep me").unwrap();
        std::os::unix::fs::symlink(&victim, index.join("a.json")).unwrap();
        let page = list(dir.path(), &ListQuery::first(10)).unwrap();
        assert_eq!(page.sessions[0].title.as_deref(), Some("hello"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        // The link was replaced by a summary (the rename replaces the name, not its target).
        assert!(
            std::fs::symlink_metadata(index.join("a.json"))
                .unwrap()
                .is_file()
        );
        // A file far larger than any summary is not read; the log is folded anew.
        std::fs::write(index.join("a.json"), vec![b' '; 10 << 20]).unwrap();
        let page = list(dir.path(), &ListQuery::first(10)).unwrap();
        assert_eq!(page.sessions[0].turns, 1);
        assert!(std::fs::metadata(index.join("a.json")).unwrap().len() < MAX_SUMMARY_BYTES);
        // A FIFO there would hang a plain read forever: it is not opened for waiting.
        std::fs::remove_file(index.join("a.json")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(index.join("a.json"))
            .status()
            .unwrap();
        assert!(made.success());
        let page = list(dir.path(), &ListQuery::first(10)).unwrap();
        assert_eq!(page.sessions[0].title.as_deref(), Some("hello"));
    }

    #[test]
    fn titles_are_one_line_and_cut() {
        assert_eq!(title_of("  \n "), None);
        let long = "x".repeat(100);
        let title = title_of(&long).unwrap();
        assert_eq!(title.chars().count(), TITLE_CHARS + 1);
        assert!(title.ends_with('…'));
    }
}
