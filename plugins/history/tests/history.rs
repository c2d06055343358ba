//! The `history` service: the atomic cut under concurrent appends, pages and their views, the
//! presenter scope of cold reads (switched, deleted presets), and typed errors.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cordis_history::{History, HistoryError, StandingScopes, StandingScopesService, ViewFor};
use cordis_presenter::{
    Card, PresentError, Presentation, Presenters, ResultView, ToolKind, ToolPresenter,
};
use cordis_runtime::Context;
use cordis_schema::{ScopeKey, ToolSchema};
use cordis_session::*;
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-history-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `deploy {target}`: a tool only a preset's standing scope registers.
struct Deploy;

impl ToolPresenter for Deploy {
    fn present_call(&self, args: &Value) -> Result<Presentation, PresentError> {
        let target = args
            .get("target")
            .and_then(Value::as_str)
            .ok_or(PresentError::Argument("target", "string"))?;
        Ok(Presentation {
            title: format!("Deploy {target}"),
            kind: ToolKind::Execute,
            input: args.clone(),
            card: Card::Generic,
            text: None,
            locations: Vec::new(),
        })
    }

    fn present_result(
        &self,
        args: &Value,
        result: ResultView<'_>,
    ) -> Result<Presentation, PresentError> {
        Ok(Presentation {
            text: Some(format!("{} (error: {})", result.content, result.is_error)),
            ..self.present_call(args)?
        })
    }
}

/// A presenter that panics on every call.
struct Boom;

impl ToolPresenter for Boom {
    fn present_call(&self, _: &Value) -> Result<Presentation, PresentError> {
        panic!("boom presenter");
    }

    fn present_result(&self, _: &Value, _: ResultView<'_>) -> Result<Presentation, PresentError> {
        panic!("boom presenter");
    }
}

/// The roster of the test: records which presets were asked for; `Err` for a deleted one.
struct FakeRoster {
    asked: Mutex<Vec<Option<String>>>,
    answer: Result<ScopeKey, String>,
}

impl StandingScopes for FakeRoster {
    fn standing_key_for<'a>(
        &'a self,
        preset: Option<&'a str>,
    ) -> BoxFuture<'a, Result<ScopeKey, String>> {
        cordis_runtime::lock(&self.asked).push(preset.map(str::to_owned));
        Box::pin(async move { self.answer.clone() })
    }
}

fn tool(name: &str) -> ToolDefinition {
    let schema = ToolSchema {
        name: name.into(),
        description: format!("{name} tool"),
        parameters: json!({"type": "object"}).into(),
    };
    ToolDefinition::new(schema, |_, _| async { Ok(ToolOutput::new("ok")) })
}

/// The standing scope of the fake `minimal` preset.
const STANDING: ScopeKey = ScopeKey(9_999);

/// A composition: sessions (persistent under `root` if given), a registry where `deploy` lives
/// only in [`STANDING`]'s layer and `boom` globally, their presenters, and optionally a roster.
fn composition(root: Option<PathBuf>, roster: Option<Arc<FakeRoster>>) -> (Context, History) {
    let ctx = Context::root();
    ctx.provide(SessionStore::new(root, Durability::None))
        .unwrap();
    let tools = ToolRegistry::new(ctx.clone());
    tools
        .register_scoped(&ctx, STANDING, tool("deploy"))
        .unwrap();
    tools.register(&ctx, tool("boom")).unwrap();
    ctx.provide(tools).unwrap();
    let presenters = Presenters::default();
    presenters
        .register(&ctx, "deploy", Arc::new(Deploy))
        .unwrap();
    presenters.register(&ctx, "boom", Arc::new(Boom)).unwrap();
    ctx.provide(presenters).unwrap();
    if let Some(roster) = roster {
        ctx.provide(StandingScopesService::new(roster)).unwrap();
    }
    let history = History::new(ctx.clone());
    (ctx, history)
}

fn store(ctx: &Context) -> Arc<SessionStore> {
    ctx.get::<SessionStore>().unwrap()
}

