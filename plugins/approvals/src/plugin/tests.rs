use std::sync::atomic::{AtomicUsize, Ordering};

use cordis_runtime::EffectHandle;
use cordis_runtime::prelude::*;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{
    Effect, ToolCall, ToolDefinition, ToolOutput, ToolResult, ToolSchema, ToolsConfig, ToolsPlugin,
    codes,
};
use futures_util::future::BoxFuture;
use serde_json::json;

use super::*;
use crate::approver::{AllowAll, Approver};

struct Harness {
    root: Context,
    reg: ToolRegistry,
    runs: Arc<AtomicUsize>,
    events: Arc<Mutex<Vec<ApprovalDecided>>>,
}

/// A tool that counts its runs, with `effect`; `bash` takes a required string `command`.
fn counting(name: &str, effect: Effect, confined: bool, runs: Arc<AtomicUsize>) -> ToolDefinition {
    let parameters = if effect == Effect::Execute {
        json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
    } else {
        json!({"type": "object"})
    };
    let schema = ToolSchema {
        name: name.into(),
        description: name.into(),
        parameters: parameters.into(),
    };
    let def = ToolDefinition::new(schema, move |_, _| {
        runs.fetch_add(1, Ordering::SeqCst);
        async { Ok(ToolOutput::new("ran")) }
    })
    .with_effect(effect);
    if confined { def.confined() } else { def }
}

/// A registry with `read_file` (read), `bash` (execute, confined as a sandboxed shell is),
/// `write_file` (edit, confined) and `fetch` (network) stand-ins that count their runs, under
/// the approvals plugin with `config`.
async fn harness(config: ApprovalsConfig) -> Harness {
    let root = Context::root();
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    root.plugin(ToolsPlugin, ToolsConfig::default());
    let approvals = root.plugin(ApprovalsPlugin, config);
    root.idle().await;
    assert_eq!(approvals.status(), ScopeStatus::Active);
    let reg = (*root.get::<ToolRegistry>().unwrap()).clone();
    let runs = Arc::new(AtomicUsize::new(0));
    for (name, effect, confined) in [
        ("bash", Effect::Execute, true),
        ("read_file", Effect::Read, true),
        ("write_file", Effect::Edit, true),
        ("fetch", Effect::Network, false),
    ] {
        let _ = reg
            .register(&root, counting(name, effect, confined, runs.clone()))
            .unwrap();
    }
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let _ = root.on::<ApprovalDecided>(move |e| seen.lock().unwrap().push(e.clone()));
    Harness {
        root,
        reg,
        runs,
        events,
    }
}

fn call(name: &str, id: &str) -> ToolCall {
    command(name, id, "rm -rf build")
}

fn command(name: &str, id: &str, line: &str) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments: json!({"command": line}),
    }
}

fn approve_with(root: &Context, approver: impl Approver) -> EffectHandle {
    root.provide(ApproverService(Arc::new(approver))).unwrap()
}

fn denied(r: &ToolResult) -> &str {
    assert_eq!(r.code.as_deref(), Some(codes::DENIED), "{r:?}");
    r.content.as_str().unwrap()
}

/// Answers every question with one answer and counts (and keeps) the questions.
#[derive(Clone)]
struct Counting {
    answer: Answer,
    asked: Arc<Mutex<Vec<ApprovalRequest>>>,
}

