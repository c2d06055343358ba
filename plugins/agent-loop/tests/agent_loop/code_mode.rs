//! A scripted turn in Code Mode: the model calls `run_code` with a program making two tool
//! calls; the log holds the outer call, one start/settle pair per sub-call, and one result.

use std::sync::Arc;

use crate::common::boot;
use cordis_code_runtime::CodeRuntimeService;
use cordis_code_runtime_quickjs::QuickJs;
use cordis_llm::ScriptedResponse;
use cordis_session::{SessionConfig, TurnEndReason, kinds};
use cordis_tools::{PresentationMode, ToolRegistry};
use serde_json::json;

const PROGRAM: &str = "const a = await tools.alpha({x: '1'}); console.log('captured output'); \
                       const b = await tools.beta({x: '2'}); return a.from + '+' + b.from;";

#[tokio::test]
async fn a_run_code_turn_logs_each_sub_call_and_one_result() {
    let script = vec![
        ScriptedResponse::tool_call(
            "run_code",
            json!({"code": PROGRAM, "description": "Call alpha then beta"}),
        ),
        ScriptedResponse::text("done"),
    ];
    let rig = boot(None, script, &["alpha", "beta"], SessionConfig::in_memory()).await;
    let _ = rig
        .root
        .provide(CodeRuntimeService(Arc::new(QuickJs::new())))
        .unwrap();
    let agent = rig.agent();
    let reg = rig.root.get::<ToolRegistry>().unwrap();
    let actx = agent.context().unwrap();
    let _ = reg
        .present_as(&actx, Some(agent.scope_key()), PresentationMode::Code)
        .unwrap();

    let reason = agent.run_turn("use code").await.unwrap();
    assert_eq!(reason, TurnEndReason::Completed);
    assert!(rig.errors.lock().unwrap().is_empty(), "{:?}", rig.errors);

    // The golden of the tool part of the log, call ids scrubbed to their shape.
    let events = agent.session().events();
    let call = rig.of_kind(kinds::TOOL_CALL);
    assert_eq!(call.len(), 1);
    let id = call[0].data["callId"].as_str().unwrap().to_owned();
    let scrub = |v: &serde_json::Value| {
        serde_json::from_str::<serde_json::Value>(&v.to_string().replace(&id, "<id>")).unwrap()
    };
    let tool_part: Vec<serde_json::Value> = events
        .iter()
        .filter(|e| e.kind.starts_with("tool/"))
        .map(|e| {
            let mut data = scrub(&e.data);
            let obj = data.as_object_mut().unwrap();
            obj.remove("turn");
            obj.remove("step");
            if e.kind == kinds::TOOL_CALL {
                obj.remove("arguments");
            }
            json!({"kind": e.kind, "data": data, "sources": e.source_event_seqs.as_ref().map(|s| s.len())})
        })
        .collect();
    let expected = json!([
        {"kind": "tool/call", "data": {"callId": "<id>", "name": "run_code"}, "sources": null},
        {"kind": "tool/code-dispatch-start", "data": {"parentCallId": "<id>", "subCallId": "<id>:code:1", "name": "alpha", "arguments": {"x": "1"}}, "sources": 1},
        {"kind": "tool/code-dispatch", "data": {"parentCallId": "<id>", "subCallId": "<id>:code:1", "name": "alpha", "arguments": {"x": "1"}, "isError": false, "content": {"from": "alpha"}}, "sources": 1},
        {"kind": "tool/code-dispatch-start", "data": {"parentCallId": "<id>", "subCallId": "<id>:code:2", "name": "beta", "arguments": {"x": "2"}}, "sources": 1},
        {"kind": "tool/code-dispatch", "data": {"parentCallId": "<id>", "subCallId": "<id>:code:2", "name": "beta", "arguments": {"x": "2"}, "isError": false, "content": {"from": "beta"}}, "sources": 1},
        {"kind": "tool/result", "data": {"callId": "<id>", "name": "run_code", "content": "captured output\nalpha+beta", "isError": false}, "sources": 1},
    ]);
    assert_eq!(serde_json::Value::Array(tool_part), expected);

    // Only the outer result reaches the model; the model saw run_code alone.
    let requests = rig.requests();
    assert_eq!(requests.len(), 2);
    let names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["run_code"]);
    assert_eq!(
        requests[1].messages.len(),
        3,
        "user, assistant, one tool result"
    );
    rig.root.dispose();
}

