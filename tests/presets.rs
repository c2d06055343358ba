//! Agent presets end to end through the host's loader (the reference's §1.3 tests): standing
//! mounts, generations, refusals, the session log, and the invariant.

use std::path::{Path, PathBuf};

use cordis::builtins::{for_config, standard};
use cordis::host::loader::boot;
use cordis::host::plan::{PlanOptions, load_plan};
use cordis_agent_loop::{AgentLoop, AgentOptions};
use cordis_agent_presets::{AgentPresets, JoinError};
use cordis_runtime::Context;
use cordis_session::resolve_session_preset;
use cordis_system_prompt::{AssembleContext, SystemPrompt};

/// A host composition with a roster over `<dir>/presets` (default `a`), booted.
async fn host(dir: &Path, extra: &str) -> Context {
    host_with(dir, r#"[{text: "ok"}]"#, extra).await
}

/// [`host`] with these scripted model responses.
async fn host_with(dir: &Path, responses: &str, extra: &str) -> Context {
    let sessions = dir.join(".sessions");
    let source = format!(
        r#"
- id: system-prompt
  name: system-prompt
  config: {{persona: "deployment persona"}}
- id: tools
  name: tools
- id: llm
  name: llm
  config: {{adapter: scripted, model: m, repeat: true, responses: {responses}}}
- id: sessions
  name: sessions
  config: {{root: "{}"}}
- id: agent-loop
  name: agent-loop
- id: presets
  name: agent-presets
  config: {{roots: [{{path: presets}}], default: a, includeUserRoot: false}}
{extra}"#,
        sessions.display()
    );
    let file = dir.join("cordis.yml");
    std::fs::write(&file, &source).unwrap();
    let options = PlanOptions::default();
    let table = for_config(&standard(), &file, &options, &|_| None);
    let plan = load_plan(
        &source,
        &file.display().to_string(),
        &|_| None,
        &table,
        &options,
    )
    .unwrap();
    let root = Context::root();
    let report = boot(&root, &plan).await;
    assert!(report.all_active(), "{:?}", report.entries);
    root
}

/// Writes preset `id` with this composition (and optional preset.yml).
fn preset(dir: &Path, id: &str, composition: &str, meta: Option<&str>) -> PathBuf {
    let p = dir.join("presets").join(id);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("agent.cordis.yml"), composition).unwrap();
    if let Some(meta) = meta {
        std::fs::write(p.join("preset.yml"), meta).unwrap();
    }
    p.join("agent.cordis.yml")
}

/// A composition declaring one tool `name` (described `desc`) and a persona.
fn with_tool(name: &str, desc: &str, persona: &str) -> String {
    format!(
        r#"
- id: tools-{name}
  name: tool-declare
  config:
    tools:
      - {{name: {name}, description: "{desc}", parameters: {{type: object}}}}
- id: persona
  name: persona
  config: {{text: "{persona}"}}
"#
    )
}

fn services(
    root: &Context,
) -> (
    std::sync::Arc<AgentPresets>,
    std::sync::Arc<AgentLoop>,
    std::sync::Arc<SystemPrompt>,
) {
    (
        root.get::<AgentPresets>().expect("roster"),
        root.get::<AgentLoop>().expect("agent loop"),
        root.get::<SystemPrompt>().expect("prompt"),
    )
}

/// Tool names and the rendered system prompt of an assembly.
async fn seen(prompt: &SystemPrompt, ctx: AssembleContext) -> (Vec<String>, String) {
    let a = prompt.assemble(ctx).await.unwrap();
    (
        a.tools.iter().map(|t| t.name.clone()).collect(),
        a.render().unwrap(),
    )
}

fn options(id: &str) -> AgentOptions {
    AgentOptions::new(id, "m")
}