impl Counting {
    fn new(answer: Answer) -> Self {
        Counting {
            answer,
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .map(|r| {
                r.call.arguments["command"]
                    .as_str()
                    .map_or_else(|| r.call.name.clone(), str::to_owned)
            })
            .collect()
    }
}

impl Approver for Counting {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        self.asked.lock().unwrap().push(request.clone());
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn ask_with_no_approver_denies_and_the_decision_is_observable() {
    let h = harness(ApprovalsConfig::default()).await;
    let r = h.reg.execute(call("bash", "c1"), Some(ScopeKey(3))).await;
    assert!(denied(&r).starts_with("tool \"bash\" needs approval and no approver"));
    assert_eq!(h.runs.load(Ordering::SeqCst), 0, "the tool never ran");
    let r = h
        .reg
        .execute(call("read_file", "c2"), Some(ScopeKey(3)))
        .await;
    assert!(!r.is_error);
    let approvals = h.root.get::<Approvals>().unwrap();
    let d = approvals.take_decision(Some(ScopeKey(3)), "c1").unwrap();
    assert_eq!(
        (d.allowed, d.by, d.policy),
        (false, DecidedBy::NoApprover, Policy::Ask)
    );
    assert!(
        approvals.take_decision(Some(ScopeKey(3)), "c1").is_none(),
        "taken once"
    );
    let events = h.events.lock().unwrap().clone();
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[1].tool.as_str(), events[1].allowed, events[1].by),
        ("read_file", true, DecidedBy::Policy)
    );
    assert_eq!(
        serde_json::to_value(&events[0]).unwrap()["by"],
        "no-approver",
        "the decision serializes for the session log"
    );
    h.root.dispose();
}

#[tokio::test]
async fn a_call_its_schema_refuses_never_reaches_the_approver() {
    let h = harness(ApprovalsConfig::default()).await;
    let approver = Counting::new(Answer::Allow);
    let _a = approve_with(&h.root, approver.clone());
    let bad = ToolCall {
        call_id: "c1".into(),
        name: "bash".into(),
        arguments: json!({"command": 7}),
    };
    let r = h.reg.execute(bad, None).await;
    assert_eq!(r.code.as_deref(), Some(codes::INVALID_ARGUMENTS), "{r:?}");
    let missing = ToolCall {
        call_id: "c2".into(),
        name: "bash".into(),
        arguments: json!({}),
    };
    let r = h.reg.execute(missing, None).await;
    assert_eq!(r.code.as_deref(), Some(codes::INVALID_ARGUMENTS), "{r:?}");
    assert_eq!(approver.asked().len(), 0, "nobody was asked");
    assert!(h.events.lock().unwrap().is_empty(), "nothing was decided");
    let r = h.reg.execute(call("bash", "c3"), None).await;
    assert_eq!(r.content, "ran");
    assert_eq!(approver.asked(), ["rm -rf build"]);
    h.root.dispose();
}

#[tokio::test]
async fn an_approver_that_allows_lets_exactly_that_call_run() {
    let h = harness(ApprovalsConfig::default()).await;
    let _approver = approve_with(&h.root, AllowAll);
    let r = h.reg.execute(call("bash", "c1"), None).await;
    assert_eq!(r.content, "ran");
    let d = h
        .root
        .get::<Approvals>()
        .unwrap()
        .take_decision(None, "c1")
        .unwrap();
    assert_eq!((d.allowed, d.by), (true, DecidedBy::Approver));
    h.root.dispose();
}

struct Refuse;

impl Approver for Refuse {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        let why = format!(
            "not {}",
            request.call.arguments["command"].as_str().unwrap_or("")
        );
        Box::pin(async move { Answer::Deny(Some(why)) })
    }
}

#[tokio::test]
async fn an_approver_that_refuses_denies_with_its_reason() {
    let h = harness(ApprovalsConfig::default()).await;
    let _approver = approve_with(&h.root, Refuse);
    let r = h.reg.execute(call("write_file", "c1"), None).await;
    assert_eq!(
        denied(&r),
        "the user denied tool \"write_file\": not rm -rf build"
    );
    assert_eq!(h.runs.load(Ordering::SeqCst), 0);
    h.root.dispose();
}

#[tokio::test]
async fn deny_wins_over_any_approver_and_allow_needs_none() {
    let config: ApprovalsConfig =
        serde_json::from_value(json!({"tools": {"bash": "deny", "write_file": "allow"}})).unwrap();
    let h = harness(config).await;
    let _approver = approve_with(&h.root, AllowAll);
    let r = h.reg.execute(call("bash", "c1"), None).await;
    assert!(denied(&r).contains("denied by the approvals policy (deny)"));
    assert!(!h.reg.execute(call("write_file", "c2"), None).await.is_error);
    assert_eq!(h.runs.load(Ordering::SeqCst), 1);
    h.root.dispose();
}

