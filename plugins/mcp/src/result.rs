//! A tool result's size for the model and the session log: what an MCP server answers is cut
//! the way a command's output is (head and tail around the one marker of
//! [`cordis_tools::bounded`]), so a server answering megabytes cannot fill every later request,
//! the log and the editor's messages with them.
//!
//! # What is bounded
//! - The text of every `text` block and every embedded `resource` text, together at most `cap`
//!   bytes: when they hold more, each longer than an even share keeps its head and tail.
//! - `structuredContent`: its strings share half of `cap` the same way; one still larger than `cap`
//!   as JSON (a huge array of numbers) is left out, a text block saying so and how large it was.
//! - An embedded resource's binary `blob` over `cap` is left out, a text block naming it.
//! - Anything else a block carries (`_meta`, annotations): a result whose JSON, media left
//!   aside, is still over twice `cap` becomes the cut text of that JSON plus its media.
//!
//! Images and audio have their own bounds ([`crate::MAX_RESULT_MEDIA`],
//! [`crate::MAX_MEDIA_CHARS`]): a model adapter sends them as media, never as text.

use cordis_tools::bounded::{cut_json_strings, cut_text};
use serde_json::{Value, json};

/// Cuts `result` (`{"content": [...], "structuredContent"?: …}`) to `cap` bytes of text, as
/// the module docs say. Returns whether anything was cut.
pub(crate) fn bound(result: &mut Value, cap: usize) -> bool {
    let mut cut = false;
    if let Some(blocks) = result.get_mut("content").and_then(Value::as_array_mut) {
        for block in blocks.iter_mut() {
            cut |= drop_large_blob(block, cap);
        }
        cut |= share(texts(blocks), cap);
    }
    if let Some(structured) = result.get_mut("structuredContent") {
        // Half the bound for its strings: their markers and the JSON around them fit in the rest.
        cut |= cut_json_strings(structured, cap / 2);
        let size = serde_json::to_vec(structured).map_or(usize::MAX, |v| v.len());
        if size > cap {
            if let Some(map) = result.as_object_mut() {
                map.remove("structuredContent");
            }
            push_text(
                result,
                format!(
                    "[structuredContent of {size} bytes omitted: over the {cap}-byte limit of one result]"
                ),
            );
            cut = true;
        }
    }
    if textual_size(result) > cap.saturating_mul(2) {
        flatten(result, cap);
        cut = true;
    }
    cut
}

/// The text of a failed call (`isError: true`), cut to `cap` bytes.
pub(crate) fn bound_error(text: String, cap: usize) -> String {
    match cut_text(&text, cap) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(cut) => cut,
    }
}

/// Whether `block` is an image or audio clip (bounded on its own and sent as media).
fn is_media(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("image" | "audio")
    )
}

/// Replaces an embedded resource whose `blob` is over `cap` by a text block naming it.
fn drop_large_blob(block: &mut Value, cap: usize) -> bool {
    if block.get("type").and_then(Value::as_str) != Some("resource") {
        return false;
    }
    let Some(blob) = block["resource"].get("blob").and_then(Value::as_str) else {
        return false;
    };
    if blob.len() <= cap {
        return false;
    }
    let uri = block["resource"]["uri"].as_str().unwrap_or("unknown");
    let mime = block["resource"]["mimeType"]
        .as_str()
        .unwrap_or("unknown type");
    *block = json!({
        "type": "text",
        "text": format!(
            "[binary resource {uri} ({mime}, about {} bytes) omitted: over the {cap}-byte limit of one result]",
            blob.len() / 4 * 3
        )
    });
    true
}

/// The texts of `blocks` the model reads: `text` blocks' and embedded resources' text.
fn texts(blocks: &mut [Value]) -> Vec<&mut String> {
    blocks
        .iter_mut()
        .filter_map(|block| {
            let text = match block.get("type").and_then(Value::as_str) {
                Some("text") => block.get_mut("text"),
                Some("resource") => block.get_mut("resource")?.get_mut("text"),
                _ => None,
            };
            match text {
                Some(Value::String(s)) => Some(s),
                _ => None,
            }
        })
        .collect()
}

/// Cuts `texts` to `cap` bytes together: each longer than an even share keeps its head and
/// tail in that share (short ones stay whole).
fn share(mut texts: Vec<&mut String>, cap: usize) -> bool {
    let total: usize = texts.iter().map(|t| t.len()).sum();
    if total <= cap {
        return false;
    }
    let each = (cap / texts.len().max(1)).max(256);
    let mut cut = false;
    for text in &mut texts {
        if text.len() > each {
            **text = cut_text(text, each).into_owned();
            cut = true;
        }
    }
    cut
}

/// Appends a text block to `result`'s content.
fn push_text(result: &mut Value, text: String) {
    if !result.get("content").is_some_and(Value::is_array) {
        result["content"] = json!([]);
    }
    if let Some(blocks) = result["content"].as_array_mut() {
        blocks.push(json!({"type": "text", "text": text}));
    }
}

