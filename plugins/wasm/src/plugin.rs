//! The runtime plugin of a `*.wasm` entry: preload compiles (or loads the cached artifact) and
//! describes; apply registers the tools through the ordinary registry, so disposal unregisters
//! them like any plugin's.
//!
//! # Config
//! The entry's `config` holds the host's keys — `capabilities` (see [`crate::grants`]), `fuel`
//! (per call), `memory_mib`, `timeout_ms` (each call's deadline) — and anything else, which is
//! the guest's own config: passed to its `init` as JSON, the host's keys removed.
//!
//! # Determinism
//! Tools are registered in the order the guest describes them, each after the schedule's
//! `before-register` point; the model-facing order is the assembly's. Granted randomness is
//! seeded from the schedule's seed and the entry id whenever a seed was given (any policy but
//! `fifo`, or a nonzero seed); otherwise it comes from the operating system.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_runtime::{BoxError, Context, Inject, Plugin, Policy};
use cordis_tools::{ToolCallContext, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::WasmEngine;
use crate::error::CallError;
use crate::grants::Capabilities;
use crate::guest::{Described, Guest};
use crate::limits::{DEFAULT_FUEL, DEFAULT_MEMORY_MIB, Limits};
use crate::runner::{Runner, RunnerOptions};

/// A call's deadline when the entry sets no `timeout_ms`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How much longer the registry waits than the epoch deadline, so the guest is stopped by the
/// deadline (with its reason) rather than abandoned by the registry.
const REGISTRY_MARGIN: Duration = Duration::from_secs(1);

/// A wasm entry's config: the host's keys, and the guest's own (everything else).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WasmConfig {
    /// What the guest may reach (nothing by default).
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Fuel per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Linear memory per instance, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// Each call's wall-clock deadline, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The guest's config.
    #[serde(flatten)]
    pub guest: serde_json::Map<String, Value>,
}

impl WasmConfig {
    /// The limits this config sets.
    pub fn limits(&self) -> Limits {
        Limits {
            fuel: self.fuel.unwrap_or(DEFAULT_FUEL).max(1),
            memory_bytes: self.memory_mib.unwrap_or(DEFAULT_MEMORY_MIB).max(1) << 20,
        }
    }

    /// Each call's deadline.
    pub fn deadline(&self) -> Duration {
        self.timeout_ms
            .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis)
    }

    /// The guest's config as JSON text (`{}` when there is none).
    pub fn guest_json(&self) -> String {
        Value::Object(self.guest.clone()).to_string()
    }
}

/// A preloaded guest and its tools, or why loading failed.
type Preloaded = Result<(Arc<Guest>, Vec<Described>), String>;

/// A wasm entry's plugin: the component path (canonical, vetted) and its optional pin.
#[derive(Debug, Clone)]
pub struct WasmPlugin {
    name: String,
    path: PathBuf,
    sha256: Option<[u8; 32]>,
    /// Guests loaded by [`Plugin::preload`], by runtime id, for that runtime's apply.
    preloaded: Arc<Mutex<BTreeMap<u64, Preloaded>>>,
}

impl WasmPlugin {
    /// A plugin for the component at `path`, shown as `name` (the entry's name as written).
    pub fn new(name: impl Into<String>, path: PathBuf, sha256: Option<[u8; 32]>) -> WasmPlugin {
        WasmPlugin {
            name: name.into(),
            path,
            sha256,
            preloaded: Arc::default(),
        }
    }

    /// The canonical component path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads, compiles (through the per-user cache) and vets the component on a thread the
    /// host can abandon (compiling a large guest takes seconds), then describes it.
    async fn load(&self, config: &WasmConfig, entry: &str) -> Preloaded {
        let (path, pin, grants) = (self.path.clone(), self.sha256, config.capabilities.clone());
        let guest = cordis_dylib::foreign::spawn(move || {
            let engine = WasmEngine::shared()?;
            let cache = match cordis_dylib::Cache::from_env() {
                Ok(cache) => Some(cache),
                Err(e) => {
                    tracing::warn!("compiling without the artifact cache: {e}");
                    None
                }
            };
            Guest::from_file(&engine, &path, pin.as_ref(), &grants, cache.as_ref())
        })
        .await
        .map_err(|e| format!("loading was lost: {e}"))?
        .map_err(|_| "the host panicked loading the component".to_owned())?
        .map_err(|e| e.to_string())?;
        let guest = Arc::new(guest);
        // Described without the workspace preopen (no service is available before apply) and
        // with randomness of its own stream, in a store dropped afterwards.
        let runner = Runner::new(
            guest.clone(),
            RunnerOptions {
                entry: Arc::from(entry),
                limits: config.limits(),
                grants: Capabilities {
                    workspace: None,
                    ..config.capabilities.clone()
                },
                workspace: None,
                config: config.guest_json(),
                seed: Some(0),
                deadline: config.deadline(),
            },
        );
        let tools = runner.describe().await.map_err(|e| e.to_string())?;
        Ok((guest, tools))
    }
}

