//! A page session's running calls, on their way to the page: each command's last lines and
//! each MCP tool's latest progress (`notifications/progress`: how far, of how much, and the
//! server's message) kept here (bounded), sent to the pages showing its session (`output`) a
//! few times a second at most, until the call's result is logged. Neither is logged (the
//! result holds what the model reads); a page that missed some gets the whole tail and the
//! latest progress with the next piece.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cordis_runtime::lock;
use serde_json::json;
use tokio::sync::{Notify, broadcast};

use super::Outgoing;

/// The most lines of a running command's output a page is sent (its last ones).
pub const TAIL_LINES: usize = 20;
/// The most bytes of a running command's output a page is sent (its last ones).
pub const TAIL_BYTES: usize = 8 << 10;
/// The most running commands followed at once (the oldest is dropped for a new one).
pub const FOLLOWED_CALLS: usize = 32;
/// How long pieces of output gather before they are sent.
const GATHER: Duration = Duration::from_millis(150);

/// One running call's output so far.
#[derive(Debug)]
struct Tail {
    /// The session the call runs in.
    session: String,
    /// Its last lines ([`TAIL_LINES`], [`TAIL_BYTES`]).
    text: String,
    /// When its first output came.
    since: Instant,
    /// How many bytes came in all.
    bytes: u64,
    /// Changed since it was last sent.
    dirty: bool,
    /// The latest progress an MCP server reported on the call.
    progress: Option<Progress>,
}

/// An MCP server's progress on a running call (`notifications/progress`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Progress {
    /// How far it is.
    pub progress: f64,
    /// Of how much, when the server knows.
    pub total: Option<f64>,
    /// The server's message (already cut by the MCP client), if any.
    pub message: Option<String>,
}

/// The running calls' output, by call id.
#[derive(Debug, Default)]
pub struct Tails {
    calls: Mutex<BTreeMap<String, Tail>>,
    wake: Notify,
}

impl Tails {
    /// Takes a piece of `call`'s output (a call of `session`).
    pub fn push(&self, session: &str, call: &str, piece: &str) {
        self.update(session, call, |tail| {
            tail.text.push_str(piece);
            tail.bytes += piece.len() as u64;
            trim(&mut tail.text);
        });
    }

    /// Takes an MCP server's `progress` on `call` (a call of `session`): it replaces the one
    /// before.
    pub fn progress(&self, session: &str, call: &str, progress: Progress) {
        self.update(session, call, |tail| tail.progress = Some(progress));
    }

    /// Changes `call`'s entry (made, dropping the oldest past [`FOLLOWED_CALLS`]) with
    /// `change`, and wakes the forwarder.
    fn update(&self, session: &str, call: &str, change: impl FnOnce(&mut Tail)) {
        {
            let mut calls = lock(&self.calls);
            if !calls.contains_key(call) && calls.len() >= FOLLOWED_CALLS {
                let oldest = calls
                    .iter()
                    .min_by_key(|(_, t)| t.since)
                    .map(|(id, _)| id.clone());
                if let Some(oldest) = oldest {
                    calls.remove(&oldest);
                }
            }
            let tail = calls.entry(call.to_owned()).or_insert_with(|| Tail {
                session: session.to_owned(),
                text: String::new(),
                since: Instant::now(),
                bytes: 0,
                dirty: false,
                progress: None,
            });
            change(tail);
            tail.dirty = true;
        }
        self.wake.notify_one();
    }

    /// `call` ended (its result is logged): nothing more of it is sent.
    pub fn end(&self, call: &str) {
        lock(&self.calls).remove(call);
    }

    /// The `output` events of the calls changed since they were last sent.
    fn changed(&self) -> Vec<Outgoing> {
        let mut calls = lock(&self.calls);
        calls
            .iter_mut()
            .filter_map(|(call, t)| std::mem::take(&mut t.dirty).then_some((call, t)))
            .map(|(call, t)| Outgoing {
                kind: "output",
                data: json!({
                    "session": t.session,
                    "call": call,
                    "tail": clean(&t.text),
                    "bytes": t.bytes,
                    "elapsedMs": u64::try_from(t.since.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "progress": t.progress,
                })
                .to_string(),
                only: Some(t.session.clone()),
            })
            .collect()
    }
}

/// Sends the running calls' output to the pages as it changes, gathered for [`GATHER`]; runs
/// until aborted.
pub async fn forward(tails: Arc<Tails>, events: broadcast::Sender<Outgoing>) {
    loop {
        tails.wake.notified().await;
        tokio::time::sleep(GATHER).await;
        for out in tails.changed() {
            let _ = events.send(out);
        }
    }
}

/// `raw` output as a page shows it: terminal escape sequences (colours, cursor moves, titles)
/// and other control characters dropped, and a line rewritten after a carriage return (a
/// progress bar) shown as its last state. An escape sequence cut off at the end is dropped
/// until the rest of it comes.
pub fn clean(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    // A carriage return not followed by a newline: the line is rewritten from its start.
    let mut rewind = false;
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters up to a final byte.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ESC \.
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => rewind = chars.peek() != Some(&'\n'),
            '\n' => {
                rewind = false;
                out.push('\n');
            }
            c if c.is_control() && c != '\t' => {}
            c => {
                if std::mem::take(&mut rewind) {
                    out.truncate(out.rfind('\n').map_or(0, |i| i + 1));
                }
                out.push(c);
            }
        }
    }
    out
}

