//! An MCP tool's result as content, for people: the `{"content": [...], "structuredContent"?}`
//! a session logs for an MCP call (what the `mcp` plugin passes on, the model's input unchanged)
//! read block by block, so a front end shows a link as a link and an image as an image instead
//! of the result's JSON.
//!
//! Two renderings of one reading ([`blocks`]):
//! - [`acp_blocks`]: ACP content blocks for a tool call update (`text`, `image`, `audio`,
//!   `resource_link`, `resource`), each with the fields the protocol's schema names and nothing
//!   else; editors render them as they render a prompt's.
//! - [`lines`]: text lines for the terminal's and the page's cards: a text as its lines, an
//!   image as `[image image/png, 70 bytes]`, a link as its URI and name, an embedded resource as
//!   its URI then its text (or its size, for a binary one). Base64 is never printed.
//!
//! A result that is not this shape (another tool's, a result with fields MCP does not define,
//! a block of a kind MCP does not have) is not read: the caller shows it as before.
//!
//! One reading in the session core, three renderers (the terminal, the page's JSON, ACP); it
//! depends on no front end.

use serde_json::{Map, Value, json};

/// The most characters of one text a terminal or page line list keeps per block (the model got
/// the text whole; the card is a summary).
pub const MAX_SHOWN_TEXT: usize = 4000;

/// One block of an MCP tool result, as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Block<'a> {
    /// Text.
    Text(&'a str),
    /// An image or an audio clip: its kind (`image`, `audio`), MIME type and base64 data.
    Media {
        /// `image` or `audio`.
        kind: &'a str,
        /// Its MIME type.
        mime: &'a str,
        /// Its base64 data.
        data: &'a str,
        /// The block as the server sent it.
        raw: &'a Value,
    },
    /// A link to a resource the server can read.
    Link {
        /// Its URI.
        uri: &'a str,
        /// Its name.
        name: &'a str,
        /// The block as the server sent it.
        raw: &'a Value,
    },
    /// A resource's contents, embedded: text, or a binary `blob` (base64).
    Resource {
        /// Its URI.
        uri: &'a str,
        /// Its MIME type, when given.
        mime: Option<&'a str>,
        /// Its text, for a text resource.
        text: Option<&'a str>,
        /// Its base64 data, for a binary one.
        blob: Option<&'a str>,
    },
}

/// The keys an MCP `CallToolResult` may have.
const RESULT_KEYS: &[&str] = &["content", "structuredContent", "isError", "_meta"];

/// The blocks of `result` when it is an MCP tool result (an object of `content` blocks, each of
/// a kind MCP defines, with the fields that kind requires); `None` otherwise.
pub fn blocks(result: &Value) -> Option<Vec<Block<'_>>> {
    let object = result.as_object()?;
    if !object.keys().all(|k| RESULT_KEYS.contains(&k.as_str())) {
        return None;
    }
    object
        .get("content")?
        .as_array()?
        .iter()
        .map(block)
        .collect()
}

/// One content block, read; `None` for a kind MCP does not have or a missing field.
fn block(b: &Value) -> Option<Block<'_>> {
    let str_of = |key: &str| b.get(key).and_then(Value::as_str);
    match str_of("type")? {
        "text" => Some(Block::Text(str_of("text")?)),
        kind @ ("image" | "audio") => Some(Block::Media {
            kind,
            mime: str_of("mimeType")?,
            data: str_of("data")?,
            raw: b,
        }),
        "resource_link" => Some(Block::Link {
            uri: str_of("uri")?,
            name: str_of("name")?,
            raw: b,
        }),
        "resource" => {
            let r = b.get("resource")?;
            let field = |key: &str| r.get(key).and_then(Value::as_str);
            let (text, blob) = (field("text"), field("blob"));
            if text.is_none() && blob.is_none() {
                return None;
            }
            Some(Block::Resource {
                uri: field("uri")?,
                mime: field("mimeType"),
                text,
                blob,
            })
        }
        _ => None,
    }
}

/// The bytes base64 `data` stands for.
pub fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count().min(2);
    (data.len() / 4 * 3).saturating_sub(padding)
}

/// `raw`'s `keys` that are present, copied (the schema's optional fields of a block).
fn copy(raw: &Value, keys: &[&str], into: &mut Map<String, Value>) {
    for key in keys {
        if let Some(v) = raw.get(*key).filter(|v| !v.is_null()) {
            into.insert((*key).to_owned(), v.clone());
        }
    }
}

/// `result`'s blocks as ACP content blocks (see the module docs); `None` when `result` is not
/// an MCP tool result. A result with no blocks but `structuredContent` is that JSON as text.
pub fn acp_blocks(result: &Value) -> Option<Vec<Value>> {
    let read = blocks(result)?;
    let mut out: Vec<Value> = read
        .iter()
        .map(|b| match b {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Media {
                kind,
                mime,
                data,
                raw,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), json!(kind));
                m.insert("mimeType".into(), json!(mime));
                m.insert("data".into(), json!(data));
                let optional: &[&str] = if *kind == "image" {
                    &["uri", "annotations"]
                } else {
                    &["annotations"]
                };
                copy(raw, optional, &mut m);
                Value::Object(m)
            }
            Block::Link { uri, name, raw } => {
                let mut m = Map::new();
                m.insert("type".into(), json!("resource_link"));
                m.insert("uri".into(), json!(uri));
                m.insert("name".into(), json!(name));
                copy(
                    raw,
                    &["title", "description", "mimeType", "size", "annotations"],
                    &mut m,
                );
                Value::Object(m)
            }
            Block::Resource {
                uri,
                mime,
                text,
                blob,
            } => {
                let mut r = Map::new();
                r.insert("uri".into(), json!(uri));
                if let Some(mime) = mime {
                    r.insert("mimeType".into(), json!(mime));
                }
                match (text, blob) {
                    (Some(text), _) => r.insert("text".into(), json!(text)),
                    (None, blob) => r.insert("blob".into(), json!(blob.unwrap_or_default())),
                };
                json!({"type": "resource", "resource": r})
            }
        })
        .collect();
    if out.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        out.push(json!({"type": "text", "text": structured.to_string()}));
    }
    Some(out)
}

