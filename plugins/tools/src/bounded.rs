//! Bounded text: the head and tail of an output a stranger controls (a command, a wasm guest, an
//! MCP server), and the one marker that says how much was cut.
//!
//! Every source of tool results cuts the same way, so the model and the log read one shape:
//! the first half of the bound, `[… N bytes omitted; M bytes in all …]`, the last half. A source
//! that streams (a command's pipes) feeds a [`HeadTail`] and never holds more than the bound; a
//! source that hands over a whole string cuts it with [`cut_text`] before it goes anywhere.

use std::borrow::Cow;
use std::collections::VecDeque;

/// The most bytes of one tool result's text that reach the model and the session log, for
/// results the registry does not know the size of beforehand (wasm guests, MCP servers, dylibs):
/// more keeps its head and tail, saying how much was cut.
pub const MAX_RESULT_TEXT: usize = 64 * 1024;

/// The first and last bytes of a stream, and its total length: at most `cap` bytes held,
/// however long the stream.
#[derive(Debug, Clone)]
pub struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    half: usize,
}

impl HeadTail {
    /// Keeps at most `cap` bytes: half from the start, half from the end.
    pub fn new(cap: usize) -> Self {
        HeadTail {
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            half: cap / 2,
        }
    }

    /// Adds the next bytes of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.half.saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        if bytes.len() >= self.half {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.half..]);
            return;
        }
        self.tail.extend(bytes);
        let over = self.tail.len().saturating_sub(self.half);
        drop(self.tail.drain(..over));
    }

    /// Bytes seen in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes held.
    pub fn kept(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// True when bytes were dropped.
    pub fn is_cut(&self) -> bool {
        (self.kept() as u64) < self.total
    }

    /// The text: the head, the marker when anything was cut, the tail (invalid UTF-8, such as a
    /// character split by the cut, shown as U+FFFD).
    pub fn render(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.is_cut() {
            out.push_str(&marker(self.total - self.kept() as u64, self.total));
        }
        let (a, b) = self.tail.as_slices();
        let tail = [a, b].concat();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

/// The marker between a cut text's head and tail.
pub fn marker(omitted: u64, total: u64) -> String {
    format!("\n[… {omitted} bytes omitted; {total} bytes in all …]\n")
}

/// `text` whole when it is at most `cap` bytes, else its head and tail around the marker, cut at
/// character boundaries (so at most `cap` bytes of it are kept).
pub fn cut_text(text: &str, cap: usize) -> Cow<'_, str> {
    if text.len() <= cap {
        return Cow::Borrowed(text);
    }
    let half = cap / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let omitted = (tail_start - head_end) as u64;
    let mut out = String::with_capacity(cap + 64);
    out.push_str(&text[..head_end]);
    out.push_str(&marker(omitted, text.len() as u64));
    out.push_str(&text[tail_start..]);
    Cow::Owned(out)
}

/// `value` with every string in it cut by [`cut_text`] to share `cap` bytes: a JSON result whose
/// strings hold more than `cap` bytes in all keeps each string's head and tail, the longest cut
/// most. Returns whether anything was cut.
pub fn cut_json_strings(value: &mut serde_json::Value, cap: usize) -> bool {
    fn total(v: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::String(s) => s.len(),
            serde_json::Value::Array(a) => a.iter().map(total).sum(),
            serde_json::Value::Object(o) => o.iter().map(|(k, v)| k.len() + total(v)).sum(),
            _ => 0,
        }
    }
    fn cut(v: &mut serde_json::Value, each: usize) -> bool {
        match v {
            serde_json::Value::String(s) if s.len() > each => {
                *s = cut_text(s, each).into_owned();
                true
            }
            serde_json::Value::Array(a) => a.iter_mut().fold(false, |c, v| cut(v, each) | c),
            serde_json::Value::Object(o) => o.values_mut().fold(false, |c, v| cut(v, each) | c),
            _ => false,
        }
    }
    if total(value) <= cap {
        return false;
    }
    // Strings longer than an even share are cut to that share; short ones stay whole.
    let count = count_strings(value).max(1);
    cut(value, (cap / count).max(256))
}

fn count_strings(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::String(_) => 1,
        serde_json::Value::Array(a) => a.iter().map(count_strings).sum(),
        serde_json::Value::Object(o) => o.values().map(count_strings).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_keeps_its_head_and_tail_and_holds_no_more_than_the_cap() {
        let mut h = HeadTail::new(10);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnop", b"qrstuvwxyz"] {
            h.push(chunk);
            assert!(h.kept() <= 10);
        }
        assert_eq!(h.total(), 26);
        assert_eq!(
            h.render(),
            "abcde\n[… 16 bytes omitted; 26 bytes in all …]\nvwxyz"
        );
        let mut small = HeadTail::new(10);
        small.push(b"short");
        assert!(!small.is_cut());
        assert_eq!(small.render(), "short");
    }

    #[test]
    fn a_text_over_the_cap_is_cut_at_character_boundaries() {
        assert!(matches!(cut_text("abc", 3), Cow::Borrowed("abc")));
        let text = "é".repeat(100); // 200 bytes
        let cut = cut_text(&text, 11);
        let (head, rest) = cut.split_once('\n').unwrap();
        assert_eq!(head, "éé");
        assert!(rest.starts_with("[… 192 bytes omitted; 200 bytes in all …]\n"));
        assert!(rest.ends_with("éé"));
    }

    #[test]
    fn json_strings_share_the_cap() {
        let mut v = serde_json::json!({"a": "x".repeat(10_000), "b": ["short", "y".repeat(5_000)]});
        assert!(cut_json_strings(&mut v, 4_000));
        let a = v["a"].as_str().unwrap();
        assert!(a.len() < 1_400 && a.contains("bytes omitted; 10000 bytes in all"));
        assert_eq!(v["b"][0], "short");
        let mut small = serde_json::json!({"a": "x"});
        assert!(!cut_json_strings(&mut small, 4_000));
    }
}
