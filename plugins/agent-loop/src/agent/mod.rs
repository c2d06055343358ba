//! `Agent`: one conversation with its own registry scope, session and turn state machine.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cordis_approvals::{Approvals, Policy as ApprovalPolicy};
use cordis_conversation::{
    AssistantToolCall, CallConfig, Chunk, FinishReason, FrozenRequest, Llm, LlmRequest, Usage,
};
use cordis_runtime::Position;
use cordis_runtime::{Context, EffectHandle, ScopeHandle};
use cordis_session::{
    AssistantChunkData, AssistantMessageData, EventData, HeaderReason, RequestHeader,
    RequestHeaderData, Session, StepEndData, StepStartData, ToolApprovalData, ToolCallData,
    ToolResultData, TurnEndReason, TurnStartData, UserMessageData, header_reason_due, last_turn,
};
use cordis_session::{CompactionData, CompactionTrigger};
use cordis_session::{ToolCodeDispatchData, ToolCodeDispatchStartData};
use cordis_system_prompt::{AssembleContext, ScopeKey, SystemPrompt};
use cordis_tools::{
    CodeDispatch, Concurrency, ToolCall, ToolRegistry, ToolResult, ToolsCodeDispatch, codes,
};
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::budget;
use crate::compaction;
use crate::config::LoopSettings;
use crate::events::{
    AgentError, AgentEvent, AgentHook, AgentNotice, AgentState, HookPoint, Moment,
};
use crate::invariant::check_request;

mod compact;
mod dispatch_log;
mod hooks;
mod loaded;

pub use compact::CompactError;

/// Why `run_turn` did not run a turn at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    /// A turn is already running.
    #[error("agent \"{0}\" is busy with another turn")]
    Busy(String),
    /// The agent was disposed.
    #[error("agent \"{0}\" is disposed")]
    Disposed(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stop {
    Aborted(Option<String>),
    Disposed,
}

/// A failure inside a turn: the step it belongs to and the message.
struct Failure {
    step: u64,
    message: String,
}

fn fail(step: u64) -> impl Fn(String) -> Failure {
    move |message| Failure { step, message }
}

pub(crate) struct Deps {
    pub(crate) ctx: Context,
    pub(crate) llm: Arc<Llm>,
    pub(crate) prompt: Arc<SystemPrompt>,
    pub(crate) tools: Arc<ToolRegistry>,
}

struct Inner {
    id: String,
    key: ScopeKey,
    scope: ScopeHandle,
    session: Session,
    deps: Deps,
    /// The call config of the next request (a model or thought-level switch replaces it
    /// between turns; the log shows it as the next `request/header` `change`).
    config: Mutex<CallConfig>,
    settings: LoopSettings,
    busy: AtomicBool,
    disposed: AtomicBool,
    /// True once this loop instance ran `SessionStart` hooks (its first turn).
    started: AtomicBool,
    /// The last header this loop instance sent (`None` until its first request).
    /// The last request built, the baseline a new header is compared with (shared, not copied).
    baseline: Mutex<Option<FrozenRequest>>,
    /// Each prompt section's fingerprint in the last request built (a `change` names those
    /// that differ: an instructions file, the skills catalog).
    prompt_sources: Mutex<BTreeMap<String, u64>>,
    stop: watch::Sender<Option<Stop>>,
    /// The binding of the agent's scope to its parent (a preset's standing key), replaced by
    /// [`Agent::rejoin`].
    parent_bind: Mutex<Option<EffectHandle>>,
}

/// An agent: cheap to clone.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.inner.id)
            .field("scope", &self.inner.key)
            .field("session", &self.inner.session.id())
            .finish_non_exhaustive()
    }
}

impl Agent {
    pub(crate) fn new(
        id: String,
        scope: ScopeHandle,
        session: Session,
        deps: Deps,
        config: CallConfig,
        settings: LoopSettings,
        parent_bind: Option<EffectHandle>,
    ) -> Agent {
        Agent {
            inner: Arc::new(Inner {
                id,
                key: ScopeKey::from(scope.id()),
                scope,
                session,
                deps,
                config: Mutex::new(config),
                settings,
                busy: AtomicBool::new(false),
                disposed: AtomicBool::new(false),
                started: AtomicBool::new(false),
                baseline: Mutex::new(None),
                prompt_sources: Mutex::default(),
                stop: watch::Sender::new(None),
                parent_bind: Mutex::new(parent_bind),
            }),
        }
    }