#[tokio::test]
async fn gives_each_session_only_its_own_preset() {
    let dir = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", &with_tool("a_tool", "A", "I am A."), None);
    preset(dir.path(), "b", &with_tool("b_tool", "B", "I am B."), None);
    let root = host(dir.path(), "").await;
    let (roster, agents, prompt) = services(&root);
    let (x, sx) = roster
        .create_agent(&agents, options("x"), Some("a"))
        .await
        .unwrap();
    let (y, sy) = roster
        .create_agent(&agents, options("y"), Some("b"))
        .await
        .unwrap();
    assert_ne!(sx.key, sy.key);
    let (tools, system) = seen(&prompt, AssembleContext::scoped(x.scope_key())).await;
    assert_eq!(tools, ["a_tool"]);
    assert_eq!(system, "I am A.");
    let (tools, system) = seen(&prompt, AssembleContext::scoped(y.scope_key())).await;
    assert_eq!(tools, ["b_tool"]);
    assert_eq!(system, "I am B.");
    // Nothing of either preset reaches the global view.
    let (tools, system) = seen(&prompt, AssembleContext::global()).await;
    assert!(tools.is_empty(), "{tools:?}");
    assert_eq!(system, "deployment persona");
    // Each session records the preset it was created with.
    assert_eq!(x.session().header().agent_preset.as_deref(), Some("a"));
    assert_eq!(y.session().preset().as_deref(), Some("b"));
    root.dispose();
}

#[tokio::test]
async fn lets_two_sessions_share_one_preset_without_colliding() {
    let dir = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", &with_tool("a_tool", "A", "I am A."), None);
    let root = host(dir.path(), "").await;
    let (roster, agents, prompt) = services(&root);
    let (x, sx) = roster
        .create_agent(&agents, options("x"), None)
        .await
        .unwrap();
    let (y, sy) = roster
        .create_agent(&agents, options("y"), None)
        .await
        .unwrap();
    assert_eq!(sx, sy, "one standing mount for both");
    assert_eq!(roster.mounted().len(), 1);
    assert_ne!(x.scope_key(), y.scope_key());
    assert_ne!(x.session().id(), y.session().id());
    // An agent's own registration stays its own.
    let tools = agents.tools();
    let _ = tools
        .register_scoped(
            &x.context().unwrap(),
            x.scope_key(),
            cordis_tools::ToolDefinition::new(
                cordis_tools::ToolSchema {
                    name: "x_only".into(),
                    description: "x".into(),
                    parameters: serde_json::json!({"type": "object"}).into(),
                },
                |_, _| async { Ok(cordis_tools::ToolOutput::new("x")) },
            ),
        )
        .unwrap();
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(x.scope_key()))
            .await
            .0,
        ["a_tool", "x_only"]
    );
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(y.scope_key()))
            .await
            .0,
        ["a_tool"]
    );
    x.dispose();
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(y.scope_key()))
            .await
            .0,
        ["a_tool"]
    );
    assert_eq!(
        y.run_turn("hi").await.unwrap(),
        cordis_session::TurnEndReason::Completed
    );
    root.dispose();
}

#[tokio::test]
async fn rolls_the_whole_agent_back_when_a_row_fails_and_names_every_failed_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = preset(
        dir.path(),
        "a",
        &format!(
            "{}\n- id: boom\n  name: debug/fault\n  config: {{mode: error}}\n- id: waits\n  name: debug/noop\n  inject: [nobody]\n",
            with_tool("a_tool", "A", "I am A.")
        ),
        None,
    );
    let root = host(dir.path(), "").await;
    let (roster, agents, prompt) = services(&root);
    let err = roster
        .create_agent(&agents, options("x"), Some("a"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("agent-presets: preset \"a\" failed to mount: 2 row(s) did not activate:\n  - boom (debug/fault): failed: "),
        "{text}"
    );
    assert!(
        text.contains("\n  - waits (debug/noop): pending: waiting for service \"nobody\""),
        "{text}"
    );
    assert!(text.ends_with(&format!("({})", path.display())), "{text}");
    // Nothing remains: no agent, no session, no standing scope, none of the good row's tools.
    assert!(agents.agent("x").is_none());
    assert!(!dir.path().join(".sessions/x.jsonl").exists());
    assert!(roster.mounted().is_empty());
    assert!(agents.tools().schemas(None).is_empty());
    let _ = prompt;
    root.dispose();
}

