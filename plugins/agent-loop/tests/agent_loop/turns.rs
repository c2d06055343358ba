//! Loop-level tests through the real plugins with the scripted adapter.

use std::time::Duration;

use crate::common::{boot, names, prompt_config, wait_until};
use cordis_agent_loop::AgentLoopPlugin;
use cordis_llm::{FrozenRequest, LlmRequestHook, ScriptedResponse};
use cordis_runtime::prelude::*;
use cordis_session::{SessionConfig, TurnEndReason, derive_messages, fold_request_header, kinds};
use cordis_system_prompt::{SystemPromptAssemble, SystemPromptPlugin};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};

fn permutations(items: &[&'static str]) -> Vec<Vec<&'static str>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            out.push(p);
        }
    }
    out
}

const TOOLS: [&str; 4] = ["delta", "alpha", "charlie", "bravo"];

async fn header_and_request(
    tool_order: Option<Vec<&str>>,
    order: &[&str],
) -> (serde_json::Value, FrozenRequest) {
    let rig = boot(
        tool_order,
        vec![ScriptedResponse::text("ok")],
        order,
        SessionConfig::in_memory(),
    )
    .await;
    let reason = rig.agent().run_turn("hi").await.unwrap();
    assert_eq!(
        reason,
        TurnEndReason::Completed,
        "{:?}",
        rig.errors.lock().unwrap()
    );
    let headers = rig.of_kind(kinds::REQUEST_HEADER);
    assert_eq!(headers.len(), 1);
    assert_eq!(headers[0].data["reason"], "initial");
    let requests = rig.requests();
    assert_eq!(requests.len(), 1);
    let folded = fold_request_header(&rig.agent().session().events())
        .unwrap()
        .unwrap();
    assert_eq!(
        folded.tools.as_deref().unwrap(),
        &requests[0].tools[..],
        "log and request carry the same tools"
    );
    let header = headers[0].data["header"].clone();
    rig.root.dispose();
    (header, requests[0].clone())
}

#[tokio::test]
async fn every_registration_order_of_four_tools_logs_and_sends_the_same_canonical_tools() {
    let perms = permutations(&TOOLS);
    assert_eq!(perms.len(), 24);
    let mut first: Option<(serde_json::Value, FrozenRequest)> = None;
    for order in &perms {
        let (header, request) = header_and_request(None, order).await;
        assert_eq!(
            names(&request.tools),
            ["alpha", "bravo", "charlie", "delta"],
            "order {order:?}"
        );
        match &first {
            None => first = Some((header, request)),
            Some((h, r)) => {
                assert_eq!(
                    serde_json::to_string(&header).unwrap(),
                    serde_json::to_string(h).unwrap(),
                    "header bytes, order {order:?}"
                );
                assert_eq!(request.tools, r.tools, "request tools, order {order:?}");
                assert_eq!(request.system, r.system);
            }
        }
    }
}

