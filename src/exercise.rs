//! Exercising a composition: boot it under one seed, hold a scripted conversation with its
//! agent, dispose it, and return everything the run showed in a form two seeds can compare —
//! the boot outcome (statuses, digest), the session log with times scrubbed, and what disposal
//! left live.
//!
//! # The script
//! A YAML (or JSON) file:
//! ```yaml
//! # The user's messages, one turn each.
//! turns: ["list my todos", "now in parallel"]
//! # The scripted model's responses, in order, in the llm entry's `responses` format
//! # (text, toolCalls, usage, error). Absent: the llm entry's own scripted responses.
//! responses:
//!   - toolCalls:
//!       - {name: todo_write, arguments: {todos: []}}
//!       - {name: todo_write, arguments: {todos: []}}
//!   - text: done
//! ```
//! The composition's `llm` entry is switched to the scripted adapter with these responses and
//! its `sessions` entry to memory, so an exercise touches no network and no files.
//!
//! A script exported from a session (`cordis sessions export --exercise`) also holds `http`:
//! the requests its WebAssembly tools made through `cordis:plugin/http`, by call id, each with
//! its kept answer (headers, body in base64). Every `*.wasm` entry of an exercise is switched
//! to replay them ([`cordis_wasm::http`]): a guest's requests are answered from the script and
//! never go out; one that does not match the recording fails its call, and the exercise with
//! [`ExerciseError::Replay`] naming the request and what differed.
//!
//! # Scrubbing (what two seeds may differ in)
//! Every key named in [`SCRUBBED_KEYS`] is removed wherever it occurs in an event (append
//! times and durations). Ids need no scrubbing: the session id is fixed (`exercise`), call ids
//! come from the script, and sequence numbers are part of what must agree.
//!
//! # Determinism
//! Tool results of calls made in one step are committed in call order, whatever order they
//! complete in, so the log does not depend on completion order; a seeded exercise proves it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cordis_agent_loop::{AgentLoop, AgentOptions};
use cordis_host::loader::{BootReport, boot};
use cordis_host::plan::{LoadPlan, Step};
use cordis_llm::{AdapterKind, LlmConfig, ScriptedResponse};
use cordis_runtime::{Context, LiveCounts, Prepared, Schedule};
use cordis_session::SessionConfig;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Keys removed from every session event before comparing seeds: they carry wall-clock time.
pub const SCRUBBED_KEYS: &[&str] = &[
    "time",
    "ts",
    "timestamp",
    "elapsedMs",
    "durationMs",
    "latencyMs",
];

/// The session (and agent) id every exercise uses.
pub const EXERCISE_ID: &str = "exercise";

/// A scripted conversation.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExerciseScript {
    /// The user's messages, one turn each.
    pub turns: Vec<String>,
    /// The model's responses; `None` keeps the llm entry's own.
    #[serde(default)]
    pub responses: Option<Vec<ScriptedResponse>>,
    /// The requests WebAssembly tools made, by call id, in order, with their kept answers.
    #[serde(default)]
    pub http: BTreeMap<String, Vec<ScriptedRequest>>,
}

/// A recorded request of a script: its record as the session log holds it, and its answer as
/// kept next to the log (absent for a refused or failed request, or one not kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptedRequest {
    /// The record.
    #[serde(flatten)]
    pub record: cordis_wasm::HttpRecord,
    /// The answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<ScriptedAnswer>,
}

/// A kept answer in a script (its status is the record's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedAnswer {
    /// The headers the guest saw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// A redirect's location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The body, in base64.
    #[serde(default)]
    pub body: String,
}

/// Why an exercise could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExerciseError {
    /// The script file could not be read.
    #[error("cannot read the exercise script {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The script is not valid.
    #[error(
        "{path}: not an exercise script: {message} (expected `turns: [...]` and optional `responses: [...]`)"
    )]
    Parse {
        /// The file.
        path: String,
        /// The parser's message, with its position.
        message: String,
    },
    /// The composition has no entry the exercise needs.
    #[error(
        "the configuration has no `{0}` entry; an exercise talks to the agent, so it needs `llm`, `sessions` and `agent-loop` entries"
    )]
    Missing(&'static str),
    /// The agent could not be created after boot (its services are not all active).
    #[error("no agent to exercise: {0}")]
    NoAgent(String),
    /// A WebAssembly tool's request did not match the script's recording (or the recording
    /// is malformed): which request, and what differed.
    #[error("{0}")]
    Replay(String),
}