#[tokio::test]
async fn rejects_a_row_that_publishes_a_process_global_service() {
    let dir = tempfile::tempdir().unwrap();
    // Declared up front (Plugin::provides): refused before anything applies.
    preset(
        dir.path(),
        "declared",
        "- id: marker\n  name: debug/provide\n  config: {service: alpha}\n",
        None,
    );
    // Not declared: caught after the mount, which is then undone.
    preset(
        dir.path(),
        "runtime",
        "- id: engine\n  name: code-runtime\n",
        None,
    );
    let root = host(dir.path(), "").await;
    let (roster, agents, _) = services(&root);
    let err = roster.standing_key_for(Some("declared")).await.unwrap_err();
    assert!(
        err.to_string().contains(
            "failed to mount: row(s) \"marker\" (debug/provide) published process-global service(s) [alpha]; "
        ),
        "{err}"
    );
    let err = roster
        .create_agent(&agents, options("x"), Some("runtime"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "failed to mount: row(s) \"engine\" (code-runtime) published process-global service(s) [code-runtime]; "
        ),
        "{err}"
    );
    assert!(
        !root.has_service("code-runtime"),
        "the refused mount is undone"
    );
    assert!(!root.has_service("alpha"));
    assert!(agents.agent("x").is_none());
    root.dispose();
}

/// Rewrites a composition so its stamp surely changes (the size differs).
fn edit(path: &Path, composition: &str) {
    std::fs::write(path, composition).unwrap();
}

#[tokio::test]
async fn starts_a_new_generation_for_later_sessions_while_joined_ones_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let path = preset(dir.path(), "a", &with_tool("a_tool", "v1", "I am A."), None);
    let root = host(dir.path(), "").await;
    let (roster, agents, prompt) = services(&root);
    let (x, sx) = roster
        .create_agent(&agents, options("x"), None)
        .await
        .unwrap();
    assert_eq!(sx.generation, 1);
    // Unchanged file: the same generation.
    assert_eq!(roster.standing_key_for(None).await.unwrap(), sx);
    edit(&path, &with_tool("a_tool", "version two", "I am A, again."));
    let (y, sy) = roster
        .create_agent(&agents, options("y"), None)
        .await
        .unwrap();
    assert_eq!(sy.generation, 2);
    assert_ne!(sy.key, sx.key);
    let describe = |key| {
        let prompt = &prompt;
        async move {
            let a = prompt.assemble(AssembleContext::scoped(key)).await.unwrap();
            (a.tools[0].description.clone(), a.render().unwrap())
        }
    };
    assert_eq!(
        describe(x.scope_key()).await,
        ("v1".to_owned(), "I am A.".to_owned())
    );
    assert_eq!(
        describe(y.scope_key()).await,
        ("version two".to_owned(), "I am A, again.".to_owned())
    );
    assert_eq!(roster.composed_preset(x.scope_key()), Some(sx));
    assert_eq!(
        roster.mounted().len(),
        2,
        "the superseded generation stays mounted"
    );
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gives_two_sessions_racing_the_refreshed_file_one_shared_new_generation() {
    let dir = tempfile::tempdir().unwrap();
    let path = preset(dir.path(), "a", &with_tool("a_tool", "v1", "I am A."), None);
    let root = host(dir.path(), "").await;
    let (roster, agents, _) = services(&root);
    let (_, first) = roster
        .create_agent(&agents, options("x"), None)
        .await
        .unwrap();
    edit(&path, &with_tool("a_tool", "version two", "I am A."));
    let (r1, r2) = (roster.clone(), roster.clone());
    let (a1, a2) = (agents.clone(), agents.clone());
    let (y, z) = tokio::join!(
        tokio::spawn(async move { r1.create_agent(&a1, options("y"), None).await.map(|r| r.1) }),
        tokio::spawn(async move { r2.create_agent(&a2, options("z"), None).await.map(|r| r.1) }),
    );
    let (y, z) = (y.unwrap().unwrap(), z.unwrap().unwrap());
    assert_eq!(y, z, "one shared generation");
    assert_eq!(y.generation, 2);
    assert_ne!(y.key, first.key);
    assert_eq!(roster.mounted().len(), 2);
    root.dispose();
}

