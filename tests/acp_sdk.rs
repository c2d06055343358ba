//! `cordis acp` driven by an editor built on the official ACP TypeScript SDK
//! (`@agentclientprotocol/sdk`, pinned below), not by this repository's own driver: the SDK's
//! client app (`client().onRequest(…).onNotification(…).connect(ndJsonStream(…))`; the SDK 2.x
//! removed `ClientSideConnection`) over the stdio of a `cordis acp` process, in
//! `tests/fixtures/acp-sdk/editor.mjs`. Each test runs one of its scenarios, which prints a JSON
//! summary of what the SDK delivered (session updates after the SDK's own validation, answers,
//! stop reasons, errors, the methods it sent); the test asserts on it.
//!
//! The SDK is installed by this test into `target/tmp/acp-sdk-<version>` (once; later runs
//! reuse it). Without `node` and `npm` on PATH the tests print a `SKIPPED:` line and pass (CI
//! has both, so they run there).

use crate::common;
use crate::common::npm;
use crate::common::npm::mcp_fixture_server;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// The pinned SDK.
const SDK: &str = "@agentclientprotocol/sdk@2.4.0";

/// A 1×1 PNG, the MCP fixture's `links` tool's image.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The directory the SDK is installed in (its `node_modules`), installed once per test
/// binary; `None` (having said `SKIPPED:`) without `node` and `npm`.
fn sdk(test: &str) -> Option<&'static Path> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        npm::node_and_npm().then(|| {
            let version = SDK.rsplit('@').next().unwrap();
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("acp-sdk-{version}"));
            npm::install_once(
                &dir,
                &[SDK],
                "node_modules/@agentclientprotocol/sdk/package.json",
            );
            dir
        })
    });
    if dir.is_none() {
        npm::skipped(&format!("acp_sdk::{test}"), SDK);
    }
    dir.as_deref()
}

/// A scratch directory for one test: the agent's cwd, its state directory (`.state/`) and the
/// sessions' workspace.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-acp-sdk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// Runs the SDK editor's `scenario` against `cordis acp ARGS` in `dir` (`spec`: more fields of
/// its spec, `env`: more of the agent's environment); the summary it printed.
fn editor(
    sdk: &Path,
    dir: &Path,
    scenario: &str,
    args: &[&str],
    spec: Value,
    env: &[(&str, &str)],
) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp-sdk/editor.mjs");
    let mut full = json!({
        "sdk": sdk,
        "scenario": scenario,
        "command": env!("CARGO_BIN_EXE_cordis"),
        "args": args,
        "cwd": dir,
    });
    if let (Some(full), Value::Object(more)) = (full.as_object_mut(), spec) {
        full.extend(more);
    }
    let mut node = Command::new("node");
    node.arg(&script)
        .arg(full.to_string())
        .current_dir(dir)
        .env("XDG_STATE_HOME", common::state_home(dir))
        .env_remove("CORDIS_LLM")
        .env_remove("CORDIS_WORKSPACE")
        .env("RUST_LOG", "off")
        .stdin(Stdio::null());
    for (k, v) in env {
        node.env(k, v);
    }
    let out = node.output().expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("the editor printed no summary:\n{stdout}\n{stderr}"));
    assert!(
        out.status.success() && summary.get("error").is_none(),
        "the editor's scenario {scenario} failed:\n{summary:#}\n{stderr}"
    );
    assert_eq!(summary["exitCode"], 0, "cordis acp's exit: {stderr}");
    summary
}

/// The updates of the summary, without their session ids.
fn updates(summary: &Value) -> Vec<&Value> {
    summary["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["update"])
        .collect()
}

/// The scripted model's fixture composition, replaying `script` (written into `dir`).
fn scripted(dir: &Path, script: &Value) -> (String, String) {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    (common::fixture("acp/agent.yml"), path.display().to_string())
}

#[test]
fn an_mcp_tools_resource_link_and_image_reach_the_sdk_editor_as_content_blocks() {
    let Some(sdk) = sdk("an_mcp_tools_resource_link_and_image_reach_the_sdk_editor") else {
        return;
    };
    let server = mcp_fixture_server();
    let dir = scratch("content");
    let (config, script) = scripted(
        &dir,
        &json!([
            {"toolCalls": [{"id": "l1", "name": "mcp__fixture__links", "arguments": {}}]},
            {"text": "Shown."},
        ]),
    );
    let summary = editor(
        sdk,
        &dir,
        "content",
        &["acp", &config],
        json!({"mcpServers": [{"name": "fixture", "command": server,
            "args": ["--tools", "links"], "env": []}]}),
        &[("ACP_SCRIPT", &script)],
    );
    assert_eq!(summary["stopReasons"], json!(["end_turn"]), "{summary:#}");
    // The editor was asked (MCP tools ask), the call `pending` in the question.
    assert_eq!(summary["asked"][0]["toolCallId"], "l1", "{summary:#}");
    assert_eq!(summary["asked"][0]["status"], "pending", "{summary:#}");
    let updates = updates(&summary);
    let done = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .unwrap_or_else(|| panic!("no completed call: {summary:#}"));
    let blocks: Vec<&Value> = done["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["type"], "content", "{done}");
            &c["content"]
        })
        .collect();
    // One block per block of the MCP result, each of its own type (not the result as JSON
    // text): the text, the link, the image, the embedded resource.
    let types: Vec<&str> = blocks.iter().filter_map(|b| b["type"].as_str()).collect();
    assert_eq!(
        types,
        ["text", "resource_link", "image", "resource"],
        "{done}"
    );
    assert_eq!(
        *blocks[1],
        json!({"type": "resource_link", "uri": "file:///project/notes.md", "name": "notes.md",
            "mimeType": "text/markdown"})
    );
    assert_eq!(
        *blocks[2],
        json!({"type": "image", "mimeType": "image/png", "data": PNG})
    );
    assert_eq!(blocks[0]["text"], "two files");
}

