//! Dylib entries: a third-party tool plugin library (see `docs/plugin-abi.md`) as a runtime
//! plugin that injects `tools`.
//!
//! Resolution ([`crate::plan`]) vets the path (allowed directories, symlinks resolved); applying
//! the entry loads the library through the per-user cache (read once, pin checked, loaded from
//! the verified copy's descriptor; see [`cordis_dylib::cache`]), creates an instance from the
//! entry's `config`, asks it for its tools, copies them into host-owned schemas and registers
//! them through the ordinary [`ToolRegistry`], so disposal unregisters them like any plugin's.
//! Loading, `create` and `describe` run on a foreign-call thread ([`cordis_dylib::foreign`]),
//! under the entry's apply timeout.
//!
//! # Calls
//! Every call runs on a foreign-call thread, behind a per-library semaphore: one call at a time
//! unless the library declares itself thread-safe (then [`THREAD_SAFE_CALLS`]), and under the
//! tool's timeout (the plugin's `timeout_ms`, else [`DEFAULT_TOOL_TIMEOUT`]). A call that times
//! out is abandoned: it keeps its thread and its permit until the plugin returns, so a hung
//! plugin slows only its own tools, and nothing (runtime shutdown, process exit) waits for it.
//! Not `spawn_blocking`: a runtime's shutdown waits for its blocking tasks. A plugin panic is the
//! call's `TOOL_PANICKED` result.
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
/// The longest tool name a plugin may describe, in bytes: the registry's one rule.
pub use cordis_tools::MAX_TOOL_NAME;

/// A dylib entry's plugin: the library path (canonical, vetted) and its optional pin.
#[derive(Debug, Clone)]
pub struct DylibPlugin {
    name: String,
    path: PathBuf,
    sha256: Option<[u8; 32]>,
    /// Libraries loaded by [`Plugin::preload`], by runtime id, for that runtime's apply. Held
    /// as [`Owned`], so one never applied is still destroyed off the async threads.
    preloaded: Arc<std::sync::Mutex<std::collections::BTreeMap<u64, Preloaded>>>,
}

/// A preloaded library: its instance and `describe` text, or why loading failed.
type Preloaded = Result<(Owned, String), String>;

/// A loaded library's instance and its `describe` text, or why loading failed.
type Loaded = Result<(Instance, String), String>;

impl DylibPlugin {
    /// A plugin for the library at `path`, shown as `name` (the entry's name as written).
    pub fn new(name: impl Into<String>, path: PathBuf, sha256: Option<[u8; 32]>) -> DylibPlugin {
        DylibPlugin {
            name: name.into(),
            path,
            sha256,
            preloaded: Arc::default(),
        }
    }