#[tokio::test]
async fn hands_a_host_reader_the_standing_key_without_starting_an_agent() {
    let dir = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", &with_tool("a_tool", "A", "I am A."), None);
    let root = host(dir.path(), "").await;
    let (roster, agents, prompt) = services(&root);
    let standing = roster.standing_key_for(Some("a")).await.unwrap();
    assert!(agents.agent_ids().is_empty());
    assert!(
        !dir.path().join(".sessions").exists()
            || std::fs::read_dir(dir.path().join(".sessions"))
                .unwrap()
                .next()
                .is_none()
    );
    // A scope-only read is not an agent: the invariant admits it.
    let (tools, system) = seen(&prompt, AssembleContext::scoped(standing.key)).await;
    assert_eq!(
        (tools, system.as_str()),
        (vec!["a_tool".to_owned()], "I am A.")
    );
    assert_eq!(roster.standing_key_for(Some("a")).await.unwrap(), standing);
    root.dispose();
}

#[tokio::test]
async fn prefers_a_logged_switch_over_the_header() {
    let dir = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", &with_tool("a_tool", "A", "I am A."), None);
    preset(dir.path(), "b", &with_tool("b_tool", "B", "I am B."), None);
    let root = host(dir.path(), "").await;
    let (roster, agents, prompt) = services(&root);
    let (x, _) = roster
        .create_agent(&agents, options("x"), Some("a"))
        .await
        .unwrap();
    let b = roster.switch(&x, "b").await.unwrap();
    assert_eq!(x.session().header().agent_preset.as_deref(), Some("a"));
    let events = x.session().events();
    assert_eq!(
        resolve_session_preset(x.session().header(), &events).as_deref(),
        Some("b")
    );
    assert_eq!(roster.composed_preset(x.scope_key()), Some(b));
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(x.scope_key()))
            .await
            .0,
        ["b_tool"]
    );
    // A switch to a preset that does not mount leaves the agent where it was.
    let err = roster.switch(&x, "nope").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent-presets: preset \"nope\" not found (available: standard, code, minimal, creative, a, b)"
    );
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(x.scope_key()))
            .await
            .0,
        ["b_tool"]
    );
    // After the first turn the conversation keeps its preset.
    x.run_turn("hi").await.unwrap();
    let err = roster.switch(&x, "a").await.unwrap_err();
    assert!(matches!(err, JoinError::NotBlank { turns: 1, .. }), "{err}");
    root.dispose();
}

#[tokio::test]
async fn an_agent_that_joined_no_preset_cannot_assemble_while_a_scope_read_can() {
    let dir = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", &with_tool("a_tool", "A", "I am A."), None);
    let root = host(dir.path(), "").await;
    let (_, agents, prompt) = services(&root);
    let loner = agents.create_agent(options("loner")).await.unwrap();
    let err = prompt
        .assemble(AssembleContext::scoped(loner.scope_key()))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "agent-presets: agent \"loner\" (scope {}) assembled a prompt without joining any agent preset",
            loner.scope_key().0
        )),
        "{err}"
    );
    // Its turn fails with that reason instead of reaching the model.
    let end = loner.run_turn("hi").await.unwrap();
    assert!(
        matches!(&end, cordis_session::TurnEndReason::Error { message, .. } if message.contains("without joining any agent preset")),
        "{end:?}"
    );
    // Scope-only reads are not agents.
    assert!(
        prompt
            .assemble(AssembleContext::scoped(cordis_tools::ScopeKey(999_999)))
            .await
            .is_ok()
    );
    assert!(prompt.assemble(AssembleContext::global()).await.is_ok());
    root.dispose();
}

#[tokio::test]
async fn without_a_roster_an_unjoined_agent_assembles_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let root = host_without_roster(dir.path()).await;
    let agents = root.get::<AgentLoop>().unwrap();
    let prompt = root.get::<SystemPrompt>().unwrap();
    let loner = agents.create_agent(options("loner")).await.unwrap();
    assert!(
        prompt
            .assemble(AssembleContext::scoped(loner.scope_key()))
            .await
            .is_ok()
    );
    root.dispose();
}

async fn host_without_roster(dir: &Path) -> Context {
    let source = "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n- id: llm\n  name: llm\n  config: {adapter: scripted, model: m, responses: []}\n- id: sessions\n  name: sessions\n  config: {memory: true}\n- id: agent-loop\n  name: agent-loop\n";
    let file = dir.join("cordis.yml");
    let options = PlanOptions::default();
    let table = for_config(&standard(), &file, &options, &|_| None);
    let plan = load_plan(source, "cordis.yml", &|_| None, &table, &options).unwrap();
    let root = Context::root();
    assert!(boot(&root, &plan).await.all_active());
    root
}

