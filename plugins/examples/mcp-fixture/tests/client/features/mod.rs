//! The client's features beyond tools (issue 29): roots, annotations and the tool filter,
//! progress and the call ceiling, prompts and resources (listed in canonical order, re-listed
//! on `list_changed`, bounded, read by the model through `read_resource`).
//!
//! A module of the `client` test binary (one binary links faster than two).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use cordis_mcp::{
    Elicitation, ElicitationAnswer, ElicitationRequest, Elicitor, McpProgress, McpServer,
    TRACE_CATALOG, ToolFilter, servers,
};
use cordis_runtime::prelude::*;
use cordis_tools::{Effect, ToolCall, ToolRegistry};
use cordis_workspace::{WorkspaceConfig, WorkspacePlugin};
use serde_json::{Value, json};

use super::{DEADLINE, call, cfg, eventually, log_lines, names, root_with_tools, settle, text};

mod bounds;
mod sampling;
mod sandbox;

fn only_server(root: &Context) -> McpServer {
    let mut all = servers(root);
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_declared_and_answered_with_the_workspace_root_as_a_file_uri() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_with_tools();
    root.plugin(
        WorkspacePlugin,
        WorkspaceConfig {
            root: Some(dir.path().to_owned()),
        },
    );
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "roots"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let mut answer: Value =
        serde_json::from_str(&text(&call(&root, "mcp__fx__roots", json!({})).await)).unwrap();
    // Declared: roots and sampling (on by default), in whatever key order; no elicitation,
    // as no front end answers it here.
    let mut declared: Vec<String> = serde_json::from_value(answer["capabilities"].take()).unwrap();
    declared.sort();
    assert_eq!(declared, ["roots", "sampling"]);
    let canonical = dir.path().canonicalize().unwrap();
    assert_eq!(
        answer,
        json!({"capabilities": null, "roots": [{
            "uri": format!("file://{}", canonical.display()),
            "name": canonical.file_name().unwrap().to_str().unwrap()
        }]})
    );
    root.dispose();

    let bare = root_with_tools();
    let entry = bare.plugin(McpPlugin, cfg("fx", &["--tools", "roots"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let answer: Value =
        serde_json::from_str(&text(&call(&bare, "mcp__fx__roots", json!({})).await)).unwrap();
    assert_eq!(answer["roots"], json!([]));
    bare.dispose();
}

use cordis_mcp::McpPlugin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_set_the_effect_class_only_when_trusted_and_the_filter_picks_tools() {
    let effects = |root: &Context| -> Vec<(String, Effect)> {
        let reg = root.get::<ToolRegistry>().unwrap();
        names(root)
            .into_iter()
            .map(|n| {
                let effect = reg.effect(&n, None).unwrap().0;
                (n, effect)
            })
            .collect()
    };
    let root = root_with_tools();
    let mut trusted = cfg("fx", &["--tools", "add,greet,slow,pid"]);
    trusted.trust_annotations = true;
    let entry = root.plugin(McpPlugin, trusted);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert_eq!(
        effects(&root),
        [
            ("mcp__fx__add".to_owned(), Effect::Read),
            ("mcp__fx__greet".to_owned(), Effect::Network),
            ("mcp__fx__pid".to_owned(), Effect::Unknown),
            ("mcp__fx__slow".to_owned(), Effect::Unknown),
        ]
    );
    root.dispose();

    // Untrusted (the default): every tool asks, whatever it claims.
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "add,greet,slow,pid"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert!(effects(&root).iter().all(|(_, e)| *e == Effect::Unknown));
    root.dispose();

    // The filter: allow by raw name (the dotted one too), deny wins over the server's list.
    let root = root_with_tools();
    let mut filtered = cfg("fx", &[]);
    filtered.tools = ToolFilter {
        allow: Some(
            ["add", "admin.reset", "greet", "nope"]
                .map(String::from)
                .into(),
        ),
        deny: ["greet"].map(String::from).into(),
    };
    let entry = root.plugin(McpPlugin, filtered);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert_eq!(
        names(&root),
        [
            "mcp__fx__add",
            &cordis_mcp::public_name("fx", "admin.reset")
        ]
    );
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_keeps_a_call_past_its_timeout_is_emitted_in_order_and_the_ceiling_still_ends_it()
{
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fixture.log");
    let root = root_with_tools();
    let seen: Arc<Mutex<Vec<McpProgress>>> = Arc::default();
    let sink = seen.clone();
    let _listener = root.on::<McpProgress>(move |e| sink.lock().unwrap().push(e.clone()));
    let mut c = cfg(
        "fx",
        &["--tools", "progress", "--log", log.to_str().unwrap()],
    );
    // 30 reports 50 ms apart: 1.5 s in all, past the 1 s wait that each report starts again.
    c.call_timeout_ms = 1_000;
    c.max_call_ms = 4_000;
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let done = call(
        &root,
        "mcp__fx__progress",
        json!({"steps": 30, "everyMs": 50}),
    )
    .await;
    assert!(!done.is_error, "{done:?}");
    assert_eq!(text(&done), "done after 30 steps");
    assert!(log_lines(&log).contains(&"progress token true".to_owned()));
    let events = seen.lock().unwrap().clone();
    assert!(!events.is_empty(), "progress was emitted");
    assert!(
        events.windows(2).all(|w| w[0].progress < w[1].progress),
        "only forward: {events:?}"
    );
    let first = &events[0];
    assert_eq!(
        (
            first.call_id.as_str(),
            first.server.as_str(),
            first.tool.as_str(),
            first.total
        ),
        ("c1", "fx", "progress", Some(30.0))
    );
    assert_eq!(
        first.message.as_deref(),
        Some(format!("step {}", first.progress).as_str())
    );

    // Endless progress: the ceiling (maxCallMs) ends the call with the registry's timeout,
    // and the server hears the cancellation.
    let reg = root.get::<ToolRegistry>().unwrap();
    let endless = ToolCall {
        call_id: "c2".into(),
        name: "mcp__fx__progress".into(),
        arguments: json!({"steps": 100_000, "everyMs": 50}),
    };
    let ended = tokio::time::timeout(DEADLINE, reg.execute(endless, None))
        .await
        .expect("the ceiling ends the call");
    assert_eq!(ended.code.as_deref(), Some("TOOL_TIMEOUT"), "{ended:?}");
    eventually("the server to hear the cancellation", || {
        let heard = log_lines(&log).contains(&"cancelled progress".to_owned());
        async move { heard }
    })
    .await;
    let c2 = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.call_id == "c2")
        .count();
    // 4 s of reports 50 ms apart, each passed on at most once.
    assert!(c2 > 0 && c2 <= 80, "{c2} events for the endless call");
    root.dispose();
}

fn catalog_args(seed: u64) -> Vec<String> {
    [
        "--tools",
        "toggle",
        "--catalog",
        "--extra-catalog",
        "6",
        "--page-size",
        "3",
        "--seed",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([seed.to_string()])
    .collect()
}

fn catalog_json(server: &McpServer) -> String {
    serde_json::to_string(&json!({
        "prompts": server.prompts(),
        "resources": server.resources(),
        "templates": server.resource_templates(),
    }))
    .unwrap()
}

fn catalogs(root: &Context) -> Vec<String> {
    root.trace_details(TRACE_CATALOG)
}

async fn toggle_catalog(root: &Context, args: Value) -> String {
    let before = catalogs(root).len();
    let r = call(root, "mcp__fx__toggle", args).await;
    assert!(!r.is_error, "{r:?}");
    eventually("a catalog re-list", || {
        let n = catalogs(root).len();
        async move { n > before }
    })
    .await;
    catalogs(root).last().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_resources_are_listed_sorted_read_and_relisted_on_list_changed() {
    let root = root_with_tools();
    let args = catalog_args(5);
    let entry = root.plugin(
        McpPlugin,
        cordis_mcp::McpConfig::stdio("fx", super::fixture(), args),
    );
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert_eq!(
        names(&root),
        ["mcp__fx__read_resource", "mcp__fx__toggle"],
        "a server with resources gets the reader"
    );
    let fx = only_server(&root);
    let prompts: Vec<String> = fx.prompts().into_iter().map(|p| p.name).collect();
    assert_eq!(
        prompts,
        [
            "greeting",
            "p_00",
            "p_01",
            "p_02",
            "p_03",
            "p_04",
            "p_05",
            "review",
            "summarize"
        ]
    );
    let uris: Vec<String> = fx.resources().into_iter().map(|r| r.uri).collect();
    assert_eq!(uris[..3], ["mem://big", "mem://logo", "mem://r/00"]);
    assert_eq!(uris.len(), 9);
    assert_eq!(fx.resource_templates()[0].uri_template, "mem://notes/{id}");

    let review = fx
        .prompts()
        .into_iter()
        .find(|p| p.name == "review")
        .unwrap();
    assert!(review.arguments[0].required && !review.arguments[1].required);
    let rendered = fx
        .get_prompt("review", BTreeMap::from([("file".into(), "a.rs".into())]))
        .await
        .unwrap();
    assert_eq!(
        rendered.messages,
        [json!({"role": "user", "content": {"type": "text", "text": "Review a.rs (focus: )."}})]
    );
    let missing = fx.get_prompt("review", BTreeMap::new()).await.unwrap_err();
    assert_eq!(
        missing.to_string(),
        "mcp(fx): prompts/get failed: prompt \"review\" needs argument \"file\""
    );
    let unknown = fx.get_prompt("nope", BTreeMap::new()).await.unwrap_err();
    assert!(
        unknown.to_string().contains("lists no prompt \"nope\""),
        "{unknown}"
    );

    let note = fx.read_resource("mem://notes/7").await.unwrap();
    assert_eq!(note[0].text.as_deref(), Some("note 7"));
    let too_long = fx
        .read_resource(&"x".repeat(8 * 1024 + 1))
        .await
        .unwrap_err();
    assert!(
        too_long
            .to_string()
            .contains("8193 bytes, over the 8192-byte limit"),
        "{too_long}"
    );
    let absent = fx.read_resource("mem://absent").await.unwrap_err();
    assert!(
        absent.to_string().contains("no resource mem://absent"),
        "{absent}"
    );

    // The model's reader: text as text, 300 KiB cut at 256 KiB saying so, a blob described.
    let big = call(&root, "mcp__fx__read_resource", json!({"uri": "mem://big"})).await;
    let big_text = text(&big);
    let note =
        "\n[cut: 262144 of 307200 bytes of mem://big shown; the limit of one read is 262144 bytes]";
    assert!(
        big_text.ends_with(note),
        "{}",
        &big_text[big_text.len() - 200..]
    );
    assert_eq!(big_text.len(), 262_144 + note.len());
    let logo = call(
        &root,
        "mcp__fx__read_resource",
        json!({"uri": "mem://logo"}),
    )
    .await;
    assert!(
        text(&logo).starts_with("[binary resource mem://logo: image/png, about"),
        "{logo:?}"
    );
    let reg = root.get::<ToolRegistry>().unwrap();
    assert_eq!(
        reg.effect("mcp__fx__read_resource", None).unwrap().0,
        Effect::Read
    );

    // list_changed: re-listed, still sorted; an invalid list keeps the previous one.
    let outcome = toggle_catalog(&root, json!({"prompt": "a_first"})).await;
    assert!(outcome.ends_with("fx: prompts applied"), "{outcome}");
    assert_eq!(fx.prompts()[0].name, "a_first");
    let outcome = toggle_catalog(&root, json!({"resource": "mem://0"})).await;
    assert!(outcome.ends_with("fx: resources applied"), "{outcome}");
    assert_eq!(fx.resources()[0].uri, "mem://0");
    let before = fx.prompts();
    let outcome = toggle_catalog(&root, json!({"duplicatePrompt": true})).await;
    assert!(
        outcome.contains("fx: prompts kept (mcp(fx): prompts/list failed: the server listed"),
        "{outcome}"
    );
    assert_eq!(fx.prompts(), before);

    // Gone with its entry.
    entry.dispose();
    assert!(servers(&root).is_empty());
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_listing_prompts_and_resources_in_seeded_random_orders_gives_one_catalog() {
    let mut seen = BTreeSet::new();
    for seed in 0..6u64 {
        let root = root_with_tools();
        let entry = root.plugin(
            McpPlugin,
            cordis_mcp::McpConfig::stdio("fx", super::fixture(), catalog_args(seed)),
        );
        assert_eq!(settle(&entry).await, ScopeStatus::Active);
        seen.insert(catalog_json(&only_server(&root)));
        root.dispose();
    }
    assert_eq!(seen.len(), 1, "one catalog for every server order");
    // 9 prompts, 9 resources and a template, all there.
    let catalog: Value = serde_json::from_str(seen.first().unwrap()).unwrap();
    assert_eq!(catalog["prompts"].as_array().unwrap().len(), 9);
    assert_eq!(catalog["resources"].as_array().unwrap().len(), 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filter_can_leave_the_reader_out_and_two_entries_with_one_name_list_neither() {
    let root = root_with_tools();
    let mut c = cordis_mcp::McpConfig::stdio("fx", super::fixture(), catalog_args(1));
    c.tools.deny = ["read_resource".to_owned()].into();
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert_eq!(names(&root), ["mcp__fx__toggle"]);
    assert_eq!(only_server(&root).name(), "fx");
    // A second entry named `fx`: the name is contested and the directory lists neither.
    let again = root.plugin(McpPlugin, cfg("fx", &["--tools", "add"]));
    assert_eq!(settle(&again).await, ScopeStatus::Active);
    assert!(servers(&root).is_empty());
    again.dispose();
    assert_eq!(only_server(&root).name(), "fx");
    root.dispose();
}

/// A scripted front end: answers in order, and records what it was asked.
struct Scripted {
    answers: Mutex<std::collections::VecDeque<ElicitationAnswer>>,
    asked: Mutex<Vec<ElicitationRequest>>,
}

impl Elicitor for Scripted {
    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> futures_util::future::BoxFuture<'static, ElicitationAnswer> {
        self.asked.lock().unwrap().push(request);
        let answer = self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(ElicitationAnswer::Decline);
        Box::pin(async move { answer })
    }
}

fn elicitations(root: &Context) -> Vec<String> {
    root.trace_details(cordis_mcp::TRACE_ELICITATION)
}

async fn ask(root: &Context, args: Value) -> Value {
    let r = call(root, "mcp__fx__ask", args).await;
    assert!(!r.is_error, "{r:?}");
    serde_json::from_str(&text(&r)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_declines_with_its_reason_without_a_front_end_and_checks_what_one_answers() {
    // No front end (CI, piped): declined, the reason traced.
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "ask"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert_eq!(ask(&root, json!({})).await, json!({"action": "decline"}));
    let traced = elicitations(&root);
    assert!(
        traced[0].ends_with("fx: declined (no one to ask: no front end answers elicitations here)"),
        "{traced:?}"
    );
    root.dispose();

    // A front end answers: checked against the form, defaults applied.
    let root = root_with_tools();
    let front = Arc::new(Scripted {
        answers: Mutex::new(
            [
                ElicitationAnswer::Accept(json!({"name": "Ada"}).as_object().unwrap().clone()),
                ElicitationAnswer::Accept(
                    json!({"name": "Ada", "age": -1})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
                ElicitationAnswer::Cancel,
                ElicitationAnswer::Accept(serde_json::Map::new()),
            ]
            .into(),
        ),
        asked: Mutex::default(),
    });
    let _service = root.provide(Elicitation(front.clone())).unwrap();
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "ask"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert_eq!(
        ask(&root, json!({})).await,
        json!({"action": "accept", "content": {"name": "Ada", "color": "red"}})
    );
    {
        let asked = front.asked.lock().unwrap();
        assert_eq!(
            (asked[0].server.as_str(), asked[0].message.as_str()),
            ("fx", "Who are you?")
        );
        assert_eq!(asked[0].schema["required"], json!(["name"]));
    }
    assert_eq!(ask(&root, json!({})).await, json!({"action": "decline"}));
    assert_eq!(ask(&root, json!({})).await, json!({"action": "cancel"}));
    // URL mode: the page is shown, an accepted answer carries nothing.
    assert_eq!(
        ask(&root, json!({"url": true})).await,
        json!({"action": "accept"})
    );
    {
        let asked = front.asked.lock().unwrap();
        let page = asked[3].url.clone().unwrap();
        assert_eq!(
            (page.url.as_str(), page.id.as_str()),
            ("https://example.test/x", "e1")
        );
        assert_eq!(asked[3].message, "Open this");
    }
    // A page that is not https, and a form over the limit: declined without asking anyone.
    // (rmcp itself refuses a form with a nested property before it gets here.)
    assert_eq!(
        ask(&root, json!({"url": "http://evil.example/x"})).await,
        json!({"action": "decline"})
    );
    let properties: serde_json::Map<String, Value> = (0..65)
        .map(|i| (format!("p{i:02}"), json!({"type": "boolean"})))
        .collect();
    let big = json!({"type": "object", "properties": properties});
    assert_eq!(
        ask(&root, json!({"form": big})).await,
        json!({"action": "decline"})
    );
    assert_eq!(
        front.asked.lock().unwrap().len(),
        4,
        "asked four times, not six"
    );
    let traced: Vec<String> = elicitations(&root)
        .iter()
        .map(|t| t.split_once("fx: ").unwrap().1.to_owned())
        .collect();
    assert_eq!(
        traced,
        [
            "accepted",
            "declined (the answer does not fit the form: property \"age\" is out of its range)",
            "cancelled by the user",
            "accepted (the user opens the page)",
            "declined (the page \"http://evil.example/x\" is not https (plain http only on this machine))",
            "declined (the form asks for 65 properties, over the 64-property limit)",
        ]
    );
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_content_is_checked_against_the_output_schema() {
    let root = root_with_tools();
    let entry = root.plugin(McpPlugin, cfg("fx", &["--tools", "structured"]));
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let good = call(&root, "mcp__fx__structured", json!({"mode": "good"})).await;
    assert!(!good.is_error, "{good:?}");
    assert_eq!(good.content["structuredContent"], json!({"sum": 3}));
    let bad = call(&root, "mcp__fx__structured", json!({"mode": "bad"})).await;
    assert!(bad.is_error);
    let why = bad.content.as_str().unwrap();
    assert!(
        why.starts_with(
            "mcp(fx): the structuredContent of tool \"structured\" does not match its outputSchema: /sum: "
        ),
        "{why}"
    );
    let missing = call(&root, "mcp__fx__structured", json!({"mode": "missing"})).await;
    assert_eq!(
        missing.content,
        json!(
            "mcp(fx): tool \"structured\" declares an outputSchema but its result has no structuredContent"
        )
    );
    root.dispose();
}

/// A front end that takes its time (a person reading the form).
struct Slow(std::time::Duration);

impl Elicitor for Slow {
    fn elicit(
        &self,
        _request: ElicitationRequest,
    ) -> futures_util::future::BoxFuture<'static, ElicitationAnswer> {
        let wait = self.0;
        Box::pin(async move {
            tokio::time::sleep(wait).await;
            ElicitationAnswer::Accept(json!({"name": "Ada"}).as_object().unwrap().clone())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_on_the_user_is_not_timed_out_by_call_timeout_ms() {
    let root = root_with_tools();
    let _service = root
        .provide(Elicitation(Arc::new(Slow(
            std::time::Duration::from_millis(1_500),
        ))))
        .unwrap();
    let mut c = cfg("fx", &["--tools", "ask"]);
    // The user answers after 1.5 s, past the 0.5 s wait: paused while they are asked.
    c.call_timeout_ms = 500;
    let entry = root.plugin(McpPlugin, c);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    assert_eq!(
        ask(&root, json!({})).await,
        json!({"action": "accept", "content": {"name": "Ada", "color": "red"}})
    );
    root.dispose();
}