#[tokio::test]
async fn a_denied_sub_call_logs_its_approval_before_it_settles() {
    let program = "await tools.alpha({x: '1'}); \
                   try { await tools.beta({x: '2'}); } catch (e) { return 'denied: ' + e.toolName; } \
                   return 'ran';";
    let script = vec![
        ScriptedResponse::tool_call(
            "run_code",
            json!({"code": program, "description": "Try a denied tool"}),
        ),
        ScriptedResponse::text("done"),
    ];
    let rig = boot(None, script, &["alpha", "beta"], SessionConfig::in_memory()).await;
    let _ = rig
        .root
        .provide(CodeRuntimeService(Arc::new(QuickJs::new())))
        .unwrap();
    let config = cordis_approvals::ApprovalsConfig {
        tools: [
            ("alpha".to_owned(), cordis_approvals::Policy::Allow),
            ("beta".to_owned(), cordis_approvals::Policy::Deny),
        ]
        .into(),
        ..Default::default()
    };
    let approvals = rig.root.plugin(cordis_approvals::ApprovalsPlugin, config);
    rig.root.idle().await;
    assert_eq!(approvals.status(), cordis_runtime::ScopeStatus::Active);
    let agent = rig.agent();
    let reg = rig.root.get::<ToolRegistry>().unwrap();
    let _ = reg
        .present_as(
            &agent.context().unwrap(),
            Some(agent.scope_key()),
            PresentationMode::Code,
        )
        .unwrap();
    assert_eq!(
        agent.run_turn("try").await.unwrap(),
        TurnEndReason::Completed
    );
    let tool_part: Vec<(String, String)> = agent
        .session()
        .events()
        .iter()
        .filter(|e| e.kind.starts_with("tool/"))
        .map(|e| {
            let id = e.data["subCallId"]
                .as_str()
                .or(e.data["callId"].as_str())
                .unwrap_or_default();
            (e.kind.clone(), id.rsplit(':').next().unwrap().to_owned())
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("tool/call", "call-0-0"),
        ("tool/code-dispatch-start", "1"),
        ("tool/code-dispatch", "1"),
        ("tool/code-dispatch-start", "2"),
        ("tool/approval", "2"),
        ("tool/code-dispatch", "2"),
        ("tool/result", "call-0-0"),
    ]
    .iter()
    .map(|(k, i)| ((*k).to_owned(), (*i).to_owned()))
    .collect();
    assert_eq!(tool_part, expected);
    let result = rig.of_kind(kinds::TOOL_RESULT);
    assert_eq!(result[0].data["content"], json!("denied: beta"));
    rig.root.dispose();
}

#[tokio::test]
async fn sub_calls_are_logged_just_before_their_run_codes_result_beside_a_parallel_tool() {
    let script = vec![
        ScriptedResponse::tool_call("alpha", json!({"x": "0"})).and_call(
            "run_code",
            json!({"code": PROGRAM, "description": "Call alpha then beta"}),
        ),
        ScriptedResponse::text("done"),
    ];
    let rig = boot(None, script, &["alpha", "beta"], SessionConfig::in_memory()).await;
    let _ = rig
        .root
        .provide(CodeRuntimeService(Arc::new(QuickJs::new())))
        .unwrap();
    let agent = rig.agent();
    let reg = rig.root.get::<ToolRegistry>().unwrap();
    let _ = reg
        .present_as(
            &agent.context().unwrap(),
            Some(agent.scope_key()),
            PresentationMode::Both,
        )
        .unwrap();
    assert_eq!(
        agent.run_turn("both").await.unwrap(),
        TurnEndReason::Completed
    );
    let kinds: Vec<String> = agent
        .session()
        .events()
        .iter()
        .filter(|e| e.kind.starts_with("tool/"))
        .map(|e| format!("{} {}", e.kind, e.data["name"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(
        kinds,
        [
            "tool/call alpha",
            "tool/call run_code",
            "tool/result alpha",
            "tool/code-dispatch-start alpha",
            "tool/code-dispatch alpha",
            "tool/code-dispatch-start beta",
            "tool/code-dispatch beta",
            "tool/result run_code",
        ]
    );
    rig.root.dispose();
}

/// A read-only tool that answers after `ms` milliseconds.
fn waiting_tool() -> cordis_tools::ToolDefinition {
    let schema = cordis_tools::ToolSchema {
        name: "wait".into(),
        description: "Waits.".into(),
        parameters: Arc::new(json!({"type": "object"})),
    };
    cordis_tools::ToolDefinition::new(schema, |args, _cx| async move {
        let ms = args["ms"].as_u64().unwrap_or(0);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        Ok(cordis_tools::ToolOutput::new(json!(ms)))
    })
    .read_only()
}

/// The `tool/*` events of one turn running `Promise.all` over `wait` calls of `delays`.
async fn overlapping_sub_calls(delays: &[u64]) -> Vec<String> {
    let calls: Vec<String> = delays
        .iter()
        .map(|ms| format!("tools.wait({{ms: {ms}}})"))
        .collect();
    let program = format!("return (await Promise.all([{}])).length;", calls.join(", "));
    let script = vec![
        ScriptedResponse::tool_call(
            "run_code",
            json!({"code": program, "description": "Wait side by side"}),
        ),
        ScriptedResponse::text("done"),
    ];
    let rig = boot(None, script, &[], SessionConfig::in_memory()).await;
    let _ = rig
        .root
        .provide(CodeRuntimeService(Arc::new(QuickJs::new())))
        .unwrap();
    let reg = rig.root.get::<ToolRegistry>().unwrap();
    let _tool = reg.register(&rig.root, waiting_tool()).unwrap();
    let agent = rig.agent();
    let _ = reg
        .present_as(
            &agent.context().unwrap(),
            Some(agent.scope_key()),
            PresentationMode::Code,
        )
        .unwrap();
    assert_eq!(
        agent.run_turn("go").await.unwrap(),
        TurnEndReason::Completed
    );
    let events = agent
        .session()
        .events()
        .iter()
        .filter(|e| e.kind.starts_with("tool/code"))
        .map(|e| {
            let id = e.data["subCallId"].as_str().unwrap_or_default();
            format!("{} {}", e.kind, id.rsplit(':').next().unwrap())
        })
        .collect();
    rig.root.dispose();
    events
}

#[tokio::test]
async fn overlapping_sub_calls_log_the_same_sequence_whichever_finishes_first() {
    // More calls than parallel slots (10): which call frees a slot used to decide when the
    // 11th and 12th started, so their start records moved with the tools' speed.
    let slow_first: Vec<u64> = (1..=12).rev().map(|k| k * 4).collect();
    let fast_first: Vec<u64> = (1..=12).map(|k| k * 4).collect();
    let a = overlapping_sub_calls(&slow_first).await;
    let b = overlapping_sub_calls(&fast_first).await;
    assert_eq!(a.len(), 24, "{a:?}");
    assert_eq!(a, b);
    // Ten start, the first settles and frees its slot for the 11th, and so on.
    assert_eq!(a[9], "tool/code-dispatch-start 10");
    assert_eq!(
        a[10..13],
        [
            "tool/code-dispatch 1",
            "tool/code-dispatch-start 11",
            "tool/code-dispatch 2"
        ]
    );
}