#[tokio::test]
async fn a_restriction_and_a_presentation_reach_only_the_joined_agents() {
    let dir = tempfile::tempdir().unwrap();
    let global = "- id: g\n  name: tool-declare\n  config:\n    tools:\n      - {name: bash, description: b, parameters: {type: object}}\n      - {name: edit_file, description: e, parameters: {type: object}}\n      - {name: grep, description: g, parameters: {type: object}}\n- id: code-runtime\n  name: code-runtime\n";
    preset(
        dir.path(),
        "a",
        "- id: only\n  name: tool-restrict\n  config: {allow: [bash, edit_file]}\n",
        None,
    );
    preset(
        dir.path(),
        "c",
        "- id: mode\n  name: tool-presentation\n  config: {mode: code}\n",
        None,
    );
    preset(dir.path(), "plain", "[]\n", None);
    let root = host(dir.path(), global).await;
    let (roster, agents, prompt) = services(&root);
    let (a, _) = roster
        .create_agent(&agents, options("a"), Some("a"))
        .await
        .unwrap();
    let (c, _) = roster
        .create_agent(&agents, options("c"), Some("c"))
        .await
        .unwrap();
    let (p, _) = roster
        .create_agent(&agents, options("p"), Some("plain"))
        .await
        .unwrap();
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(a.scope_key()))
            .await
            .0,
        ["bash", "edit_file"]
    );
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(c.scope_key()))
            .await
            .0,
        ["run_code"]
    );
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(p.scope_key()))
            .await
            .0,
        ["bash", "edit_file", "grep"]
    );
    let tools = agents.tools();
    assert_eq!(
        tools.mode_for(Some(c.scope_key())),
        cordis_tools::PresentationMode::Code
    );
    assert_eq!(
        tools.mode_for(Some(p.scope_key())),
        cordis_tools::PresentationMode::Native
    );
    root.dispose();
}

#[tokio::test]
async fn an_edit_of_an_included_file_starts_a_new_generation_too() {
    let dir = tempfile::tempdir().unwrap();
    let base = preset(
        dir.path(),
        "base",
        &with_tool("a_tool", "v1", "I am A."),
        None,
    );
    preset(
        dir.path(),
        "a",
        "- id: base\n  name: cordis/include\n  config: {path: ../base/agent.cordis.yml}\n",
        None,
    );
    let root = host(dir.path(), "").await;
    let (roster, agents, prompt) = services(&root);
    let (x, sx) = roster
        .create_agent(&agents, options("x"), None)
        .await
        .unwrap();
    assert_eq!(roster.standing_key_for(None).await.unwrap(), sx);
    edit(&base, &with_tool("a_tool", "version two", "I am A."));
    let (y, sy) = roster
        .create_agent(&agents, options("y"), None)
        .await
        .unwrap();
    assert_eq!((sx.generation, sy.generation), (1, 2));
    let describe = |key| {
        let prompt = &prompt;
        async move {
            prompt
                .assemble(AssembleContext::scoped(key))
                .await
                .unwrap()
                .tools[0]
                .description
                .clone()
        }
    };
    assert_eq!(describe(x.scope_key()).await, "v1");
    assert_eq!(describe(y.scope_key()).await, "version two");
    root.dispose();
}

#[tokio::test]
async fn cold_history_reads_find_a_preset_through_the_standing_scopes_service() {
    let dir = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", &with_tool("a_tool", "A", "I am A."), None);
    let root = host(dir.path(), "").await;
    let (roster, agents, _) = services(&root);
    let seam = root
        .get::<cordis_history::StandingScopesService>()
        .expect("agent-presets/standing");
    let key = seam.scopes().standing_key_for(Some("a")).await.unwrap();
    assert!(agents.agent_ids().is_empty(), "no agent started");
    assert_eq!(roster.standing_key_for(Some("a")).await.unwrap().key, key);
    assert_eq!(seam.scopes().standing_key_for(None).await.unwrap(), key);
    let err = seam
        .scopes()
        .standing_key_for(Some("gone"))
        .await
        .unwrap_err();
    assert!(
        err.starts_with("agent-presets: preset \"gone\" not found"),
        "{err}"
    );
    root.dispose();
}