/// `result` as JSON without its media blocks, in bytes.
fn textual_size(result: &Value) -> usize {
    let mut rest = result.clone();
    if let Some(blocks) = rest.get_mut("content").and_then(Value::as_array_mut) {
        blocks.retain(|b| !is_media(b));
    }
    serde_json::to_vec(&rest).map_or(usize::MAX, |v| v.len())
}

/// The last resort for a result whose extra fields are too large: its JSON without media, cut
/// to `cap`, as one text block, then its media blocks.
fn flatten(result: &mut Value, cap: usize) {
    let mut media = Vec::new();
    if let Some(blocks) = result.get_mut("content").and_then(Value::as_array_mut) {
        let mut kept = Vec::new();
        for block in blocks.drain(..) {
            if is_media(&block) {
                media.push(block);
            } else {
                kept.push(block);
            }
        }
        *blocks = kept;
    }
    let text = serde_json::to_string(result).unwrap_or_default();
    let mut content = vec![json!({"type": "text", "text": cut_text(&text, cap)})];
    content.extend(media);
    *result = json!({ "content": content });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(result: &Value, at: usize) -> &str {
        result["content"][at]["text"].as_str().unwrap()
    }

    #[test]
    fn a_small_result_is_left_as_it_is() {
        let mut r =
            json!({"content": [{"type": "text", "text": "3"}], "structuredContent": {"sum": 3}});
        let before = r.clone();
        assert!(!bound(&mut r, 1024));
        assert_eq!(r, before);
    }

    #[test]
    fn a_three_megabyte_text_keeps_its_head_and_tail_within_the_bound() {
        let big = format!("BEGIN{}END", "x".repeat(3_000_000));
        let mut r = json!({"content": [{"type": "text", "text": big}]});
        assert!(bound(&mut r, 64 << 10));
        let text = text_of(&r, 0);
        assert!(text.starts_with("BEGINxxx") && text.ends_with("xxxEND"));
        assert!(
            text.contains("bytes omitted; 3000008 bytes in all"),
            "{}",
            &text[32760..32840]
        );
        assert!(text.len() <= (64 << 10) + 64, "{}", text.len());
    }

    #[test]
    fn texts_share_the_bound_and_short_ones_stay_whole() {
        let mut r = json!({"content": [
            {"type": "text", "text": "short"},
            {"type": "text", "text": "a".repeat(10_000)},
            {"type": "resource", "resource": {"uri": "mem://x", "text": "b".repeat(10_000)}},
            {"type": "image", "mimeType": "image/png", "data": "c".repeat(9_000)}
        ]});
        assert!(bound(&mut r, 6_000));
        assert_eq!(text_of(&r, 0), "short");
        assert!(text_of(&r, 1).len() < 2_100);
        let resource = r["content"][2]["resource"]["text"].as_str().unwrap();
        assert!(resource.contains("bytes omitted; 10000 bytes in all"));
        // Media are bounded on their own, never cut as text.
        assert_eq!(r["content"][3]["data"].as_str().unwrap().len(), 9_000);
    }

    #[test]
    fn large_structured_content_is_cut_or_left_out_saying_how_large_it_was() {
        let mut strings = json!({"content": [], "structuredContent": {"log": "l".repeat(50_000)}});
        assert!(bound(&mut strings, 4_096));
        let log = strings["structuredContent"]["log"].as_str().unwrap();
        assert!(log.contains("bytes omitted; 50000 bytes in all"));

        let numbers: Vec<u32> = (0..20_000).collect();
        let mut r = json!({"content": [], "structuredContent": {"n": numbers}});
        assert!(bound(&mut r, 4_096));
        assert!(r.get("structuredContent").is_none());
        assert!(
            text_of(&r, 0).starts_with("[structuredContent of 108897 bytes omitted: over the 4096-byte limit of one result]"),
            "{}",
            text_of(&r, 0)
        );
    }

    #[test]
    fn a_large_blob_and_large_extra_fields_are_bounded_too() {
        let mut r = json!({"content": [
            {"type": "resource", "resource": {"uri": "mem://bin", "mimeType": "application/zip", "blob": "QUFB".repeat(5_000)}}
        ]});
        assert!(bound(&mut r, 4_096));
        assert_eq!(
            text_of(&r, 0),
            "[binary resource mem://bin (application/zip, about 15000 bytes) omitted: over the 4096-byte limit of one result]"
        );

        let meta: Vec<u32> = (0..20_000).collect();
        let mut r = json!({"content": [
            {"type": "text", "text": "hi", "_meta": {"n": meta}},
            {"type": "image", "mimeType": "image/png", "data": "iVBOR"}
        ]});
        assert!(bound(&mut r, 4_096));
        let text = text_of(&r, 0);
        assert!(
            text.len() <= 4_096 + 64 && text.contains("bytes omitted"),
            "{}",
            text.len()
        );
        assert_eq!(r["content"][1]["data"], "iVBOR");
    }

    #[test]
    fn an_error_text_is_cut_too() {
        assert_eq!(bound_error("short".into(), 1024), "short");
        let cut = bound_error("e".repeat(100_000), 1024);
        assert!(cut.len() <= 1024 + 64 && cut.contains("bytes in all"));
    }
}