/// An OpenAI stream answering `text` and stopping.
fn answer(text: &str) -> Vec<Value> {
    vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]
}

/// A model request's tool names and system prompt.
fn offered(body: &Value) -> (Vec<String>, String) {
    let tools = body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let system = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "system"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    (tools, system)
}

#[test]
fn a_mode_switch_after_a_prompt_takes_effect_on_the_sdk_editors_next_request() {
    let Some(sdk) = sdk("a_mode_switch_after_a_prompt_takes_effect") else {
        return;
    };
    let dir = scratch("mode");
    // The bundled cordis.yml (modes `standard` and `minimal`) on a loopback OpenAI server that
    // keeps the request bodies.
    let (base, bodies) = common::openai_serving(vec![answer("Hi."), answer("Again.")]);
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("cordis.yml");
    let summary = editor(
        sdk,
        &dir,
        "mode",
        &["acp", &bundled.display().to_string()],
        json!({"mode": "minimal"}),
        &[
            ("CORDIS_LLM", "openai"),
            ("CORDIS_BASE_URL", &base),
            ("CORDIS_API_KEY_ENV", "CORDIS_TEST_KEY"),
            ("CORDIS_TEST_KEY", "k"),
        ],
    );
    assert_eq!(summary["modes"]["currentModeId"], "standard", "{summary:#}");
    assert_eq!(summary["setMode"], json!({}), "{summary:#}");
    assert_eq!(
        summary["stopReasons"],
        json!(["end_turn", "end_turn"]),
        "{summary:#}"
    );
    let bodies = bodies.join().unwrap();
    let [first, second] = &bodies[..] else {
        panic!("two model requests: {bodies:#?}");
    };
    let (before, standard) = offered(first);
    let (mut after, minimal) = offered(second);
    // The second request runs the `minimal` preset: its tools and its persona.
    after.sort();
    assert_eq!(
        after,
        ["bash", "edit_file", "read_file", "write_file"],
        "before: {before:?}"
    );
    assert!(before.len() > after.len(), "{before:?}");
    let persona = "You are a helpful software engineer assistant.";
    assert!(minimal.contains(persona), "{minimal}");
    assert!(!standard.contains(persona), "{standard}");
    // The conversation goes on in the new mode.
    assert!(second["messages"].to_string().contains("Hi."), "{second:#}");
}

#[test]
fn session_delete_is_advertised_and_the_deleted_session_leaves_the_sdk_editors_list() {
    let Some(sdk) = sdk("session_delete_is_advertised") else {
        return;
    };
    let dir = scratch("delete");
    let (config, script) = scripted(&dir, &json!([{"text": "One."}]));
    let summary = editor(
        sdk,
        &dir,
        "delete",
        &["acp", &config],
        json!({}),
        &[("ACP_SCRIPT", &script)],
    );
    assert_eq!(
        summary["agentCapabilities"]["sessionCapabilities"]["delete"],
        json!({}),
        "{summary:#}"
    );
    let (gone, kept) = (&summary["gone"], &summary["kept"]);
    let before = summary["listedBefore"].as_array().unwrap();
    assert!(
        before.contains(gone) && before.contains(kept),
        "{summary:#}"
    );
    assert_eq!(summary["deleted"], json!({}), "{summary:#}");
    assert_eq!(summary["listedAfter"], json!([kept]), "{summary:#}");
    // Its log is gone from disk too; the other stays.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp");
    let sessions = common::sessions_of(&dir, &fixtures);
    let log = |s: &Value| sessions.join(format!("{}.jsonl", s.as_str().unwrap()));
    assert!(!log(gone).exists() && log(kept).exists());
}

#[test]
fn the_sdks_cancellation_sends_cancel_request_and_the_prompt_ends_cancelled() {
    let Some(sdk) = sdk("the_sdks_cancellation_sends_cancel_request") else {
        return;
    };
    let dir = scratch("cancel");
    // The first turn runs a command that sleeps (bash runs without asking in the fixture), so
    // the prompt is in flight when the editor cancels it.
    let (config, script) = scripted(
        &dir,
        &json!([
            {"text": "partial", "toolCalls": [{"id": "hold", "name": "bash", "arguments": {"command": "sleep 30"}}]},
            {"text": "Next answer."},
        ]),
    );
    let summary = editor(
        sdk,
        &dir,
        "cancel",
        &["acp", &config],
        json!({}),
        &[("ACP_SCRIPT", &script)],
    );
    // The SDK cancelled the request with `$/cancel_request` (its cancellation signal), not
    // with `session/cancel`.
    let sent: Vec<&str> = summary["sent"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(sent.contains(&"$/cancel_request"), "{sent:?}");
    assert!(!sent.contains(&"session/cancel"), "{sent:?}");
    assert!(summary.get("cancelError").is_none(), "{summary:#}");
    // The prompt ended `cancelled`, its command with it; the next prompt runs.
    assert_eq!(
        summary["stopReasons"],
        json!(["cancelled", "end_turn"]),
        "{summary:#}"
    );
    let updates = updates(&summary);
    let ended = updates
        .iter()
        .rfind(|u| u["toolCallId"] == "hold" && u["sessionUpdate"] == "tool_call_update")
        .unwrap_or_else(|| panic!("{summary:#}"));
    assert_eq!(ended["status"], "failed", "{ended}");
}