/// One turn: the user's message, an assistant message calling `tool`, the call and its result,
/// the final answer.
fn turn(s: &Session, turn: u64, tool: &str, args: &str) {
    s.append(&TurnStartData { turn }, None).unwrap();
    s.append(
        &UserMessageData {
            turn,
            content: format!("do {turn}"),
            prompt: None,
        },
        None,
    )
    .unwrap();
    s.append(
        &AssistantMessageData {
            turn,
            step: 1,
            content: String::new(),
            tool_calls: vec![],
            usage: None,
            reasoning: None,
        },
        None,
    )
    .unwrap();
    let call = s
        .append(
            &ToolCallData {
                turn,
                step: 1,
                call_id: format!("c{turn}"),
                name: tool.into(),
                arguments: args.into(),
            },
            None,
        )
        .unwrap();
    s.append(
        &ToolResultData {
            turn,
            step: 1,
            call_id: format!("c{turn}"),
            name: tool.into(),
            content: json!("done"),
            is_error: false,
            code: None,
        },
        Some(vec![call]),
    )
    .unwrap();
    s.append(
        &AssistantMessageData {
            turn,
            step: 2,
            content: format!("answer {turn}"),
            tool_calls: vec![],
            usage: None,
            reasoning: None,
        },
        None,
    )
    .unwrap();
    s.append(
        &TurnEndData {
            turn,
            reason: TurnEndReason::Completed,
        },
        None,
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_of_seq_is_the_last_served_seq_on_10000_reads_while_another_thread_appends() {
    let (ctx, history) = composition(None, None);
    let s = store(&ctx).create("hammer", None, None).await.unwrap();
    turn(&s, 1, "deploy", r#"{"target": "prod"}"#);
    let stop = Arc::new(AtomicBool::new(false));
    let appender = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 1;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                // Every event kind the page and the baseline read, the preset switch included.
                s.select_preset(&format!("p{n}")).unwrap();
                turn(&s, n, "deploy", r#"{"target": "prod"}"#);
            }
            n
        })
    };
    // Reads start once appends are under way.
    let initial = s.len();
    while s.len() == initial {
        tokio::task::yield_now().await;
    }
    let mut seen = std::collections::BTreeSet::new();
    for read in 0..10_000 {
        let page = history.history("hammer", None, Some(3)).await.unwrap();
        let last = page.events.last().expect("a non-empty log").event.seq;
        let p = page.projections.expect("a tail page carries the baseline");
        assert_eq!(
            p.as_of_seq,
            Some(last),
            "read {read}: the baseline describes another moment than the page"
        );
        seen.insert(last);
    }
    stop.store(true, Ordering::Relaxed);
    let turns = appender.join().unwrap();
    eprintln!(
        "{} distinct tails over 10000 reads, {turns} turns appended",
        seen.len()
    );
    // The reads raced real appends: the tail moved under them (typically hundreds of distinct
    // tails; how many depends on the machine's load, so only movement is asserted).
    assert!(
        seen.len() >= 2,
        "the tail never moved: no append raced the reads"
    );
    ctx.dispose();
}

