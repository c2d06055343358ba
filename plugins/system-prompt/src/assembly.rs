//! What `assemble()` produces: sections, the canonical tool list, variables, and the request
//! header bytes derived from them.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::error::RenderError;
use crate::render::interpolate_into;
use crate::schema::{ScopeKey, ToolSchema};
use cordis_schema::shared_canonical_bytes;

/// Who a prompt is assembled for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AssembleContext {
    /// The registry scope (an agent's scope); `None` assembles the global view.
    pub scope: Option<ScopeKey>,
}

impl AssembleContext {
    /// The global view: no scope.
    pub fn global() -> Self {
        AssembleContext { scope: None }
    }

    /// The view of one registry scope.
    pub fn scoped(scope: ScopeKey) -> Self {
        AssembleContext { scope: Some(scope) }
    }
}

/// One section after its text was resolved, before interpolation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AssembledSection {
    /// The section name.
    pub name: String,
    /// Its order.
    pub order: f64,
    /// The resolved text, `{{variables}}` not yet substituted.
    pub text: String,
}

/// The result of `assemble()`; what `system-prompt/assemble` listeners see and may change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptAssembly {
    /// Sections in render order.
    pub sections: Vec<AssembledSection>,
    /// The model-facing tools, in canonical order (unless a listener changed it).
    pub tools: Vec<ToolSchema>,
    /// Tools offered but deferred behind [`TOOL_SEARCH`] (a `deferred-tools` entry moves them
    /// here when a composition offers more than its threshold), in canonical order: not in the
    /// request until a session loads them. Empty without tool search.
    pub deferred: Vec<ToolSchema>,
    /// Registered variables; `None` means registered but without a value for this assembly.
    pub variables: BTreeMap<String, Option<String>>,
}

/// The tool that loads [`PromptAssembly::deferred`] tools into a session.
///
/// The load is one fact, in the session log: a successful `tool/result` of this tool whose
/// content is an object with `"loaded": [names]`. The agent loop appends the deferred tools a
/// log loaded after the assembly's tools (each load in canonical order, loads in log order),
/// so every earlier request's tools stay a prefix of the next one's.
pub const TOOL_SEARCH: &str = "tool_search";

/// Building the request header bytes failed.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The system prompt could not be rendered.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Serializing the header failed (not expected for JSON values).
    #[error("serializing the request header failed: {0}")]
    Json(#[from] serde_json::Error),
}

impl PromptAssembly {
    /// Interpolates variables, drops empty sections and joins the rest with a blank line.
    ///
    /// # Errors
    /// A [`RenderError`] for a malformed, unknown or valueless variable reference.
    pub fn render(&self) -> Result<String, RenderError> {
        render(self)
    }

    /// The canonical JSON bytes of `{system, tools}`: what the model receives besides messages.
    ///
    /// Object keys inside tool parameters are sorted, so the bytes depend only on content.
    ///
    /// # Errors
    /// [`HeaderError::Render`] when the system prompt does not render.
    pub fn header_json(&self) -> Result<Vec<u8>, HeaderError> {
        let system = self.render()?;
        Ok(header_bytes(&system, &self.tools)?)
    }
}

/// The header bytes of a rendered system prompt and a tool list (see
/// [`PromptAssembly::header_json`]), also for a header read back from a session log.
///
/// # Errors
/// Only if a string cannot be written as JSON.
pub fn header_bytes(system: &str, tools: &[ToolSchema]) -> Result<Vec<u8>, serde_json::Error> {
    // Seeded boots of one composition (`cordis stress`) and the turns of one session build the
    // same header again and again: the bytes depend on these inputs alone, so the bytes last
    // built for identical inputs (see `same_tools`) are those this call would build.
    if let Some(bytes) = LAST_HEADER.with(|last| {
        last.borrow()
            .as_ref()
            .filter(|last| last.system == system && same_tools(&last.tools, tools))
            .map(|last| last.bytes.clone())
    }) {
        return Ok(bytes);
    }
    let bytes = build_header(system, tools)?;
    LAST_HEADER.with(|last| {
        *last.borrow_mut() = Some(LastHeader {
            system: system.to_owned(),
            tools: tools.to_vec(),
            bytes: bytes.clone(),
        });
    });
    Ok(bytes)
}

/// The inputs and bytes of the header a thread built last.
struct LastHeader {
    system: String,
    tools: Vec<ToolSchema>,
    bytes: Vec<u8>,
}

thread_local! {
    /// One header per thread (a bounded memo: the next different header replaces it).
    static LAST_HEADER: RefCell<Option<LastHeader>> = const { RefCell::new(None) };
}

/// True when the two tool lists serialize to the same header bytes: the same names and
/// descriptions, and parameters that are one shared allocation or [`cordis_schema::same_json`].
fn same_tools(a: &[ToolSchema], b: &[ToolSchema]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.name == b.name
                && a.description == b.description
                && (Arc::ptr_eq(&a.parameters, &b.parameters)
                    || cordis_schema::same_json(&a.parameters, &b.parameters))
        })
}

/// The header bytes, built (see [`header_bytes`]).
fn build_header(system: &str, tools: &[ToolSchema]) -> Result<Vec<u8>, serde_json::Error> {
    // Written by hand rather than through a derived struct: each tool's parameters are
    // spliced in as their canonical bytes, serialized once per shared schema (see
    // `cordis_schema::memo`) instead of once per request. Field order and the absence of
    // empty fields are those of the reference's `canonicalHeader`.
    let mut out = Vec::with_capacity(system.len() + 64 + 512 * tools.len());
    out.push(b'{');
    if !system.is_empty() {
        out.extend_from_slice(b"\"system\":");
        serde_json::to_writer(&mut out, system)?;
    }
    if !tools.is_empty() {
        if !system.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(b"\"tools\":[");
        for (i, tool) in tools.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"name\":");
            serde_json::to_writer(&mut out, &tool.name)?;
            out.extend_from_slice(b",\"description\":");
            serde_json::to_writer(&mut out, &tool.description)?;
            out.extend_from_slice(b",\"parameters\":");
            out.extend_from_slice(&shared_canonical_bytes(&tool.parameters));
            out.push(b'}');
        }
        out.push(b']');
    }
    out.push(b'}');
    Ok(out)
}

