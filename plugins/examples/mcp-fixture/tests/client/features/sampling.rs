//! Sampling: a server's `sampling/createMessage` reaches the composition's model only after
//! the user allowed it through the front end's approver; refused without an approver, when
//! the user says no, or when the entry turns sampling off; bounded in tokens.

use std::sync::{Arc, Mutex};

use cordis_approvals::{Answer, ApprovalRequest, Approver, ApproverService};
use cordis_llm::{LlmConfig, LlmPlugin, ScriptedAdapter};
use cordis_mcp::{MAX_SAMPLING_TOKENS, McpPlugin, TRACE_SAMPLING};
use cordis_runtime::prelude::*;
use serde_json::{Value, json};

use super::super::{call, cfg, root_with_tools, settle, text};

/// Answers every question with `answer`, recording what it was asked.
struct Deciding {
    answer: Answer,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Deciding {
    fn approve(
        &self,
        request: &ApprovalRequest,
    ) -> futures_util::future::BoxFuture<'static, Answer> {
        self.asked.lock().unwrap().push(request.clone());
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

/// A root with tools and a scripted model answering `reply` (models `fx-small`, `fx-large`).
fn root_with_model(reply: &str) -> Context {
    let root = root_with_tools();
    let config: LlmConfig = serde_json::from_value(json!({
        "adapter": "scripted",
        "model": "fx-small",
        "models": ["fx-large"],
        "responses": [{"text": reply}],
        "repeat": true,
        "recordRequests": 4
    }))
    .unwrap();
    root.plugin(LlmPlugin, config);
    root
}

/// What the test reads of a model request.
#[derive(Debug, PartialEq)]
struct Seen {
    model: String,
    max_tokens: Option<u32>,
    system: Option<String>,
    tools: usize,
}

fn model_requests(root: &Context) -> Vec<Seen> {
    let llm = root.get::<cordis_llm::Llm>().unwrap();
    let adapter = llm
        .adapter()
        .as_any()
        .downcast_ref::<ScriptedAdapter>()
        .unwrap();
    adapter
        .requests()
        .into_iter()
        .map(|r| Seen {
            model: r.config.model.clone(),
            max_tokens: r.config.max_tokens,
            system: r.system.clone(),
            tools: r.tools.len(),
        })
        .collect()
}

async fn sample(root: &Context, args: Value) -> (bool, String) {
    let result = call(root, "mcp__fx__sample", args).await;
    (result.is_error, text(&result))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_asks_the_user_then_the_model_and_is_refused_without_a_yes() {
    // Allowed: the model answers, on the hinted model, within the token cap, without tools.
    let root = root_with_model("Forty-two.");
    let front = Arc::new(Deciding {
        answer: Answer::Allow,
        asked: Mutex::default(),
    });
    let _approver = root.provide(ApproverService(front.clone())).unwrap();
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "sample"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let (failed, answer) = sample(
        &root,
        json!({"prompt": "What is six times seven?", "maxTokens": 1_000_000, "hint": "fx-l"}),
    )
    .await;
    assert!(!failed, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        answer["content"],
        json!({"type": "text", "text": "Forty-two."})
    );
    assert_eq!(answer["model"], "fx-large");
    assert_eq!(answer["stopReason"], "endTurn");
    assert_eq!(
        model_requests(&root),
        [Seen {
            model: "fx-large".into(),
            max_tokens: Some(MAX_SAMPLING_TOKENS),
            system: Some("You answer a tool's question briefly.".into()),
            tools: 0,
        }]
    );
    let asked = front.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].call.name, "mcp__fx__sampling");
    assert_eq!(
        asked[0].call.arguments["messages"],
        json!([{"role": "user", "text": "What is six times seven?"}])
    );
    assert!(
        root.trace_details(TRACE_SAMPLING)[0].ends_with("fx: answered by fx-large (10 bytes)"),
        "{:?}",
        root.trace_details(TRACE_SAMPLING)
    );
    root.dispose();

    // The user says no: refused, the model never called.
    let root = root_with_model("never");
    let front = Arc::new(Deciding {
        answer: Answer::Deny(Some("not now".into())),
        asked: Mutex::default(),
    });
    let _approver = root.provide(ApproverService(front.clone())).unwrap();
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "sample"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let (failed, answer) = sample(&root, json!({})).await;
    assert!(failed);
    assert!(answer.contains("the user declined: not now"), "{answer}");
    assert!(model_requests(&root).is_empty());
    root.dispose();

    // Nobody to ask (CI, piped runs): refused with the reason, traced.
    let root = root_with_model("never");
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "sample"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let (failed, answer) = sample(&root, json!({})).await;
    assert!(
        failed && answer.contains("declined: no one to ask"),
        "{answer}"
    );
    assert!(model_requests(&root).is_empty());
    assert!(
        root.trace_details(TRACE_SAMPLING)[0].contains("fx: refused: declined: no one to ask"),
        "{:?}",
        root.trace_details(TRACE_SAMPLING)
    );
    root.dispose();

    // Turned off: not declared, so the server is refused whoever would answer.
    let root = root_with_model("never");
    let front = Arc::new(Deciding {
        answer: Answer::Allow,
        asked: Mutex::default(),
    });
    let _approver = root.provide(ApproverService(front.clone())).unwrap();
    let mut off = cfg("fx", &["--tools", "sample"]);
    off.sampling = false;
    let entry = root.plugin(McpPlugin, off);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let (failed, answer) = sample(&root, json!({})).await;
    assert!(failed, "{answer}");
    assert!(front.asked.lock().unwrap().is_empty());
    assert!(model_requests(&root).is_empty());
    root.dispose();
}
