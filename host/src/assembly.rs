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
    match assembly.header_json() {
        Ok(bytes) => Assembled::Ok(Box::new(assembly), bytes),
        Err(e) => Assembled::Failed(e.to_string()),
    }
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
        },
    }
}