#[tokio::test]
async fn the_default_comes_from_the_effect_class_not_the_name() {
    let h = harness(ApprovalsConfig::default()).await;
    // A third party's `grep` that declares nothing: it is not the workspace's read-only grep.
    let runs = Arc::new(AtomicUsize::new(0));
    let _ = h
        .reg
        .register(
            &h.root,
            counting("grep", Effect::Unknown, false, runs.clone()),
        )
        .unwrap();
    let _ = h
        .reg
        .register(
            &h.root,
            counting("todo_write", Effect::State, false, runs.clone()),
        )
        .unwrap();
    let approver = Counting::new(Answer::Deny(None));
    let _a = approve_with(&h.root, approver.clone());
    let r = h.reg.execute(call("grep", "c1"), None).await;
    assert!(denied(&r).starts_with("the user denied tool \"grep\""));
    assert!(!h.reg.execute(call("todo_write", "c2"), None).await.is_error);
    assert!(!h.reg.execute(call("read_file", "c3"), None).await.is_error);
    assert_eq!(approver.asked(), ["rm -rf build"], "only grep asked");
    h.root.dispose();
}

#[tokio::test]
async fn modes_auto_runs_confined_calls_and_never_ask_denies_the_rest() {
    for (mode, write, fetch) in [
        (Mode::Ask, "asked", "asked"),
        (Mode::Auto, "ran", "asked"),
        (Mode::NeverAsk, "ran", "denied"),
    ] {
        let h = harness(ApprovalsConfig {
            mode,
            ..ApprovalsConfig::default()
        })
        .await;
        let approver = Counting::new(Answer::Deny(None));
        let _a = approve_with(&h.root, approver.clone());
        let outcome = |r: &ToolResult, asked_before: usize, asked_now: usize| {
            if !r.is_error {
                "ran"
            } else if asked_now > asked_before {
                "asked"
            } else {
                "denied"
            }
        };
        let r = h.reg.execute(call("write_file", "c1"), None).await;
        let got_write = outcome(&r, 0, approver.asked().len());
        let before = approver.asked().len();
        let r = h.reg.execute(call("fetch", "c2"), None).await;
        let got_fetch = outcome(&r, before, approver.asked().len());
        assert_eq!((got_write, got_fetch), (write, fetch), "mode {mode}");
        if mode == Mode::NeverAsk {
            assert!(
                denied(&r).contains("the permission mode is never-ask"),
                "{r:?}"
            );
        }
        h.root.dispose();
    }
}

#[tokio::test]
async fn a_session_may_choose_its_own_mode() {
    let h = harness(ApprovalsConfig::default()).await;
    let approvals = h.root.get::<Approvals>().unwrap();
    approvals.set_mode(ScopeKey(9), Mode::Auto);
    assert_eq!(approvals.mode_for(Some(ScopeKey(9))), Mode::Auto);
    assert_eq!(approvals.mode_for(Some(ScopeKey(8))), Mode::Ask);
    let r = h
        .reg
        .execute(call("write_file", "c1"), Some(ScopeKey(9)))
        .await;
    assert!(!r.is_error, "auto in scope 9: {r:?}");
    let r = h
        .reg
        .execute(call("write_file", "c1"), Some(ScopeKey(8)))
        .await;
    assert!(r.is_error, "ask elsewhere");
    // A child scope bound under 9 (a subagent) runs under its session's choice.
    let child = h.root.child_scope("child");
    let child_key = ScopeKey::from(child.id());
    let _bind = h
        .reg
        .bind_parent(&child.context().unwrap(), child_key, ScopeKey(9))
        .unwrap();
    assert_eq!(approvals.mode_along(&h.reg.chain(child_key)), Mode::Auto);
    let r = h
        .reg
        .execute(call("write_file", "c2"), Some(child_key))
        .await;
    assert!(!r.is_error, "auto through the parent: {r:?}");
    approvals.forget(ScopeKey(9));
    assert_eq!(approvals.mode_for(Some(ScopeKey(9))), Mode::Ask);
    h.root.dispose();
}