#[tokio::test]
async fn a_configured_tool_order_reaches_the_logged_header_and_the_request_for_every_order() {
    let tool_order = vec!["delta", "<unlisted-tools>", "alpha"];
    for order in permutations(&TOOLS) {
        let (header, request) = header_and_request(Some(tool_order.clone()), &order).await;
        assert_eq!(
            names(&request.tools),
            ["delta", "bravo", "charlie", "alpha"]
        );
        let logged: Vec<&str> = header["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(logged, ["delta", "bravo", "charlie", "alpha"]);
    }
}

#[tokio::test]
async fn an_unknown_tool_order_name_fails_every_turn_balanced_until_the_config_is_fixed() {
    let rig = boot(
        Some(vec!["ghost", "<unlisted-tools>"]),
        vec![ScriptedResponse::text("fixed")],
        &["alpha"],
        SessionConfig::in_memory(),
    )
    .await;
    for turn in 1..=2u64 {
        let reason = rig.agent().run_turn("hi").await.unwrap();
        let TurnEndReason::Error { step, message } = &reason else {
            panic!("{reason:?}")
        };
        assert_eq!(*step, 1, "the step that was about to open");
        assert_eq!(
            message,
            "toolOrder lists unregistered tool \"ghost\"; known tools: alpha"
        );
        let errors = rig.errors.lock().unwrap().clone();
        assert_eq!(
            errors.len() as u64,
            turn,
            "exactly one agent/error per failed turn"
        );
        assert_eq!(
            (errors.last().unwrap().step, &errors.last().unwrap().message),
            (1, message)
        );
        assert!(!rig.agent().is_busy(), "back to idle");
    }
    assert_eq!(
        rig.kinds(),
        [
            "turn/start",
            "user/message",
            "turn/end",
            "turn/start",
            "user/message",
            "turn/end"
        ]
    );
    assert!(rig.of_kind(kinds::STEP_START).is_empty(), "no step/start");
    assert!(rig.of_kind(kinds::STEP_END).is_empty(), "no step/end");
    assert!(
        rig.of_kind(kinds::REQUEST_HEADER).is_empty(),
        "no request/header"
    );
    assert!(rig.requests().is_empty(), "no request reached the adapter");
    let end = &rig.of_kind(kinds::TURN_END)[1];
    assert_eq!(end.data["reason"]["kind"], "error");
    assert_eq!(end.data["reason"]["step"], 1);

    // Fix the config: the system prompt comes back, tools and the loop re-apply on it.
    rig.prompt.dispose();
    rig.root.plugin(
        SystemPromptPlugin,
        prompt_config(Some(vec!["alpha", "<unlisted-tools>"])),
    );
    rig.root.idle().await;
    let reason = rig.agent().run_turn("again").await.unwrap();
    assert_eq!(reason, TurnEndReason::Completed);
    assert_eq!(rig.errors.lock().unwrap().len(), 2, "no new agent/error");
    let headers = rig.of_kind(kinds::REQUEST_HEADER);
    assert_eq!(headers.len(), 1);
    assert_eq!(headers[0].data["reason"], "initial");
    assert_eq!(rig.requests().len(), 1);
    assert_eq!(
        rig.of_kind(kinds::TURN_START).last().unwrap().data["turn"],
        3
    );
    rig.root.dispose();
}

fn schema(name: &str) -> ToolSchema {
    ToolSchema {
        name: name.into(),
        description: format!("{name} tool"),
        parameters: serde_json::json!({"type": "object"}).into(),
    }
}

#[tokio::test]
async fn a_panicking_or_timed_out_tool_gives_an_error_result_and_the_turn_continues() {
    let script = vec![
        ScriptedResponse::tool_call("boom", serde_json::json!({}))
            .and_call("slow", serde_json::json!({}))
            .and_call("alpha", serde_json::json!({"x": "1"})),
        ScriptedResponse::text("done"),
    ];
    let rig = boot(None, script, &[], SessionConfig::in_memory()).await;
    let reg = rig.root.get::<ToolRegistry>().unwrap();
    let _ = reg
        .register(
            &rig.root,
            ToolDefinition::new(schema("boom"), |_, _| async { panic!("kaboom") }),
        )
        .unwrap();
    // `slow` and `alpha` are read-only, so they overlap and alpha really finishes first.
    let slow = ToolDefinition::new(schema("slow"), |_, _| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(ToolOutput::new("late"))
    })
    .with_timeout(Duration::from_millis(30))
    .read_only();
    let _ = reg.register(&rig.root, slow).unwrap();
    let alpha =
        ToolDefinition::new(schema("alpha"), |_, _| async { Ok(ToolOutput::new("a")) }).read_only();
    let _ = reg.register(&rig.root, alpha).unwrap();
    let reason = rig.agent().run_turn("use tools").await.unwrap();
    assert_eq!(reason, TurnEndReason::Completed);
    assert!(rig.errors.lock().unwrap().is_empty());
    let results = rig.of_kind(kinds::TOOL_RESULT);
    let codes: Vec<_> = results
        .iter()
        .map(|r| {
            (
                r.data["name"].as_str().unwrap().to_owned(),
                r.data["code"].clone(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("boom".to_owned(), serde_json::json!("TOOL_PANICKED")),
            ("slow".to_owned(), serde_json::json!("TOOL_TIMEOUT")),
            ("alpha".to_owned(), serde_json::Value::Null),
        ],
        "committed in call order although alpha finished before slow"
    );
    let calls = rig.of_kind(kinds::TOOL_CALL);
    for (r, c) in results.iter().zip(&calls) {
        assert_eq!(r.source_event_seqs, Some(vec![c.seq]));
    }
    assert_eq!(
        rig.kinds()
            .iter()
            .filter(|k| *k == "step/start" || *k == "step/end")
            .count(),
        4,
        "two balanced steps"
    );
    let requests = rig.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].messages.len(),
        5,
        "user, assistant, three tool results"
    );
    assert_eq!(
        rig.of_kind(kinds::REQUEST_HEADER).len(),
        1,
        "an unchanged header is not logged again"
    );
    rig.root.dispose();
}