    /// The agent id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The agent's registry scope (register its own tools, restrictions, guards here).
    pub fn scope_key(&self) -> ScopeKey {
        self.inner.key
    }

    /// A context on the agent's runtime scope (registrations there unwind with the agent).
    pub fn context(&self) -> Option<Context> {
        self.inner.scope.context()
    }

    /// The call config of its next request (model, sampling, reasoning effort).
    pub fn call_config(&self) -> CallConfig {
        cordis_runtime::lock(&self.inner.config).clone()
    }

    /// Replaces the call config of its requests from the next one on (a model or thought-level
    /// switch); the next request's header is logged as a `change`.
    ///
    /// # Errors
    /// [`TurnError::Busy`] while a turn runs: a turn runs on one config.
    pub fn set_call_config(&self, config: CallConfig) -> Result<(), TurnError> {
        if self.inner.busy.load(Ordering::Acquire) {
            return Err(TurnError::Busy(self.inner.id.clone()));
        }
        *cordis_runtime::lock(&self.inner.config) = config;
        Ok(())
    }

    /// Takes back the model and reasoning effort of the session's last request when the
    /// composition still offers them (a resumed session stays on the model it was switched
    /// to); an agent created on another model than the default keeps its own.
    pub(crate) fn restore_call_config(&self) {
        let Ok(Some(last)) = self.inner.session.request_header() else {
            return;
        };
        let llm = &self.inner.deps.llm;
        let mut config = self.call_config();
        if llm.default_model() != Some(config.model.as_str()) {
            return;
        }
        if llm.models().contains(&last.config.model) {
            config.model = last.config.model;
        }
        config.reasoning_effort = last
            .config
            .reasoning_effort
            .filter(|e| llm.thought_levels().contains(e));
        *cordis_runtime::lock(&self.inner.config) = config;
    }

    /// The agent's session.
    pub fn session(&self) -> &Session {
        &self.inner.session
    }

    /// The parent the agent's scope is bound to (a preset's standing key), if any.
    pub fn parent_scope(&self) -> Option<ScopeKey> {
        self.inner.deps.tools.parent_of(self.inner.key)
    }

    /// Re-binds the agent's scope under `parent` (switching a blank agent to another preset),
    /// replacing the binding it was created with. The caller decides when a switch is allowed
    /// (the preset roster refuses it mid-turn and after the first turn).
    ///
    /// # Errors
    /// A cycle or a disposed agent; the old binding is then restored when it can be.
    pub fn rejoin(&self, parent: ScopeKey) -> Result<(), cordis_tools::RegisterError> {
        let Some(ctx) = self.context() else {
            return Err(cordis_tools::RegisterError::ScopeGone);
        };
        let tools = &self.inner.deps.tools;
        let mut bind = cordis_runtime::lock(&self.inner.parent_bind);
        let old = tools.parent_of(self.inner.key);
        if let Some(handle) = bind.take() {
            handle.dispose();
        }
        match tools.bind_parent(&ctx, self.inner.key, parent) {
            Ok(handle) => {
                *bind = Some(handle);
                Ok(())
            }
            Err(e) => {
                if let Some(old) = old {
                    *bind = tools.bind_parent(&ctx, self.inner.key, old).ok();
                }
                Err(e)
            }
        }
    }

    /// True while a turn runs.
    pub fn is_busy(&self) -> bool {
        self.inner.busy.load(Ordering::Acquire)
    }

    /// Cancels the running turn; it ends with `turn/end {kind: aborted, reason}`. No effect when
    /// idle.
    pub fn cancel(&self, reason: Option<String>) {
        if self.is_busy() {
            self.inner.stop.send_replace(Some(Stop::Aborted(reason)));
        }
    }

    /// Disposes the agent: a running turn ends with `turn/end {kind: disposed}`, its scope (and
    /// every registration on it) unwinds, and later turns are refused.
    pub fn dispose(&self) {
        self.session_end();
        self.mark_disposed();
        self.inner.scope.dispose();
    }

    pub(crate) fn mark_disposed(&self) {
        self.inner.disposed.store(true, Ordering::Release);
        self.inner.stop.send_replace(Some(Stop::Disposed));
    }

    /// Runs one turn on `input` and returns why it ended. Failures are not errors here: they are
    /// logged (`turn/end {kind: error}`), signalled ([`AgentError`]) and returned as the reason.
    ///
    /// # Errors
    /// [`TurnError`] when no turn could start (busy or disposed).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping the future leaves the turn open in the log (a later open
    /// repairs it as `interrupted`). Use [`Agent::cancel`] instead.
    pub async fn run_turn(&self, input: impl Into<String>) -> Result<TurnEndReason, TurnError> {
        self.run_prompt(input.into(), None).await
    }