const INJECT: &[Inject] = ToolRegistry::INJECT;

async fn call(
    runner: Arc<Runner>,
    entry: Arc<str>,
    tool: String,
    args: Value,
) -> Result<ToolOutput, String> {
    match runner.call(&tool, &args.to_string()).await {
        Ok(text) => serde_json::from_str::<Value>(&text)
            .map(ToolOutput::new)
            .map_err(|e| format!("{entry}: tool \"{tool}\" returned invalid JSON: {e}")),
        // A trap is the guest's panic: the registry reports `TOOL_PANICKED` (`resume_unwind`
        // skips the panic hook). The runner already dropped the instance.
        Err(CallError::Trap(m)) => {
            std::panic::resume_unwind(Box::new(format!("{entry}: tool \"{tool}\" trapped: {m}")))
        }
        Err(e) => Err(format!("{entry}: {e}")),
    }
}

impl Plugin for WasmPlugin {
    type Config = WasmConfig;

    fn name(&self) -> &str {
        &self.name
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn needs(&self, config: &WasmConfig) -> Vec<String> {
        if config.capabilities.workspace.is_some() {
            vec![<cordis_workspace::Workspace as cordis_runtime::Service>::NAME.to_owned()]
        } else {
            Vec::new()
        }
    }

    fn starts(&self, config: &WasmConfig) -> Vec<String> {
        let grants = serde_json::to_string(&config.capabilities).unwrap_or_default();
        vec![format!(
            "runs the WebAssembly component {} in a sandbox (capabilities {grants})",
            self.path.display()
        )]
    }

    /// Compiles and describes before the seeded applies start, so how long compiling takes
    /// cannot change a seed's interleaving.
    async fn preload(&self, root: &Context, config: &WasmConfig) {
        /// Records a preload cut short by its entry's timeout, so apply fails at once.
        struct Unfinished<'a> {
            plugin: &'a WasmPlugin,
            runtime: u64,
            done: bool,
        }
        impl Drop for Unfinished<'_> {
            fn drop(&mut self) {
                if !self.done {
                    let why = "compiling or describing did not finish within the entry's timeout (timeout)";
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
        let loaded = self.load(config, &self.name).await;
        unfinished.done = true;
        cordis_runtime::lock(&self.preloaded).insert(root.runtime_id(), loaded);
    }

    async fn apply(&self, ctx: Context, config: &WasmConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let name = self.name.clone();
        let preloaded = cordis_runtime::lock(&self.preloaded).remove(&ctx.runtime_id());
        let loaded = match preloaded {
            Some(loaded) => loaded,
            // Not preloaded (a reload, or a host that skips preloading): load now.
            None => self.load(config, &name).await,
        };
        let (guest, tools) = loaded.map_err(|e| format!("{name}: {e}"))?;
        let workspace = match config.capabilities.workspace {
            Some(_) => Some(
                ctx.require::<cordis_workspace::Workspace>()?
                    .root()
                    .to_owned(),
            ),
            None => None,
        };
        let schedule = ctx.schedule();
        let seeded = schedule.policy() != Policy::Fifo || schedule.seed() != 0;
        let entry: Arc<str> = Arc::from(ctx.label().unwrap_or(&name));
        let deadline = config.deadline();
        let runner = Arc::new(Runner::new(
            guest,
            RunnerOptions {
                entry: entry.clone(),
                limits: config.limits(),
                grants: config.capabilities.clone(),
                workspace,
                config: config.guest_json(),
                seed: seeded.then(|| schedule.seed()),
                deadline,
            },
        ));
        for tool in tools {
            let schema = ToolSchema {
                name: tool.name.clone(),
                description: tool.description,
                parameters: tool.parameters.into(),
            };
            let (runner, entry, tool_name) = (runner.clone(), entry.clone(), tool.name);
            let handler = move |args: Value, _: ToolCallContext| {
                call(runner.clone(), entry.clone(), tool_name.clone(), args)
            };
            let def = ToolDefinition::new(schema, handler)
                .with_effect(tool.effect)
                .with_timeout(deadline + REGISTRY_MARGIN);
            def.validate().map_err(|e| {
                format!("{name}: describe returned a tool the registry refuses: {e}")
            })?;
            // The seeded point lets randomized schedules interleave registrations across plugins.
            registry
                .register_scheduled(&ctx, def)
                .await
                .map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(())
    }
}
