//! What the model would receive from a booted runtime: the prompt assembly and its digest.
//!
//! With a `system-prompt` entry loaded, the view is the global assembly — sections (name, order)
//! and the tools in canonical order — and the digest is the sha256 of the **request header
//! bytes** (rendered system text + tool schemas as canonical JSON), the bytes a model request
//! carries. Without one there is no request to describe: the view is `null` and the digest covers
//! the sorted names of the provided services, so `stress` still compares something meaningful.
//!
//! # Determinism
//! Everything here derives from the assembly (canonical by construction) or from sorted names.

use cordis_runtime::Context;
use cordis_system_prompt::{AssembleContext, SystemPrompt};
use serde_json::{Value, json};

use crate::digest::{digest, sha256_hex};

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

/// Assembles the global request of `ctx`'s runtime.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn assembly_view(ctx: &Context) -> AssemblyView {
    let Some(prompt) = ctx.get::<SystemPrompt>() else {
        return AssemblyView {
            json: Value::Null,
            digest: digest(&json!({ "services": ctx.service_names() })),
            error: None,
        };
    };
    let failed = |message: String| AssemblyView {
        json: Value::Null,
        digest: sha256_hex(format!("assemble failed: {message}").as_bytes()),
        error: Some(message),
    };
    let assembly = match prompt.assemble(AssembleContext::global()).await {
        Ok(a) => a,
        Err(e) => return failed(e.to_string()),
    };
    let header = match assembly.header_json() {
        Ok(bytes) => bytes,
        Err(e) => return failed(e.to_string()),
    };
    AssemblyView {
        json: json!({
            "sections": assembly
                .sections
                .iter()
                .map(|s| json!({"name": s.name, "order": s.order}))
                .collect::<Vec<_>>(),
            "tools": assembly.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        }),
        digest: sha256_hex(&header),
        error: None,
    }
}
