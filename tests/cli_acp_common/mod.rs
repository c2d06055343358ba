//! What the `cordis acp` tests share: the protocol's JSON Schema as the judge of what the agent
//! writes.
//!
//! `tests/fixtures/acp/schema.v1.json` is `schema/v1/schema.json` of
//! github.com/agentclientprotocol/agent-client-protocol at b7f0005 (2026-08-22, Apache-2.0),
//! copied unchanged: the agent's wire types are our own, so they are checked against the
//! protocol's published schema rather than against themselves.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;

const SCHEMA_URL: &str = "file:///acp/schema.v1.json";

struct Schema {
    schemas: boon::Schemas,
    defs: std::collections::BTreeMap<&'static str, boon::SchemaIndex>,
}

/// The definitions the agent sends.
const SENT: &[&str] = &[
    "SessionNotification",
    "RequestPermissionRequest",
    "InitializeResponse",
    "NewSessionResponse",
    "LoadSessionResponse",
    "PromptResponse",
    "SetSessionModeResponse",
    "SetSessionConfigOptionResponse",
    "ListSessionsResponse",
    "ResumeSessionResponse",
    "CloseSessionResponse",
    "DeleteSessionResponse",
    "WriteTextFileRequest",
    "ReadTextFileRequest",
    "CreateTerminalRequest",
    "TerminalOutputRequest",
    "WaitForTerminalExitRequest",
    "KillTerminalRequest",
    "ReleaseTerminalRequest",
    "CreateElicitationRequest",
    "CompleteElicitationNotification",
];

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp/schema.v1.json");
        let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut compiler = boon::Compiler::new();
        compiler.add_resource(SCHEMA_URL, json).unwrap();
        let mut schemas = boon::Schemas::new();
        let defs = SENT
            .iter()
            .map(|def| {
                let index = compiler
                    .compile(&format!("{SCHEMA_URL}#/$defs/{def}"), &mut schemas)
                    .unwrap_or_else(|e| panic!("compiling {def}: {e}"));
                (*def, index)
            })
            .collect();
        Schema { schemas, defs }
    })
}

/// Checks `value` against the schema's definition `def`; the error names what failed.
pub fn validate(def: &str, value: &Value) -> Result<(), String> {
    let schema = schema();
    let index = schema.defs[def];
    schema
        .schemas
        .validate(value, index)
        .map_err(|e| format!("not a valid {def}: {value}\n{e:#}"))
}