impl ExerciseScript {
    /// Reads a script file (YAML or JSON).
    ///
    /// # Errors
    /// When the file cannot be read or is not a script.
    pub fn load(path: &Path) -> Result<ExerciseScript, ExerciseError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ExerciseError::Read {
            path: shown.clone(),
            source,
        })?;
        ExerciseScript::parse(&text, &shown)
    }

    /// Parses a script's text; `origin` names it in errors.
    ///
    /// # Errors
    /// When the text is not a script.
    pub fn parse(text: &str, origin: &str) -> Result<ExerciseScript, ExerciseError> {
        serde_yaml_ng::from_str(text).map_err(|e| ExerciseError::Parse {
            path: origin.to_owned(),
            message: e.to_string(),
        })
    }
}

impl ExerciseScript {
    /// The script's recorded requests as a WebAssembly replay.
    ///
    /// # Errors
    /// A body that is not base64, or an answer that is not its record's (status, length,
    /// SHA-256): the call and request named.
    pub fn replay(&self) -> Result<cordis_wasm::http::Replay, ExerciseError> {
        let mut calls = BTreeMap::new();
        for (call, requests) in &self.http {
            let mut recorded = Vec::with_capacity(requests.len());
            for (i, request) in requests.iter().enumerate() {
                let named = |why: String| {
                    ExerciseError::Replay(format!(
                        "the script's request {} of call {call} ({} {}): {why}",
                        i + 1,
                        request.record.method,
                        request.record.url
                    ))
                };
                let answer = match &request.answer {
                    None => None,
                    Some(a) => {
                        let body = cordis_wasm::http::body_from_base64(&a.body).map_err(named)?;
                        let answer = cordis_wasm::http::Answer {
                            status: request.record.status.unwrap_or_default(),
                            headers: a.headers.clone(),
                            location: a.location.clone(),
                            body,
                        };
                        cordis_wasm::http::answer_matches(&request.record, &answer)
                            .map_err(named)?;
                        Some(answer)
                    }
                };
                recorded.push(cordis_wasm::http::Recording {
                    record: request.record.clone(),
                    answer,
                });
            }
            calls.insert(call.clone(), recorded);
        }
        Ok(cordis_wasm::http::Replay { calls })
    }
}

/// `plan` set up for an exercise: its `llm` entry scripted with `script`'s responses (if any)
/// and recording nothing, its `sessions` entry in memory, its WebAssembly entries replaying
/// `script`'s recorded requests (never the network).
///
/// # Errors
/// When the plan has no `llm`, `sessions` or `agent-loop` entry, or the script's recorded
/// requests are malformed.
pub fn exercise_plan(plan: &LoadPlan, script: &ExerciseScript) -> Result<LoadPlan, ExerciseError> {
    let mut out = plan.clone();
    let (mut llm, mut sessions, mut agent_loop) = (false, false, false);
    let replay = Arc::new(script.replay()?);
    for entry in &mut out.entries {
        let Step::Plugin { prepared, .. } = &mut entry.step else {
            continue;
        };
        if let Some(config) = prepared.config.downcast_ref::<cordis_wasm::WasmConfig>() {
            let config = cordis_wasm::WasmConfig {
                replay: Some(replay.clone()),
                ..config.clone()
            };
            *prepared = Prepared::erased(Arc::clone(&prepared.plugin), Arc::new(config));
            continue;
        }
        match prepared.plugin.name() {
            "llm" => {
                if let Some(config) = prepared.config.downcast_ref::<LlmConfig>() {
                    let mut config = config.clone();
                    config.adapter = AdapterKind::Scripted;
                    config.record_requests = 0;
                    if let Some(responses) = &script.responses {
                        config.responses = Some(responses.clone());
                        config.script = None;
                        config.repeat = false;
                    }
                    *prepared = Prepared::erased(Arc::clone(&prepared.plugin), Arc::new(config));
                    llm = true;
                }
            }
            "sessions" => {
                if let Some(config) = prepared.config.downcast_ref::<SessionConfig>() {
                    let config = SessionConfig {
                        durability: config.durability,
                        ..SessionConfig::in_memory()
                    };
                    *prepared = Prepared::erased(Arc::clone(&prepared.plugin), Arc::new(config));
                    sessions = true;
                }
            }
            "agent-loop" => agent_loop = true,
            _ => {}
        }
    }
    if !llm {
        return Err(ExerciseError::Missing("llm"));
    }
    if !sessions {
        return Err(ExerciseError::Missing("sessions"));
    }
    if !agent_loop {
        return Err(ExerciseError::Missing("agent-loop"));
    }
    Ok(out)
}