    /// The canonical library path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

const INJECT: &[Inject] = ToolRegistry::INJECT;

/// Where verified copies of libraries go for this process's environment:
/// `$CORDIS_DYLIB_CACHE`, else `$XDG_CACHE_HOME/cordis/dylib`, else `~/.cache/cordis/dylib`
/// (see [`cordis_dylib::cache`] for how it is created and checked).
///
/// # Errors
/// None of those variables is set.
pub fn cache_dir() -> Result<PathBuf, cordis_dylib::CacheError> {
    cordis_dylib::cache::default_dir(|name| std::env::var_os(name))
}

/// The sha256 of a library file's bytes (never following a symlink, never blocking on a FIFO).
///
/// # Errors
/// The file cannot be opened or read, or it is not a regular file.
pub fn file_sha256(path: &Path) -> std::io::Result<[u8; 32]> {
    cordis_dylib::file_sha256(path)
}

/// Opens the entry's library (through the per-user cache), creates an instance and describes it.
fn load(path: &Path, pin: Option<&[u8; 32]>, config: &str) -> Result<(Instance, String), String> {
    let cache = cordis_dylib::Cache::from_env().map_err(|e| e.to_string())?;
    let library = cordis_dylib::open_in(&cache, path, pin).map_err(|e| e.to_string())?;
    let instance = library
        .create(config)
        .map_err(|e| stage_error("create", &e))?;
    let text = instance
        .describe()
        .map_err(|e| stage_error("describe", &e))?;
    Ok((instance, text))
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
        // The registry's own name rule, the same for first-party and library tools.
        cordis_tools::check_tool_name(name)
            .map_err(|e| format!("describe returned an invalid tool name {name:?}: {e}"))?;
        if !seen.insert(name.clone()) {
            return Err(format!("describe returned tool \"{name}\" twice"));
        }
        let timeout = tool.timeout_ms.map(Duration::from_millis);
        let schema = ToolSchema {
            name: tool.name,
            description: tool.description,
            parameters: tool.parameters.into(),
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

/// The call limiter of each library, by content.
fn limiter(instance: &Instance) -> Arc<Semaphore> {
    static LIMITERS: Mutex<BTreeMap<[u8; 32], Arc<Semaphore>>> = Mutex::new(BTreeMap::new());
    let library = instance.library();
    let mut map = cordis_runtime::lock(&LIMITERS);
    map.entry(library.sha256())
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

/// Owns an instance; destroys it on a foreign thread (`destroy` may wait for a running call,
/// or never return), so dropping never blocks and nothing waits for it.
#[derive(Debug)]
struct Owned(Option<Instance>);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(instance) = self.0.take() {
            cordis_dylib::foreign::detach(move || drop(instance));
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
    // On a thread the host can abandon: if the registry's timeout drops this future, the
    // call keeps its thread and its permit until the plugin returns, and nothing waits for it.
    let joined = cordis_dylib::foreign::spawn(move || {
        let _permit = permit;
        match &instance.0 {
            Some(i) => i.invoke(&name, &args),
            None => Err(CallError::Error("the instance is gone".to_owned())),
        }
    })
    .await;
    match joined {
        Ok(Ok(Ok(text))) => serde_json::from_str::<Value>(&text)
            .map(ToolOutput::new)
            .map_err(|e| format!("{library}: tool \"{tool}\" returned invalid JSON: {e}")),
        // `resume_unwind` skips the panic hook; the registry reports `TOOL_PANICKED`.
        Ok(Ok(Err(CallError::Panic(message)))) => {
            std::panic::resume_unwind(Box::new(format!("{message} (in {library})")))
        }
        Ok(Ok(Err(e))) => Err(format!("{library}: {e}")),
        Ok(Err(_)) => Err(format!("{library}: the host panicked calling the plugin")),
        Err(e) => Err(format!("{library}: {e}")),
    }
}

impl DylibPlugin {
    /// Opens, creates and describes the library on a thread the host can abandon: when the
    /// entry's timeout drops this future, a `create` that never returns keeps only its own thread
    /// (and its instance, if it ever comes, is destroyed there).
    async fn load_on_a_foreign_thread(&self, config: &Value) -> Result<Loaded, BoxError> {
        let name = self.name.clone();
        let path = self.path.clone();
        let sha256 = self.sha256;
        let config = config.to_string();
        let loaded = cordis_dylib::foreign::spawn(move || load(&path, sha256.as_ref(), &config))
            .await
            .map_err(|e| format!("{name}: loading was lost: {e}"))?
            .map_err(|_| format!("{name}: the host panicked loading the library"))?;
        Ok(loaded)
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

    fn starts(&self, _config: &Value) -> Vec<String> {
        vec![format!(
            "loads the native library {} into this process",
            self.path.display()
        )]
    }

    /// Opens, creates and describes before the seeded applies start, so when the operating
    /// system finishes that work cannot change a seed's interleaving (exact replay).
    async fn preload(&self, root: &Context, config: &Value) {
        /// Records a preload that was cancelled (its entry's timeout ran out), so the apply
        /// fails at once instead of waiting a second timeout on a library that hangs.
        struct Unfinished<'a> {
            plugin: &'a DylibPlugin,
            runtime: u64,
            done: bool,
        }
        impl Drop for Unfinished<'_> {
            fn drop(&mut self) {
                if !self.done {
                    let why = "opening, create or describe did not finish within the entry's timeout (timeout)";
                    cordis_runtime::lock(&self.plugin.preloaded)
                        .insert(self.runtime, Err(why.to_owned()));
                }
            }
        }
        let mut unfinished = Unfinished {
            plugin: self,
            runtime: root.runtime_id(),
            done: false,
        };
        let loaded = self.load_on_a_foreign_thread(config).await;
        unfinished.done = true;
        if let Ok(loaded) = loaded {
            let loaded = loaded.map(|(instance, text)| (Owned(Some(instance)), text));
            cordis_runtime::lock(&self.preloaded).insert(root.runtime_id(), loaded);
        }
    }

    async fn apply(&self, ctx: Context, config: &Value) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let name = self.name.clone();
        let preloaded = cordis_runtime::lock(&self.preloaded).remove(&ctx.runtime_id());
        let loaded = match preloaded {
            Some(Ok((mut owned, text))) => match owned.0.take() {
                Some(instance) => Ok((instance, text)),
                None => Err("the preloaded instance is gone".to_owned()),
            },
            Some(Err(e)) => Err(e),
            // Not preloaded (a reload, or a host that skips preloading): load now.
            None => self.load_on_a_foreign_thread(config).await?,
        };
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
            registry
                .register_scheduled(&ctx, def)
                .await
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
