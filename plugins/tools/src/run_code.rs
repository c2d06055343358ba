//! The `run_code` transport: the tool a non-native scope gains, which runs one program on the
//! loaded code runtime with the scope's tools as bindings.
//!
//! Each binding call goes through the registry's full pipeline (pre-execute, guards, execute,
//! post-execute) as the sub-call `<callId>:code:<n>` (n = 1, 2, … in submission order), marked
//! with its parent so the `code` collapse does not refuse it. The runtime is read when a call
//! starts, so a native deployment needs none.
//!
//! Each sub-call passes the [`ToolsCodeDispatch`] waterfall twice: when it starts (no outcome
//! yet; the call runs once the pass is over) and after its commit (with the outcome). Passes go
//! one at a time in the scheduler's order of decisions, which does not depend on which tool
//! finished first. The agent loop logs each pass as it comes, as the session events
//! `tool/code-dispatch-start` and `tool/code-dispatch`; neither enters the model's history,
//! which receives only the outer `run_code` result.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use cordis_code_mode::{Language, RunCodeSchema, render_run_failure, render_run_result};
use cordis_code_runtime::{
    BoxFuture, Cancel, CodeRunRequest, CodeRuntimeService, Concurrency, Executed, Limits, SubCall,
    ToolBindings, ToolCallError,
};
use cordis_schema::{ScopeKey, ToolSchema};
use serde_json::Value;

use crate::definition::{ToolCall, ToolCallContext, ToolDefinition, ToolOutput, ToolResult};
use crate::execute::Dispatched;
use crate::registry::{Inner, RUN_CODE, Registered, ToolRegistry};
use crate::turns::{Turn, Turns};

