//! `History`: the conversation a request carries, shared between requests instead of copied.
//!
//! A turn's requests all carry the whole conversation so far. Copied, that is quadratic in the
//! turn count (time per step and memory for anyone keeping requests); shared, a new request
//! costs what was appended since the last one. A `History` is an immutable snapshot: full chunks
//! of [`CHUNK`] messages are `Arc`-shared by every snapshot that contains them, and only the
//! short open tail (fewer than [`CHUNK`] messages) is copied when a shared snapshot is appended
//! to.
//!
//! # Examples
//!
//! ```
//! use cordis_conversation::{History, Message};
//!
//! let mut live = History::new();
//! live.push(Message::user("hi"));
//! let sent = live.clone(); // a snapshot: O(1), shares the messages
//! live.push(Message::user("again"));
//! assert_eq!((sent.len(), live.len()), (1, 2));
//! assert_eq!(sent, vec![Message::user("hi")]);
//! ```

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::message::Message;

/// Messages per shared chunk.
pub const CHUNK: usize = 32;

/// An immutable, cheaply cloned sequence of messages (see the module docs).
#[derive(Clone, Default)]
pub struct History {
    /// Full chunks, each exactly [`CHUNK`] long.
    sealed: Arc<Vec<Arc<[Message]>>>,
    /// The open tail, shorter than [`CHUNK`].
    tail: Arc<Vec<Message>>,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        History::default()
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.sealed.len() * CHUNK + self.tail.len()
    }

    /// True when there is no message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `message` (other snapshots are unaffected).
    pub fn push(&mut self, message: Message) {
        Arc::make_mut(&mut self.tail).push(message);
        if self.tail.len() == CHUNK {
            let tail = std::mem::take(&mut self.tail);
            let chunk: Arc<[Message]> = match Arc::try_unwrap(tail) {
                Ok(v) => v.into(),
                Err(shared) => shared.as_slice().into(),
            };
            Arc::make_mut(&mut self.sealed).push(chunk);
        }
    }

    /// The message at `index`.
    pub fn get(&self, index: usize) -> Option<&Message> {
        let (chunk, offset) = (index / CHUNK, index % CHUNK);
        match self.sealed.get(chunk) {
            Some(c) => c.get(offset),
            None if chunk == self.sealed.len() => self.tail.get(offset),
            None => None,
        }
    }

    /// The messages in order.
    pub fn iter(&self) -> HistoryIter<'_> {
        HistoryIter {
            history: self,
            front: 0,
            back: self.len(),
        }
    }

    /// A copy of the messages.
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }
}

/// The iterator of [`History::iter`].
#[derive(Clone)]
pub struct HistoryIter<'a> {
    history: &'a History,
    front: usize,
    back: usize,
}

impl<'a> Iterator for HistoryIter<'a> {
    type Item = &'a Message;
    fn next(&mut self) -> Option<&'a Message> {
        if self.front == self.back {
            return None;
        }
        let m = self.history.get(self.front);
        self.front += 1;
        m
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl ExactSizeIterator for HistoryIter<'_> {}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Message;
    type IntoIter = HistoryIter<'a>;
    fn into_iter(self) -> HistoryIter<'a> {
        self.iter()
    }
}

impl std::ops::Index<usize> for History {
    type Output = Message;
    fn index(&self, index: usize) -> &Message {
        match self.get(index) {
            Some(m) => m,
            None => panic!("history index {index} out of range (len {})", self.len()),
        }
    }
}

impl Extend<Message> for History {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        for m in iter {
            self.push(m);
        }
    }
}

impl FromIterator<Message> for History {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        let mut h = History::new();
        h.extend(iter);
        h
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> Self {
        messages.into_iter().collect()
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for History {
    fn eq(&self, other: &History) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[Message]> for History {
    fn eq(&self, other: &[Message]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<Vec<Message>> for History {
    fn eq(&self, other: &Vec<Message>) -> bool {
        *self == other[..]
    }
}

impl PartialEq<History> for Vec<Message> {
    fn eq(&self, other: &History) -> bool {
        *other == self[..]
    }
}

impl Serialize for History {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(d).map(History::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(i: usize) -> Message {
        Message::user(i.to_string())
    }

    #[test]
    fn snapshots_keep_their_prefix_while_the_live_history_grows_past_chunk_borders() {
        let mut live = History::new();
        let mut snapshots = Vec::new();
        for i in 0..(3 * CHUNK + 5) {
            snapshots.push(live.clone());
            live.push(m(i));
        }
        for (n, snap) in snapshots.iter().enumerate() {
            assert_eq!(snap.len(), n);
            assert_eq!(snap.to_vec(), (0..n).map(m).collect::<Vec<_>>());
        }
        assert_eq!(live[CHUNK], m(CHUNK));
        assert_eq!(live.get(live.len()), None);
        assert_eq!(live.iter().len(), live.len());
    }

    #[test]
    fn full_chunks_are_shared_not_copied() {
        let mut live: History = (0..2 * CHUNK + 1).map(m).collect();
        let snap = live.clone();
        live.push(m(0));
        assert!(Arc::ptr_eq(&live.sealed[0], &snap.sealed[0]));
        assert!(Arc::ptr_eq(&live.sealed[1], &snap.sealed[1]));
    }

    #[test]
    fn it_serializes_as_a_plain_list() {
        let h: History = vec![Message::user("a")].into();
        let text = serde_json::to_string(&h).unwrap();
        assert_eq!(text, r#"[{"role":"user","content":"a"}]"#);
        assert_eq!(serde_json::from_str::<History>(&text).unwrap(), h);
    }
}