#[tokio::test]
async fn always_for_git_status_grants_that_command_only_and_the_decision_carries_it() {
    let h = harness(ApprovalsConfig::default()).await;
    let always = Counting::new(Answer::AllowAlways);
    let a = approve_with(&h.root, always.clone());
    let s = Some(ScopeKey(4));
    let r = h
        .reg
        .execute(command("bash", "c1", "git status --short"), s)
        .await;
    assert_eq!(r.content, "ran");
    let approvals = h.root.get::<Approvals>().unwrap();
    let d = approvals.take_decision(s, "c1").unwrap();
    assert_eq!(d.by, DecidedBy::ApproverAlways);
    assert_eq!(d.grants.len(), 1);
    assert_eq!(d.grants[0].to_string(), "bash `git status`");
    assert_eq!(
        always.asked.lock().unwrap()[0].grants,
        d.grants,
        "the question said what always would grant"
    );
    a.dispose();
    let refuse = Counting::new(Answer::Deny(None));
    let _r = approve_with(&h.root, refuse.clone());
    let r = h.reg.execute(command("bash", "c2", "git status"), s).await;
    assert_eq!(r.content, "ran", "granted: not asked again");
    assert_eq!(
        approvals.take_decision(s, "c2").unwrap().by,
        DecidedBy::Grant
    );
    for (id, line) in [
        ("c3", "git push"),
        ("c4", "git status; rm -rf x"),
        ("c5", "git status $(rm -rf x)"),
        ("c5b", "git status > ~/.bashrc"),
    ] {
        let r = h.reg.execute(command("bash", id, line), s).await;
        assert!(r.is_error, "{line} must ask");
    }
    assert_eq!(
        refuse.asked(),
        [
            "git push",
            "git status; rm -rf x",
            "git status $(rm -rf x)",
            "git status > ~/.bashrc"
        ]
    );
    // Never another tool, never another session.
    let r = h
        .reg
        .execute(command("write_file", "c6", "git status"), s)
        .await;
    assert!(r.is_error);
    let r = h
        .reg
        .execute(command("bash", "c7", "git status"), Some(ScopeKey(5)))
        .await;
    assert!(r.is_error);
    // Revoked, it asks again.
    assert!(approvals.revoke(s, &d.grants[0]));
    let r = h.reg.execute(command("bash", "c8", "git status"), s).await;
    assert!(r.is_error);
    h.root.dispose();
}

#[tokio::test]
async fn reject_always_refuses_that_command_in_any_line_unasked_and_nothing_else() {
    let h = harness(ApprovalsConfig::default()).await;
    let never = Counting::new(Answer::RejectAlways(None));
    let a = approve_with(&h.root, never.clone());
    let s = Some(ScopeKey(4));
    let r = h
        .reg
        .execute(command("bash", "c1", "git push --force"), s)
        .await;
    assert!(denied(&r).contains("for the rest of this session"), "{r:?}");
    let approvals = h.root.get::<Approvals>().unwrap();
    let d = approvals.take_decision(s, "c1").unwrap();
    assert_eq!((d.by, d.allowed), (DecidedBy::ApproverAlways, false));
    assert_eq!(d.grants, []);
    assert_eq!(d.refusals.len(), 1);
    assert_eq!(d.refusals[0].to_string(), "bash `git push`");
    a.dispose();
    let allow = Counting::new(Answer::Allow);
    let _a = approve_with(&h.root, allow.clone());
    // Refused wherever it appears in a line, even after an allowed command, without asking.
    for (id, line) in [("c2", "git push"), ("c3", "git status && git push origin")] {
        let r = h.reg.execute(command("bash", id, line), s).await;
        assert!(
            denied(&r).contains("rejected bash `git push`"),
            "{line}: {r:?}"
        );
        assert_eq!(
            approvals.take_decision(s, id).unwrap().by,
            DecidedBy::Refusal
        );
    }
    // Another command, another session: asked as before.
    let r = h.reg.execute(command("bash", "c4", "git status"), s).await;
    assert_eq!(r.content, "ran");
    let r = h
        .reg
        .execute(command("bash", "c5", "git push"), Some(ScopeKey(5)))
        .await;
    assert_eq!(r.content, "ran");
    assert_eq!(allow.asked(), ["git status", "git push"]);
    assert_eq!(h.runs.load(Ordering::SeqCst), 2);
    h.root.dispose();
}

