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

use cordis_runtime::Context;
use cordis_schema::RequestConfig;
use cordis_system_prompt::{AssembleContext, PromptAssembly, SystemPrompt};
use serde_json::{Value, json};

use crate::digest::{canonical_bytes, digest, sha256_hex};

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
    match assemble(ctx).await {
        Assembled::NoPrompt => {
            HeaderBytes::NoPrompt(canonical_bytes(&json!({ "services": ctx.service_names() })))
        }
        Assembled::Failed(message) => HeaderBytes::Failed(message),
        Assembled::Ok(_, bytes) => HeaderBytes::Header(bytes),
    }
}

enum Assembled {
    NoPrompt,
    Failed(String),
    Ok(Box<PromptAssembly>, Vec<u8>),
}

async fn assemble(ctx: &Context) -> Assembled {
    let Some(prompt) = ctx.get::<SystemPrompt>() else {
        return Assembled::NoPrompt;
    };
    let assembly = match prompt.assemble(AssembleContext::global()).await {
        Ok(a) => a,
        Err(e) => return Assembled::Failed(e.to_string()),
    };
    match request_header(ctx, &assembly) {
        Ok(bytes) => Assembled::Ok(Box::new(assembly), bytes),
        Err(e) => Assembled::Failed(e.to_string()),
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
    let bytes = assembly.header_json()?;
    Ok(match ctx.get::<RequestConfig>() {
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
    match assemble(ctx).await {
        Assembled::NoPrompt => AssemblyView {
            json: Value::Null,
            digest: digest(&json!({ "services": ctx.service_names() })),
            error: None,
        },
        Assembled::Failed(message) => AssemblyView {
            json: Value::Null,
            digest: HeaderBytes::Failed(message.clone()).digest(),
            error: Some(message),
        },
        Assembled::Ok(assembly, header) => AssemblyView {
            json: view_json(ctx, &assembly),
            digest: header_digest(header),
            error: None,
        },
    }
}

thread_local! {
    /// The last request header digested on this thread, with its digest: seeded boots of one
    /// composition (`cordis stress`) assemble the same header thousands of times, and comparing
    /// the bytes costs less than hashing them again.
    static LAST_HEADER: std::cell::RefCell<Option<(Vec<u8>, String)>> =
        const { std::cell::RefCell::new(None) };
}

/// `sha256_hex(&header)`, reused when `header` is the bytes this thread digested last.
fn header_digest(header: Vec<u8>) -> String {
    LAST_HEADER.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((bytes, digest)) = last.as_ref()
            && *bytes == header
        {
            return digest.clone();
        }
        let digest = sha256_hex(&header);
        *last = Some((header, digest.clone()));
        digest
    })
}

/// What `check` shows of an assembly in `ctx`'s runtime: `{"sections": [{"name", "order"}],
/// "tools": [names]}`, `"deferred": [names]` when a `deferred-tools` entry holds tools back
/// behind `tool_search`, and the `config` when the model service provides one.
pub fn view_json(ctx: &Context, assembly: &PromptAssembly) -> Value {
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
    if let Some(config) = ctx.get::<RequestConfig>() {
        view["config"] = config.0.clone();
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_digest_is_reused_for_the_same_bytes_only() {
        let (a, b) = (br#"{"system":"a"}"#.to_vec(), br#"{"system":"b"}"#.to_vec());
        for header in [&a, &a, &b, &a, &b, &b] {
            assert_eq!(header_digest(header.clone()), sha256_hex(header));
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
}
