//! The envelope of a JSON-RPC message read as it streams past without being kept: whether it
//! names a method, whether it answers (a `result` or `error`), and its id. A message too large
//! to hold (over a line limit) is skipped, but its envelope still says whom it answers, so the
//! request it answers can fail at once, naming the limit, instead of waiting forever. The ACP
//! server and the MCP stdio client both read over-limit lines with it.
//!
//! Keys are compared as written: an `id` whose key is spelled with escapes is not found.

use serde_json::Value;

/// The longest id an envelope keeps; a longer one is no id a peer of ours sent.
pub const MAX_ENVELOPE_ID_BYTES: usize = 64;

/// Whether JSON-RPC 2.0 allows `id` as a request's id: a string, a number or null.
pub fn is_valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_) | Value::Null)
}

/// What the top level of a JSON-RPC message says of itself, read byte by byte ([`Envelope::feed`])
/// with a bounded state (at most [`MAX_ENVELOPE_ID_BYTES`] of the id and 8 bytes of a key kept).
#[derive(Debug, Default)]
pub struct Envelope {
    /// Nesting of objects and arrays outside strings (1: inside the top-level object).
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, the next string is a key.
    expect_key: bool,
    /// The top-level key being read or just read (bytes as written, at most 8 kept).
    key: Option<Vec<u8>>,
    /// The raw bytes of the top-level `id` value while it is read (at most one more than
    /// [`MAX_ENVELOPE_ID_BYTES`] kept).
    value: Option<Vec<u8>>,
    /// The top-level `id`: `Some(None)` when present but too long or not JSON.
    id: Option<Option<Value>>,
    /// A top-level `method` key was seen.
    method: bool,
    /// A top-level `result` or `error` key was seen.
    answer: bool,
}

impl Envelope {
    /// Reads the next bytes of the message.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        let structural = !self.in_string;
        // The id's value ends at a top-level comma or the top level's closing brace.
        if structural
            && self.depth == 1
            && matches!(b, b',' | b'}')
            && let Some(raw) = self.value.take()
        {
            let id = (raw.len() <= MAX_ENVELOPE_ID_BYTES)
                .then(|| serde_json::from_slice(raw.trim_ascii()).ok())
                .flatten();
            self.id = Some(id);
        }
        if let Some(raw) = &mut self.value
            && raw.len() <= MAX_ENVELOPE_ID_BYTES
        {
            raw.push(b);
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                return;
            }
            if self.depth == 1
                && let Some(key) = &mut self.key
                && key.len() <= 8
            {
                key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.key = Some(Vec::new());
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = b == b'{';
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if self.depth == 1 => {
                self.expect_key = false;
                match self.key.take().as_deref() {
                    Some(b"id") => self.value = Some(Vec::new()),
                    Some(b"method") => self.method = true,
                    Some(b"result" | b"error") => self.answer = true,
                    _ => {}
                }
            }
            b',' if self.depth == 1 => self.expect_key = true,
            _ => {}
        }
    }

    /// The id, once read whole, when it is one JSON-RPC allows (a string, a number or null).
    pub fn id(&self) -> Option<&Value> {
        self.id.as_ref()?.as_ref().filter(|id| is_valid_id(id))
    }

    /// True when the message names a method (a request or a notification).
    pub fn has_method(&self) -> bool {
        self.method
    }

    /// The id of the request this message answers, as soon as it is known: it has a `result` or
    /// an `error`, no method (so far), and a string or number id.
    pub fn answers(&self) -> Option<&Value> {
        (self.answer && !self.method)
            .then(|| self.id())
            .flatten()
            .filter(|id| !id.is_null())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(text: &str) -> Envelope {
        let mut e = Envelope::default();
        // In uneven pieces, as a skipped line arrives.
        for piece in text.as_bytes().chunks(3) {
            e.feed(piece);
        }
        e
    }

    #[test]
    fn an_envelope_finds_the_top_level_id_before_or_after_a_result_and_not_one_inside_it() {
        let first =
            envelope(r#"{"id": 7, "jsonrpc": "2.0", "result": {"id": 99, "content": "x"}}"#);
        assert_eq!(first.id(), Some(&json!(7)));
        assert_eq!(first.answers(), Some(&json!(7)));
        let last = envelope(
            r#"{"jsonrpc":"2.0","result":{"content":"a \"id\": 5, } ] {","id":[1]},"id":12}"#,
        );
        assert_eq!(last.answers(), Some(&json!(12)));
        let request = envelope(r#"{"method": "session/prompt", "params": {"id": 1}, "id": "r-1"}"#);
        assert!(request.has_method());
        assert_eq!(request.id(), Some(&json!("r-1")));
        assert_eq!(request.answers(), None);
        let error = envelope(r#"{"jsonrpc":"2.0","id":"a\"b","error":{"code":1"#);
        assert_eq!(error.answers(), Some(&json!("a\"b")));
    }

    #[test]
    fn an_envelope_keeps_no_id_that_is_too_long_or_not_one_json_rpc_allows() {
        let long = format!(r#"{{"id": "{}", "result": 1}}"#, "x".repeat(100));
        assert_eq!(envelope(&long).id, Some(None));
        assert_eq!(envelope(r#"{"id": {"a": 1}, "result": 1}"#).id(), None);
        assert_eq!(envelope(r#"{"result": 1}"#).id, None);
        // Cut short (the rest never came): no id was finished.
        assert_eq!(envelope(r#"{"result": 1, "id": 4"#).id, None);
        assert_eq!(envelope(r#"{"result": 1, "id": null}"#).answers(), None);
    }
}