/// What one exercise showed.
#[derive(Debug, Clone)]
pub struct ExerciseOutcome {
    /// The boot report (statuses, assembly, digest).
    pub report: BootReport,
    /// The agent's session log, each event scrubbed of [`SCRUBBED_KEYS`].
    pub log: Vec<Value>,
    /// Each turn's end: `completed`, or the reason it did not.
    pub turns: Vec<String>,
    /// What disposal left live (should be nothing).
    pub live_after: LiveCounts,
    /// The order in which `debug/echo` tool calls completed (`who: tool`), to show that the
    /// log agrees even where completion order does not.
    pub completions: Vec<String>,
    /// The cache-prefix contract of the session ([`cordis_session::contract`]): how many
    /// requests were checked, or the checker's message for the first request that breaks it.
    pub contract: Result<usize, String>,
}

impl ExerciseOutcome {
    /// Everything two seeds must agree on, as one JSON value: the boot outcome, the turn ends
    /// and the scrubbed log.
    pub fn comparable(&self) -> Value {
        serde_json::json!({
            "boot": self.report.outcome(),
            "turns": self.turns,
            "log": self.log,
        })
    }
}

/// Removes [`SCRUBBED_KEYS`] from `value`, at any depth.
pub fn scrub(value: &mut Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                for key in SCRUBBED_KEYS {
                    map.remove(*key);
                }
                stack.extend(map.values_mut());
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

/// Boots `plan` (prepared by [`exercise_plan`]) under `schedule`, runs `script`'s turns,
/// disposes, and returns what it saw.
///
/// # Errors
/// When no agent can be created (the boot left the agent loop pending or failed).
///
/// # Cancel safety
/// As [`exercise_with_preset`].
pub async fn exercise(
    plan: &LoadPlan,
    script: &ExerciseScript,
    schedule: Schedule,
) -> Result<ExerciseOutcome, ExerciseError> {
    exercise_with_preset(plan, script, schedule, None).await
}

/// [`exercise`] with the agent joined to agent preset `preset` (`None`: the roster's default)
/// when the composition has an `agent-presets` roster.
///
/// # Errors
/// As [`exercise`]; also when the preset does not mount.
///
/// # Cancel safety
/// Not cancel safe: dropped before it disposes (during the boot, the agent's creation or a
/// turn), the runtime it made is never disposed and no handle to it is returned: its entries
/// stay, their tasks run on in the tokio runtime and their effects are never undone; a turn
/// dropped part way stays open in the in-memory log, which is lost with it. Calling again boots
/// a fresh runtime. Its callers run it to completion (`block_on`).
pub async fn exercise_with_preset(
    plan: &LoadPlan,
    script: &ExerciseScript,
    schedule: Schedule,
    preset: Option<&str>,
) -> Result<ExerciseOutcome, ExerciseError> {
    let root = Context::root_with(schedule);
    let report = boot(&root, plan).await;
    let Some(agents) = root.get::<AgentLoop>() else {
        let bad: Vec<String> = report
            .entries
            .iter()
            .filter(|e| !e.status.is_as_configured())
            .map(|e| format!("{} is {}", e.id, e.status))
            .collect();
        root.dispose();
        return Err(ExerciseError::NoAgent(if bad.is_empty() {
            "the agent-loop service is not provided".to_owned()
        } else {
            bad.join(", ")
        }));
    };
    let model = agents.llm().default_model().unwrap_or("default").to_owned();
    let mut options = AgentOptions::new(EXERCISE_ID, model);
    options.session_id = Some(EXERCISE_ID.to_owned());
    // With a roster, the agent joins a preset (an unjoined agent could not assemble); a preset
    // asked for without one is refused, not ignored.
    let created = crate::session::open::join_agent(&root, options, preset)
        .await
        .map_err(|e| e.to_string());
    let agent = match created {
        Ok(agent) => agent,
        Err(e) => {
            root.dispose();
            return Err(ExerciseError::NoAgent(e));
        }
    };
    let mut turns = Vec::with_capacity(script.turns.len());
    for message in &script.turns {
        let end = match agent.run_turn(message.clone()).await {
            Ok(reason) => serde_json::to_string(&reason).unwrap_or_default(),
            Err(e) => e.to_string(),
        };
        turns.push(end);
    }
    let events = agent.session().events();
    let contract = cordis_session::contract::check_contract(agent.session().header(), &events)
        .map(|report| report.requests)
        .map_err(|e| e.to_string());
    let mut log: Vec<Value> = events
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
        .collect();
    for event in &mut log {
        scrub(event);
    }
    let completions = root.trace_details(cordis_host::echo::TRACE_TOOL_COMPLETE);
    let mismatches = root.trace_details(cordis_wasm::http::TRACE_REPLAY_MISMATCH);
    root.dispose();
    root.tasks_finished().await;
    if let Some(first) = mismatches.into_iter().next() {
        return Err(ExerciseError::Replay(first));
    }
    let live_after = root.live();
    Ok(ExerciseOutcome {
        report,
        log,
        turns,
        live_after,
        completions,
        contract,
    })
}

/// One model response being gathered from a logged step, in the scripted format.
#[derive(Default)]
struct Recorded {
    reasoning: Vec<String>,
    text: Vec<String>,
    calls: Vec<Value>,
    usage: Option<Value>,
    error: Option<String>,
    finish: Option<&'static str>,
    /// Anything was streamed (a step that failed before its first chunk has nothing).
    streamed: bool,
}

impl Recorded {
    fn take(&mut self, chunk: cordis_llm::Chunk) {
        use cordis_llm::{Chunk, FinishReason};
        self.streamed = true;
        match chunk {
            Chunk::Reasoning { delta } => self.reasoning.push(delta),
            Chunk::Text { delta } => self.text.push(delta),
            Chunk::ToolCall { call } => self.calls.push(serde_json::json!({
                "id": call.id,
                "name": call.name,
                // A string is sent verbatim: the exact bytes the model produced.
                "arguments": call.arguments,
            })),
            Chunk::Usage { usage } => self.usage = serde_json::to_value(usage).ok(),
            Chunk::Finish { reason } => match reason {
                FinishReason::Error { message } => self.error = Some(message),
                FinishReason::Length => self.finish = Some("length"),
                FinishReason::Aborted => self.finish = Some("aborted"),
                // The scripted default: tool-calls with calls, else stop.
                FinishReason::Stop if !self.calls.is_empty() => self.finish = Some("stop"),
                FinishReason::ToolCalls if self.calls.is_empty() => {
                    self.finish = Some("tool-calls");
                }
                FinishReason::Stop | FinishReason::ToolCalls => {}
            },
        }
    }

    fn response(self) -> Value {
        let mut out = serde_json::Map::new();
        if !self.reasoning.is_empty() {
            out.insert("reasoning".into(), self.reasoning.into());
        }
        if !self.text.is_empty() {
            out.insert("text".into(), self.text.into());
        }
        if !self.calls.is_empty() {
            out.insert("toolCalls".into(), self.calls.into());
        }
        if let Some(usage) = self.usage {
            out.insert("usage".into(), usage);
        }
        if let Some(error) = self.error {
            out.insert("error".into(), error.into());
        }
        if let Some(finish) = self.finish {
            out.insert("finish".into(), finish.into());
        }
        Value::Object(out)
    }
}

/// The exercise script of a logged session (`cordis sessions export ID --exercise OUT`): its
/// user turns, and the model's responses in the scripted format, one per model request in log
/// order — each step's streamed chunks as they were logged (reasoning and text deltas, tool
/// calls with their call ids and their arguments verbatim, usage, how it finished), and each
/// `compaction`'s summary with its usage (the summary request is answered like any other).
/// Replayed by `cordis stress COMPOSITION --exercise FILE`, the session's messages come back:
/// the model's from the script, the tools' from running them again.
///
/// A step that failed before the model streamed anything becomes an `error` response with
/// the turn's error message; a prompt's images are not kept (the script holds text turns).
///
/// # Errors
/// A malformed payload of a kind the export reads.
pub fn export_script(
    events: &[cordis_session::SessionEvent],
) -> Result<Value, cordis_session::ProjectionError> {
    use cordis_session::{EventView, kinds};
    /// The kinds the export reads (a malformed event of another kind is not its concern).
    const READ: &[&str] = &[
        kinds::USER_MESSAGE,
        kinds::STEP_START,
        kinds::ASSISTANT_CHUNK,
        kinds::STEP_END,
        kinds::TURN_END,
        kinds::COMPACTION,
    ];
    let mut turns = Vec::new();
    let mut responses = Vec::new();
    let mut step: Option<Recorded> = None;
    for event in events {
        match event.view() {
            EventView::UserMessage(d) => turns.push(Value::String(d.content)),
            EventView::StepStart(_) => {
                if let Some(r) = step.replace(Recorded::default()).filter(|r| r.streamed) {
                    responses.push(r.response());
                }
            }
            EventView::AssistantChunk(d) => {
                if let Some(r) = &mut step {
                    r.take(d.chunk);
                }
            }
            EventView::StepEnd(_) => {
                if let Some(r) = step.take().filter(|r| r.streamed) {
                    responses.push(r.response());
                }
            }
            EventView::TurnEnd(d) => {
                if let Some(r) = step.take() {
                    match (r.streamed, d.reason) {
                        (true, _) => responses.push(r.response()),
                        (false, cordis_session::TurnEndReason::Error { message, .. }) => {
                            responses.push(serde_json::json!({"error": message}));
                        }
                        (false, _) => {}
                    }
                }
            }
            EventView::Compaction(d) => {
                let mut r = serde_json::json!({"text": [d.summary]});
                if let Some(usage) = d.usage.and_then(|u| serde_json::to_value(u).ok()) {
                    r["usage"] = usage;
                }
                responses.push(r);
            }
            EventView::Malformed(e) if READ.contains(&e.kind.as_str()) => return Err(e),
            _ => {}
        }
    }
    if let Some(r) = step.take().filter(|r| r.streamed) {
        responses.push(r.response());
    }
    Ok(serde_json::json!({"turns": turns, "responses": responses}))
}

/// [`export_script`], with the requests WebAssembly tools made (`http`: by call id, each
/// record as the log holds it, with its answer read from `kept`, the session store's
/// [`cordis_wasm::http::KEPT_DIR`] directory, when it was kept there).
///
/// # Errors
/// A malformed payload of a kind the export reads, or a kept answer that cannot be read or is
/// not its record's.
pub fn export_script_kept(
    events: &[cordis_session::SessionEvent],
    kept: Option<&Path>,
) -> Result<Value, String> {
    let mut script = export_script(events).map_err(|e| e.to_string())?;
    let mut http = serde_json::Map::new();
    for event in events {
        let Ok(result) = event.data_as::<cordis_session::ToolResultData>() else {
            continue;
        };
        let records = recorded_requests(&result.content);
        if records.is_empty() {
            continue;
        }
        let mut requests = Vec::with_capacity(records.len());
        for record in records {
            let answer = match (kept, record.status) {
                (Some(dir), Some(_)) => cordis_wasm::http::read_kept(dir, &record)
                    .map_err(|why| format!("call {}: {why}", result.call_id))?
                    .map(|a| ScriptedAnswer {
                        headers: a.headers,
                        location: a.location,
                        body: cordis_wasm::http::body_to_base64(&a.body),
                    }),
                _ => None,
            };
            let request = ScriptedRequest { record, answer };
            requests.push(serde_json::to_value(request).map_err(|e| e.to_string())?);
        }
        http.insert(result.call_id, Value::Array(requests));
    }
    if !http.is_empty() {
        script["http"] = Value::Object(http);
    }
    Ok(script)
}

/// The requests a WebAssembly tool's result records: `{"result": …, "http": [...]}`, or a
/// failure's message with an `http: [...]` line after it.
fn recorded_requests(content: &Value) -> Vec<cordis_wasm::HttpRecord> {
    let list = match content {
        Value::Object(map) if map.len() == 2 && map.contains_key("result") => {
            map.get("http").cloned()
        }
        Value::String(text) => text
            .rsplit_once("\nhttp: ")
            .and_then(|(_, line)| serde_json::from_str::<Value>(line).ok()),
        _ => None,
    };
    list.and_then(|l| serde_json::from_value(l).ok())
        .unwrap_or_default()
}

/// The first event at which two logs differ: its index and each side (`None` past the end).
pub fn first_difference(a: &[Value], b: &[Value]) -> Option<(usize, Option<Value>, Option<Value>)> {
    let n = a.len().max(b.len());
    (0..n).find_map(|i| {
        let (x, y) = (a.get(i), b.get(i));
        (x != y).then(|| (i, x.cloned(), y.cloned()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubbing_removes_times_at_any_depth_and_nothing_else() {
        let mut v = serde_json::json!({"type": "x", "seq": 3, "time": 17, "data": {"durationMs": 4, "items": [{"ts": 1, "keep": 2}]}});
        scrub(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"type": "x", "seq": 3, "data": {"items": [{"keep": 2}]}})
        );
    }

    #[test]
    fn a_script_needs_turns_and_names_its_file_when_wrong() {
        let ok =
            ExerciseScript::parse("turns: [hi]\nresponses: [{text: hello}]\n", "s.yml").unwrap();
        assert_eq!(ok.turns, ["hi"]);
        assert_eq!(ok.responses.as_ref().map(Vec::len), Some(1));
        let err = ExerciseScript::parse("turn: [hi]\n", "s.yml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.yml: not an exercise script"), "{err}");
    }

    #[test]
    fn an_exported_log_is_one_scripted_response_per_model_request_in_log_order() {
        use cordis_llm::{AssistantToolCall, Chunk, FinishReason, Usage};
        use cordis_session::{
            AssistantChunkData, CompactionData, CompactionTrigger, Session, StepEndData,
            StepStartData, TurnEndData, TurnEndReason, UserMessageData,
        };
        let s = Session::in_memory("s");
        let chunk = |chunk: Chunk| AssistantChunkData {
            turn: 1,
            step: 1,
            chunk,
        };
        s.append(
            &UserMessageData {
                turn: 1,
                content: "hi".into(),
                prompt: None,
            },
            None,
        )
        .unwrap();
        s.append(&StepStartData { turn: 1, step: 1 }, None).unwrap();
        for c in [
            Chunk::Reasoning { delta: "hm".into() },
            Chunk::Text { delta: "a".into() },
            Chunk::Text { delta: "b".into() },
            Chunk::ToolCall {
                call: AssistantToolCall {
                    id: "x1".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\": \"a\"}".into(),
                },
            },
            Chunk::Usage {
                usage: Usage {
                    input_tokens: 5,
                    output_tokens: 2,
                    cached_input_tokens: None,
                },
            },
            Chunk::Finish {
                reason: FinishReason::ToolCalls,
            },
        ] {
            s.append(&chunk(c), None).unwrap();
        }
        s.append(&StepEndData { turn: 1, step: 1 }, None).unwrap();
        s.append(
            &CompactionData {
                summary: "said hi".into(),
                trigger: CompactionTrigger::Auto,
                focus: None,
                through_seq: 9,
                messages: 3,
                dropped_tool_results: 0,
                input_tokens: None,
                usage: None,
            },
            None,
        )
        .unwrap();
        s.append(&StepStartData { turn: 1, step: 2 }, None).unwrap();
        s.append(
            &TurnEndData {
                turn: 1,
                reason: TurnEndReason::Error {
                    step: 2,
                    message: "boom".into(),
                },
            },
            None,
        )
        .unwrap();
        let script = export_script(&s.events()).unwrap();
        assert_eq!(
            script,
            serde_json::json!({
                "turns": ["hi"],
                "responses": [
                    {"reasoning": ["hm"], "text": ["a", "b"],
                     "toolCalls": [{"id": "x1", "name": "read_file", "arguments": "{\"path\": \"a\"}"}],
                     "usage": {"inputTokens": 5, "outputTokens": 2}},
                    {"text": ["said hi"]},
                    {"error": "boom"},
                ],
            })
        );
        // The script reads back as an exercise script.
        let parsed = ExerciseScript::parse(&script.to_string(), "export").unwrap();
        assert_eq!(parsed.responses.map(|r| r.len()), Some(3));
    }

    #[test]
    fn a_wasm_tools_requests_are_read_from_its_answer_or_its_failure_and_nothing_else() {
        let record = serde_json::json!({"method": "GET", "url": "http://h/a", "status": 200, "bytes": 2, "sha256": "ab"});
        let answered = serde_json::json!({"result": {"a": 1}, "http": [record]});
        let read = recorded_requests(&answered);
        assert_eq!(read.len(), 1);
        assert_eq!(serde_json::to_value(&read[0]).unwrap(), record);
        let failed = Value::String(format!("web: no\nhttp: [{record}]"));
        assert_eq!(recorded_requests(&failed), read);
        // Another tool's answer that happens to hold `http` is not a wasm tool's record list.
        let other = serde_json::json!({"http": [record], "more": 1, "result": 2});
        assert!(recorded_requests(&other).is_empty());
        assert!(recorded_requests(&Value::String("plain failure".into())).is_empty());
    }

    #[test]
    fn first_difference_finds_the_index_and_a_shorter_log() {
        let a = vec![serde_json::json!(1), serde_json::json!(2)];
        let b = vec![serde_json::json!(1)];
        assert_eq!(first_difference(&a, &a), None);
        assert_eq!(
            first_difference(&a, &b),
            Some((1, Some(serde_json::json!(2)), None))
        );
    }
}