    /// Runs one turn like [`Agent::run_turn`] on `text`, logging `prompt` (the content blocks a
    /// client sent, of which `text` is what the model reads) with the user's message, so a
    /// replay shows what was sent.
    ///
    /// # Errors
    /// As [`Agent::run_turn`].
    ///
    /// # Cancel safety
    /// As [`Agent::run_turn`].
    pub async fn run_prompt(
        &self,
        text: String,
        prompt: Option<Vec<serde_json::Value>>,
    ) -> Result<TurnEndReason, TurnError> {
        let inner = &self.inner;
        if inner.disposed.load(Ordering::Acquire) {
            return Err(TurnError::Disposed(inner.id.clone()));
        }
        if inner.busy.swap(true, Ordering::AcqRel) {
            return Err(TurnError::Busy(inner.id.clone()));
        }
        if !inner.disposed.load(Ordering::Acquire) {
            inner.stop.send_replace(None);
        }
        self.signal_state(true);
        let mut stop_rx = inner.stop.subscribe();
        let mut turn = 0;
        let outcome = tokio::select! {
            biased;
            stop = stop_rx.wait_for(Option::is_some) => Err(stop.map(|s| s.clone()).ok().flatten().unwrap_or(Stop::Disposed)),
            result = self.turn_body(text, prompt, &mut turn) => Ok(result),
        };
        let session = &inner.session;
        let (reason, code) = match outcome {
            Ok(Ok(reason)) => (reason, codes::INTERNAL),
            Ok(Err(failure)) => (
                TurnEndReason::Error {
                    step: failure.step,
                    message: failure.message,
                },
                "TURN_FAILED",
            ),
            Err(Stop::Aborted(reason)) => (TurnEndReason::Aborted { reason }, "ABORTED"),
            Err(Stop::Disposed) => (TurnEndReason::Disposed, "DISPOSED"),
        };
        let mut errored = false;
        if let TurnEndReason::Error { step, message } = &reason {
            self.signal_error(turn, *step, message.clone());
            errored = true;
        }
        let before = session.len();
        let closed = session
            .close_open_turn(reason.clone(), code)
            .map_err(|e| e.to_string());
        if let Ok(seqs) = &closed {
            self.signal_logged(before, seqs.len());
        }
        let flushed = session.flush().await.map_err(|e| e.to_string());
        if let Some(message) = closed.err().or(flushed.err())
            && !errored
        {
            self.signal_error(turn, 0, format!("closing the turn failed: {message}"));
        }
        inner.busy.store(false, Ordering::Release);
        self.signal_state(false);
        Ok(reason)
    }

    fn signal_state(&self, busy: bool) {
        self.inner.deps.ctx.emit(AgentState {
            agent: self.inner.id.clone(),
            busy,
        });
    }

    fn signal_error(&self, turn: u64, step: u64, message: String) {
        // Debug, not warn: the failure is the turn's `turn/end` and the caller's result, and
        // the app shows it once; a warn line would print it a second time.
        tracing::debug!(agent = %self.inner.id, turn, step, %message, "turn failed");
        self.inner.deps.ctx.emit(AgentError {
            agent: self.inner.id.clone(),
            turn,
            step,
            message,
        });
    }

    /// Emits `agent/event` for `count` events from seq `from`.
    fn signal_logged(&self, from: usize, count: usize) {
        let ctx = &self.inner.deps.ctx;
        if count == 0 || ctx.listener_count::<AgentEvent>() == 0 {
            return;
        }
        let events = self
            .inner
            .session
            .with_events(|e| e[from..(from + count).min(e.len())].to_vec());
        for event in events {
            ctx.emit(AgentEvent {
                agent: self.inner.id.clone(),
                event,
            });
        }
    }

    fn log<D: EventData>(
        &self,
        data: &D,
        sources: Option<Vec<u64>>,
        step: u64,
    ) -> Result<u64, Failure> {
        let seq = self
            .inner
            .session
            .append(data, sources)
            .map_err(|e| Failure {
                step,
                message: e.to_string(),
            })?;
        self.signal_logged(seq as usize, 1);
        Ok(seq)
    }

    async fn flush(&self, step: u64) -> Result<(), Failure> {
        self.inner.session.flush().await.map_err(|e| Failure {
            step,
            message: e.to_string(),
        })
    }

