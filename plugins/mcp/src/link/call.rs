//! `tools/call`: a tool's result as the registry passes it on (content blocks, the
//! structured content checked against the tool's `outputSchema`, the text bounded), images
//! and audio kept within their bounds.

use cordis_tools::{ToolCallContext, ToolOutput};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult};
use serde_json::{Value, json};

use super::Link;
use crate::{output, progress, result};

impl Link {
    /// Calls `raw` with `args`: the server's error text on failure, `{content, structuredContent?}`
    /// on success.
    pub(crate) async fn call(
        &self,
        raw: &str,
        args: Value,
        cx: ToolCallContext,
        output: Option<&output::OutputSchema>,
    ) -> Result<ToolOutput, String> {
        let peer = self.connected()?;
        let arguments = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let params: CallToolRequestParams =
            serde_json::from_value(json!({"name": raw, "arguments": arguments}))
                .map_err(|e| format!("mcp({}): cannot build the call: {e}", self.server))?;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let waiting = progress::Waiting {
            call_id: cx.call_id,
            scope: cx.scope,
            tool: raw.to_owned(),
            last: None,
        };
        let mut result = match self.request(&peer, request, Some(waiting)).await? {
            ServerResult::CallToolResult(result) => result,
            ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_) => {
                return Err(format!(
                    "Tool \"{raw}\" requires task-based execution or client input, which this bridge does not support"
                ));
            }
            // An empty `{}` result parses as the empty result: a call with no content.
            ServerResult::EmptyResult(_) => rmcp::model::CallToolResult::default(),
            _ => {
                return Err(format!(
                    "mcp({}): tools/call was answered with another kind of result",
                    self.server
                ));
            }
        };
        let mut images = 0;
        // Each block of rmcp's copy is dropped once converted: a large answer is not held twice.
        let content: Vec<Value> = std::mem::take(&mut result.content)
            .into_iter()
            .map(|block| media(block_value(block), &mut images))
            .collect();
        if result.is_error == Some(true) {
            let text: Vec<&str> = content
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            let text = if text.is_empty() {
                Value::Array(content.clone()).to_string()
            } else {
                text.join("\n")
            };
            return Err(result::bound_error(text, self.max_result_text));
        }
        if let Some(schema) = output {
            let Some(structured) = &result.structured_content else {
                return Err(format!(
                    "mcp({}): tool \"{raw}\" declares an outputSchema but its result has no structuredContent",
                    self.server
                ));
            };
            schema.check(structured).map_err(|why| {
                format!(
                    "mcp({}): the structuredContent of tool \"{raw}\" does not match its outputSchema: {why}",
                    self.server
                )
            })?;
        }
        let mut out = json!({ "content": content });
        if let Some(structured) = result.structured_content {
            out["structuredContent"] = structured;
        }
        if result::bound(&mut out, self.max_result_text) {
            tracing::debug!(server = %self.server, tool = raw, limit = self.max_result_text, "mcp tool result cut to maxResultText");
        }
        Ok(ToolOutput::new(out))
    }
}

/// A content block as JSON, its text moved rather than copied (a large text is then held once,
/// not twice, until it is cut).
fn block_value(mut block: rmcp::model::ContentBlock) -> Value {
    let text = match &mut block {
        rmcp::model::ContentBlock::Text(t) => Some(std::mem::take(&mut t.text)),
        _ => None,
    };
    let mut value = serde_json::to_value(&block).unwrap_or(Value::Null);
    if let Some(text) = text {
        value["text"] = Value::String(text);
    }
    value
}

/// The most images and audio clips one result passes on (the rest are named in a text block).
pub const MAX_RESULT_MEDIA: usize = 8;

/// The largest image or audio clip passed on, in base64 characters (about 3 MiB).
pub const MAX_MEDIA_CHARS: usize = 4 << 20;

/// A content block as the call's result holds it: an image or audio clip (of the allowed size
/// and count; `taken` counts them) as it came (the model adapter sends it to models that take
/// it and names it to others); one past the bounds named in a text block.
fn media(block: Value, taken: &mut usize) -> Value {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind != "image" && kind != "audio" {
        return block;
    }
    let fits = block
        .get("data")
        .and_then(Value::as_str)
        .is_some_and(|d| d.len() <= MAX_MEDIA_CHARS)
        && block.get("mimeType").and_then(Value::as_str).is_some();
    if fits && *taken < MAX_RESULT_MEDIA {
        *taken += 1;
        return block;
    }
    let mime = block
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("unknown type");
    // Base64 is four characters for three bytes.
    let bytes = block
        .get("data")
        .and_then(Value::as_str)
        .map_or(0, |d| d.len() / 4 * 3);
    json!({
        "type": "text",
        "text": format!("[the server returned {kind} ({mime}, about {bytes} bytes) that is not shown: over the images, audio or bytes one result passes on]")
    })
}