/// Renders an assembly into the system prompt text (see [`PromptAssembly::render`]).
///
/// # Errors
/// A [`RenderError`] for a malformed, unknown or valueless variable reference.
pub fn render(assembly: &PromptAssembly) -> Result<String, RenderError> {
    let capacity = assembly.sections.iter().map(|s| s.text.len() + 2).sum();
    let mut out = String::with_capacity(capacity);
    for section in &assembly.sections {
        // Each non-empty section after the first follows a blank line; a section that
        // interpolates to nothing is dropped with its separator.
        let start = out.len();
        if start > 0 {
            out.push_str("\n\n");
        }
        let body = out.len();
        interpolate_into(&mut out, &section.text, &section.name, &assembly.variables)?;
        if out.len() == body {
            out.truncate(start);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(name: &str, text: &str) -> AssembledSection {
        AssembledSection {
            name: name.into(),
            order: 0.0,
            text: text.into(),
        }
    }

    #[test]
    fn empty_sections_are_dropped_and_the_rest_joined_by_a_blank_line() {
        let mut assembly = PromptAssembly {
            sections: vec![section("a", "one"), section("b", ""), section("c", "{{x}}")],
            ..Default::default()
        };
        assembly.variables.insert("x".into(), Some(String::new()));
        assembly.sections.push(section("d", "two"));
        assert_eq!(render(&assembly).unwrap(), "one\n\ntwo");
    }

    #[test]
    fn header_json_has_fixed_field_order_and_sorted_parameter_keys() {
        let mut params = serde_json::Map::new();
        params.insert("type".into(), "object".into());
        params.insert("properties".into(), serde_json::json!({}));
        let assembly = PromptAssembly {
            sections: vec![section("a", "hi")],
            tools: vec![ToolSchema {
                name: "t".into(),
                description: "d".into(),
                parameters: serde_json::Value::Object(params).into(),
            }],
            deferred: Vec::new(),
            variables: BTreeMap::new(),
        };
        let bytes = assembly.header_json().unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"system":"hi","tools":[{"name":"t","description":"d","parameters":{"properties":{},"type":"object"}}]}"#
        );
        assert_eq!(PromptAssembly::default().header_json().unwrap(), b"{}");
    }

    fn tool(name: &str, description: &str, parameters: serde_json::Value) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: description.into(),
            parameters: parameters.into(),
        }
    }

    /// The memo serves the bytes built last only for inputs that serialize identically: each
    /// changed input below gets its own bytes, each repeated one the bytes built afresh.
    #[test]
    fn remembered_header_bytes_are_served_only_for_identical_inputs() {
        let base = || {
            vec![
                tool("a", "d", serde_json::json!({"type": "object", "x": 0.0})),
                tool(
                    "b",
                    "e",
                    serde_json::json!({"type": "object", "y": [1, "s"]}),
                ),
            ]
        };
        let mut variants = vec![("s".to_owned(), base()), (String::new(), base())];
        let mut changed = |f: &dyn Fn(&mut Vec<ToolSchema>)| {
            let mut tools = base();
            f(&mut tools);
            variants.push(("s".to_owned(), tools));
        };
        changed(&|t| t[0].name = "z".into());
        changed(&|t| t[1].description = "f".into());
        changed(&|t| t[0].parameters = serde_json::json!({"type": "object", "x": -0.0}).into());
        changed(&|t| t[0].parameters = serde_json::json!({"type": "object", "x": 0}).into());
        changed(&|t| t[1].parameters = serde_json::json!({"type": "object", "y": [1, "t"]}).into());
        changed(&|t| t[1].parameters = serde_json::json!({"type": "object", "y": [1]}).into());
        changed(&|t| t[1].parameters = serde_json::json!({"type": "object"}).into());
        changed(&|t| {
            t.pop();
        });
        let fresh: Vec<Vec<u8>> = variants
            .iter()
            .map(|(system, tools)| build_header(system, tools).unwrap())
            .collect();
        let distinct: std::collections::BTreeSet<&Vec<u8>> = fresh.iter().collect();
        assert_eq!(
            distinct.len(),
            variants.len(),
            "every variant has bytes of its own"
        );
        // Every ordered pair: the first call fills the memo, the second must not be served it
        // unless it is the same variant.
        for (x, (system, tools)) in variants.iter().enumerate() {
            for (y, (other_system, other_tools)) in variants.iter().enumerate() {
                assert_eq!(header_bytes(system, tools).unwrap(), fresh[x]);
                assert_eq!(
                    header_bytes(other_system, other_tools).unwrap(),
                    fresh[y],
                    "{other_system:?} {other_tools:?} after {system:?} {tools:?}"
                );
            }
        }
        // Equal content in another allocation, and the same allocation, are the same header.
        let tools = base();
        let shared = tools.clone();
        assert!(Arc::ptr_eq(&tools[0].parameters, &shared[0].parameters));
        assert_eq!(
            header_bytes("s", &tools).unwrap(),
            header_bytes("s", &base()).unwrap()
        );
        assert_eq!(
            header_bytes("s", &shared).unwrap(),
            build_header("s", &base()).unwrap()
        );
    }
}