    async fn turn_body(
        &self,
        input: String,
        prompt: Option<Vec<serde_json::Value>>,
        turn_out: &mut u64,
    ) -> Result<TurnEndReason, Failure> {
        let inner = &self.inner;
        let session = &inner.session;
        let turn = session
            .with_events(last_turn)
            .map_err(|e| fail(0)(e.to_string()))?
            + 1;
        *turn_out = turn;
        // Compacted before the turn opens, the user's new message follows the summary.
        self.compact_if_due(0).await?;
        self.log(&TurnStartData { turn }, None, 0)?;
        let input = match self.prompt_hooks(turn, input).await? {
            Ok(input) => input,
            Err(reason) => {
                return Ok(TurnEndReason::Aborted {
                    reason: Some(reason),
                });
            }
        };
        self.log(
            &UserMessageData {
                turn,
                content: input,
                prompt,
            },
            None,
            0,
        )?;
        let mut step = 0;
        let mut stop_hook_active = false;
        loop {
            step += 1;
            if step > inner.settings.max_steps {
                return Ok(TurnEndReason::MaxSteps {
                    steps: inner.settings.max_steps,
                });
            }
            let model = self.call_config().model;
            if let Some(message) = session
                .with_events(|e| budget::spent(&inner.settings.budget, &inner.deps.llm, &model, e))
            {
                return Ok(TurnEndReason::Budget { message });
            }
            if step > 1 {
                self.compact_if_due(step).await?;
            }
            if !self.run_step(turn, step).await? {
                match self.stop_hooks(turn, step, stop_hook_active).await? {
                    Some(reason) if step < inner.settings.max_steps => {
                        stop_hook_active = true;
                        let content = format!("Stop hook feedback: {reason}");
                        let data = UserMessageData {
                            turn,
                            content,
                            prompt: None,
                        };
                        self.log(&data, None, step)?;
                    }
                    _ => return Ok(TurnEndReason::Completed),
                }
            }
        }
    }

    /// One step; returns whether the model called tools (the turn continues).
    ///
    /// Three phases: [`Agent::prepare_request`] (assemble, log, freeze),
    /// [`Agent::collect_response`] (the model call, logged chunk by chunk) and
    /// [`Agent::dispatch_tools`] (calls logged, run through the registry, results in call order).
    async fn run_step(&self, turn: u64, step: u64) -> Result<bool, Failure> {
        let (boundary, request) = self.prepare_request(turn, step).await?;
        let calls = self.collect_response(turn, step, boundary, request).await?;
        let more = !calls.is_empty();
        if more {
            self.dispatch_tools(turn, step, calls).await?;
        }
        self.log(&StepEndData { turn, step }, None, step)?;
        Ok(more)
    }