/// Keeps the last [`TAIL_BYTES`] bytes of `text` (from a character's start), then its last
/// [`TAIL_LINES`] lines (a line still being written counts as one).
pub fn trim(text: &mut String) {
    if text.len() > TAIL_BYTES {
        let mut cut = text.len() - TAIL_BYTES;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text.drain(..cut);
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    if let Some((newline, _)) = body.rmatch_indices('\n').nth(TAIL_LINES - 1) {
        text.drain(..=newline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_lines_and_bytes() {
        let mut text: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        trim(&mut text);
        assert_eq!(text.lines().count(), TAIL_LINES);
        assert!(text.starts_with("line 31\n"), "{text}");
        assert!(text.ends_with("line 50\n"), "{text}");
        // A line still being written is the last one.
        let mut text: String = (1..=30).map(|n| format!("{n}\n")).collect::<String>() + "part";
        trim(&mut text);
        assert_eq!(text.lines().count(), TAIL_LINES);
        assert!(text.ends_with("30\npart"), "{text}");
        // One long line: its last bytes, cut at a character's start.
        let mut text = "é".repeat(TAIL_BYTES);
        trim(&mut text);
        assert!(text.len() <= TAIL_BYTES && text.len() >= TAIL_BYTES - 1);
        assert!(text.chars().all(|c| c == 'é'));
    }

    #[test]
    fn escapes_and_control_characters_are_dropped_and_a_rewritten_line_shows_its_last_state() {
        assert_eq!(
            clean("\u{1b}[1;31merror\u{1b}[0m: bad\r\n\u{1b}]0;title\u{7}ok\u{7}\n"),
            "error: bad\nok\n"
        );
        assert_eq!(clean(" 10%\r 50%\r100%\ndone"), "100%\ndone");
        assert_eq!(clean("a\tb\u{8}c"), "a\tbc");
        // Cut off mid-sequence: dropped for now.
        assert_eq!(clean("text\u{1b}[3"), "text");
    }

    #[test]
    fn changed_tails_are_sent_once_to_their_session_only_and_ended_ones_never() {
        let tails = Tails::default();
        tails.push("s1", "c1", "hello\n");
        tails.push("s1", "c1", "world\n");
        tails.push("s2", "c2", "other\n");
        let sent = tails.changed();
        assert_eq!(sent.len(), 2);
        let first: serde_json::Value = serde_json::from_str(&sent[0].data).unwrap();
        assert_eq!(first["tail"], "hello\nworld\n");
        assert_eq!(first["bytes"], 12);
        assert_eq!(sent[0].only.as_deref(), Some("s1"));
        assert_eq!(sent[1].only.as_deref(), Some("s2"));
        assert!(tails.changed().is_empty(), "nothing new, nothing sent");
        tails.push("s1", "c1", "more\n");
        tails.end("c1");
        assert!(tails.changed().is_empty(), "an ended call is not sent");
        // An MCP server's progress: the latest one is sent, with no output.
        let step = |progress: f64, message: &str| Progress {
            progress,
            total: Some(4.0),
            message: Some(message.to_owned()),
        };
        tails.progress("s1", "m1", step(1.0, "one"));
        tails.progress("s1", "m1", step(2.0, "two"));
        let sent = tails.changed();
        assert_eq!(sent.len(), 1);
        let progress: serde_json::Value = serde_json::from_str(&sent[0].data).unwrap();
        assert_eq!(
            progress["progress"],
            json!({"progress": 2.0, "total": 4.0, "message": "two"})
        );
        assert_eq!(progress["tail"], "");
        assert_eq!(first["progress"], serde_json::Value::Null);
        tails.end("m1");
        for n in 0..=FOLLOWED_CALLS {
            tails.push("s", &format!("call{n}"), "x");
        }
        assert_eq!(lock(&tails.calls).len(), FOLLOWED_CALLS);
    }
}