/// Checks every message the agent wrote, given the method of each request the client sent
/// (by id): each `session/update` is a `SessionNotification`, each permission question a
/// `RequestPermissionRequest`, each successful answer the response type of its method; no
/// `tool_call_update` comes before its `tool_call` (per session). Returns the first problem.
pub fn check_messages(messages: &[Value], sent: &[(u64, String)]) -> Result<(), String> {
    let mut announced: BTreeSet<(String, String)> = BTreeSet::new();
    for m in messages {
        match m["method"].as_str() {
            Some("session/update") => {
                validate("SessionNotification", &m["params"])?;
                let session = m["params"]["sessionId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let update = &m["params"]["update"];
                let call = update["toolCallId"].as_str().unwrap_or_default().to_owned();
                match update["sessionUpdate"].as_str() {
                    Some("tool_call") => {
                        announced.insert((session, call));
                    }
                    Some("tool_call_update") if !announced.contains(&(session, call)) => {
                        return Err(format!("tool_call_update before its tool_call: {m}"));
                    }
                    _ => {}
                }
            }
            Some("session/request_permission") => {
                validate("RequestPermissionRequest", &m["params"])?
            }
            Some("fs/write_text_file") => validate("WriteTextFileRequest", &m["params"])?,
            Some("fs/read_text_file") => validate("ReadTextFileRequest", &m["params"])?,
            Some("terminal/create") => validate("CreateTerminalRequest", &m["params"])?,
            Some("terminal/output") => validate("TerminalOutputRequest", &m["params"])?,
            Some("terminal/wait_for_exit") => validate("WaitForTerminalExitRequest", &m["params"])?,
            Some("terminal/kill") => validate("KillTerminalRequest", &m["params"])?,
            Some("terminal/release") => validate("ReleaseTerminalRequest", &m["params"])?,
            Some("elicitation/create") => validate("CreateElicitationRequest", &m["params"])?,
            Some("elicitation/complete") => {
                validate("CompleteElicitationNotification", &m["params"])?
            }
            Some(other) => return Err(format!("the agent sent an unexpected {other}: {m}")),
            None => {
                let Some(result) = m.get("result") else {
                    continue;
                };
                let Some(method) = m["id"]
                    .as_u64()
                    .and_then(|id| sent.iter().find(|(i, _)| *i == id))
                    .map(|(_, method)| method.as_str())
                else {
                    return Err(format!("an answer to no request: {m}"));
                };
                let def = match method {
                    "initialize" => "InitializeResponse",
                    "session/new" => "NewSessionResponse",
                    "session/load" => "LoadSessionResponse",
                    "session/prompt" => "PromptResponse",
                    "session/set_mode" => "SetSessionModeResponse",
                    "session/set_config_option" => "SetSessionConfigOptionResponse",
                    "session/list" => "ListSessionsResponse",
                    "session/resume" => "ResumeSessionResponse",
                    "session/close" => "CloseSessionResponse",
                    "session/delete" => "DeleteSessionResponse",
                    _ => continue,
                };
                validate(def, result)?;
            }
        }
    }
    Ok(())
}

/// True for an update a running command sends while it runs (its output so far): a
/// `tool_call_update` without a status. They are not logged, so a replay has none.
pub fn is_progress(update: &Value) -> bool {
    update["sessionUpdate"] == "tool_call_update" && update.get("status").is_none()
}

/// True for the update that says a call runs now (`in_progress`, nothing else): sent when the
/// approvals stage lets it run (an editor's answer, a rule, its effect class), not logged, so a
/// replay (of calls that ran) has none.
pub fn is_running(update: &Value) -> bool {
    update["sessionUpdate"] == "tool_call_update"
        && update["status"] == "in_progress"
        && update.as_object().is_some_and(|u| u.len() == 3)
}

/// The story `updates` tell, as a replay tells it: progress and running updates dropped, the terminal
/// output a call streamed while it ran (Zed's `terminal_output` pieces) put back into its final
/// update, where a replay has it whole, and a message's (or thought's) text chunks joined into
/// one, as a replay sends the message.
pub fn story(updates: &[Value]) -> Vec<Value> {
    let mut streamed: std::collections::BTreeMap<String, String> = Default::default();
    let mut out: Vec<Value> = Vec::new();
    for u in updates {
        let call = u["toolCallId"].as_str().unwrap_or_default().to_owned();
        if is_running(u) {
            continue;
        }
        if is_progress(u) {
            if let Some(data) = u["_meta"]["terminal_output"]["data"].as_str() {
                streamed.entry(call).or_default().push_str(data);
            }
            continue;
        }
        let kind = u["sessionUpdate"].as_str().unwrap_or_default();
        if matches!(kind, "agent_message_chunk" | "agent_thought_chunk")
            && u["content"]["type"] == "text"
            && let Some(last) = out.last_mut()
            && last["sessionUpdate"] == kind
            && last["content"]["type"] == "text"
        {
            let joined = format!(
                "{}{}",
                last["content"]["text"].as_str().unwrap_or_default(),
                u["content"]["text"].as_str().unwrap_or_default()
            );
            last["content"]["text"] = Value::String(joined);
            continue;
        }
        let mut u = u.clone();
        if u["sessionUpdate"] == "tool_call_update"
            && let Some(data) = streamed.remove(&call)
            && u["_meta"].get("terminal_output").is_none()
            && let Some(meta) = u.get_mut("_meta").and_then(Value::as_object_mut)
        {
            meta.insert(
                "terminal_output".into(),
                serde_json::json!({"terminal_id": call, "data": data}),
            );
        }
        out.push(u);
    }
    out
}