/// Calls tool `name` for `scope` through the registry, as the loop would.
async fn call(
    agents: &AgentLoop,
    scope: cordis_tools::ScopeKey,
    name: &str,
    arguments: serde_json::Value,
) -> Result<String, String> {
    let result = agents
        .tools()
        .execute(
            cordis_tools::ToolCall {
                call_id: "c1".into(),
                name: name.into(),
                arguments,
            },
            Some(scope),
        )
        .await;
    let value = serde_json::to_value(&result).unwrap();
    if value["is_error"] == true {
        Err(value["content"].to_string())
    } else {
        Ok(value["content"].to_string())
    }
}

/// A `workspace` row rooted at `dir`.
fn workspace_row(dir: &Path) -> String {
    format!(
        "- id: workspace\n  name: workspace\n  config: {{root: \"{}\"}}\n",
        dir.display()
    )
}

/// Answers every approval with no, keeping the card each prompt would have shown.
struct CardKeeper {
    presenters: cordis_presenter::Presenters,
    shown: std::sync::Mutex<Vec<cordis_presenter::Presentation>>,
}

impl cordis_approvals::Approver for CardKeeper {
    fn approve(
        &self,
        request: &cordis_approvals::ApprovalRequest,
    ) -> futures_util::future::BoxFuture<'static, cordis_approvals::Answer> {
        let card = self
            .presenters
            .present_approval(&request.call.name, &request.call.arguments);
        self.shown.lock().unwrap().push(card);
        Box::pin(async { cordis_approvals::Answer::Deny(Some("not now".into())) })
    }
}

#[tokio::test]
async fn a_mount_is_confined_to_the_workspace_and_its_approval_shows_what_it_starts() {
    // cordis_mount used to mount any file on the host, and approving "mount this path" let its
    // rows start any process without showing it.
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", "- id: cordis\n  name: tool-cordis\n", None);
    let outside = elsewhere.path().join("outside.yml");
    std::fs::write(&outside, with_tool("outside_tool", "O", "I am outside.")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.path().join("link.yml")).unwrap();
    std::fs::write(
        dir.path().join("includes.yml"),
        format!(
            "- id: inc\n  name: cordis/include\n  config: {{path: \"{}\"}}\n",
            outside.display()
        ),
    )
    .unwrap();
    let witness = dir.path().join("ran.txt");
    std::fs::write(
        dir.path().join("server.yml"),
        format!(
            "- id: srv\n  name: mcp\n  config: {{transport: stdio, server: srv, command: sh, args: [-c, \"id > {}\"]}}\n",
            witness.display()
        ),
    )
    .unwrap();
    let extra = format!(
        "{}- id: approvals\n  name: approvals\n  config: {{tools: {{cordis_mount: ask}}}}\n- id: presenter\n  name: presenter\n",
        workspace_row(dir.path())
    );
    let root = host(dir.path(), &extra).await;
    let keeper = std::sync::Arc::new(CardKeeper {
        presenters: root
            .get::<cordis_presenter::Presenters>()
            .unwrap()
            .as_ref()
            .clone(),
        shown: std::sync::Mutex::default(),
    });
    let _ = root
        .provide(cordis_approvals::ApproverService(keeper.clone()))
        .unwrap();
    let (roster, agents, _) = services(&root);
    let (x, _) = roster
        .create_agent(&agents, options("x"), None)
        .await
        .unwrap();
    let mount = |path: String| {
        call(
            &agents,
            x.scope_key(),
            "cordis_mount",
            serde_json::json!({"path": path}),
        )
    };

    // Outside, through a symlink, or through an include: refused before anyone is asked.
    let err = mount(outside.display().to_string()).await.unwrap_err();
    assert!(
        err.contains(&format!(
            "{} is outside the workspace and the preset roots (allowed: {}",
            std::fs::canonicalize(&outside).unwrap().display(),
            std::fs::canonicalize(dir.path()).unwrap().display()
        )),
        "{err}"
    );
    let err = mount("link.yml".into()).await.unwrap_err();
    assert!(
        err.contains("cordis_mount: link.yml: ") && err.contains("is outside the workspace"),
        "{err}"
    );
    let err = mount("includes.yml".into()).await.unwrap_err();
    assert!(
        err.contains("includes.yml includes a file it may not: "),
        "{err}"
    );
    let err = mount("../x.yml".into()).await.unwrap_err();
    assert!(err.contains("cordis_mount: ../x.yml: "), "{err}");
    assert!(keeper.shown.lock().unwrap().is_empty());

    // Inside: the approval names the command the server row would run; denied, it never runs.
    let err = mount("server.yml".into()).await.unwrap_err();
    assert!(
        err.contains(r#"the user denied tool \"cordis_mount\": not now"#),
        "{err}"
    );
    let shown = keeper.shown.lock().unwrap().clone();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].title, "Mount server.yml");
    assert_eq!(shown[0].kind, cordis_presenter::ToolKind::Execute);
    assert_eq!(
        shown[0].text.as_deref(),
        Some(
            format!(
                "rows: srv (mcp)\nwhen mounted, it starts:\n  srv (mcp): runs the command sh -c 'id > {}'",
                witness.display()
            )
            .as_str()
        )
    );
    assert!(!witness.exists());
    root.dispose();
}