    /// Assembles the prompt (before `step/start`: an assembly failure opens no step), logs
    /// `step/start` and, when it is new or changed, the `request/header`, and freezes the request.
    /// Returns the boundary (the seq of `step/start`) with the request, once the log that explains
    /// it is durable.
    async fn prepare_request(&self, turn: u64, step: u64) -> Result<(u64, FrozenRequest), Failure> {
        let inner = &self.inner;
        let session = &inner.session;
        let err = fail(step);
        let assembly = inner
            .deps
            .prompt
            .assemble(AssembleContext::scoped(inner.key))
            .await
            .map_err(|e| err(e.to_string()))?;
        let system = assembly.render().map_err(|e| err(e.to_string()))?;
        let (boundary, messages) = session.boundary();
        self.log(&StepStartData { turn, step }, None, step)?;

        // Past a `deferred-tools` threshold: the prefix, then what the log says was loaded.
        let (tools, loaded) = if assembly.deferred.is_empty() {
            (assembly.tools, Default::default())
        } else {
            let loads = session.with_events(loaded::loads);
            loaded::with_loaded(assembly.tools, &assembly.deferred, &loads)
        };
        let header = RequestHeader::new(self.call_config(), system, tools);
        let due = session.with_events(|events| header_reason_due(session.header(), events));
        // The tools a `tool-load` appended (its `changed`).
        let mut appended = None;
        let reason = {
            let baseline = cordis_runtime::lock(&inner.baseline);
            match &*baseline {
                _ if due.is_some() => due,
                None => Some(
                    if session
                        .request_header()
                        .map_err(|e| err(e.to_string()))?
                        .is_some()
                    {
                        HeaderReason::Resume
                    } else {
                        HeaderReason::Initial
                    },
                ),
                Some(last) if !same_header(last, &header) => {
                    appended = loaded::tool_load(last, &header, &loaded);
                    Some(match appended {
                        Some(_) => HeaderReason::ToolLoad,
                        None => HeaderReason::Change,
                    })
                }
                Some(_) => None,
            }
        };
        // Each section's rendered text, fingerprinted, so a `change` names what changed.
        let sources: BTreeMap<String, u64> = assembly
            .sections
            .iter()
            .map(|s| {
                let text = cordis_system_prompt::interpolate(&s.text, &s.name, &assembly.variables)
                    .unwrap_or_else(|_| s.text.clone());
                let mut hasher = std::hash::DefaultHasher::new();
                std::hash::Hash::hash(&text, &mut hasher);
                (s.name.clone(), std::hash::Hasher::finish(&hasher))
            })
            .collect();
        let last = std::mem::replace(&mut *cordis_runtime::lock(&inner.prompt_sources), sources);
        if let Some(reason) = reason {
            let mut changed = appended.unwrap_or_default();
            if reason == HeaderReason::Change {
                let now = cordis_runtime::lock(&inner.prompt_sources);
                let names: std::collections::BTreeSet<&String> =
                    last.keys().chain(now.keys()).collect();
                changed.extend(
                    names
                        .into_iter()
                        .filter(|n| last.get(*n) != now.get(*n))
                        .cloned(),
                );
                if let Some(before) = &*cordis_runtime::lock(&inner.baseline) {
                    if before.tools.as_slice() != header.tools.as_deref().unwrap_or_default() {
                        changed.push("tools".to_owned());
                    }
                    if before.config != header.config {
                        changed.push("config".to_owned());
                    }
                }
            }
            let data = RequestHeaderData {
                header: header.clone(),
                reason,
                changed,
            };
            self.log(&data, None, step)?;
        }
        let request = FrozenRequest::new(LlmRequest {
            config: header.config,
            messages,
            system: header.system,
            tools: header.tools.unwrap_or_default(),
            session_id: session.id().to_owned(),
        });
        *cordis_runtime::lock(&inner.baseline) = Some(request.clone());
        // The log that explains the request is durable before the model sees the request.
        self.flush(step).await?;
        Ok((boundary, request))
    }

