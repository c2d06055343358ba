//! What the model would receive from a booted runtime: the prompt assembly and its digest.
//!
//! With a `system-prompt` entry loaded, the view is the global assembly — sections (name, order)
//! and the tools in canonical order — and the digest is the sha256 of the **request header
//! bytes**: what a session's `request/header` records, as canonical JSON — the call `config`
//! of the model service's default ([`cordis_schema::RequestConfig`], when one is provided), the
//! rendered system text and the tool schemas. Without one there is no request to describe: the view is `null` and the digest covers
//! the sorted names of the provided services, so `stress` still compares something meaningful.
//!
//! # Determinism
//! Everything here derives from the assembly (canonical by construction) or from sorted names.

use std::sync::Arc;

use cordis_runtime::Context;
use cordis_schema::{RequestConfig, ToolSchema};
use cordis_system_prompt::{AssembleContext, PromptAssembly, SystemPrompt};
use serde_json::{Value, json};

use crate::digest::{canonical_bytes, sha256_hex};

/// The assembly of a booted runtime, as `check` and `stress` report it.
#[derive(Debug, Clone, PartialEq)]
pub struct AssemblyView {
    /// `{"sections": [{"name", "order"}], "tools": [names]}`, or `null` without a system prompt
    /// (or when assembling failed).
    pub json: Value,
    /// Lowercase hex sha256 of the request header bytes (see the module docs).
    pub digest: String,
    /// Why `assemble()` failed (an unknown `toolOrder` name, a duplicate tool, …).
    pub error: Option<String>,
}

/// The bytes a digest covers, before hashing: the request header, or what stands for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HeaderBytes {
    /// The request header bytes of a successful assembly.
    Header(Vec<u8>),
    /// No system prompt is loaded: the canonical bytes of the sorted service names.
    NoPrompt(Vec<u8>),
    /// `assemble()` failed with this message.
    Failed(String),
}

impl HeaderBytes {
    /// The lowercase hex sha256 the reports print.
    pub fn digest(&self) -> String {
        match self {
            HeaderBytes::Header(bytes) | HeaderBytes::NoPrompt(bytes) => sha256_hex(bytes),
            HeaderBytes::Failed(message) => {
                sha256_hex(format!("assemble failed: {message}").as_bytes())
            }
        }
    }
}

/// Assembles the global request of `ctx`'s runtime down to the bytes its digest covers (what
/// `permute` compares: it hashes only the distinct ones).
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn header_bytes(ctx: &Context) -> HeaderBytes {
    match gather(ctx).await {
        Gathered::NoPrompt(services) => HeaderBytes::NoPrompt(services),
        Gathered::Failed(message) => HeaderBytes::Failed(message),
        Gathered::Assembled { header, .. } => HeaderBytes::Header(header),
    }
}

/// The request header bytes of `assembly` in `ctx`'s runtime: what a session's
/// `request/header` records for it (see the module docs); their sha256 is the digest.
///
/// # Errors
/// When the system prompt does not render.
pub fn request_header(
    ctx: &Context,
    assembly: &PromptAssembly,
) -> Result<Vec<u8>, cordis_system_prompt::HeaderError> {
    header_with(ctx.get::<RequestConfig>().as_deref(), assembly)
}

/// [`request_header`] with the model service's call config `config`.
fn header_with(
    config: Option<&RequestConfig>,
    assembly: &PromptAssembly,
) -> Result<Vec<u8>, cordis_system_prompt::HeaderError> {
    let bytes = assembly.header_json()?;
    Ok(match config {
        Some(config) => with_config(&config.0, &bytes),
        None => bytes,
    })
}

/// The digest of a `request/header` read back from a session log (its `data.header`): the one
/// [`assembly_view`] gives the runtime that logged it. `None` for a value of another shape.
pub fn logged_header_digest(header: &Value) -> Option<String> {
    let system = match header.get("system") {
        Some(s) => s.as_str()?,
        None => "",
    };
    let tools: Vec<cordis_schema::ToolSchema> = match header.get("tools") {
        Some(t) => serde_json::from_value(t.clone()).ok()?,
        None => Vec::new(),
    };
    let bytes = cordis_system_prompt::header_bytes(system, &tools).ok()?;
    let bytes = match header.get("config") {
        Some(config) => with_config(config, &bytes),
        None => bytes,
    };
    Some(sha256_hex(&bytes))
}