/// `text` cut to [`MAX_SHOWN_TEXT`] characters, saying how many more there were.
fn bounded(text: &str) -> String {
    let count = text.chars().count();
    if count <= MAX_SHOWN_TEXT {
        return text.to_owned();
    }
    let kept: String = text.chars().take(MAX_SHOWN_TEXT).collect();
    format!("{kept}… ({} more characters)", count - MAX_SHOWN_TEXT)
}

/// `result`'s blocks as lines for a card (see the module docs); `None` when `result` is not an
/// MCP tool result. Lines are not made safe for a terminal: the caller does that.
pub fn lines(result: &Value) -> Option<Vec<String>> {
    let read = blocks(result)?;
    let mut out = Vec::new();
    for b in &read {
        match b {
            Block::Text(text) => out.extend(bounded(text).lines().map(str::to_owned)),
            Block::Media {
                kind, mime, data, ..
            } => out.push(format!("[{kind} {mime}, {} bytes]", decoded_len(data))),
            Block::Link { uri, name, .. } => out.push(format!("[link] {uri} ({name})")),
            Block::Resource {
                uri,
                mime,
                text,
                blob,
            } => {
                let mime = mime.map(|m| format!(" {m}")).unwrap_or_default();
                match (text, blob) {
                    (Some(text), _) => {
                        out.push(format!("[resource {uri}{mime}]"));
                        out.extend(bounded(text).lines().map(str::to_owned));
                    }
                    (None, blob) => out.push(format!(
                        "[resource {uri}{mime}, {} bytes]",
                        decoded_len(blob.unwrap_or_default())
                    )),
                }
            }
        }
    }
    if read.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        out.push(bounded(&structured.to_string()));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1x1 PNG (70 bytes), as the fixture server sends it.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    fn result() -> Value {
        json!({"content": [
            {"type": "text", "text": "two things:\nsee below"},
            {"type": "resource_link", "uri": "file:///w/notes.md", "name": "notes.md",
             "mimeType": "text/markdown", "_meta": {"x": 1}},
            {"type": "image", "mimeType": "image/png", "data": PNG},
            {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
            {"type": "resource", "resource": {"uri": "mem://readme", "mimeType": "text/plain", "text": "read me"}},
            {"type": "resource", "resource": {"uri": "mem://logo", "blob": PNG}}
        ], "structuredContent": {"n": 2}})
    }

    #[test]
    fn every_kind_of_block_becomes_its_acp_content_block_with_the_schemas_fields_only() {
        let blocks = acp_blocks(&result()).unwrap();
        assert_eq!(
            blocks,
            vec![
                json!({"type": "text", "text": "two things:\nsee below"}),
                json!({"type": "resource_link", "uri": "file:///w/notes.md", "name": "notes.md",
                       "mimeType": "text/markdown"}),
                json!({"type": "image", "mimeType": "image/png", "data": PNG}),
                json!({"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}),
                json!({"type": "resource", "resource": {"uri": "mem://readme", "mimeType": "text/plain", "text": "read me"}}),
                json!({"type": "resource", "resource": {"uri": "mem://logo", "blob": PNG}}),
            ]
        );
    }

    #[test]
    fn lines_name_media_and_links_and_never_print_base64() {
        let shown = lines(&result()).unwrap();
        assert_eq!(
            shown,
            [
                "two things:",
                "see below",
                "[link] file:///w/notes.md (notes.md)",
                "[image image/png, 70 bytes]",
                "[audio audio/wav, 4 bytes]",
                "[resource mem://readme text/plain]",
                "read me",
                "[resource mem://logo, 70 bytes]",
            ]
        );
        assert!(!shown.concat().contains("iVBOR"));
    }

    #[test]
    fn a_long_text_is_cut_on_a_card() {
        let long = "x".repeat(MAX_SHOWN_TEXT + 10);
        let shown = lines(&json!({"content": [{"type": "text", "text": long}]})).unwrap();
        assert!(shown[0].ends_with("… (10 more characters)"), "{shown:?}");
    }

    #[test]
    fn only_structured_content_is_shown_as_its_json() {
        let r = json!({"content": [], "structuredContent": {"sum": 3}});
        assert_eq!(lines(&r).unwrap(), [r#"{"sum":3}"#]);
        assert_eq!(
            acp_blocks(&r).unwrap(),
            [json!({"type": "text", "text": r#"{"sum":3}"#})]
        );
    }

    #[test]
    fn what_is_not_an_mcp_result_is_not_read() {
        for other in [
            json!("plain text"),
            json!({"content": "a string"}),
            json!({"content": [{"type": "text", "text": "a"}], "extra": 1}),
            json!({"content": [{"type": "video", "data": "AA=="}]}),
            json!({"content": [{"type": "image", "data": "AA=="}]}),
            json!({"content": [{"type": "resource_link", "uri": "x:"}]}),
        ] {
            assert_eq!(blocks(&other), None, "{other}");
            assert_eq!(lines(&other), None, "{other}");
        }
    }

    #[test]
    fn base64_lengths_count_the_padding() {
        assert_eq!(decoded_len("UklGRg=="), 4);
        assert_eq!(decoded_len("UklGRiQ="), 5);
        assert_eq!(decoded_len("UklGRiQA"), 6);
        assert_eq!(decoded_len(""), 0);
    }
}