    /// Calls the model (the invariant checks the final request against the log from
    /// `boundary`), logs every chunk as it arrives and then the assembled `assistant/message`.
    /// Returns the tool calls the model made, in order.
    async fn collect_response(
        &self,
        turn: u64,
        step: u64,
        boundary: u64,
        request: FrozenRequest,
    ) -> Result<Vec<AssistantToolCall>, Failure> {
        let inner = &self.inner;
        let session = &inner.session;
        let err = fail(step);
        let check = move |req: &LlmRequest| -> Result<(), String> {
            session.with_events(|events| check_request(events, boundary, req))
        };
        let check: &(dyn Fn(&LlmRequest) -> Result<(), String> + Send + Sync) = &check;
        let (_sent, mut stream) = inner
            .deps
            .llm
            .stream(request, inner.settings.invariant.then_some(check))
            .await
            .map_err(|e| err(e.to_string()))?;

        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls: Vec<AssistantToolCall> = Vec::new();
        let mut usage: Option<Usage> = None;
        let mut finish = None;
        let mut chunk_seqs = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| err(e.to_string()))?;
            let data = AssistantChunkData { turn, step, chunk };
            chunk_seqs.push(self.log(&data, None, step)?);
            match data.chunk {
                Chunk::Text { delta } => text.push_str(&delta),
                // Kept on the assistant's message, which later requests carry back.
                Chunk::Reasoning { delta } => reasoning.push_str(&delta),
                Chunk::ToolCall { call } => calls.push(call),
                Chunk::Usage { usage: u } => usage = Some(u),
                Chunk::Finish { reason } => finish = Some(reason),
            }
        }
        drop(stream);
        match finish {
            Some(FinishReason::Error { message }) => return Err(err(message)),
            Some(FinishReason::Aborted) => return Err(err("the model call was aborted".into())),
            _ => {}
        }
        if !text.is_empty() || !calls.is_empty() || usage.is_some() || !reasoning.is_empty() {
            let data = AssistantMessageData {
                turn,
                step,
                content: text,
                tool_calls: calls.clone(),
                usage,
                reasoning: (!reasoning.is_empty()).then_some(reasoning),
            };
            self.log(&data, Some(chunk_seqs), step)?;
        }
        Ok(calls)
    }

    /// Logs the `tool/call`s (durable before any tool runs), dispatches them through the
    /// registry for the agent's scope, in parallel up to `maxParallelTools`, and logs each
    /// `tool/result` in call order.
    ///
    /// # Determinism
    /// Results are committed in call order whatever order the tools finish in.
    async fn dispatch_tools(
        &self,
        turn: u64,
        step: u64,
        calls: Vec<AssistantToolCall>,
    ) -> Result<(), Failure> {
        let inner = &self.inner;
        let call_ids: Vec<(String, String)> = calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone()))
            .collect();
        let mut call_seqs = Vec::with_capacity(calls.len());
        for call in &calls {
            let data = ToolCallData {
                turn,
                step,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            };
            call_seqs.push(self.log(&data, None, step)?);
        }
        self.flush(step).await?;
        let key = inner.key;
        let parents = call_ids
            .iter()
            .zip(&call_seqs)
            .map(|((id, _), seq)| (id.clone(), *seq))
            .collect();
        let sub_calls = self.log_sub_calls(turn, step, parents);
        let tools = inner.deps.tools.clone();
        let timeout = inner.settings.tool_timeout;
        // Read-only calls in a row may overlap (up to maxParallelTools); a mutating call runs
        // alone, after every earlier call and before any later one: the rule run_code applies
        // to its sub-calls too. Unknown tools count as mutating (they fail at once anyway).
        let mut batches: Vec<Vec<AssistantToolCall>> = Vec::new();
        let mut last_read_only = false;
        for call in calls {
            let read_only = tools.concurrency(&call.name, Some(key)) == Some(Concurrency::ReadOnly);
            match batches.last_mut() {
                Some(batch) if read_only && last_read_only => batch.push(call),
                _ => batches.push(vec![call]),
            }
            last_read_only = read_only;
        }
        let run_call = move |call: AssistantToolCall| {
            let tools = tools.clone();
            async move {
                let arguments = serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
                let call = ToolCall {
                    call_id: call.id,
                    name: call.name,
                    arguments,
                };
                let run = tools.execute(call.clone(), Some(key));
                match timeout {
                    None => run.await,
                    Some(limit) => tokio::time::timeout(limit, run).await.unwrap_or_else(|_| {
                        ToolResult::error(
                            &call,
                            codes::TOOL_TIMEOUT,
                            format!(
                                "tool \"{}\" did not finish within {} ms (loop timeout)",
                                call.name,
                                limit.as_millis()
                            ),
                        )
                    }),
                }
            }
        };
        let parallel = inner.settings.max_parallel_tools;
        // `flatten` starts a batch only when the one before it has ended.
        let mut results = futures_util::stream::iter(batches.into_iter().map(|batch| {
            futures_util::stream::iter(batch.into_iter().map(run_call.clone())).buffered(parallel)
        }))
        .flatten();
        let mut index = 0;
        while let Some(result) = results.next().await {
            // The loop's call id and name, whatever a pre-execute listener rewrote.
            let (call_id, name) = call_ids[index].clone();
            // A run_code call's sub-calls were logged as they passed; a failure to log one
            // ends the step here, before the parent's result.
            sub_calls.check()?;
            let source = call_seqs[index];
            let moment = Moment::ToolResult {
                call_id: call_id.clone(),
            };
            let runs = self.hook_point(turn, moment).await.map(|p| p.runs);
            let (pre, post): (Vec<_>, Vec<_>) = runs
                .unwrap_or_default()
                .into_iter()
                .partition(|r| r.event == "PreToolUse");
            self.log_hook_runs(pre, step, Some(source))?;
            self.log_approval(&call_id, &name, turn, step, source)?;
            self.log_hook_runs(post, step, Some(source))?;
            let data = ToolResultData {
                turn,
                step,
                call_id,
                name,
                content: result.content,
                is_error: result.is_error,
                code: result.code,
            };
            self.log(&data, Some(vec![call_seqs[index]]), step)?;
            index += 1;
        }
        Ok(())
    }
}

/// True when `header` is what `last` (the previous request) was built from: a pure reordering
/// of tools is a difference.
fn same_header(last: &LlmRequest, header: &RequestHeader) -> bool {
    last.config == header.config
        && last.system == header.system
        && match &header.tools {
            Some(tools) => &last.tools == tools,
            None => last.tools.is_empty(),
        }
}
