//! Dylib entries: a third-party tool plugin library (see `docs/plugin-abi.md`) as a runtime
//! plugin that injects `tools`.
//!
//! Resolution ([`crate::plan`]) vets the path (allowed directories, symlinks resolved); applying
//! the entry opens the library (once per path, never unloaded; see [`cordis_dylib`]), creates
//! an instance from the entry's `config`, asks it for its tools, copies them into host-owned
//! schemas and registers them through the ordinary [`ToolRegistry`], so disposal unregisters
//! them like any plugin's. Opening, `create` and `describe` run on a blocking thread, under the
//! entry's apply timeout.
//!
//! # Calls
//! Every call runs on `tokio::task::spawn_blocking`, behind a per-library semaphore: one call at
//! a time unless the library declares itself thread-safe (then [`THREAD_SAFE_CALLS`]), and
//! under the tool's timeout (the plugin's `timeout_ms`, else [`DEFAULT_TOOL_TIMEOUT`]). A call
//! that times out keeps its blocking thread and its permit until the plugin returns, so a hung
//! plugin slows only its own tools. A plugin panic is the call's `TOOL_PANICKED` result.
//!
//! # Determinism
//! Tools are registered in the order the plugin describes them, each after the schedule's
//! `before-register` point, like `tool-declare`; the model-facing order is the assembly's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_dylib::{CallError, Instance};
use cordis_runtime::{BoxError, Context, Inject, Plugin};
use cordis_tools::{ToolCallContext, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Semaphore;

/// How many calls into a thread-safe library may run at once.
pub const THREAD_SAFE_CALLS: usize = 8;
/// The timeout of a plugin tool that sets no `timeout_ms`.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest tool name a plugin may describe, in bytes.
pub const MAX_TOOL_NAME: usize = 128;

/// A dylib entry's plugin: the library path (canonical, vetted) and its optional pin.
#[derive(Debug, Clone)]
pub struct DylibPlugin {
    name: String,
    path: PathBuf,
    sha256: Option<[u8; 32]>,
}

impl DylibPlugin {
    /// A plugin for the library at `path`, shown as `name` (the entry's name as written).
    pub fn new(name: impl Into<String>, path: PathBuf, sha256: Option<[u8; 32]>) -> DylibPlugin {
        DylibPlugin {
            name: name.into(),
            path,
            sha256,
        }
    }

    /// The canonical library path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

const INJECT: &[Inject] = &[Inject::required("tools")];

/// Where content-addressed copies of libraries go: `$CORDIS_DYLIB_CACHE`, else
/// `<temp dir>/cordis-dylib-cache`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("CORDIS_DYLIB_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("cordis-dylib-cache"))
}

/// The sha256 of a file's bytes.
pub fn file_sha256(path: &Path) -> std::io::Result<[u8; 32]> {
    use sha2::Digest as _;
    Ok(sha2::Sha256::digest(std::fs::read(path)?).into())
}

/// Copies the library at `path` to `<cache>/<sha256>-<file name>` (once per content) and returns
/// the copy and its hash, after checking the pin.
///
/// Loading the copy, not the original, is what lets a changed library be loaded again: a library
/// is never unloaded, and a second `dlopen` of the same path would return the old code. The pin
/// is checked against the very bytes that are copied, so a file swapped after the check is never
/// loaded.
fn stage(path: &Path, pin: Option<&[u8; 32]>) -> Result<(PathBuf, [u8; 32]), String> {
    use sha2::Digest as _;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let hash: [u8; 32] = sha2::Sha256::digest(&bytes).into();
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(expected) = pin
        && expected != &hash
    {
        let want: String = expected.iter().map(|b| format!("{b:02x}")).collect();
        return Err(format!(
            "sha256 mismatch: the entry pins {want}, the file is {hex} ({})",
            path.display()
        ));
    }
    let dir = cache_dir();
    let file_name = path
        .file_name()
        .map_or_else(|| "library".into(), |n| n.to_string_lossy().into_owned());
    let staged = dir.join(format!("{hex}-{file_name}"));
    if !staged.exists() {
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create the library cache {}: {e}", dir.display()))?;
        // Write beside under a name no other loader uses (threads of this process included),
        // then rename: nobody ever sees a half-written copy, and racing loaders of the same
        // content both end with the same complete file.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let unique = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let partial = dir.join(format!(".{hex}-{}-{unique}.partial", std::process::id()));
        let written =
            std::fs::write(&partial, &bytes).and_then(|()| std::fs::rename(&partial, &staged));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&partial);
            if !staged.exists() {
                return Err(format!(
                    "cannot copy {} into {}: {e}",
                    path.display(),
                    dir.display()
                ));
            }
        }
    }
    Ok((staged, hash))
}

/// What `describe` returns.
#[derive(Debug, Deserialize)]
struct Description {
    tools: Vec<Described>,
}

#[derive(Debug, Deserialize)]
struct Described {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Value,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

fn stage_error(stage: &str, e: &CallError) -> String {
    match e {
        CallError::Error(m) => format!("{stage} failed: {m}"),
        other => format!("{stage} {other}"),
    }
}

/// Checks a described tool list and turns it into definitions (without handlers yet).
fn tools_of(text: &str) -> Result<Vec<(ToolSchema, Option<Duration>)>, String> {
    let description: Description =
        serde_json::from_str(text).map_err(|e| format!("describe returned invalid JSON: {e}"))?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for tool in description.tools {
        let name = &tool.name;
        if name.len() > MAX_TOOL_NAME || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "describe returned an invalid tool name {name:?}: names are 1 to {MAX_TOOL_NAME} bytes without whitespace or control characters"
            ));
        }
        if !seen.insert(name.clone()) {
            return Err(format!("describe returned tool \"{name}\" twice"));
        }
        let timeout = tool.timeout_ms.map(Duration::from_millis);
        let schema = ToolSchema {
            name: tool.name,
            description: tool.description,
            parameters: tool.parameters,
        };
        // Validate names (empty, reserved), parameters and timeouts before registering any.
        let mut probe = ToolDefinition::new(schema.clone(), |_, _| async {
            Err::<ToolOutput, String>(String::new())
        });
        probe.timeout = timeout;
        probe
            .validate()
            .map_err(|e| format!("describe returned a tool the registry refuses: {e}"))?;
        out.push((schema, timeout));
    }
    Ok(out)
}

