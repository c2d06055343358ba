//! What a `session/prompt` may carry: its blocks as one user message, and its images checked.

use serde_json::Value;

use crate::acp::rpc::RpcError;
use crate::acp::session::invalid_params;

/// The prompt as one user message: text blocks as they are, resource links as a marker line,
/// embedded text resources as their text between marker lines naming the URI.
///
/// # Errors
/// Content the agent did not advertise (images, audio, binary resources), or nothing to say.
pub fn prompt_text(blocks: &[Value]) -> Result<String, RpcError> {
    let mut text = String::new();
    for block in blocks {
        let field = |name: &str| block.get(name).and_then(Value::as_str);
        match field("type") {
            Some("text") => text.push_str(
                field("text").ok_or_else(|| invalid_params("a text block without text"))?,
            ),
            Some("resource_link") => {
                let (Some(name), Some(uri)) = (field("name"), field("uri")) else {
                    return Err(invalid_params("a resource_link block needs name and uri"));
                };
                text.push_str(&format!(
                    "\n[resource_link name=\"{name}\" uri=\"{uri}\"]\n"
                ));
            }
            // The model gets images beside the text (from the blocks as logged); see `images`.
            Some("image") => {}
            Some("audio") => {
                return Err(invalid_params(
                    "audio content is not supported (promptCapabilities.audio is false)",
                ));
            }
            Some("resource") => {
                let resource = block.get("resource");
                let part = |name: &str| resource.and_then(|r| r.get(name)).and_then(Value::as_str);
                let Some(uri) = part("uri") else {
                    return Err(invalid_params("an embedded resource needs a uri"));
                };
                let Some(body) = part("text") else {
                    return Err(invalid_params(format!(
                        "the embedded resource {uri} is binary (blob); only text resources can be read by the model"
                    )));
                };
                text.push_str(&format!("\n[resource uri=\"{uri}\"]\n{body}"));
                if !body.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str("[/resource]\n");
            }
            other => {
                return Err(invalid_params(format!(
                    "unknown content block type {}",
                    other.map_or_else(|| "(none)".to_owned(), |t| format!("\"{t}\""))
                )));
            }
        }
    }
    if text.trim().is_empty() && !blocks.iter().any(|b| b["type"] == "image") {
        return Err(invalid_params("the prompt is empty"));
    }
    Ok(text)
}

/// The most images one prompt carries.
pub const MAX_PROMPT_IMAGES: usize = 8;
/// The largest image a prompt carries, as base64 (6 MiB of image).
pub const MAX_IMAGE_BASE64: usize = 8 * 1024 * 1024;
/// The image types models take.
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Checks a prompt's image blocks: each with a supported `mimeType` and base64 `data` within
/// [`MAX_IMAGE_BASE64`], at most [`MAX_PROMPT_IMAGES`], and a model that takes them
/// (`accepts`). Returns how many there are.
///
/// # Errors
/// `-32602` naming what is wrong and how to fix it.
pub fn check_images(blocks: &[Value], accepts: bool) -> Result<usize, RpcError> {
    let images: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "image").collect();
    if images.is_empty() {
        return Ok(0);
    }
    if !accepts {
        return Err(invalid_params(
            "this agent's model does not take images (promptCapabilities.image is false; the `llm` entry sets `imageInput: true` for a model that does)",
        ));
    }
    if images.len() > MAX_PROMPT_IMAGES {
        return Err(invalid_params(format!(
            "the prompt has {} images; at most {MAX_PROMPT_IMAGES} go with one prompt",
            images.len()
        )));
    }
    for (i, image) in images.iter().enumerate() {
        let mime = image["mimeType"].as_str().unwrap_or_default();
        if !IMAGE_TYPES.contains(&mime) {
            return Err(invalid_params(format!(
                "image {}: mimeType \"{mime}\" is not one of {}",
                i + 1,
                IMAGE_TYPES.join(", ")
            )));
        }
        let Some(data) = image["data"].as_str() else {
            return Err(invalid_params(format!("image {}: no base64 `data`", i + 1)));
        };
        if data.len() > MAX_IMAGE_BASE64 {
            return Err(invalid_params(format!(
                "image {}: {} bytes of base64, over the limit of {MAX_IMAGE_BASE64}",
                i + 1,
                data.len()
            )));
        }
        if !data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        {
            return Err(invalid_params(format!(
                "image {}: `data` is not base64",
                i + 1
            )));
        }
    }
    Ok(images.len())
}