/// `header` (a canonical JSON object whose keys sort after `config`) with `"config"` first.
fn with_config(config: &Value, header: &[u8]) -> Vec<u8> {
    let config = crate::digest::canonical_bytes(config);
    let mut out = Vec::with_capacity(config.len() + header.len() + 12);
    out.extend_from_slice(b"{\"config\":");
    out.extend_from_slice(&config);
    match header {
        b"{}" => out.push(b'}'),
        _ => {
            out.push(b',');
            out.extend_from_slice(header.get(1..).unwrap_or_default());
        }
    }
    out
}

/// Assembles the global request of `ctx`'s runtime.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn assembly_view(ctx: &Context) -> AssemblyView {
    gather(ctx).await.view()
}

/// An assembly as [`assembly_view`] reads it, before its view and digest are built: a stress
/// run compares it with the first seed's view and digest ([`Gathered::has_view`]) and builds
/// them only to explain a difference.
#[derive(Debug)]
pub(crate) enum Gathered {
    /// No system prompt: the canonical bytes of the sorted service names.
    NoPrompt(Vec<u8>),
    /// `assemble()`, or rendering its header, failed with this message.
    Failed(String),
    /// The assembly, the model service's call config and the request header bytes.
    Assembled {
        assembly: Box<PromptAssembly>,
        config: Option<Arc<RequestConfig>>,
        header: Vec<u8>,
    },
}

/// Assembles the global request of `ctx`'s runtime, building neither its view nor its digest.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub(crate) async fn gather(ctx: &Context) -> Gathered {
    let Some(prompt) = ctx.get::<SystemPrompt>() else {
        return Gathered::NoPrompt(canonical_bytes(&json!({ "services": ctx.service_names() })));
    };
    let assembly = match prompt.assemble(AssembleContext::global()).await {
        Ok(a) => a,
        Err(e) => return Gathered::Failed(e.to_string()),
    };
    // One read serves the header and the view (nothing runs between two reads either).
    let config = ctx.get::<RequestConfig>();
    match header_with(config.as_deref(), &assembly) {
        Ok(header) => Gathered::Assembled {
            assembly: Box::new(assembly),
            config,
            header,
        },
        Err(e) => Gathered::Failed(e.to_string()),
    }
}

impl Gathered {
    /// The view [`assembly_view`] reports for this assembly.
    pub(crate) fn view(&self) -> AssemblyView {
        match self {
            Gathered::NoPrompt(services) => AssemblyView {
                json: Value::Null,
                digest: header_digest(services),
                error: None,
            },
            Gathered::Failed(message) => AssemblyView {
                json: Value::Null,
                digest: HeaderBytes::Failed(message.clone()).digest(),
                error: Some(message.clone()),
            },
            Gathered::Assembled {
                assembly,
                config,
                header,
            } => AssemblyView {
                json: view_json_with(assembly, config.as_deref().map(|c| &c.0)),
                digest: header_digest(header),
                error: None,
            },
        }
    }

    /// Whether [`Self::view`] is `json`, `digest` and `error`, without building it: what a
    /// stress seed costs when it agrees with the first.
    pub(crate) fn has_view(&self, json: &Value, digest: &str, error: Option<&str>) -> bool {
        match self {
            Gathered::NoPrompt(services) => {
                json.is_null() && error.is_none() && digest_is(services, digest)
            }
            Gathered::Failed(message) => {
                json.is_null()
                    && error == Some(message.as_str())
                    && HeaderBytes::Failed(message.clone()).digest() == digest
            }
            Gathered::Assembled {
                assembly,
                config,
                header,
            } => {
                error.is_none()
                    && view_is(assembly, config.as_deref().map(|c| &c.0), json)
                    && digest_is(header, digest)
            }
        }
    }
}