/// The `run_code` parameters of `language`, one allocation per language and process (so the
/// registry and the request header know them by identity, see `cordis_schema::memo`).
fn shared_parameters(language: Language, built: serde_json::Value) -> Arc<serde_json::Value> {
    static SHARED: std::sync::Mutex<Vec<(Language, Arc<serde_json::Value>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut shared = cordis_runtime::lock(&SHARED);
    if let Some((_, p)) = shared.iter().find(|(l, _)| *l == language) {
        return p.clone();
    }
    let p = Arc::new(built);
    shared.push((language, p.clone()));
    p
}

/// Builds the transport for `language`; its handler holds the registry weakly.
///
/// # Errors
/// Only if the fixed `run_code` schema failed to compile (a bug, reported rather than a panic).
pub(crate) fn transport(
    registry: Weak<Inner>,
    language: Language,
) -> Result<Arc<Registered>, crate::RegisterError> {
    let schema = RunCodeSchema::for_language(language);
    let def = ToolDefinition::new(
        ToolSchema {
            name: RUN_CODE.to_owned(),
            description: schema.description.to_owned(),
            parameters: shared_parameters(language, schema.parameters),
        },
        move |args, cx| {
            let registry = registry.upgrade().map(|inner| ToolRegistry { inner });
            async move {
                let Some(registry) = registry else {
                    return Err("run_code: the tool registry is gone".to_owned());
                };
                registry.run_code(args, cx).await
            }
        },
    )
    // Its sub-calls each pass the whole pipeline, approval included.
    .with_effect(crate::Effect::Dispatch)
    .with_output_schema(schema.output_schema);
    // Not `def.compile()`: that applies the registration name rule, which reserves this name.
    let arguments = crate::arguments::ArgumentSchema::compile(RUN_CODE, &def.schema.parameters)?;
    Ok(Arc::new(Registered { def, arguments }))
}

impl ToolRegistry {
    /// Runs one `run_code` call: the program on the loaded runtime, the scope's tools as
    /// bindings, the outcome rendered as the one result the model sees.
    async fn run_code(&self, args: Value, cx: ToolCallContext) -> Result<ToolOutput, String> {
        let program = args
            .get("code")
            .and_then(Value::as_str)
            .ok_or("run_code: `code` must be a string")?
            .to_owned();
        let Some(runtime) = self.inner.ctx.get::<CodeRuntimeService>() else {
            let mode = self.inner.mode_for(cx.scope);
            return Err(format!(
                "mode \"{mode}\" requires a code runtime: load the `code-runtime` plugin or present this scope as \"native\""
            ));
        };
        let bindings = Arc::new(RegistryBindings {
            registry: self.clone(),
            scope: cx.scope,
            call_id: cx.call_id,
            pending: Mutex::new(BTreeMap::new()),
            turns: Arc::default(),
        });
        let request = CodeRunRequest {
            program,
            bindings,
            limits: Limits {
                max_parallel_sub_calls: self.inner.presentation.max_parallel_sub_calls,
                max_sub_calls: self.inner.presentation.max_sub_calls,
                output_bytes: self.inner.presentation.max_output_bytes,
                ..Limits::default()
            },
            // Dropping this future (the call's timeout or cancellation) aborts the run.
            cancel: Cancel::never(),
        };
        let outcome = runtime.0.run(request).await.map_err(|e| e.to_string())?;
        let logs = outcome.log_texts();
        match outcome.result {
            Ok(value) => Ok(ToolOutput::new(render_run_result(&logs, value.as_ref()))),
            Err(failure) => Err(render_run_failure(
                failure.kind.as_str(),
                &failure.message,
                &logs,
            )),
        }
    }
}

/// The scope's tools as a program's bindings.
struct RegistryBindings {
    registry: ToolRegistry,
    scope: Option<ScopeKey>,
    /// The outer `run_code` call id (the sub-calls' parent).
    call_id: String,
    /// Sub-calls awaiting their commit, by sequence number: the call, its result, and whether
    /// it ran (so post-execute is due) or was refused by pre-execute.
    pending: Mutex<BTreeMap<u64, Pending>>,
    /// The order of the dispatch records: a place is taken when the scheduler starts a call and
    /// when a commit ends (a deterministic sequence, see `ToolBindings`), and each record is
    /// announced in its turn.
    turns: Arc<Turns>,
}

/// A sub-call between its run and its commit: the call as the program made it, the call as it
/// ran (pre-execute may rewrite it), its result, and whether it ran.
type Pending = (ToolCall, ToolCall, ToolResult, bool);

impl RegistryBindings {
    fn pending(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Passes one dispatch record through [`ToolsCodeDispatch`] in `turn`; a failing listener
    /// leaves the record as it was.
    async fn announce(&self, turn: Turn, record: CodeDispatch) -> CodeDispatch {
        turn.reached().await;
        let ctx = self.registry.inner.ctx.clone();
        match ctx.waterfall::<ToolsCodeDispatch>(record.clone()).await {
            Ok(out) => out,
            Err(error) => {
                tracing::warn!(%error, "a tools/code-dispatch listener failed");
                record
            }
        }
    }

    /// The record of sub-call `seq`: always from the call as the program made it, so its start
    /// and its settle carry the same id and arguments whatever a listener rewrote.
    fn record(&self, seq: u64, call: &ToolCall, outcome: Option<DispatchOutcome>) -> CodeDispatch {
        CodeDispatch {
            scope: self.scope,
            parent_call_id: self.call_id.clone(),
            seq,
            sub_call_id: call.call_id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            outcome,
        }
    }
}

/// The `tools/code-dispatch` waterfall: one `run_code` sub-call starting (no outcome) or
/// settled (with its outcome, after post-execute). Listeners may rewrite the logged content;
/// what the program receives is not affected.
pub struct ToolsCodeDispatch;

/// A sub-call's outcome as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchOutcome {
    /// True for a failed sub-call.
    pub is_error: bool,
    /// The result content (the error message for a failure).
    pub content: Value,
}

/// The value flowing through [`ToolsCodeDispatch`].
#[derive(Debug, Clone, PartialEq)]
pub struct CodeDispatch {
    /// The scope the `run_code` call runs in.
    pub scope: Option<ScopeKey>,
    /// The `run_code` call id.
    pub parent_call_id: String,
    /// The sub-call's number n = 1, 2, … in submission order (what logs sort by).
    pub seq: u64,
    /// `<parent>:code:<n>`.
    pub sub_call_id: String,
    /// The tool name.
    pub name: String,
    /// The arguments as the program passed them.
    pub arguments: Value,
    /// `None` when the call starts; the outcome once it has settled.
    pub outcome: Option<DispatchOutcome>,
}

impl cordis_runtime::Waterfall for ToolsCodeDispatch {
    const NAME: &'static str = "tools/code-dispatch";
    type Value = CodeDispatch;
}

/// A tool result as a program sees it: the content, or a rejection with the error message.
fn for_program(result: &ToolResult) -> Result<Value, ToolCallError> {
    if !result.is_error {
        return Ok(result.content.clone());
    }
    Err(ToolCallError::new(match &result.content {
        Value::String(message) => message.clone(),
        other => other.to_string(),
    }))
}

impl ToolBindings for RegistryBindings {
    fn names(&self) -> Vec<String> {
        self.registry
            .schemas(self.scope)
            .into_iter()
            .map(|s| s.name)
            .filter(|n| n != RUN_CODE)
            .collect()
    }

    fn concurrency(&self, name: &str) -> Concurrency {
        self.registry
            .concurrency(name, self.scope)
            .unwrap_or(Concurrency::Mutating)
    }

    fn call(&self, call: SubCall) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        let sub = ToolCall {
            call_id: format!("{}:code:{}", self.call_id, call.seq),
            name: call.name,
            arguments: call.arguments,
        };
        let seq = call.seq;
        // Taken now, while the scheduler decides, not when the future is first polled.
        let turn = self.turns.take();
        Box::pin(async move {
            // The start is announced (and logged) before the call runs.
            let _ = self.announce(turn, self.record(seq, &sub, None)).await;
            let (call, result, ran) = match self
                .registry
                .dispatch(sub.clone(), self.scope, Some(&self.call_id))
                .await
            {
                Dispatched::Refused(result) => (sub.clone(), result, false),
                Dispatched::Ran(call, result) => (call, result, true),
            };
            let out = for_program(&result);
            self.pending().insert(seq, (sub, call, result, ran));
            out
        })
    }

    fn commit(&self, executed: Executed) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        Box::pin(async move {
            let taken = self.pending().remove(&executed.seq);
            let Some((sub, call, result, ran)) = taken else {
                return executed.result;
            };
            let result = if ran {
                self.registry
                    .post_execute(call.clone(), self.scope, result)
                    .await
            } else {
                result
            };
            let outcome = DispatchOutcome {
                is_error: result.is_error,
                content: result.content.clone(),
            };
            // No call starts while a commit runs, so this place follows every start before it.
            let turn = self.turns.take();
            let _ = self
                .announce(turn, self.record(executed.seq, &sub, Some(outcome)))
                .await;
            for_program(&result)
        })
    }
}
