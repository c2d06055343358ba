//! The runtime plugin of a `*.wasm` entry: preload compiles (or loads the cached artifact) and
//! describes; apply registers the tools through the ordinary registry, so disposal unregisters
//! them like any plugin's.
//!
//! # Config
//! The entry's `config` holds the host's keys — `capabilities` (see [`crate::grants`]), `fuel`
//! (per call), `memory_mib`, `timeout_ms` (each call's deadline), `max_result_bytes` (how much
//! of one answer reaches the model and the log) — and anything else, which is the guest's own
//! config: passed to its `init` as JSON, the host's keys removed.
//!
//! # What the model and approvals see
//! Each tool's effect is the more cautious of what it declares and what its entry's
//! capabilities let it do ([`Capabilities::effect_of`]): a guest granted `workspace: write` asks
//! like an edit even if it says `read`. An answer over `max_result_bytes` keeps its head and
//! tail (see `call` in this module). A call that made requests through `cordis:plugin/http`
//! answers `{"result": <the guest's answer>, "http": [<one record a request>]}` (a failed one
//! adds an `http: [...]` line to its message), so the session log's tool result records what
//! went out and what came back (method, URL, status, body length and SHA-256). Each answer is
//! also kept next to the session logs (the store's `http/` directory), and a replay
//! ([`WasmConfig::replay`], set by the exercise runner) answers the requests from its
//! recording instead of the network ([`crate::http`]).
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
use crate::http::{KEPT_DIR, Replay, TRACE_REPLAY_MISMATCH, Tape};
use crate::limits::{DEFAULT_FUEL, DEFAULT_MEMORY_MIB, Limits};
use crate::runner::{Runner, RunnerOptions};

