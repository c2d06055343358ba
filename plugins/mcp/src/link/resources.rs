//! A server's resources on demand: `resources/read` for front ends, and the read-only
//! `read_resource` tool each server with resources gets for the model.

use cordis_tools::ToolOutput;
use rmcp::model::{ClientRequest, ReadResourceRequestParams, ServerResult, Tool};
use serde_json::{Value, json};

use super::Link;
use crate::catalog::{ResourceContent, to_values};
use crate::error::McpError;
use crate::progress;

/// The raw name of the tool each server with resources gets: it reads one by URI.
pub const READ_RESOURCE: &str = "read_resource";

/// The `_meta` key marking the resource reader among a server's tools.
const READER_MARK: &str = "io.cordis/resource-reader";

/// The longest URI `resources/read` is sent.
pub const MAX_URI_BYTES: usize = 8 << 10;

/// The most text of one `read_resource` call passed to the model (the rest is cut, saying so).
pub const MAX_RESOURCE_TEXT: usize = 256 << 10;

/// The most messages a `prompts/get` answer, or contents a `resources/read` answer, may hold.
pub const MAX_ANSWER_ITEMS: usize = 1_000;

impl Link {
    /// `resources/read` of `uri`.
    pub(crate) async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContent>, McpError> {
        let error = |reason: String| McpError::Request {
            server: self.server.clone(),
            method: "resources/read",
            reason,
        };
        if uri.len() > MAX_URI_BYTES {
            return Err(error(format!(
                "the URI is {} bytes, over the {MAX_URI_BYTES}-byte limit",
                uri.len()
            )));
        }
        let peer = self.connected().map_err(error)?;
        let request = ClientRequest::ReadResourceRequest(rmcp::model::ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        let ServerResult::ReadResourceResult(result) =
            self.request(&peer, request, None).await.map_err(error)?
        else {
            return Err(error(
                "the server answered with another kind of result".into(),
            ));
        };
        if result.contents.len() > MAX_ANSWER_ITEMS {
            return Err(error(format!(
                "{} contents, over the {MAX_ANSWER_ITEMS}-content limit",
                result.contents.len()
            )));
        }
        Ok(to_values(&result.contents)
            .iter()
            .map(|c| {
                let field = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
                ResourceContent {
                    uri: field("uri").unwrap_or_default(),
                    mime_type: field("mimeType"),
                    text: field("text"),
                    blob: field("blob"),
                }
            })
            .collect())
    }

    /// The `read_resource` tool: text contents as text blocks (at most
    /// [`MAX_RESOURCE_TEXT`] bytes in all, the cut said), binary ones described.
    pub(crate) async fn read_for_model(&self, args: &Value) -> Result<ToolOutput, String> {
        let Some(uri) = args.get("uri").and_then(Value::as_str) else {
            return Err("read_resource needs `uri` (a string)".to_owned());
        };
        let contents = self.read_resource(uri).await.map_err(|e| e.to_string())?;
        let mut budget = MAX_RESOURCE_TEXT;
        let blocks: Vec<Value> = contents
            .into_iter()
            .map(|c| {
                let mime = c.mime_type.as_deref().unwrap_or("unknown type");
                let text = match (c.text, c.blob) {
                    (Some(text), _) if text.len() <= budget => {
                        budget -= text.len();
                        text
                    }
                    (Some(text), _) => {
                        let total = text.len();
                        let kept = progress::cut(text, budget);
                        budget -= kept.len();
                        format!(
                            "{kept}\n[cut: {} of {total} bytes of {} shown; the limit of one read is {MAX_RESOURCE_TEXT} bytes]",
                            kept.len(),
                            c.uri
                        )
                    }
                    (None, Some(blob)) => format!(
                        "[binary resource {}: {mime}, about {} bytes; binary contents are not passed to the model]",
                        c.uri,
                        blob.len() / 4 * 3
                    ),
                    (None, None) => format!("[resource {}: no contents]", c.uri),
                };
                json!({"type": "text", "text": text})
            })
            .collect();
        Ok(ToolOutput::new(json!({ "content": blocks })))
    }
}

/// The tool a server with resources gets, as if it had listed it (marked in `_meta`).
pub(crate) fn reader_tool(server: &str) -> Tool {
    let value = json!({
        "name": READ_RESOURCE,
        "description": format!("Reads a resource of the MCP server \"{server}\" by its URI (resources/read). Text comes back as text; binary contents are described, not passed on."),
        "inputSchema": {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI"}},
            "required": ["uri"]
        },
        "annotations": {"readOnlyHint": true},
        "_meta": {READER_MARK: true}
    });
    // A fixed, valid tool: the conversion cannot fail; a default tool would only be refused
    // by the registry.
    serde_json::from_value(value).unwrap_or_else(|_| Tool::default())
}

/// Whether `tool` is the resource reader [`reader_tool`] made.
pub(crate) fn is_reader(tool: &Tool) -> bool {
    tool.name == READ_RESOURCE
        && tool
            .meta
            .as_ref()
            .is_some_and(|m| m.get(READER_MARK) == Some(&Value::Bool(true)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_reader_is_marked_and_a_server_tool_of_its_name_is_not() {
        assert!(is_reader(&reader_tool("fx")));
        let theirs: Tool = serde_json::from_value(
            json!({"name": READ_RESOURCE, "inputSchema": {"type": "object"}}),
        )
        .unwrap();
        assert!(!is_reader(&theirs));
    }
}