#[tokio::test]
async fn command_rules_match_parsed_commands() {
    let config: ApprovalsConfig = serde_json::from_value(json!({
        "commands": {"allow": ["ls", "git status"], "deny": ["git checkout"]}
    }))
    .unwrap();
    let h = harness(config).await;
    let approver = Counting::new(Answer::Allow);
    let _a = approve_with(&h.root, approver.clone());
    let r = h
        .reg
        .execute(command("bash", "c1", "git -C x checkout -- f"), None)
        .await;
    assert_eq!(
        denied(&r),
        "the command `git checkout` is denied by the approvals rule \"git checkout\"; do not run it again"
    );
    let r = h
        .reg
        .execute(command("bash", "c2", "ls -la && git status"), None)
        .await;
    assert!(!r.is_error, "both allowed by rules");
    let r = h
        .reg
        .execute(command("bash", "c3", "ls; rm -rf x"), None)
        .await;
    assert!(!r.is_error, "asked, and allowed");
    let r = h
        .reg
        .execute(command("bash", "c4", "ls $(rm -rf x)"), None)
        .await;
    assert!(!r.is_error);
    assert_eq!(approver.asked(), ["ls; rm -rf x", "ls $(rm -rf x)"]);
    let d = h
        .root
        .get::<Approvals>()
        .unwrap()
        .take_decision(None, "c2")
        .unwrap();
    assert_eq!((d.by, d.policy), (DecidedBy::Rule, Policy::Allow));
    h.root.dispose();
}

#[tokio::test]
async fn an_unreadable_command_is_not_passed_by_auto_when_deny_rules_exist() {
    let config: ApprovalsConfig = serde_json::from_value(json!({
        "mode": "auto", "commands": {"deny": ["git push"]}
    }))
    .unwrap();
    let h = harness(config).await;
    let approver = Counting::new(Answer::Deny(None));
    let _a = approve_with(&h.root, approver.clone());
    let r = h
        .reg
        .execute(command("bash", "c1", "cargo build"), None)
        .await;
    assert!(!r.is_error, "a confined, readable command runs in auto");
    let r = h
        .reg
        .execute(command("bash", "c2", "eval \"git push\""), None)
        .await;
    assert!(r.is_error);
    assert_eq!(approver.asked(), ["eval \"git push\""]);
    h.root.dispose();
}

#[tokio::test]
async fn the_stage_applies_to_every_caller_including_nested_sub_calls() {
    let h = harness(ApprovalsConfig::default()).await;
    // A stand-in for run_code: its handler dispatches a sub-call through the same registry.
    let reg = h.reg.clone();
    let schema = ToolSchema {
        name: "script".into(),
        description: "runs bash".into(),
        parameters: json!({"type": "object"}).into(),
    };
    let script = ToolDefinition::new(schema, move |_, cx| {
        let reg = reg.clone();
        async move {
            let sub = reg.execute(call("bash", "c1:code:1"), cx.scope).await;
            Ok(ToolOutput::new(sub.content))
        }
    });
    let _ = h.reg.register(&h.root, script).unwrap();
    let agent = h.root.child_scope("agent");
    let key = ScopeKey::from(agent.id());
    let r = h.reg.execute(call("script", "c1"), Some(key)).await;
    // `script` declares no effect: it asks, and is denied first.
    assert!(denied(&r).contains("\"script\" needs approval"));
    let _approver = approve_with(&h.root, crate::AllowListed(["script".to_owned()].into()));
    let r = h.reg.execute(call("script", "c2"), Some(key)).await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        r.content,
        "the user denied tool \"bash\": not approved: only script may run without asking in this session"
    );
    assert_eq!(h.runs.load(Ordering::SeqCst), 0, "bash never ran");
    h.root.dispose();
}