/// The call limiter of each library, by canonical path.
fn limiter(instance: &Instance) -> Arc<Semaphore> {
    static LIMITERS: Mutex<BTreeMap<PathBuf, Arc<Semaphore>>> = Mutex::new(BTreeMap::new());
    let library = instance.library();
    let mut map = LIMITERS.lock().unwrap_or_else(|e| e.into_inner());
    map.entry(library.path().to_owned())
        .or_insert_with(|| {
            let permits = if library.thread_safe() {
                THREAD_SAFE_CALLS
            } else {
                1
            };
            Arc::new(Semaphore::new(permits))
        })
        .clone()
}

/// Owns an instance; destroys it on a blocking thread (it may wait for a running call).
struct Owned(Option<Instance>);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(instance) = self.0.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => drop(handle.spawn_blocking(move || drop(instance))),
                Err(_) => drop(instance),
            }
        }
    }
}

async fn call(
    instance: Arc<Owned>,
    limiter: Arc<Semaphore>,
    library: String,
    tool: String,
    args: Value,
) -> Result<ToolOutput, String> {
    let permit = limiter
        .acquire_owned()
        .await
        .map_err(|e| format!("{library}: {e}"))?;
    let args = args.to_string();
    let name = tool.clone();
    let joined = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        match &instance.0 {
            Some(i) => i.invoke(&name, &args),
            None => Err(CallError::Error("the instance is gone".to_owned())),
        }
    })
    .await;
    match joined {
        Ok(Ok(text)) => serde_json::from_str::<Value>(&text)
            .map(ToolOutput::new)
            .map_err(|e| format!("{library}: tool \"{tool}\" returned invalid JSON: {e}")),
        // `resume_unwind` skips the panic hook; the registry reports `TOOL_PANICKED`.
        Ok(Err(CallError::Panic(message))) => {
            std::panic::resume_unwind(Box::new(format!("{message} (in {library})")))
        }
        Ok(Err(e)) => Err(format!("{library}: {e}")),
        Err(e) => Err(format!("{library}: the call was lost: {e}")),
    }
}

impl Plugin for DylibPlugin {
    type Config = Value;

    fn name(&self) -> &str {
        &self.name
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    async fn apply(&self, ctx: Context, config: &Value) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let name = self.name.clone();
        let path = self.path.clone();
        let sha256 = self.sha256;
        let config = config.to_string();
        let loaded = tokio::task::spawn_blocking(move || -> Result<(Instance, String), String> {
            let (staged, hash) = stage(&path, sha256.as_ref())?;
            let library = cordis_dylib::open(&staged, Some(&hash)).map_err(|e| e.to_string())?;
            let instance = library
                .create(&config)
                .map_err(|e| stage_error("create", &e))?;
            let text = instance
                .describe()
                .map_err(|e| stage_error("describe", &e))?;
            Ok((instance, text))
        })
        .await
        .map_err(|e| format!("{name}: loading was lost: {e}"))?;
        let (instance, text) = loaded.map_err(|e| format!("{name}: {e}"))?;
        let limiter = limiter(&instance);
        let instance = Arc::new(Owned(Some(instance)));
        let tools = tools_of(&text).map_err(|e| format!("{name}: {e}"))?;
        for (schema, timeout) in tools {
            let tool = schema.name.clone();
            let (instance, limiter, library) = (instance.clone(), limiter.clone(), name.clone());
            let handler = move |args: Value, _: ToolCallContext| {
                call(
                    instance.clone(),
                    limiter.clone(),
                    library.clone(),
                    tool.clone(),
                    args,
                )
            };
            let def = ToolDefinition::new(schema, handler)
                .with_timeout(timeout.unwrap_or(DEFAULT_TOOL_TIMEOUT));
            // The seeded point lets randomized schedules interleave registrations across plugins.
            ctx.schedule().point("before-register").await;
            ctx.trace("register", def.name().to_owned());
            registry
                .register(&ctx, def)
                .map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn described_tools_are_checked_before_any_is_registered() {
        let ok = r#"{"tools": [{"name": "a", "description": "A", "parameters": {"type": "object"}, "timeout_ms": 5}]}"#;
        let tools = tools_of(ok).unwrap();
        assert_eq!(tools[0].0.name, "a");
        assert_eq!(tools[0].1, Some(Duration::from_millis(5)));
        let err = |text: &str| tools_of(text).unwrap_err();
        assert!(err("{\"tools\": [").starts_with("describe returned invalid JSON"));
        let tool = |n: &str| format!(r#"{{"name": "{n}", "parameters": {{"type": "object"}}}}"#);
        let list = |names: &[&str]| {
            let items: Vec<String> = names.iter().map(|n| tool(n)).collect();
            format!("{{\"tools\": [{}]}}", items.join(","))
        };
        assert!(err(&list(&["a", "a"])).contains("tool \"a\" twice"));
        assert!(err(&list(&["has space"])).contains("invalid tool name \"has space\""));
        assert!(err(&list(&["run_code"])).contains("\"run_code\" is reserved"));
        assert!(err(&list(&["<unlisted-tools>"])).contains("is reserved"));
        assert!(err(&list(&[""])).contains("must be non-empty"));
    }
}