#[tokio::test]
async fn pages_walk_back_and_views_pair_only_within_the_page() {
    let (ctx, history) = composition(None, None);
    let s = store(&ctx).create("pages", None, None).await.unwrap();
    for n in 1..=3 {
        turn(&s, n, "boom", "{}");
    }
    s.select_preset("minimal").unwrap();
    // 3 turns of 7 events (seqs 0..=20; messages at 1, 2, 5 of each), then the switch (21).
    let tail = history.history("pages", None, Some(2)).await.unwrap();
    let seqs: Vec<u64> = tail.events.iter().map(|e| e.event.seq).collect();
    assert_eq!(
        seqs,
        (16..=21).collect::<Vec<_>>(),
        "2 messages back: 19 and 16"
    );
    assert!(tail.has_more);
    let p = tail.projections.as_ref().unwrap();
    assert_eq!(
        (p.as_of_seq, &p.values["agentPreset"]),
        (Some(21), &json!("minimal"))
    );
    // The call (17) and its result (18) are on this page, but `boom` panics: no view, and
    // the events still ship.
    assert_eq!(tail.events[1].event.kind, kinds::TOOL_CALL);
    assert!(tail.events.iter().all(|e| e.view.is_none()));

    let older = history.history("pages", Some(16), Some(2)).await.unwrap();
    let seqs: Vec<u64> = older.events.iter().map(|e| e.event.seq).collect();
    assert_eq!(seqs, (12..16).collect::<Vec<_>>(), "messages 15 and 12");
    assert!(older.has_more && older.projections.is_none());
    let rest = history.history("pages", Some(12), None).await.unwrap();
    assert_eq!(rest.events.len(), 12);
    assert!(!rest.has_more && rest.projections.is_none());

    // The default page (50 messages) is the whole log.
    let all = history.history("pages", None, None).await.unwrap();
    assert_eq!(all.events.len(), 22);
    assert!(!all.has_more);
    ctx.dispose();
}

