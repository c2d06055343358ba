//! The server's tool set: every page of `tools/list`, the entry's filter, the resource
//! reader, and registration as one all-or-nothing generation (rolled back on a conflict);
//! each tool's definition with its effect class and size bounds; the re-sync after
//! `notifications/tools/list_changed`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use cordis_runtime::EffectHandle;
use cordis_tools::{ToolDefinition, ToolSchema};
use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use super::{Bridge, Generation};
use crate::catalog::MAX_PAGES;
use crate::error::McpError;
use crate::link::{READ_RESOURCE, is_reader, reader_tool};
use crate::naming::public_name;
use crate::{depth, lock, output};

/// The trace kind of a re-sync after `notifications/tools/list_changed`.
pub const TRACE_SYNC: &str = "mcp-sync";

/// The longest tool description taken from a server: it goes into every model request.
pub const MAX_DESCRIPTION_BYTES: usize = 16 << 10;

/// The largest tool parameters schema taken from a server, as compact JSON.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;

/// Refuses a tool whose description or schema is too large to send with every request (the
/// tool is left out with a warning, like a schema the registry refuses).
fn within_size(description: &str, parameters: &Value) -> Result<(), String> {
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(format!(
            "its description is {} bytes, over the {MAX_DESCRIPTION_BYTES}-byte limit",
            description.len()
        ));
    }
    let schema = serde_json::to_vec(parameters).map_or(usize::MAX, |b| b.len());
    if schema > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its input schema is {schema} bytes, over the {MAX_SCHEMA_BYTES}-byte limit"
        ));
    }
    Ok(())
}