/// A call's deadline when the entry sets no `timeout_ms`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The least `max_result_bytes` can be: room for a head, the marker and a tail.
const MIN_RESULT_BYTES: usize = 256;
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
    /// The most bytes of one call's result (or error) that reach the model and the session
    /// log (default [`cordis_tools::MAX_RESULT_TEXT`]); a longer one keeps its head and tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_result_bytes: Option<usize>,
    /// The guest's config.
    #[serde(flatten)]
    pub guest: serde_json::Map<String, Value>,
    /// Set by a replay (the exercise runner), never by a config file: the guest's requests
    /// are answered from these recordings, never the network ([`crate::http`]).
    #[serde(skip)]
    pub replay: Option<Arc<Replay>>,
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

    /// The most bytes of one call's result that reach the model and the log.
    pub fn max_result(&self) -> usize {
        self.max_result_bytes
            .unwrap_or(cordis_tools::MAX_RESULT_TEXT)
            .max(MIN_RESULT_BYTES)
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
            let cache = match cordis_artifact_cache::Cache::from_env() {
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

/// Calls `tool` and turns the guest's answer into the tool's output, cut to `max_result`
/// bytes.
///
/// # Bounds
/// The component model lifts the guest's whole answer into one host string before this sees
/// it (wasmtime offers no way to look at a returned string's length first that survives the
/// guest's post-return), so that one copy is bounded by the guest's memory limit
/// (`memory_mib`), not by `max_result`. It lives only here: an answer over `max_result` is cut
/// to its head and tail ([`cordis_tools::cut_text`]) and dropped at once, never parsed, so
/// nothing past the bound reaches the registry, the model, the session log or the next request.
async fn call(
    runner: Arc<Runner>,
    entry: Arc<str>,
    tool: String,
    args: Value,
    max_result: usize,
    cx: ToolCallContext,
    tapes: Tapes,
) -> Result<ToolOutput, String> {
    let read_only = cx.clearance == cordis_tools::Clearance::ReadOnly;
    let tape = tapes.tape(&cx.call_id);
    let replay = matches!(tape, Tape::Replay { .. });
    let recorded = runner
        .call_on_tape(&tool, &args.to_string(), read_only, tape)
        .await;
    if replay
        && let (Err(CallError::Instance(why)), Some(ctx)) = (&recorded.answer, &tapes.ctx)
        && why.starts_with("replay: ")
    {
        ctx.trace(TRACE_REPLAY_MISMATCH, why.clone());
    }
    let http = &recorded.http;
    match recorded.answer {
        Ok(text) => answer(text, max_result)
            .map(|output| with_requests(output, http))
            .map_err(|e| {
                let e = format!("{entry}: tool \"{tool}\" returned invalid JSON: {e}");
                failure_with_requests(e, http)
            }),
        // A trap is the guest's panic: the registry reports `TOOL_PANICKED` (`resume_unwind`
        // skips the panic hook). The runner already dropped the instance.
        Err(CallError::Trap(m)) => std::panic::resume_unwind(Box::new(failure_with_requests(
            format!("{entry}: tool \"{tool}\" trapped: {m}"),
            http,
        ))),
        // The guest's own error text is as long as it likes: cut like an answer.
        Err(CallError::Failed(m)) => Err(failure_with_requests(
            format!("{entry}: {}", cordis_tools::cut_text(&m, max_result)),
            http,
        )),
        Err(e) => Err(failure_with_requests(format!("{entry}: {e}"), http)),
    }
}

/// Where an entry's calls get their requests answered: a replay's recordings, or the network,
/// keeping each answer next to the session logs when the composition keeps them on disk.
#[derive(Clone)]
struct Tapes {
    replay: Option<Arc<Replay>>,
    /// The entry's context (for the session store and the trace), when it grants `network`.
    ctx: Option<Context>,
}

impl Tapes {
    fn tape(&self, call: &str) -> Tape {
        if let Some(replay) = &self.replay {
            return replay.tape(call);
        }
        let kept = self
            .ctx
            .as_ref()
            .and_then(Context::get::<cordis_session::SessionStore>)
            .and_then(|store| store.root().map(|root| root.join(KEPT_DIR)));
        kept.map_or(Tape::Live, Tape::Keep)
    }
}

/// The output of a call that made requests through `cordis:plugin/http`: the guest's answer
/// under `result` and the requests under `http`, so the tool call's outcome in the session log
/// records them (a call that made none keeps the guest's answer as it is).
fn with_requests(output: ToolOutput, http: &[crate::HttpRecord]) -> ToolOutput {
    if http.is_empty() {
        return output;
    }
    ToolOutput::new(serde_json::json!({"result": output.content, "http": http}))
}

/// A failed call's message with the requests it made, as a JSON line after it.
fn failure_with_requests(message: String, http: &[crate::HttpRecord]) -> String {
    if http.is_empty() {
        return message;
    }
    let records = serde_json::to_string(http).unwrap_or_default();
    format!("{message}\nhttp: {records}")
}

/// The output of a guest's answer `text` (JSON text): parsed when it is at most `max_result`
/// bytes; otherwise, unparsed, its head and tail around the marker saying how much was cut, as
/// one JSON string (the model reads the cut text; the whole is never held past this call).
fn answer(text: String, max_result: usize) -> Result<ToolOutput, serde_json::Error> {
    if text.len() <= max_result {
        return serde_json::from_str::<Value>(&text).map(ToolOutput::new);
    }
    tracing::debug!(
        "a wasm tool's answer of {} bytes was cut to {max_result}",
        text.len()
    );
    let cut = cordis_tools::cut_text(&text, max_result).into_owned();
    drop(text);
    Ok(ToolOutput::new(Value::String(cut)))
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
        let max_result = config.max_result();
        let tapes = Tapes {
            replay: config.replay.clone(),
            ctx: config.capabilities.network.is_some().then(|| ctx.clone()),
        };
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
            // The grants, not the guest's word, decide how cautious approvals are.
            let effect = config.capabilities.effect_of(tool.effect);
            if effect != tool.effect {
                tracing::debug!(
                    entry = %entry,
                    "tool \"{}\" declares effect {}, but its entry's capabilities make it {effect}",
                    tool.name,
                    tool.effect
                );
            }
            let schema = ToolSchema {
                name: tool.name.clone(),
                description: tool.description,
                parameters: tool.parameters.into(),
            };
            let (runner, entry, tool_name) = (runner.clone(), entry.clone(), tool.name);
            let tapes = tapes.clone();
            let handler = move |args: Value, cx: ToolCallContext| {
                call(
                    runner.clone(),
                    entry.clone(),
                    tool_name.clone(),
                    args,
                    max_result,
                    cx,
                    tapes.clone(),
                )
            };
            let def = ToolDefinition::new(schema, handler)
                .with_effect(effect)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_within_the_bound_is_parsed_and_a_longer_one_keeps_its_head_and_tail() {
        let small = answer(r#"{"a":1}"#.to_owned(), 1024).unwrap();
        assert_eq!(small.content, serde_json::json!({"a": 1}));
        assert!(answer("{not json".to_owned(), 1024).is_err());
        let text = format!("{{\"data\":\"{}\"}}", "x".repeat(100_000));
        let cut = answer(text, 1024).unwrap();
        let Value::String(cut) = cut.content else {
            panic!("a cut answer is its text");
        };
        assert!(cut.len() <= 1024 + 64, "{}", cut.len());
        assert!(cut.starts_with("{\"data\":\"xxx"), "{cut}");
        assert!(cut.ends_with("xxx\"}"), "{cut}");
        assert!(cut.contains("bytes omitted; 100011 bytes in all"), "{cut}");
    }

    #[test]
    fn the_result_bound_defaults_to_the_registry_wide_one_and_has_a_floor() {
        let config: WasmConfig =
            serde_json::from_value(serde_json::json!({"units": "metric"})).unwrap();
        assert_eq!(config.max_result(), cordis_tools::MAX_RESULT_TEXT);
        assert_eq!(config.guest_json(), r#"{"units":"metric"}"#);
        let set: WasmConfig =
            serde_json::from_value(serde_json::json!({"max_result_bytes": 1})).unwrap();
        assert_eq!(set.max_result(), MIN_RESULT_BYTES);
        assert_eq!(set.guest_json(), "{}", "a host key is not the guest's");
    }

    #[test]
    fn a_call_that_made_requests_records_them_in_its_outcome_and_one_that_made_none_is_unchanged() {
        let record = crate::HttpRecord {
            method: "GET".to_owned(),
            url: "http://127.0.0.1:8080/x".to_owned(),
            request_bytes: None,
            request_sha256: None,
            status: Some(200),
            bytes: Some(2),
            sha256: Some("ab".to_owned()),
            error: None,
        };
        let plain = with_requests(ToolOutput::new(serde_json::json!({"a": 1})), &[]);
        assert_eq!(plain.content, serde_json::json!({"a": 1}));
        let wrapped = with_requests(
            ToolOutput::new(serde_json::json!({"a": 1})),
            std::slice::from_ref(&record),
        );
        assert_eq!(
            wrapped.content,
            serde_json::json!({"result": {"a": 1}, "http": [{
                "method": "GET", "url": "http://127.0.0.1:8080/x", "status": 200, "bytes": 2, "sha256": "ab"
            }]})
        );
        assert_eq!(failure_with_requests("w: no".to_owned(), &[]), "w: no");
        assert_eq!(
            failure_with_requests("w: no".to_owned(), &[record]),
            r#"w: no
http: [{"method":"GET","url":"http://127.0.0.1:8080/x","status":200,"bytes":2,"sha256":"ab"}]"#
        );
    }
}