#[tokio::test]
async fn the_invariant_catches_a_request_changed_after_logging() {
    let rig = boot(
        None,
        vec![ScriptedResponse::text("never")],
        &["alpha"],
        SessionConfig::in_memory(),
    )
    .await;
    let _ = rig.root.on_waterfall::<LlmRequestHook, _, _>(
        Position::Back,
        |req: FrozenRequest, next| async move {
            let mut changed = (*req).clone();
            changed.tools.push(ToolSchema {
                name: "smuggled".into(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}).into(),
            });
            next.run(FrozenRequest::new(changed)).await
        },
    );
    let reason = rig.agent().run_turn("hi").await.unwrap();
    let TurnEndReason::Error { step, message } = reason else {
        panic!()
    };
    assert_eq!(step, 1);
    assert!(
        message.contains(
            "request field `tools` diverges from the log (request has 2 tools, the log 1)"
        ),
        "{message}"
    );
    assert!(rig.requests().is_empty(), "the adapter never saw it");
    assert_eq!(rig.errors.lock().unwrap().len(), 1);
    assert_eq!(
        rig.kinds(),
        [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "step/end",
            "turn/end"
        ]
    );
    rig.root.dispose();

    let rig = boot(
        None,
        vec![ScriptedResponse::text("never")],
        &[],
        SessionConfig::in_memory(),
    )
    .await;
    let _ = rig.root.on_waterfall::<LlmRequestHook, _, _>(
        Position::Back,
        |req: FrozenRequest, next| async move {
            let mut changed = (*req).clone();
            changed.messages = Default::default();
            next.run(FrozenRequest::new(changed)).await
        },
    );
    let TurnEndReason::Error { message, .. } = rig.agent().run_turn("hi").await.unwrap() else {
        panic!()
    };
    assert!(
        message.contains("request field `messages` diverges"),
        "{message}"
    );
    rig.root.dispose();
}

#[tokio::test]
async fn header_reasons_are_initial_then_change_on_a_pure_reorder_then_resume_in_a_new_loop_instance()
 {
    let script = vec![
        ScriptedResponse::text("one"),
        ScriptedResponse::text("two"),
        ScriptedResponse::text("three"),
        ScriptedResponse::text("four"),
    ];
    let rig = boot(
        None,
        script,
        &["alpha", "bravo"],
        SessionConfig::in_memory(),
    )
    .await;
    assert_eq!(
        rig.agent().run_turn("1").await.unwrap(),
        TurnEndReason::Completed
    );
    assert_eq!(
        rig.agent().run_turn("2").await.unwrap(),
        TurnEndReason::Completed
    );
    let reverse = rig.root.on_waterfall::<SystemPromptAssemble, _, _>(
        Position::Back,
        |mut v, next| async move {
            v.assembly.tools.reverse();
            next.run(v).await
        },
    );
    assert_eq!(
        rig.agent().run_turn("3").await.unwrap(),
        TurnEndReason::Completed
    );
    reverse.dispose();
    let reasons: Vec<_> = rig
        .of_kind(kinds::REQUEST_HEADER)
        .iter()
        .map(|h| h.data["reason"].clone())
        .collect();
    assert_eq!(
        reasons,
        ["initial", "change"],
        "unchanged turn 2 logs nothing; a pure reordering is a change"
    );
    assert_eq!(names(&rig.requests()[2].tools), ["bravo", "alpha"]);

    rig.agent_loop.dispose();
    rig.root
        .plugin(AgentLoopPlugin, crate::common::loop_config());
    rig.root.idle().await;
    assert_eq!(
        rig.agent().run_turn("4").await.unwrap(),
        TurnEndReason::Completed
    );
    let reasons: Vec<_> = rig
        .of_kind(kinds::REQUEST_HEADER)
        .iter()
        .map(|h| h.data["reason"].clone())
        .collect();
    assert_eq!(reasons, ["initial", "change", "resume"]);
    rig.root.dispose();
}