impl Bridge {
    /// Every page of `tools/list`.
    pub(super) async fn list(&self, peer: &Peer<RoleClient>) -> Result<Vec<Tool>, McpError> {
        let list_error = |reason: String| McpError::List {
            server: self.server().to_owned(),
            reason,
        };
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let params = cursor
                .clone()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = peer.list_tools(params).await.map_err(|e| {
                list_error(
                    crate::error::refusal(self.server(), &e).unwrap_or_else(|| e.to_string()),
                )
            })?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(list_error(format!("the server repeated cursor {next:?}")));
                }
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
        Err(list_error(format!("more than {MAX_PAGES} pages")))
    }

    /// Registers `tools` as the current generation, replacing the previous one; on a conflict
    /// the new set is disposed whole and the previous one registered again. True when the set
    /// changed.
    ///
    /// The entry's `tools` filter applies first (a tool listed twice is refused even when
    /// filtered out: the list is invalid). A server offering resources also gets
    /// [`READ_RESOURCE`], unless it lists a tool of that name itself (the server's own wins) or
    /// the filter leaves it out.
    ///
    /// A tool that requires task augmentation (`execution.taskSupport: "required"`) is left
    /// out with a warning: cordis cannot call it as a task yet, so every call would fail.
    pub(super) async fn install(&self, tools: Vec<Tool>) -> Result<bool, McpError> {
        let mut named: Vec<(String, Tool)> = Vec::with_capacity(tools.len() + 1);
        let mut raw_seen = BTreeSet::new();
        for tool in tools {
            if !raw_seen.insert(tool.name.to_string()) {
                return Err(McpError::ListedTwice {
                    server: self.server().to_owned(),
                    tool: tool.name.to_string(),
                });
            }
            if requires_tasks(&tool) {
                tracing::warn!(
                    server = %self.server(),
                    tool = %tool.name,
                    "mcp({}): tool {:?} requires task augmentation (execution.taskSupport: required), which cordis does not support yet: it is left out of the tools offered",
                    self.server(),
                    tool.name
                );
                continue;
            }
            if self.config.tools.admits(&tool.name) {
                named.push((public_name(self.server(), &tool.name), tool));
            }
        }
        if self.link.has_resources.load(Ordering::SeqCst)
            && !raw_seen.contains(READ_RESOURCE)
            && self.config.tools.admits(READ_RESOURCE)
        {
            named.push((
                public_name(self.server(), READ_RESOURCE),
                reader_tool(self.server()),
            ));
        }
        // Registered in the server's order: what the model sees is the registry's canonical
        // order, and the determinism tests prove it against this order nobody controls. Only
        // the comparison with the current set ignores the order.
        let sorted = |tools: &[(String, Tool)]| {
            let mut v: Vec<(String, Tool)> = tools.to_vec();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        let same = {
            let current = lock(&self.current);
            // Registered (or nothing to register: an empty list is the same as an empty one).
            (!current.handles.is_empty() || named.is_empty())
                && sorted(&current.tools) == sorted(&named)
        };
        if same {
            return Ok(false);
        }
        let previous = std::mem::take(&mut *lock(&self.current));
        for handle in &previous.handles {
            handle.dispose();
        }
        match self.register_all(&named).await {
            Ok(handles) => {
                *lock(&self.current) = Generation {
                    tools: named,
                    handles,
                };
                Ok(true)
            }
            Err(error) => {
                if !previous.tools.is_empty() {
                    match self.register_all(&previous.tools).await {
                        Ok(handles) => {
                            *lock(&self.current) = Generation {
                                tools: previous.tools,
                                handles,
                            };
                        }
                        Err(again) => {
                            tracing::warn!(server = %self.server(), error = %again, "the previous tool list could not be restored");
                        }
                    }
                }
                Err(error)
            }
        }
    }

    /// Registers every valid tool or none. A tool whose schema the registry refuses is left
    /// out with a warning (one broken third-party tool should not take the others with it); a
    /// registration that fails (a name another entry owns) disposes the whole set.
    async fn register_all(&self, tools: &[(String, Tool)]) -> Result<Vec<EffectHandle>, McpError> {
        let mut handles = Vec::with_capacity(tools.len());
        for (public, tool) in tools {
            let def = match self.definition(public, tool) {
                Ok(def) => def,
                Err(reason) => {
                    tracing::warn!(server = %self.server(), tool = %tool.name, %reason, "mcp tool left out");
                    continue;
                }
            };
            match self.registry.register_scheduled(&self.ctx, def).await {
                Ok(handle) => handles.push(handle),
                Err(error) => {
                    for handle in &handles {
                        handle.dispose();
                    }
                    return Err(McpError::Register {
                        server: self.server().to_owned(),
                        tool: public.clone(),
                        reason: error.to_string(),
                    });
                }
            }
        }
        Ok(handles)
    }

    fn definition(&self, public: &str, tool: &Tool) -> Result<ToolDefinition, String> {
        let mut parameters = Value::Object((*tool.input_schema).clone());
        if parameters.get("type").is_none() {
            parameters["type"] = json!("object");
        }
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_owned();
        if let Some(why) = serde_json::to_value(tool)
            .ok()
            .as_ref()
            .and_then(depth::too_deep)
        {
            return Err(why);
        }
        within_size(&description, &parameters)?;
        let schema = ToolSchema {
            name: public.to_owned(),
            description,
            parameters: parameters.into(),
        };
        let link = self.link.clone();
        // The registry's timeout is the ceiling; the wait without progress is rmcp's.
        let def = if is_reader(tool) {
            ToolDefinition::new(schema, move |args, _cx| {
                let link = link.clone();
                async move { link.read_for_model(&args).await }
            })
            .with_timeout(self.config.max_call())
            .with_effect(cordis_tools::Effect::Read)
            .read_only()
        } else {
            let raw: Arc<str> = tool.name.as_ref().into();
            let output = tool.output_schema.as_ref().and_then(|schema| {
                output::OutputSchema::compile(&Value::Object((**schema).clone()))
                    .map_err(|reason| {
                        tracing::warn!(server = %self.server(), tool = %tool.name, %reason, "mcp tool's outputSchema does not compile; its results are not checked");
                    })
                    .ok()
                    .map(Arc::new)
            });
            ToolDefinition::new(schema, move |args, cx| {
                let (link, raw, output) = (link.clone(), raw.clone(), output.clone());
                async move { link.call(&raw, args, cx, output.as_deref()).await }
            })
            .with_timeout(self.config.max_call())
            .with_effect(if self.config.trust_annotations {
                effect_of(tool)
            } else {
                cordis_tools::Effect::Unknown
            })
        };
        def.validate().map_err(|e| e.to_string())?;
        Ok(def)
    }

    /// Lists and installs again; traces `mcp-sync` with the outcome (`<server>: applied`,
    /// `kept (…)` or `rolled back (…)`), so tests and logs can tell a sync happened.
    pub(super) async fn resync(&self, peer: &Peer<RoleClient>) {
        let outcome = match tokio::time::timeout(self.config.call_timeout(), self.list(peer)).await
        {
            Ok(Ok(tools)) => match self.install(tools).await {
                Ok(_) => "applied".to_owned(),
                Err(error @ McpError::Register { .. }) => {
                    tracing::warn!(server = %self.server(), %error, "re-sync rolled back; keeping the previous tools");
                    format!("rolled back ({error})")
                }
                Err(error) => {
                    tracing::warn!(server = %self.server(), %error, "re-sync refused; keeping the previous tools");
                    format!("kept ({error})")
                }
            },
            Ok(Err(error)) => {
                tracing::warn!(server = %self.server(), %error, "re-sync failed; keeping the previous tools");
                format!("kept ({error})")
            }
            Err(_) => {
                tracing::warn!(server = %self.server(), "re-sync timed out; keeping the previous tools");
                "kept (tools/list timed out)".to_owned()
            }
        };
        self.ctx
            .trace(TRACE_SYNC, format!("{}: {outcome}", self.server()));
    }
}