thread_local! {
    /// The last request header digested on this thread, with its digest: seeded boots of one
    /// composition (`cordis stress`) assemble the same header thousands of times, and comparing
    /// the bytes costs less than hashing them again.
    static LAST_HEADER: std::cell::RefCell<Option<(Vec<u8>, String)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `with` on `sha256_hex(header)`, reused when `header` is the bytes this thread digested
/// last (keyed by the whole bytes, so other bytes are never served a stale digest).
fn with_header_digest<R>(header: &[u8], with: impl FnOnce(&str) -> R) -> R {
    LAST_HEADER.with(|last| {
        let mut last = last.borrow_mut();
        match last.as_ref() {
            Some((bytes, digest)) if bytes.as_slice() == header => with(digest),
            _ => {
                let digest = sha256_hex(header);
                let out = with(&digest);
                *last = Some((header.to_vec(), digest));
                out
            }
        }
    })
}

/// `sha256_hex(header)`, reused when `header` is the bytes this thread digested last.
fn header_digest(header: &[u8]) -> String {
    with_header_digest(header, str::to_owned)
}

/// Whether `sha256_hex(header)` is `digest`, reusing this thread's last digest.
fn digest_is(header: &[u8], digest: &str) -> bool {
    with_header_digest(header, |d| d == digest)
}

/// What `check` shows of an assembly in `ctx`'s runtime: `{"sections": [{"name", "order"}],
/// "tools": [names]}`, `"deferred": [names]` when a `deferred-tools` entry holds tools back
/// behind `tool_search`, and the `config` when the model service provides one.
pub fn view_json(ctx: &Context, assembly: &PromptAssembly) -> Value {
    let config = ctx.get::<RequestConfig>();
    view_json_with(assembly, config.as_deref().map(|c| &c.0))
}

/// [`view_json`] with the model service's call config `config`.
fn view_json_with(assembly: &PromptAssembly, config: Option<&Value>) -> Value {
    let mut view = json!({
        "sections": assembly
            .sections
            .iter()
            .map(|s| json!({"name": s.name, "order": s.order}))
            .collect::<Vec<_>>(),
        "tools": assembly.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
    });
    if !assembly.deferred.is_empty() {
        view["deferred"] = assembly
            .deferred
            .iter()
            .map(|t| Value::from(t.name.clone()))
            .collect();
    }
    if let Some(config) = config {
        view["config"] = config.clone();
    }
    view
}

/// Whether `view_json_with(assembly, config) == *view`, without building it: every key it
/// writes is in `view` with an equal value, and `view` has no other.
fn view_is(assembly: &PromptAssembly, config: Option<&Value>, view: &Value) -> bool {
    let Value::Object(map) = view else {
        return false;
    };
    let names_are = |key: &str, tools: &[ToolSchema]| {
        map.get(key).and_then(Value::as_array).is_some_and(|names| {
            names.len() == tools.len()
                && names
                    .iter()
                    .zip(tools)
                    .all(|(name, tool)| name.as_str() == Some(tool.name.as_str()))
        })
    };
    let sections_are = map
        .get("sections")
        .and_then(Value::as_array)
        .is_some_and(|sections| {
            sections.len() == assembly.sections.len()
                && sections.iter().zip(&assembly.sections).all(|(v, s)| {
                    // `json!` turns an order into `Value::from(order)` (`null` when not finite).
                    v.as_object().is_some_and(|o| {
                        o.len() == 2
                            && o.get("name").and_then(Value::as_str) == Some(s.name.as_str())
                            && o.get("order") == Some(&Value::from(s.order))
                    })
                })
        });
    let keys = 2 + usize::from(!assembly.deferred.is_empty()) + usize::from(config.is_some());
    map.len() == keys
        && sections_are
        && names_are("tools", &assembly.tools)
        && (assembly.deferred.is_empty() || names_are("deferred", &assembly.deferred))
        && config.is_none_or(|config| map.get("config") == Some(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_digest_is_reused_for_the_same_bytes_only() {
        let (a, b) = (br#"{"system":"a"}"#.to_vec(), br#"{"system":"b"}"#.to_vec());
        for header in [&a, &a, &b, &a, &b, &b] {
            assert_eq!(header_digest(header), sha256_hex(header));
        }
    }

    #[test]
    fn the_config_is_spliced_first_as_a_request_header_records_it() {
        let config = json!({"model": "m"});
        assert_eq!(
            with_config(&config, br#"{"system":"s","tools":[]}"#),
            br#"{"config":{"model":"m"},"system":"s","tools":[]}"#
        );
        assert_eq!(with_config(&config, b"{}"), br#"{"config":{"model":"m"}}"#);
        // The same bytes as the canonical form of the whole header.
        let whole = json!({"config": {"model": "m"}, "system": "s"});
        assert_eq!(
            with_config(&config, br#"{"system":"s"}"#),
            crate::digest::canonical_bytes(&whole)
        );
    }

    fn assembly(sections: &[(&str, f64)], tools: &[&str], deferred: &[&str]) -> PromptAssembly {
        let schemas = |names: &[&str]| -> Vec<ToolSchema> {
            names
                .iter()
                .map(|n| ToolSchema {
                    name: (*n).to_owned(),
                    description: String::new(),
                    parameters: Arc::new(json!({"type": "object"})),
                })
                .collect()
        };
        PromptAssembly {
            sections: sections
                .iter()
                .map(|(name, order)| cordis_system_prompt::AssembledSection {
                    name: (*name).to_owned(),
                    order: *order,
                    text: String::new(),
                })
                .collect(),
            tools: schemas(tools),
            deferred: schemas(deferred),
            variables: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn view_is_says_whether_view_json_would_be_equal_without_building_it() {
        let configs = [None, Some(Value::Null), Some(json!({"model": "m"}))];
        let assemblies = [
            assembly(&[], &[], &[]),
            assembly(&[("a", 0.0)], &["t"], &[]),
            assembly(&[("a", -0.0)], &["t"], &[]),
            assembly(&[("a", 1.5)], &["t"], &[]),
            assembly(&[("b", 0.0)], &["t"], &[]),
            // Orders that are not finite are all `null` in the view.
            assembly(&[("a", f64::NAN)], &["t"], &[]),
            assembly(&[("a", f64::INFINITY)], &["t"], &[]),
            assembly(&[("a", 0.0), ("b", 1.0)], &["t"], &[]),
            assembly(&[("a", 0.0)], &["t", "u"], &[]),
            assembly(&[("a", 0.0)], &["u", "t"], &[]),
            assembly(&[("a", 0.0)], &["t"], &["d"]),
            assembly(&[("a", 0.0)], &["t"], &["d", "e"]),
        ];
        let mut views: Vec<Value> = Vec::new();
        for a in &assemblies {
            for c in &configs {
                views.push(view_json_with(a, c.as_ref()));
            }
        }
        // Shapes `view_json_with` never builds.
        views.extend([
            Value::Null,
            json!({"sections": [], "tools": [], "extra": 1}),
            json!({"sections": [{"name": "a", "order": 0.0, "text": ""}], "tools": ["t"]}),
            json!({"sections": [{"name": "a", "order": 0}], "tools": ["t"]}),
            json!({"sections": [], "tools": [], "deferred": []}),
        ]);
        let mut equal = 0;
        for a in &assemblies {
            for c in &configs {
                let built = view_json_with(a, c.as_ref());
                for view in &views {
                    assert_eq!(
                        view_is(a, c.as_ref(), view),
                        built == *view,
                        "{built} against {view}"
                    );
                    equal += usize::from(built == *view);
                }
            }
        }
        // Not only the view itself matched: -0.0 meets 0.0, NaN meets infinity.
        assert!(equal > assemblies.len() * configs.len(), "{equal}");
    }

    #[test]
    fn has_view_is_the_built_view_compared() {
        let assembled = |sections: &[(&str, f64)], header: &[u8]| Gathered::Assembled {
            assembly: Box::new(assembly(sections, &["t"], &[])),
            config: Some(Arc::new(RequestConfig(json!({"model": "m"})))),
            header: header.to_vec(),
        };
        let gathered = [
            Gathered::NoPrompt(br#"{"services":[]}"#.to_vec()),
            Gathered::NoPrompt(br#"{"services":["x"]}"#.to_vec()),
            Gathered::Failed("bad".to_owned()),
            Gathered::Failed("worse".to_owned()),
            assembled(&[("a", 0.0)], br#"{"system":"a"}"#),
            assembled(&[("a", 0.0)], br#"{"system":"b"}"#),
            assembled(&[("b", 0.0)], br#"{"system":"a"}"#),
        ];
        for (i, g) in gathered.iter().enumerate() {
            for (j, other) in gathered.iter().enumerate() {
                let (mine, theirs) = (g.view(), other.view());
                // Asked twice: once digesting other bytes, once the same ones as last time.
                for _ in 0..2 {
                    assert_eq!(
                        g.has_view(&theirs.json, &theirs.digest, theirs.error.as_deref()),
                        mine == theirs,
                        "{i} against {j}"
                    );
                }
                assert_eq!(mine == theirs, i == j, "{i} against {j}");
            }
        }
    }
}