#[tokio::test]
async fn a_mount_its_policy_denies_is_not_planned_so_its_error_tells_nothing_of_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", "- id: cordis\n  name: tool-cordis\n", None);
    let outside = elsewhere.path().join("outside.yml");
    std::fs::write(&outside, with_tool("outside_tool", "O", "I am outside.")).unwrap();
    let extra = format!(
        "{}- id: approvals\n  name: approvals\n  config: {{tools: {{cordis_mount: deny}}}}\n",
        workspace_row(dir.path())
    );
    let root = host(dir.path(), &extra).await;
    let (roster, agents, _) = services(&root);
    let (x, _) = roster
        .create_agent(&agents, options("x"), None)
        .await
        .unwrap();
    for path in [outside.display().to_string(), "missing.yml".to_owned()] {
        let err = call(
            &agents,
            x.scope_key(),
            "cordis_mount",
            serde_json::json!({"path": path}),
        )
        .await
        .unwrap_err();
        assert!(err.contains("cordis_mount"), "{err}");
        assert!(
            !err.contains("outside the workspace") && !err.contains("missing.yml"),
            "the plan's error reached the model: {err}"
        );
    }
    root.dispose();
}

#[tokio::test]
async fn an_agent_mounts_a_composition_for_itself_and_unmounts_it() {
    let dir = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", "- id: cordis\n  name: tool-cordis\n", None);
    let extra = dir.path().join("extra.yml");
    std::fs::write(&extra, with_tool("extra_tool", "E", "I am extra.")).unwrap();
    let failing = dir.path().join("failing.yml");
    std::fs::write(
        &failing,
        "- id: boom\n  name: debug/fault\n  config: {mode: error}\n",
    )
    .unwrap();
    let root = host(dir.path(), &workspace_row(dir.path())).await;
    let (roster, agents, prompt) = services(&root);
    let (x, sx) = roster
        .create_agent(&agents, options("x"), None)
        .await
        .unwrap();
    let (y, _) = roster
        .create_agent(&agents, options("y"), None)
        .await
        .unwrap();
    let before = seen(&prompt, AssembleContext::scoped(x.scope_key())).await;
    assert_eq!(
        before.0,
        ["cordis_inspect", "cordis_mount", "cordis_unmount"]
    );
    let out = call(
        &agents,
        x.scope_key(),
        "cordis_mount",
        serde_json::json!({"path": extra.display().to_string()}),
    )
    .await
    .unwrap();
    assert!(
        out.contains("rows tools-extra_tool (tool-declare), persona (persona)"),
        "{out}"
    );
    let (tools, system) = seen(&prompt, AssembleContext::scoped(x.scope_key())).await;
    assert_eq!(
        tools,
        [
            "cordis_inspect",
            "cordis_mount",
            "cordis_unmount",
            "extra_tool"
        ]
    );
    assert_eq!(system, "I am extra.");
    // The other agent on the same preset sees none of it; x still counts as joined to `a`.
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(y.scope_key())).await,
        before
    );
    assert_eq!(roster.composed_preset(x.scope_key()), Some(sx.clone()));
    // A composition with a failing row is refused, naming it; nothing changes.
    let err = call(
        &agents,
        x.scope_key(),
        "cordis_mount",
        serde_json::json!({"path": failing.display().to_string()}),
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("1 row(s) did not activate") && err.contains("boom (debug/fault)"),
        "{err}"
    );
    assert!(
        seen(&prompt, AssembleContext::scoped(x.scope_key()))
            .await
            .0
            .contains(&"extra_tool".to_owned())
    );
    call(
        &agents,
        x.scope_key(),
        "cordis_unmount",
        serde_json::json!({}),
    )
    .await
    .unwrap();
    assert_eq!(
        seen(&prompt, AssembleContext::scoped(x.scope_key())).await,
        before
    );
    let err = call(
        &agents,
        x.scope_key(),
        "cordis_unmount",
        serde_json::json!({}),
    )
    .await
    .unwrap_err();
    assert!(err.contains("nothing is mounted"), "{err}");
    // A mount goes with its agent.
    call(
        &agents,
        x.scope_key(),
        "cordis_mount",
        serde_json::json!({"path": extra.display().to_string()}),
    )
    .await
    .unwrap();
    let labelled = |root: &Context| {
        root.scopes()
            .iter()
            .filter(|s| s.label.as_deref() == Some("tools-extra_tool"))
            .count()
    };
    assert_eq!(labelled(&root), 1);
    x.dispose();
    assert_eq!(labelled(&root), 0);
    root.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_is_refused_mid_turn_and_the_agent_keeps_its_preset() {
    let dir = tempfile::tempdir().unwrap();
    preset(dir.path(), "a", &with_tool("a_tool", "A", "I am A."), None);
    preset(dir.path(), "b", &with_tool("b_tool", "B", "I am B."), None);
    let responses = r#"[{toolCalls: [{name: hold, arguments: {}}]}, {text: "released"}]"#;
    let root = host_with(dir.path(), responses, "").await;
    let (roster, agents, prompt) = services(&root);
    let (x, sa) = roster
        .create_agent(&agents, options("x"), Some("a"))
        .await
        .unwrap();
    // A tool of the agent's own that holds the turn open until released.
    let (entered_tx, entered) = tokio::sync::oneshot::channel::<()>();
    let entered_tx = std::sync::Mutex::new(Some(entered_tx));
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let hold = cordis_tools::ToolDefinition::new(
        cordis_tools::ToolSchema {
            name: "hold".into(),
            description: "hold".into(),
            parameters: serde_json::json!({"type": "object"}).into(),
        },
        move |_, _| {
            if let Some(tx) = entered_tx.lock().unwrap().take() {
                let _ = tx.send(());
            }
            let held = held.clone();
            async move {
                held.notified().await;
                Ok(cordis_tools::ToolOutput::new("released"))
            }
        },
    );
    let _ = agents
        .tools()
        .register_scoped(&x.context().unwrap(), x.scope_key(), hold)
        .unwrap();
    let turn = tokio::spawn({
        let x = x.clone();
        async move { x.run_turn("go").await }
    });
    entered.await.unwrap();
    assert!(x.is_busy());
    let err = roster.switch(&x, "b").await.unwrap_err();
    assert!(matches!(err, JoinError::MidTurn { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "agent-presets: agent \"x\" is in a turn; switch presets between turns"
    );
    release.notify_one();
    assert_eq!(
        turn.await.unwrap().unwrap(),
        cordis_session::TurnEndReason::Completed
    );
    assert_eq!(roster.composed_preset(x.scope_key()), Some(sa));
    assert!(
        seen(&prompt, AssembleContext::scoped(x.scope_key()))
            .await
            .0
            .contains(&"a_tool".to_owned())
    );
    assert!(
        !x.session()
            .events()
            .iter()
            .any(|e| e.kind == cordis_session::kinds::AGENT_PRESET_SELECTED)
    );
    root.dispose();
}