/// The effect class a trusted server's annotations declare. The protocol's defaults count
/// where a hint is absent (`readOnlyHint: false`, `destructiveHint: true`,
/// `openWorldHint: true`):
/// - `readOnlyHint: true` → `read` (runs without asking; `destructiveHint` means nothing then);
/// - `destructiveHint: false` with `openWorldHint` true or absent → `network`;
/// - anything else (destructive, a hint absent, or a closed-world change) → `unknown`, what
///   every MCP tool is without `trustAnnotations`.
fn effect_of(tool: &Tool) -> cordis_tools::Effect {
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint) == Some(true);
    let destructive = hints.and_then(|a| a.destructive_hint).unwrap_or(true);
    let open_world = hints.and_then(|a| a.open_world_hint).unwrap_or(true);
    if read_only {
        cordis_tools::Effect::Read
    } else if !destructive && open_world {
        cordis_tools::Effect::Network
    } else {
        cordis_tools::Effect::Unknown
    }
}

/// Whether the server said `tool` can only be called as a task (see
/// [`crate::depth::TASK_REQUIRED_META`]).
fn requires_tasks(tool: &Tool) -> bool {
    tool.meta
        .as_ref()
        .and_then(|m| m.get(crate::depth::TASK_REQUIRED_META))
        .is_some_and(|v| v == "required")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 24, low 13): a 16 MB description went into every request.
    #[test]
    fn a_tool_too_large_to_send_with_every_request_is_refused_with_its_size() {
        let schema = json!({"type": "object"});
        assert!(within_size("short", &schema).is_ok());
        assert_eq!(
            within_size(&"d".repeat(MAX_DESCRIPTION_BYTES + 1), &schema).unwrap_err(),
            "its description is 16385 bytes, over the 16384-byte limit"
        );
        let big = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        assert!(
            within_size("ok", &big)
                .unwrap_err()
                .ends_with("over the 65536-byte limit")
        );
    }

    fn annotated(hints: Value) -> Tool {
        serde_json::from_value(
            json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": hints}),
        )
        .unwrap()
    }

    #[test]
    fn hints_map_to_effect_classes_with_the_protocols_defaults() {
        use cordis_tools::Effect::{Network, Read, Unknown};
        let cases = [
            (json!({"readOnlyHint": true}), Read),
            (json!({"readOnlyHint": true, "destructiveHint": true}), Read),
            (json!({}), Unknown),
            (json!({"openWorldHint": true}), Unknown),
            (
                json!({"destructiveHint": true, "openWorldHint": true}),
                Unknown,
            ),
            (json!({"destructiveHint": false}), Network),
            (
                json!({"destructiveHint": false, "openWorldHint": true}),
                Network,
            ),
            (
                json!({"destructiveHint": false, "openWorldHint": false}),
                Unknown,
            ),
            (
                json!({"readOnlyHint": false, "destructiveHint": false}),
                Network,
            ),
        ];
        for (hints, effect) in cases {
            assert_eq!(effect_of(&annotated(hints.clone())), effect, "{hints}");
        }
        let bare: Tool =
            serde_json::from_value(json!({"name": "t", "inputSchema": {"type": "object"}}))
                .unwrap();
        assert_eq!(effect_of(&bare), Unknown);
    }
}
