//! The `tool-subagent` plugin: a tool that runs a child agent and returns its final message.
//!
//! A call `{task, tools?}` from an agent:
//! 1. creates a child agent whose registry scope is parented to the caller's, so it sees the
//!    caller's tools (its own scoped tools and everything global) — narrowed to `tools` when the
//!    call lists some;
//! 2. logs it to its own session `<parent session>.<toolName>-<call id>`, whose header names the
//!    caller's session as `parentSession`;
//! 3. runs one turn on `task`, disposes the child (its scope and registrations unwind; the log
//!    stays) and returns the child's final assistant message. A turn that does not complete is
//!    a tool error naming how it ended.
//!
//! The tool name is configurable (`toolName`), so the plugin can be loaded more than once, e.g.
//! as `subagent` and `subagent_fork` with different descriptions.
//!
//! # Fan-out
//! A model can ask for any number of subagents, and each of them for as many more: a script
//! answering every request with 50 calls once made thousands of sessions in two minutes. So:
//! - `maxDepth` bounds nesting (a subagent calling the tool again);
//! - `maxPerResponse` bounds the calls one model response makes (`run_code` sub-calls count
//!   with the response of their `run_code` call), `maxPerTurn` the calls one agent makes in one
//!   turn (a subagent runs one turn), so one user turn starts at most
//!   `maxPerTurn + maxPerTurn²` sessions at the default depth of 2;
//! - in flight: an agent runs its subagent calls one at a time (the tool is mutating), so at
//!   most `maxDepth` run at once under one session.
//!
//! A call past a bound fails without starting anything, naming the bound.
//!
//! # Determinism
//! A call's place among its response's and its turn's calls is read from the caller's session
//! log (its `tool/call`, or its `run_code` sub-call start), which is logged before any tool
//! runs, so which calls run never depends on which finished first.
//!
//! ```yaml
//! - id: subagent
//!   name: tool-subagent
//!   config: {toolName: subagent, maxDepth: 2, maxPerResponse: 4, maxPerTurn: 8}
//! ```

use std::sync::{Arc, LazyLock};

use cordis_agent_loop::{AgentLoop, AgentOptions};
use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_session::{
    AssistantMessageData, SessionEvent, ToolCallData, ToolCodeDispatchStartData, TurnEndReason,
};
use cordis_tools::{
    Restriction, ToolCallContext, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema,
};
use serde::Deserialize;

/// The default tool name.
pub const DEFAULT_TOOL_NAME: &str = "subagent";

fn default_tool_name() -> String {
    DEFAULT_TOOL_NAME.to_owned()
}

fn default_depth() -> usize {
    2
}

/// The default of `maxPerResponse`.
pub const DEFAULT_MAX_PER_RESPONSE: usize = 4;

/// The default of `maxPerTurn`.
pub const DEFAULT_MAX_PER_TURN: usize = 8;

fn default_per_response() -> usize {
    DEFAULT_MAX_PER_RESPONSE
}

fn default_per_turn() -> usize {
    DEFAULT_MAX_PER_TURN
}

/// Configuration of `tool-subagent`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubagentConfig {
    /// The tool name (default `subagent`).
    #[serde(default = "default_tool_name")]
    pub tool_name: String,
    /// The tool description the model sees.
    #[serde(default)]
    pub description: Option<String>,
    /// The child's model; default: the caller's.
    #[serde(default)]
    pub model: Option<String>,
    /// How deep subagents may nest (1: a subagent cannot start another).
    #[serde(default = "default_depth")]
    pub max_depth: usize,
    /// How many subagent calls of one model response run; later ones fail.
    #[serde(default = "default_per_response")]
    pub max_per_response: usize,
    /// How many subagent calls one agent makes in one turn; later ones fail.
    #[serde(default = "default_per_turn")]
    pub max_per_turn: usize,
}

impl Default for SubagentConfig {
    fn default() -> Self {
        SubagentConfig {
            tool_name: default_tool_name(),
            description: None,
            model: None,
            max_depth: default_depth(),
            max_per_response: DEFAULT_MAX_PER_RESPONSE,
            max_per_turn: DEFAULT_MAX_PER_TURN,
        }
    }
}

/// The parameters, built once per process and shared by every apply (the registry and the
/// request header know them by identity).
static PARAMETERS: LazyLock<std::sync::Arc<serde_json::Value>> = LazyLock::new(|| {
    std::sync::Arc::new(serde_json::json!({
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "The complete instructions for the subagent."},
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Restrict the subagent to these of your tools (default: all)."
            }
        },
        "required": ["task"]
    }))
});