#[tokio::test]
async fn views_present_in_the_recorded_presets_scope_and_a_result_whose_call_is_on_another_page_gets_none()
 {
    let roster = Arc::new(FakeRoster {
        asked: Mutex::default(),
        answer: Ok(STANDING),
    });
    let (ctx, history) = composition(None, Some(roster.clone()));
    let s = store(&ctx)
        .create_with("views", CreateOptions::default().agent_preset("minimal"))
        .await
        .unwrap();
    turn(&s, 1, "deploy", r#"{"target": "prod"}"#);
    turn(&s, 2, "deploy", r#"{"nope": 1}"#);
    turn(&s, 3, "deploy", "not json");
    let page = history.history("views", None, None).await.unwrap();
    assert_eq!(
        *cordis_runtime::lock(&roster.asked),
        [Some("minimal".to_owned())],
        "no agent runs it: the recorded preset's standing scope"
    );
    let view = |seq: usize| page.events[seq].view.clone();
    let call = view(3).expect("deploy presents in the standing scope");
    assert_eq!(call.for_, ViewFor::Call);
    assert_eq!(
        (call.view.title.as_str(), call.view.kind),
        ("Deploy prod", ToolKind::Execute)
    );
    assert_eq!(call.view.input, json!({"target": "prod"}));
    let result = view(4).expect("paired with its call on the page");
    assert_eq!(result.for_, ViewFor::Result);
    assert_eq!(result.view.text.as_deref(), Some("\"done\" (error: false)"));
    assert_eq!(view(10), None, "a presenter error: no view");
    assert_eq!(view(11), None);
    assert_eq!(view(17), None, "arguments that are not JSON: no view");
    assert!(
        view(0).is_none() && view(1).is_none(),
        "only tool events have views"
    );
    let json = serde_json::to_value(&page).unwrap();
    assert_eq!(json["events"][3]["view"]["for"], "call");
    assert_eq!(json["events"][3]["view"]["view"]["title"], "Deploy prod");
    assert!(json["events"][0].get("view").is_none());
    assert_eq!(json["hasMore"], false);
    assert_eq!(json["projections"]["asOfSeq"], 20);

    // A user message steered in between a call and its result: a one-message tail page
    // starts at that message, so the result's call is on the older page.
    let call = s
        .append(
            &ToolCallData {
                turn: 4,
                step: 1,
                call_id: "late".into(),
                name: "deploy".into(),
                arguments: r#"{"target": "prod"}"#.into(),
            },
            None,
        )
        .unwrap();
    s.append(
        &UserMessageData {
            turn: 4,
            content: "steer".into(),
            prompt: None,
        },
        None,
    )
    .unwrap();
    s.append(
        &ToolResultData {
            turn: 4,
            step: 1,
            call_id: "late".into(),
            name: "deploy".into(),
            content: json!("done"),
            is_error: false,
            code: None,
        },
        Some(vec![call]),
    )
    .unwrap();
    let split = history.history("views", None, Some(1)).await.unwrap();
    let kinds: Vec<&str> = split.events.iter().map(|e| e.event.kind.as_str()).collect();
    assert_eq!(kinds, [kinds::USER_MESSAGE, kinds::TOOL_RESULT]);
    assert_eq!(
        split.events[1].view, None,
        "a cross-page result gets no view"
    );
    let whole = history.history("views", None, Some(2)).await.unwrap();
    assert_eq!(
        whole.events[0].event.seq, 19,
        "the answer of turn 3, then the steer"
    );
    assert!(
        whole.events.last().unwrap().view.is_some(),
        "the same result with its call on the page has a view"
    );
    ctx.dispose();
}

/// Adds an agent loop to `ctx` and creates agent `id` on session `session`, its scope bound
/// under `parent` when given (as a preset mount would).
async fn live_agent(ctx: &Context, id: &str, session: &str, parent: Option<ScopeKey>) {
    use cordis_agent_loop::{AgentLoop, AgentLoopConfig, AgentOptions};
    let agents = match ctx.get::<AgentLoop>() {
        Some(agents) => agents,
        None => {
            let llm = cordis_llm::Llm::new(
                ctx.clone(),
                Arc::new(cordis_llm::ScriptedAdapter::new(vec![])),
            );
            let prompt = cordis_system_prompt::SystemPrompt::new(ctx.clone(), None).unwrap();
            let settings = serde_json::from_value::<AgentLoopConfig>(json!({}))
                .unwrap()
                .settings();
            let agents = AgentLoop::new(
                ctx.clone(),
                Arc::new(llm),
                Arc::new(prompt),
                ctx.get::<ToolRegistry>().unwrap(),
                store(ctx),
                settings,
            );
            ctx.provide(agents).unwrap();
            ctx.get::<AgentLoop>().unwrap()
        }
    };
    let options: AgentOptions = serde_json::from_value(json!({
        "id": id,
        "model": "m",
        "sessionId": session,
        "parentScope": parent.map(|k| k.0),
    }))
    .unwrap();
    agents.create_agent(options).await.unwrap();
}

#[tokio::test]
async fn a_live_agent_presents_in_its_own_scope_and_the_roster_is_not_asked() {
    let roster = Arc::new(FakeRoster {
        asked: Mutex::default(),
        answer: Ok(STANDING),
    });
    let (ctx, history) = composition(None, Some(roster.clone()));
    // `joined` runs under the standing scope; `loner` joined nothing, though its header names
    // the same preset: the live agent's scope decides, not the recorded preset.
    for (id, parent) in [("joined", Some(STANDING)), ("loner", None)] {
        let s = store(&ctx)
            .create_with(id, CreateOptions::default().agent_preset("minimal"))
            .await
            .unwrap();
        turn(&s, 1, "deploy", r#"{"target": "prod"}"#);
        live_agent(&ctx, id, id, parent).await;
    }
    let joined = history.history("joined", None, None).await.unwrap();
    assert_eq!(
        joined.events[3]
            .view
            .as_ref()
            .map(|v| v.view.title.as_str()),
        Some("Deploy prod"),
        "visible through the agent's chain"
    );
    let loner = history.history("loner", None, None).await.unwrap();
    assert_eq!(loner.events[3].event.kind, kinds::TOOL_CALL);
    assert_eq!(loner.events[3].view, None, "not in the loner's chain");
    assert!(
        cordis_runtime::lock(&roster.asked).is_empty(),
        "a live agent: the roster is not consulted"
    );
    ctx.dispose();
}

#[tokio::test]
async fn a_cold_read_of_a_switched_session_resolves_the_switched_preset_from_the_log() {
    let dir = temp_dir("switched");
    let roster = Arc::new(FakeRoster {
        asked: Mutex::default(),
        answer: Ok(STANDING),
    });
    let (ctx, history) = composition(Some(dir.clone()), Some(roster.clone()));
    {
        // Written by "another process": a store of its own, closed before the read.
        let writer = SessionStore::new(Some(dir.clone()), Durability::Fsync);
        let s = writer
            .create_with("cold", CreateOptions::default().agent_preset("standard"))
            .await
            .unwrap();
        s.select_preset("minimal").unwrap();
        turn(&s, 1, "deploy", r#"{"target": "staging"}"#);
        s.flush().await.unwrap();
    }
    let page = history.history("cold", None, None).await.unwrap();
    assert_eq!(
        *cordis_runtime::lock(&roster.asked),
        [Some("minimal".to_owned())],
        "the switch in the log, not the header's `standard`"
    );
    assert_eq!(page.events.len(), 8);
    assert_eq!(
        page.events[4].view.as_ref().map(|v| v.view.title.as_str()),
        Some("Deploy staging")
    );
    assert_eq!(
        page.projections.unwrap().values["agentPreset"],
        json!("minimal")
    );
    // The read resumed nothing: no turn was closed, no lock is held, the file is unchanged.
    let again = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let (s, report) = again.open("cold").await.unwrap();
    assert!(report.repaired.is_empty());
    assert_eq!(s.len(), 8);
    ctx.dispose();
}

#[tokio::test]
async fn a_deleted_preset_still_serves_the_transcript_with_global_views_only() {
    let dir = temp_dir("deleted");
    let roster = Arc::new(FakeRoster {
        asked: Mutex::default(),
        answer: Err("agent-presets: preset \"gone\" not found (available: none)".into()),
    });
    let (ctx, history) = composition(Some(dir.clone()), Some(roster.clone()));
    {
        let writer = SessionStore::new(Some(dir.clone()), Durability::Fsync);
        let s = writer
            .create_with("orphan", CreateOptions::default().agent_preset("gone"))
            .await
            .unwrap();
        turn(&s, 1, "deploy", r#"{"target": "prod"}"#);
        s.flush().await.unwrap();
    }
    let page = history.history("orphan", None, None).await.unwrap();
    assert_eq!(
        *cordis_runtime::lock(&roster.asked),
        [Some("gone".to_owned())]
    );
    assert_eq!(page.events.len(), 7, "the whole transcript");
    assert!(
        page.events.iter().all(|e| e.view.is_none()),
        "deploy is not visible in the global layer: no view"
    );
    assert_eq!(page.projections.unwrap().as_of_seq, Some(6));

    // Without any roster the read serves the global layer without asking.
    let (ctx2, bare) = composition(Some(dir.clone()), None);
    let page = bare.history("orphan", None, None).await.unwrap();
    assert_eq!(page.events.len(), 7);
    ctx.dispose();
    ctx2.dispose();
}

#[tokio::test]
async fn unknown_sessions_are_not_found_and_broken_logs_are_internal_errors_naming_the_session() {
    let dir = temp_dir("errors");
    let (ctx, history) = composition(Some(dir.clone()), None);
    for id in ["missing", "../etc/passwd", ""] {
        let err = history.history(id, None, None).await.unwrap_err();
        assert_eq!(
            err,
            HistoryError::NotFound {
                session: id.to_owned()
            }
        );
        assert_eq!(err.code(), "session-not-found");
    }
    std::fs::write(
        dir.join("bad.jsonl"),
        "{\"type\":\"session\",\"version\":7,\"id\":\"bad\",\"createdAt\":0}\n",
    )
    .unwrap();
    let err = history.history("bad", None, None).await.unwrap_err();
    assert_eq!(err.code(), "internal");
    assert!(
        err.to_string()
            .starts_with("history unavailable for session \"bad\": session file "),
        "{err}"
    );
    assert!(err.to_string().contains("format version 7"), "{err}");

    // A composition without sessions: internal, named.
    let bare = Context::root();
    let err = History::new(bare.clone())
        .history("x", None, None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "history unavailable for session \"x\": the composition has no `sessions` service"
    );
    bare.dispose();
    ctx.dispose();
}