#[tokio::test]
async fn cancel_ends_the_turn_aborted_and_dispose_ends_it_disposed_balanced() {
    let slow = cordis_llm::ScriptedResponse {
        delay_ms: Some(10_000),
        ..ScriptedResponse::text("slow")
    };
    let rig = boot(
        None,
        vec![slow.clone(), slow],
        &[],
        SessionConfig::in_memory(),
    )
    .await;
    let agent = rig.agent();
    let running = tokio::spawn({
        let agent = agent.clone();
        async move { agent.run_turn("wait").await }
    });
    wait_until("the first request reaches the adapter", || {
        !rig.requests().is_empty()
    })
    .await;
    assert_eq!(
        agent.run_turn("second").await,
        Err(cordis_agent_loop::TurnError::Busy("main".into()))
    );
    agent.cancel(Some("user pressed stop".into()));
    let reason = running.await.unwrap().unwrap();
    assert_eq!(
        reason,
        TurnEndReason::Aborted {
            reason: Some("user pressed stop".into())
        }
    );
    assert_eq!(
        rig.kinds()[rig.kinds().len() - 2..],
        ["step/end", "turn/end"]
    );
    assert!(
        rig.errors.lock().unwrap().is_empty(),
        "an abort is not an error"
    );

    let running = tokio::spawn({
        let agent = agent.clone();
        async move { agent.run_turn("wait again").await }
    });
    wait_until("the second request reaches the adapter", || {
        rig.requests().len() >= 2
    })
    .await;
    agent.dispose();
    assert_eq!(running.await.unwrap().unwrap(), TurnEndReason::Disposed);
    assert_eq!(
        agent.session().events().last().unwrap().data["reason"]["kind"],
        "disposed"
    );
    assert!(
        rig.root
            .get::<cordis_agent_loop::AgentLoop>()
            .unwrap()
            .agent("main")
            .is_none()
    );
    assert_eq!(
        agent.run_turn("x").await,
        Err(cordis_agent_loop::TurnError::Disposed("main".into()))
    );
    rig.root.dispose();
}

#[tokio::test]
async fn a_persisted_log_rebuilds_every_request_the_adapter_received() {
    let dir = std::env::temp_dir().join(format!("cordis-agent-loop-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = vec![
        ScriptedResponse::tool_call("alpha", serde_json::json!({"x": "1"})),
        ScriptedResponse::text("done"),
    ];
    let rig = boot(
        None,
        script,
        &["alpha", "bravo"],
        SessionConfig {
            root: Some(dir.clone()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        rig.agent().run_turn("go").await.unwrap(),
        TurnEndReason::Completed
    );
    let requests = rig.requests();
    rig.root.dispose();
    // Read the file back with a fresh store: every request is a function of the log.
    let store =
        cordis_session::SessionStore::new(Some(dir.clone()), cordis_session::Durability::Fsync);
    let (session, report) = store.open("main").await.unwrap();
    assert!(report.repaired.is_empty());
    let events = session.events();
    let starts: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == kinds::STEP_START)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), requests.len());
    for (i, start) in starts.iter().enumerate() {
        assert_eq!(
            derive_messages(&events[..*start]).unwrap(),
            requests[i].messages
        );
        let header = fold_request_header(&events[..*start + 2]).unwrap().unwrap();
        assert_eq!(header.tools.unwrap_or_default(), requests[i].tools);
        assert_eq!(header.system, requests[i].system);
        assert_eq!(header.config, requests[i].config);
        cordis_agent_loop::check_request(&events, *start as u64, &requests[i]).unwrap_or_else(
            |e| {
                // The header for step 2 is the one folded before it (unchanged, not re-logged).
                panic!("step {}: {e}", i + 1)
            },
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn reasoning_is_logged_and_sent_back_with_its_assistant_message() {
    let mut first = ScriptedResponse::tool_call("alpha", serde_json::json!({}));
    first.reasoning = vec!["secret plan".into()];
    let rig = boot(
        None,
        vec![first, ScriptedResponse::text("done")],
        &["alpha"],
        SessionConfig::in_memory(),
    )
    .await;
    let reason = rig.agent().run_turn("go").await.unwrap();
    assert_eq!(
        reason,
        TurnEndReason::Completed,
        "{:?}",
        rig.errors.lock().unwrap()
    );
    let logged = rig.of_kind(kinds::ASSISTANT_CHUNK);
    assert_eq!(
        logged[0].data["chunk"],
        serde_json::json!({"type": "reasoning", "delta": "secret plan"})
    );
    let requests = rig.requests();
    assert_eq!(requests.len(), 2);
    // DeepSeek's thinking mode refuses a tool-calling turn whose reasoning was dropped.
    let assistant = requests[1]
        .messages
        .iter()
        .find(|m| matches!(m, cordis_llm::Message::Assistant { .. }))
        .cloned()
        .expect("the first answer is in the second request");
    let cordis_llm::Message::Assistant {
        tool_calls,
        reasoning,
        ..
    } = assistant
    else {
        unreachable!()
    };
    assert_eq!(tool_calls[0].name, "alpha");
    assert_eq!(reasoning.as_deref(), Some("secret plan"));
    rig.root.dispose();
}