/// The tool's schema for `config`.
pub fn schema(config: &SubagentConfig) -> ToolSchema {
    ToolSchema {
        name: config.tool_name.clone(),
        description: config.description.clone().unwrap_or_else(|| {
            "Delegate a self-contained task to a subagent that has your tools; returns its final answer."
                .to_owned()
        }),
        parameters: PARAMETERS.clone(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    task: String,
    #[serde(default)]
    tools: Option<Vec<String>>,
}

/// The `tool-subagent` plugin (injects `agent-loop` and `tools`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SubagentPlugin;

const INJECT: &[Inject] = &[
    Inject::required(AgentLoop::NAME),
    Inject::required(ToolRegistry::NAME),
];

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The final assistant message of the last turn in `events`.
fn final_message(events: &[SessionEvent]) -> String {
    events
        .iter()
        .rev()
        .find(|e| e.is::<AssistantMessageData>())
        .and_then(|e| e.data_as::<AssistantMessageData>().ok())
        .map(|d| d.content)
        .unwrap_or_default()
}

/// Why call `call_id` of tool `tool` may not start, read from `events` (its caller's log): the
/// calls of the tool before it in its response (all of them) and in its turn (those that
/// started) against the bounds, or its absence from the log. `None`: it may start.
fn over_bound(events: &[SessionEvent], config: &SubagentConfig, call_id: &str) -> Option<String> {
    let tool = config.tool_name.as_str();
    // (turn, step, call id) of every call of the tool, in log order.
    let calls: Vec<(u64, u64, String)> = events
        .iter()
        .filter_map(|e| {
            if e.is::<ToolCallData>() {
                let c = e.data_as::<ToolCallData>().ok()?;
                (c.name == tool).then_some((c.turn, c.step, c.call_id))
            } else if e.is::<ToolCodeDispatchStartData>() {
                let c = e.data_as::<ToolCodeDispatchStartData>().ok()?;
                (c.name == tool).then_some((c.turn, c.step, c.sub_call_id))
            } else {
                None
            }
        })
        .collect();
    // The call running now is the latest one logged with its id; one that is not there cannot
    // be placed, so it is not run (fail closed).
    let Some(at) = calls.iter().rposition(|(_, _, id)| id == call_id) else {
        return Some(format!(
            "{tool}: call {call_id} is not in its session's log, so its place among its response's and its turn's calls is unknown; it did not run"
        ));
    };
    let (turn, step, _) = &calls[at];
    let mut started = 0;
    // Replay the bounds over the turn's calls before this one, in log order.
    let mut per_step: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    for (_, s, _) in calls[..at].iter().filter(|(t, _, _)| t == turn) {
        let n = per_step.entry(*s).or_default();
        if *n < config.max_per_response && started < config.max_per_turn {
            started += 1;
        }
        *n += 1;
    }
    let in_response = per_step.get(step).copied().unwrap_or(0);
    if in_response >= config.max_per_response {
        return Some(format!(
            "{tool}: at most {} subagent calls of one response run (maxPerResponse); this is call {} of this response, so it did not run",
            config.max_per_response,
            in_response + 1
        ));
    }
    if started >= config.max_per_turn {
        return Some(format!(
            "{tool}: at most {} subagents start in one turn (maxPerTurn), and this turn started them all, so this call did not run",
            config.max_per_turn
        ));
    }
    None
}

async fn run_child(
    agents: Arc<AgentLoop>,
    config: Arc<SubagentConfig>,
    args: serde_json::Value,
    cx: ToolCallContext,
) -> Result<ToolOutput, String> {
    let tool = &config.tool_name;
    let Args { task, tools } =
        serde_json::from_value(args).map_err(|e| format!("invalid {tool} arguments: {e}"))?;
    let parent = cx.scope.and_then(|key| agents.agent_by_scope(key));
    let (parent_id, parent_session) = match &parent {
        Some(p) => (p.id().to_owned(), Some(p.session().id().to_owned())),
        None => ("global".to_owned(), None),
    };
    let depth = parent_id.matches('/').count();
    if depth >= config.max_depth {
        return Err(format!(
            "{tool}: subagents nest at most {} deep",
            config.max_depth
        ));
    }
    let refused = parent.as_ref().and_then(|p| {
        p.session()
            .with_events(|events| over_bound(events, &config, &cx.call_id))
    });
    if let Some(why) = refused {
        return Err(why);
    }
    let model = config
        .model
        .clone()
        .or_else(|| parent.as_ref().map(|p| p.call_config().model.clone()))
        .or_else(|| agents.llm().default_model().map(str::to_owned))
        .unwrap_or_default();
    let base = format!(
        "{}.{}-{}",
        parent_session.as_deref().unwrap_or("session"),
        sanitize(tool),
        sanitize(&cx.call_id)
    );
    let store = agents.sessions();
    let mut session_id = base.clone();
    let mut n = 1;
    while store.path_of(&session_id).is_some_and(|p| p.exists()) {
        n += 1;
        session_id = format!("{base}-{n}");
    }
    // Created here so its header links the parent; the agent then opens this live session.
    let session = store
        .create(&session_id, None, parent_session.clone())
        .await
        .map_err(|e| format!("{tool}: {e}"))?;
    let mut options = AgentOptions::new(format!("{parent_id}/{tool}-{}", cx.call_id), model);
    options.session_id = Some(session_id.clone());
    options.parent_scope = cx.scope.map(|k| k.0);
    if let Some(p) = &parent {
        let c = p.call_config();
        options.temperature = c.temperature;
        options.max_tokens = c.max_tokens;
        options.stop = c.stop.clone();
    }
    let child = agents
        .create_agent(options)
        .await
        .map_err(|e| format!("{tool}: {e}"))?;
    drop(session);
    if let Some(allow) = tools {
        let restricted = child
            .context()
            .ok_or_else(|| format!("{tool}: the subagent is gone"))
            .and_then(|actx| {
                agents
                    .tools()
                    .restrict(
                        &actx,
                        child.scope_key(),
                        Restriction {
                            allow: Some(allow),
                            deny: None,
                        },
                    )
                    .map_err(|e| format!("{tool}: {e}"))
            });
        if let Err(e) = restricted {
            child.dispose();
            return Err(e);
        }
    }
    let ended = child.run_turn(task).await;
    let text = child.session().with_events(final_message);
    child.dispose();
    match ended {
        Ok(TurnEndReason::Completed) => Ok(ToolOutput::new(text)),
        Ok(TurnEndReason::Error { message, .. }) => Err(format!(
            "{tool}: the subagent failed (session {session_id}): {message}"
        )),
        Ok(other) => Err(format!(
            "{tool}: the subagent's turn ended {} (session {session_id})",
            serde_json::to_string(&other).unwrap_or_default()
        )),
        Err(e) => Err(format!("{tool}: {e}")),
    }
}

impl Plugin for SubagentPlugin {
    type Config = SubagentConfig;

    fn name(&self) -> &str {
        "tool-subagent"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn claims(&self, config: &Self::Config) -> Vec<cordis_runtime::Claim> {
        vec![cordis_runtime::Claim::tool(config.tool_name.clone())]
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &SubagentConfig) -> Result<(), BoxError> {
        if config.tool_name.is_empty() {
            return Err("tool-subagent: `toolName` must not be empty".into());
        }
        let agents = ctx.require::<AgentLoop>()?;
        let registry = ctx.require::<cordis_tools::ToolRegistry>()?;
        let config = Arc::new(config.clone());
        let def = ToolDefinition::new(schema(&config), move |args, cx| {
            run_child(agents.clone(), config.clone(), args, cx)
        })
        // The child's calls pass the pipeline in its own scope (its grants, never the parent's).
        .with_effect(cordis_tools::Effect::Dispatch);
        let _ = registry.register(&ctx, def)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_agent_loop::{AgentLoopConfig, AgentLoopPlugin};
    use cordis_llm::{LlmConfig, LlmPlugin, ScriptedResponse};
    use cordis_runtime::prelude::*;
    use cordis_session::{SessionConfig, SessionPlugin, ToolResultData};
    use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
    use cordis_tools::{ToolRegistry, ToolsConfig, ToolsPlugin};

    use super::*;

    #[tokio::test]
    async fn a_subagent_runs_on_the_callers_tools_logs_a_linked_session_and_returns_its_answer() {
        let root = Context::root();
        let responses = vec![
            // parent step 1: delegate
            ScriptedResponse::tool_call(
                "subagent",
                serde_json::json!({"task": "count the files", "tools": ["echo"]}),
            ),
            // child: use an inherited tool, then answer
            ScriptedResponse::tool_call("echo", serde_json::json!({})),
            ScriptedResponse::text("There are 3 files."),
            // parent step 2
            ScriptedResponse::text("The subagent says 3."),
        ];
        root.plugin(
            LlmPlugin,
            LlmConfig {
                responses: Some(responses),
                ..Default::default()
            },
        );
        root.plugin(SessionPlugin::default(), SessionConfig::in_memory());
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(AgentLoopPlugin, AgentLoopConfig::default());
        let sub = root.plugin(SubagentPlugin, SubagentConfig::default());
        let fork = root.plugin(
            SubagentPlugin,
            SubagentConfig {
                tool_name: "subagent_fork".into(),
                ..Default::default()
            },
        );
        root.idle().await;
        assert_eq!(
            (sub.status(), fork.status()),
            (ScopeStatus::Active, ScopeStatus::Active)
        );
        let reg = root.get::<ToolRegistry>().unwrap();
        reg.register(
            &root,
            ToolDefinition::new(
                ToolSchema {
                    name: "echo".into(),
                    description: "e".into(),
                    parameters: serde_json::json!({"type": "object"}).into(),
                },
                |_, _| async { Ok(ToolOutput::new("pong")) },
            ),
        )
        .unwrap();
        let agents = root.get::<AgentLoop>().unwrap();
        let main = agents
            .create_agent(AgentOptions::new("main", "m"))
            .await
            .unwrap();
        assert_eq!(
            main.run_turn("delegate it").await.unwrap(),
            TurnEndReason::Completed
        );
        let events = main.session().events();
        let result = events
            .iter()
            .find(|e| e.is::<ToolResultData>())
            .unwrap()
            .data_as::<ToolResultData>()
            .unwrap();
        assert_eq!(result.content, "There are 3 files.");
        assert!(!result.is_error);
        assert_eq!(agents.agent_ids(), vec!["main"], "the child is disposed");
        // The child's session is linked and saw only the allowed tool.
        let store = agents.sessions().clone();
        let (child, _) = store.open("main.subagent-call-0-0").await.unwrap();
        assert_eq!(child.header().parent_session.as_deref(), Some("main"));
        let header = child.request_header().unwrap().unwrap();
        let names: Vec<String> = header.tools.unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(names, vec!["echo"]);
        root.dispose();
    }

    #[tokio::test]
    async fn a_model_asking_for_fifty_subagents_at_every_step_starts_a_bounded_number() {
        let dir = tempfile::tempdir().unwrap();
        let root = Context::root();
        let fifty: Vec<cordis_llm::ScriptedToolCall> = (0..50)
            .map(|i| cordis_llm::ScriptedToolCall {
                id: None,
                name: "subagent".into(),
                arguments: Some(serde_json::json!({"task": format!("fan out {i}")})),
            })
            .collect();
        root.plugin(
            LlmPlugin,
            LlmConfig {
                responses: Some(vec![ScriptedResponse {
                    tool_calls: fifty,
                    ..ScriptedResponse::default()
                }]),
                repeat: true,
                ..Default::default()
            },
        );
        root.plugin(
            SessionPlugin::default(),
            SessionConfig {
                root: Some(dir.path().to_path_buf()),
                ..SessionConfig::default()
            },
        );
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(
            AgentLoopPlugin,
            AgentLoopConfig {
                max_steps: 3,
                ..Default::default()
            },
        );
        root.plugin(SubagentPlugin, SubagentConfig::default());
        root.idle().await;
        let agents = root.get::<AgentLoop>().unwrap();
        let main = agents
            .create_agent(AgentOptions::new("main", "m"))
            .await
            .unwrap();
        let _ = main.run_turn("go").await.unwrap();
        let results: Vec<ToolResultData> = main
            .session()
            .events()
            .iter()
            .filter_map(|e| e.data_as::<ToolResultData>().ok())
            .collect();
        // Three steps of 50 calls: 4 run in the first two responses, then the turn's 8 are spent.
        assert_eq!(results.len(), 150);
        let ran: Vec<(u64, usize)> = (1..=3)
            .map(|step| {
                let n = results
                    .iter()
                    .filter(|r| {
                        r.step == step && !r.content.as_str().unwrap_or("").contains("did not run")
                    })
                    .count();
                (step, n)
            })
            .collect();
        assert_eq!(ran, [(1, 4), (2, 4), (3, 0)], "{:?}", &results[50..55]);
        let refused = results[4].content.as_str().unwrap();
        assert!(
            refused.contains(
                "at most 4 subagent calls of one response run (maxPerResponse); this is call 5"
            ),
            "{refused}"
        );
        let spent = results[100].content.as_str().unwrap();
        assert!(
            spent.contains(
                "at most 8 subagents start in one turn (maxPerTurn), and this turn started them all"
            ),
            "{spent}"
        );
        // Every child spends its own turn's 8 on grandchildren, which may not nest further:
        // 8 children and 64 grandchildren, and not one session more.
        let sessions = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "jsonl")
            })
            .count();
        assert_eq!(sessions, 1 + 8 + 64);
        root.dispose();
    }
}