#[tokio::test]
async fn disposing_the_plugin_removes_its_stage() {
    let root = Context::root();
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    root.plugin(ToolsPlugin, ToolsConfig::default());
    let approvals = root.plugin(ApprovalsPlugin, ApprovalsConfig::default());
    root.idle().await;
    let reg = root.get::<ToolRegistry>().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let _ = reg
        .register(&root, counting("bash", Effect::Execute, false, runs))
        .unwrap();
    assert!(reg.execute(call("bash", "c1"), None).await.is_error);
    approvals.dispose();
    assert!(!reg.execute(call("bash", "c2"), None).await.is_error);
    root.dispose();
    assert!(root.live().is_zero(), "{:?}", root.live());
}

#[tokio::test]
async fn a_second_approvals_entry_is_refused() {
    let root = Context::root();
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    root.plugin(ToolsPlugin, ToolsConfig::default());
    let reg = {
        root.idle().await;
        root.get::<ToolRegistry>().unwrap()
    };
    let first = Approvals::new(ApprovalsConfig::default());
    let stage = Stage {
        approvals: Arc::new(first),
        ctx: root.clone(),
    };
    let _ = reg.set_approval(&root, Arc::new(stage)).unwrap();
    let again = Stage {
        approvals: Arc::new(Approvals::new(ApprovalsConfig::default())),
        ctx: root.clone(),
    };
    let e = reg.set_approval(&root, Arc::new(again)).unwrap_err();
    assert!(e.to_string().contains("already installed"), "{e}");
    root.dispose();
}

#[tokio::test]
async fn deny_rules_hold_under_an_allow_policy_and_a_whole_command_grant_is_exact() {
    let config: ApprovalsConfig = serde_json::from_value(json!({
        "tools": {"bash": "allow"}, "commands": {"deny": ["git push"]}
    }))
    .unwrap();
    let h = harness(config).await;
    let r = h
        .reg
        .execute(command("bash", "c1", "git -C x push"), None)
        .await;
    assert!(denied(&r).contains("approvals rule \"git push\""), "{r:?}");
    assert!(
        !h.reg
            .execute(command("bash", "c2", "ls"), None)
            .await
            .is_error
    );
    h.root.dispose();

    let h = harness(ApprovalsConfig::default()).await;
    let always = Counting::new(Answer::AllowAlways);
    let a = approve_with(&h.root, always.clone());
    let s = Some(ScopeKey(4));
    assert!(
        !h.reg
            .execute(command("bash", "c1", "rm -rf build"), s)
            .await
            .is_error
    );
    a.dispose();
    let refuse = Counting::new(Answer::Deny(None));
    let _r = approve_with(&h.root, refuse.clone());
    assert!(
        !h.reg
            .execute(command("bash", "c2", "rm -rf build"), s)
            .await
            .is_error
    );
    for (id, line) in [
        ("c3", "rm -rf build ~"),
        ("c4", "GIT_DIR=x rm -rf build"),
        ("c5", "PATH=.; rm -rf build"),
    ] {
        assert!(
            h.reg.execute(command("bash", id, line), s).await.is_error,
            "{line}"
        );
    }
    assert_eq!(
        refuse.asked(),
        [
            "rm -rf build ~",
            "GIT_DIR=x rm -rf build",
            "PATH=.; rm -rf build"
        ]
    );
    h.root.dispose();
}

/// A registry under the approvals plugin with `config` and one `execute` tool `sh` (confined)
/// that answers with the clearance its call got.
async fn clearance_probe(config: serde_json::Value) -> (Context, ToolRegistry) {
    let root = Context::root();
    root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
    root.plugin(ToolsPlugin, ToolsConfig::default());
    root.plugin(ApprovalsPlugin, serde_json::from_value(config).unwrap());
    root.idle().await;
    let reg = (*root.get::<ToolRegistry>().unwrap()).clone();
    let schema = ToolSchema {
        name: "sh".into(),
        description: "sh".into(),
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}).into(),
    };
    let tool = ToolDefinition::new(schema, |_, cx| async move {
        Ok(ToolOutput::new(cx.clearance.as_str()))
    })
    .with_effect(Effect::Execute)
    .confined();
    let _ = reg.register(&root, tool).unwrap();
    (root, reg)
}

/// The clearance each way of deciding gives a command: only a person's yes and a `write` rule
/// clear it fully; an allow rule, a grant and the mode run it read-only.
#[tokio::test]
async fn what_runs_without_a_question_is_cleared_read_only() {
    let (root, reg) =
        clearance_probe(json!({"commands": {"allow": ["git diff"], "write": ["cargo test"]}}))
            .await;
    let cleared = |line: &'static str, id: &'static str, scope: Option<ScopeKey>| {
        let reg = reg.clone();
        async move {
            let r = reg.execute(command("sh", id, line), scope).await;
            assert!(!r.is_error, "{r:?}");
            r.content.as_str().unwrap().to_owned()
        }
    };
    let approvals = root.get::<Approvals>().unwrap();
    // An allow rule: read-only, whatever options follow (`--output=FILE` included).
    assert_eq!(cleared("git diff --stat", "c1", None).await, "read-only");
    assert_eq!(
        approvals.take_decision(None, "c1").unwrap().by,
        DecidedBy::Rule
    );
    // A write rule says in so many words that its commands may write.
    assert_eq!(cleared("cargo test -q", "c2", None).await, "full");
    assert_eq!(
        approvals.take_decision(None, "c2").unwrap().by,
        DecidedBy::WriteRule
    );
    // A line mixing both is only as cleared as its least cleared command.
    assert_eq!(
        cleared("cargo test && git diff", "c3", None).await,
        "read-only"
    );
    // A person's yes ("always") clears the call they saw; the grant it made runs later calls
    // read-only.
    let approver = Counting::new(Answer::AllowAlways);
    let _a = approve_with(&root, approver.clone());
    assert_eq!(cleared("make all", "c4", Some(ScopeKey(1))).await, "full");
    assert_eq!(
        cleared("make all", "c5", Some(ScopeKey(1))).await,
        "read-only"
    );
    assert_eq!(approver.asked(), ["make all"]);
    assert_eq!(
        approvals.take_decision(Some(ScopeKey(1)), "c5").unwrap().by,
        DecidedBy::Grant
    );
    // A per-tool `allow` runs it read-only; `write` says it may write.
    for (policy, clearance, by) in [
        ("allow", "read-only", DecidedBy::Policy),
        ("write", "full", DecidedBy::WriteRule),
    ] {
        let (other, reg2) = clearance_probe(json!({"tools": {"sh": policy}})).await;
        let r = reg2.execute(command("sh", "p1", "make"), None).await;
        assert_eq!(r.content, clearance, "{policy}");
        let d = other
            .get::<Approvals>()
            .unwrap()
            .take_decision(None, "p1")
            .unwrap();
        assert_eq!(d.by, by, "{policy}");
        other.dispose();
    }
    // The permission mode's confinement rule runs it read-only too.
    approvals.set_mode(ScopeKey(2), Mode::Auto);
    assert_eq!(
        cleared("rm -rf build", "c6", Some(ScopeKey(2))).await,
        "read-only"
    );
    assert_eq!(
        approvals.take_decision(Some(ScopeKey(2)), "c6").unwrap().by,
        DecidedBy::Mode
    );
    root.dispose();
}
