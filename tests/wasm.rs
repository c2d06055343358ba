//! WebAssembly component entries through the host and the CLI: the example composition as the
//! README runs it, the proofs (`permute`, `stress`), seeded replay of granted randomness, and
//! entries that fail alone. (The engine itself — limits, traps, grants, the artifact cache — is
//! tested in `plugins/wasm/tests/wasm/`.)
#![cfg(unix)]

use crate::common;

// Relative to `tests/`, where this module file is.
#[path = "../plugins/wasm/tests/wasm/guests.rs"]
pub(crate) mod guests;

use std::path::{Path, PathBuf};

use common::cordis;
use cordis_host::plan::{PlanOptions, load_plan};
use cordis_runtime::{Context, Policy, Schedule, ScopeStatus};
use cordis_tools::{ToolCall, ToolRegistry};
use serde_json::{Value, json};

fn example() -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "examples", "wasm", "cordis.yml"]
        .iter()
        .collect();
    p.display().to_string()
}

/// A fresh directory for a test's configs and components.
fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-wasm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_example_composition_checks_and_its_three_guests_answer_or_stop_with_their_reason() {
    let check = cordis(&["check", &example(), "--json"], &[]);
    assert_eq!(check.code, 0, "{}{}", check.out, check.err);
    let report: Value = serde_json::from_str(&check.out).unwrap();
    for id in ["hello", "spin", "balloon"] {
        let entry = report["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap();
        assert_eq!(entry["status"], "active", "{entry:#}");
    }
    assert_eq!(
        report["assembly"]["tools"],
        json!(["wasm_balloon", "wasm_hello", "wasm_spin"])
    );

    let hello = || {
        cordis(
            &["call", &example(), "wasm_hello", r#"{"name": "Ada"}"#],
            &[],
        )
    };
    let run = hello();
    assert_eq!(run.code, 0, "{}", run.err);
    assert_eq!(
        serde_json::from_str::<Value>(&run.out).unwrap(),
        json!({"greeting": "Hello, Ada!"})
    );

    let spin = cordis(&["call", &example(), "wasm_spin", "{}"], &[]);
    assert_eq!(spin.code, 1);
    assert!(
        spin.err
            .contains("spin: stopped: out of fuel (10000000 units per call"),
        "{}",
        spin.err
    );
    let balloon = cordis(&["call", &example(), "wasm_balloon", "{}"], &[]);
    assert_eq!(balloon.code, 1);
    assert!(
        balloon
            .err
            .contains("balloon: stopped: memory limit of 16 MiB reached"),
        "{}",
        balloon.err
    );
    assert_eq!(hello().code, 0);
}

#[test]
fn permute_finds_one_outcome_and_500_seeds_agree_with_wasm_entries() {
    let permute = cordis(&["permute", &example()], &[]);
    assert_eq!(permute.code, 0, "{}{}", permute.out, permute.err);
    assert!(
        permute.out.contains("1 distinct outcome"),
        "{}",
        permute.out
    );
    // The components state nothing, so the boots watch them: none reads what another
    // registers, so one class stands for every order (issue 45).
    assert!(
        permute.out.contains("3 silent (seen)") && !permute.out.contains("interacting:"),
        "{}",
        permute.out
    );
    let stress = cordis(&["stress", &example(), "--seeds", "500"], &[]);
    assert_eq!(stress.code, 0, "{}{}", stress.out, stress.err);
    assert!(stress.out.contains("500 seeds agree"), "{}", stress.out);
    assert!(
        stress.out.contains("0 entries not active in every run"),
        "{}",
        stress.out
    );
}

/// Writes `guest`'s component as `file` in `dir`, and returns its sha256 (hex).
fn write_guest(dir: &Path, file: &str, guest: &guests::Spec) -> String {
    use sha2::Digest;
    let bytes = guests::component(guest);
    std::fs::write(dir.join(file), &bytes).unwrap();
    sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn plan_at(dir: &Path, yml: &str) -> cordis_host::LoadPlan {
    let file = dir.join("cordis.yml");
    std::fs::write(&file, yml).unwrap();
    load_plan(
        yml,
        &file.display().to_string(),
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Boots `plan` under `policy`/`seed` on a current-thread runtime (exact replay), calls
/// `tool` twice, disposes, and returns the answers and the statuses.
fn boot_and_call(
    plan: &cordis_host::LoadPlan,
    policy: Policy,
    seed: u64,
    tool: &str,
) -> (Vec<Value>, Vec<(String, ScopeStatus)>) {
    let rt = cordis_host::shutdown::current_thread().unwrap();
    let out = rt.block_on(async {
        let root = Context::root_with(Schedule::new(policy, seed));
        let handles = cordis_host::loader::start_under(&root, plan).await;
        root.idle().await;
        let statuses = plan
            .entries
            .iter()
            .zip(&handles)
            .filter_map(|(e, h)| h.as_ref().map(|h| (e.id.clone(), h.status())))
            .collect();
        let mut answers = Vec::new();
        if let Some(registry) = root.get::<ToolRegistry>() {
            for _ in 0..2 {
                let call = ToolCall {
                    call_id: "1".into(),
                    name: tool.into(),
                    arguments: json!({}),
                };
                let result = registry.execute(call, None).await;
                answers.push(json!({"error": result.is_error, "content": result.content}));
            }
        }
        root.dispose();
        (answers, statuses)
    });
    cordis_host::shutdown::end(rt);
    out
}

const BASE: &str = "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n";

#[test]
fn a_seed_replays_a_call_with_granted_randomness_byte_for_byte() {
    let dir = temp("replay");
    let sha = write_guest(&dir, "dice.wasm", &guests::random());
    let plan = plan_at(
        &dir,
        &format!(
            "{BASE}- id: dice\n  name: ./dice.wasm\n  sha256: {sha}\n  config:\n    capabilities: {{random: true}}\n"
        ),
    );
    let (first, statuses) = boot_and_call(&plan, Policy::Random, 42, "dice");
    assert!(
        statuses.iter().all(|(_, s)| *s == ScopeStatus::Active),
        "{statuses:?}"
    );
    assert_eq!(first[0]["error"], false, "{first:?}");
    assert_ne!(first[0], first[1], "two calls draw two numbers");
    for _ in 0..3 {
        assert_eq!(
            boot_and_call(&plan, Policy::Random, 42, "dice").0,
            first,
            "seed 42 replays"
        );
    }
    assert_eq!(
        boot_and_call(&plan, Policy::Pct { depth: 3 }, 42, "dice").0,
        first,
        "the seed, not the policy, draws"
    );
    assert_ne!(boot_and_call(&plan, Policy::Random, 43, "dice").0, first);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wasm_entry_with_a_wrong_pin_or_an_ungranted_import_fails_alone_with_its_reason() {
    let dir = temp("alone");
    write_guest(&dir, "dice.wasm", &guests::random());
    let sha = write_guest(&dir, "echo.wasm", &guests::echo("echo"));
    let wrong = "0".repeat(64);
    let plan = plan_at(
        &dir,
        &format!(
            "{BASE}- id: dice\n  name: ./dice.wasm\n- id: pinned\n  name: ./echo.wasm\n  sha256: {wrong}\n- id: echo\n  name: ./echo.wasm\n  sha256: {sha}\n"
        ),
    );
    let file = dir.join("cordis.yml").display().to_string();
    let check = cordis(&["check", &file, "--json"], &[]);
    assert_eq!(check.code, 1, "{}{}", check.out, check.err);
    let report: Value = serde_json::from_str(&check.out).unwrap();
    let entry = |id: &str| {
        report["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(entry("echo")["status"], "active");
    assert_eq!(entry("dice")["status"], "failed");
    let why = entry("dice").to_string();
    assert!(
        why.contains(
            "the component imports wasi:random/random@0.2.12, which its entry does not grant"
        ),
        "{why}"
    );
    let why = entry("pinned").to_string();
    assert!(
        why.contains(&format!("but the entry pins {wrong}")),
        "{why}"
    );
    // The host answers the healthy entry's calls.
    let (answers, _) = boot_and_call(&plan, Policy::Fifo, 0, "echo");
    assert_eq!(answers[0], json!({"error": false, "content": {}}));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wasm_entry_outside_the_allowed_directories_or_with_a_network_grant_is_a_config_error() {
    let dir = temp("config");
    let inner = dir.join("conf");
    std::fs::create_dir_all(&inner).unwrap();
    write_guest(&dir, "echo.wasm", &guests::echo("echo"));
    write_guest(&inner, "echo.wasm", &guests::echo("echo"));
    std::os::unix::fs::symlink(dir.join("echo.wasm"), inner.join("link.wasm")).unwrap();
    let file = inner.join("cordis.yml");
    std::fs::write(
        &file,
        format!("{BASE}- id: out\n  name: ./link.wasm\n- id: net\n  name: {}\n  config:\n    capabilities: {{network: {{allow: [example.org/x]}}}}\n", dir.join("conf").join("echo.wasm").display()),
    )
    .unwrap();
    let check = cordis(&["check", &file.display().to_string()], &[]);
    assert_eq!(check.code, 2, "{}{}", check.out, check.err);
    assert!(
        check
            .err
            .contains("entry \"out\": plugin library \"./link.wasm\" resolves to"),
        "{}",
        check.err
    );
    assert!(
        check.err.contains("outside the allowed plugin directories"),
        "{}",
        check.err
    );
    assert!(
        check.err.contains("network.allow entry \"example.org/x\" is not a host (expected HOST, HOST:PORT or *.DOMAIN[:PORT], without scheme or path)"),
        "{}",
        check.err
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_rebuilt_component_restarts_only_its_entry_and_its_new_tools_replace_the_old() {
    use cordis_host::reload::LiveConfig;
    let dir = temp("reload");
    write_guest(&dir, "swap.wasm", &guests::echo("before"));
    write_guest(&dir, "stay.wasm", &guests::echo("stay"));
    let yml = format!("{BASE}- id: swap\n  name: ./swap.wasm\n- id: stay\n  name: ./stay.wasm\n");
    let file = dir.join("cordis.yml").display().to_string();
    let options = PlanOptions {
        config_dir: Some(dir.clone()),
        ..PlanOptions::default()
    };
    let no_env = |_: &str| None;
    let (mut live, report) = LiveConfig::boot(
        Context::root_with(Schedule::fifo()),
        &yml,
        &file,
        &no_env,
        cordis::builtins::standard(),
        options,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.healthy(), "{:?}", report.entries);
    let tools = |report: &cordis_host::BootReport| report.assembly["tools"].clone();
    assert_eq!(tools(&live.report().await), json!(["before", "stay"]));
    // Same bytes: nothing restarts.
    assert!(
        live.reload(&yml, &no_env)
            .await
            .unwrap()
            .restarted
            .is_empty()
    );
    // New bytes at the same path: that entry alone restarts.
    write_guest(&dir, "swap.wasm", &guests::echo("after"));
    let summary = live.reload(&yml, &no_env).await.unwrap();
    assert_eq!(summary.restarted, ["swap"], "{summary:?}");
    assert_eq!(tools(&live.report().await), json!(["after", "stay"]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_c_guest_built_with_debian_clang_answers() {
    let file: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "examples",
        "wasm",
        "c",
        "cordis.yml",
    ]
    .iter()
    .collect();
    let run = cordis(
        &[
            "call",
            &file.display().to_string(),
            "c_word_count",
            r#"{"text": "one two  three"}"#,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    assert_eq!(
        serde_json::from_str::<Value>(&run.out).unwrap(),
        json!({"words": 3})
    );
}

#[test]
fn disposing_a_wasm_entry_unregisters_its_tools_and_leaves_the_others() {
    let dir = temp("dispose");
    write_guest(&dir, "a.wasm", &guests::echo("a_echo"));
    write_guest(&dir, "b.wasm", &guests::echo("b_echo"));
    let plan = plan_at(
        &dir,
        &format!("{BASE}- id: a\n  name: ./a.wasm\n- id: b\n  name: ./b.wasm\n"),
    );
    let rt = cordis_host::shutdown::current_thread().unwrap();
    rt.block_on(async {
        let root = Context::root_with(Schedule::fifo());
        let handles = cordis_host::loader::start_under(&root, &plan).await;
        root.idle().await;
        let registry = root.get::<ToolRegistry>().unwrap();
        let names = |registry: &ToolRegistry| -> Vec<String> {
            registry.schemas(None).into_iter().map(|s| s.name).collect()
        };
        assert_eq!(names(&registry), ["a_echo", "b_echo"]);
        let a = plan.entries.iter().position(|e| e.id == "a").unwrap();
        handles[a].as_ref().unwrap().dispose();
        root.idle().await;
        assert_eq!(names(&registry), ["b_echo"]);
        let call = ToolCall {
            call_id: "1".into(),
            name: "b_echo".into(),
            arguments: json!({"k": 1}),
        };
        assert_eq!(registry.execute(call, None).await.content, json!({"k": 1}));
        root.dispose();
    });
    cordis_host::shutdown::end(rt);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ignored by default: a debug build's Cranelift compiles this 1.6 MB QuickJS component for
/// longer than the entry's 30 s timeout (a release build: about 5 s once, then the cached
/// artifact). Run it with `cargo test --release --test suite wasm:: -- --ignored`.
#[test]
#[ignore = "compiling a QuickJS guest needs a release build"]
fn the_javascript_guest_built_with_componentize_qjs_answers() {
    let file: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "examples",
        "wasm",
        "js",
        "cordis.yml",
    ]
    .iter()
    .collect();
    let file = file.display().to_string();
    let run = cordis(&["call", &file, "js_shout", r#"{"text": "hello"}"#], &[]);
    assert_eq!(run.code, 0, "{}", run.err);
    assert_eq!(
        serde_json::from_str::<Value>(&run.out).unwrap(),
        json!({"shout": "HELLO!!"})
    );
}

/// Ignored by default, as the JavaScript guest: an 18 MB componentize-py guest (33 core
/// instances: the per-store instance limit once refused it) compiles in about 12 s in a release
/// build, far longer in a debug one. Run it with
/// `cargo test --release --test suite wasm:: -- --ignored`.
#[test]
#[ignore = "compiling a Python guest needs a release build"]
fn the_python_guest_built_with_componentize_py_answers() {
    let file: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "examples",
        "wasm",
        "python",
        "cordis.yml",
    ]
    .iter()
    .collect();
    let file = file.display().to_string();
    let run = cordis(
        &["call", &file, "py_count", r#"{"text": "hello wide world"}"#],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    assert_eq!(
        serde_json::from_str::<Value>(&run.out).unwrap(),
        json!({"label": "counted", "words": 3, "chars": 16})
    );
}

/// The events of every session log under `dir/.sessions`, and the logs' total size in bytes.
fn session_events(dir: &Path) -> (Vec<Value>, u64) {
    let (mut events, mut bytes) = (Vec::new(), 0);
    for entry in std::fs::read_dir(dir.join(".sessions")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path).unwrap();
            bytes += text.len() as u64;
            events.extend(
                text.lines()
                    .skip(1)
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
    }
    (events, bytes)
}

/// Regression (issue 40, finding 6): a guest granted `workspace: write` whose tool declares
/// `read` wrote a file unasked in `ask` mode, because its own declaration decided. The grants
/// decide now: the tool is an edit, so a piped run (no approver) denies it and nothing is
/// written.
#[test]
fn a_guest_granted_workspace_write_is_asked_whatever_effect_it_declares() {
    let dir = temp("effect");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // The probe guest's tool declares `read`, and creates `new.txt` when it can.
    write_guest(&dir, "probe.wasm", &guests::files());
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "{BASE}- id: llm\n  name: llm\n  config:\n    adapter: scripted\n    model: m\n    responses:\n      - toolCalls: [{{name: probe, arguments: {{}}}}]\n      - text: Probed.\n\
             - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
             - {{id: agent-loop, name: agent-loop}}\n\
             - {{id: workspace, name: workspace, config: {{root: {ws}}}}}\n\
             - {{id: approvals, name: approvals, config: {{mode: ask}}}}\n\
             - id: probe\n  name: ./probe.wasm\n  config:\n    capabilities: {{workspace: write}}\n",
            ws = ws.display()
        ),
    )
    .unwrap();
    let (code, out, err) = common::piped(&dir, &["run", "cordis.yml"], "probe the workspace\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("Probed."), "{out}\n{err}");
    assert!(
        !ws.join("new.txt").exists(),
        "the guest wrote without being asked"
    );
    let (events, _) = session_events(&dir);
    let decisions: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "tool/approval")
        .map(|e| (e["data"]["by"].clone(), e["data"]["allowed"].clone()))
        .collect();
    assert_eq!(
        decisions,
        [(json!("no-approver"), json!(false))],
        "{events:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What runs without a question cannot write: a guest granted `workspace: write` whose tool is
/// allowed by a per-tool `allow` runs with a read-only workspace (on an instance of its own);
/// `tools: {NAME: write}` says in so many words that it may write.
#[test]
fn a_wasm_tool_allowed_without_a_question_runs_with_a_read_only_workspace_unless_its_rule_says_write()
 {
    for (policy, writes) in [("allow", false), ("write", true)] {
        let dir = temp(&format!("clearance-{policy}"));
        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        write_guest(&dir, "probe.wasm", &guests::files());
        std::fs::write(
            dir.join("cordis.yml"),
            format!(
                "{BASE}- id: llm\n  name: llm\n  config:\n    adapter: scripted\n    model: m\n    responses:\n      - toolCalls: [{{name: probe, arguments: {{}}}}]\n      - text: Probed.\n\
                 - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
                 - {{id: agent-loop, name: agent-loop}}\n\
                 - {{id: workspace, name: workspace, config: {{root: {ws}}}}}\n\
                 - {{id: approvals, name: approvals, config: {{mode: ask, tools: {{probe: {policy}}}}}}}\n\
                 - id: probe\n  name: ./probe.wasm\n  config:\n    capabilities: {{workspace: write}}\n",
                ws = ws.display()
            ),
        )
        .unwrap();
        let (code, out, err) = common::piped(&dir, &["run", "cordis.yml"], "probe the workspace\n");
        assert_eq!(code, Some(0), "{out}\n{err}");
        assert!(out.contains("Probed."), "{out}\n{err}");
        assert_eq!(
            ws.join("new.txt").exists(),
            writes,
            "{policy}: {out}\n{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Regression (issue 40, finding 15): a guest's tool names outside `[A-Za-z0-9_-]{1,64}` were
/// accepted. The entry fails at load, naming itself and the name; the others stay.
#[test]
fn a_wasm_tool_name_outside_the_plain_identifier_rule_fails_its_entry_at_load() {
    let dir = temp("names");
    write_guest(&dir, "dotted.wasm", &guests::echo("read.file"));
    write_guest(&dir, "echo.wasm", &guests::echo("echo"));
    std::fs::write(
        dir.join("cordis.yml"),
        format!("{BASE}- id: dotted\n  name: ./dotted.wasm\n- id: echo\n  name: ./echo.wasm\n"),
    )
    .unwrap();
    let file = dir.join("cordis.yml").display().to_string();
    let check = cordis(&["check", &file, "--json"], &[]);
    assert_eq!(check.code, 1, "{}{}", check.out, check.err);
    let report: Value = serde_json::from_str(&check.out).unwrap();
    let entry = |id: &str| {
        report["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(entry("echo")["status"], "active");
    assert_eq!(entry("dotted")["status"], "failed");
    let why = entry("dotted").to_string();
    assert!(
        why.contains(
            r#"dotted.wasm: describe failed: describe returned an invalid tool name \"read.file\": a WebAssembly tool's name is 1 to 64 of [A-Za-z0-9_-]"#
        ),
        "{why}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The size of the hostile result of
/// [`a_50_mb_wasm_result_reaches_the_model_and_the_log_cut_and_memory_stays_bounded`].
const HUGE_RESULT: u32 = 50_000_000;
/// The peak resident set that run may reach, in KiB: what the process needs without the result
/// (96 MiB for a debug build; about 90 MiB measured with a 200 KB result), plus the guest's
/// linear memory holding the result (at most its 64 MiB limit), plus the host's one copy of the
/// lifted result (no longer than that memory), dropped as soon as it is cut. Measured: 172 MiB.
/// Before the bound the result was also parsed, logged, kept in the conversation and sent whole
/// (458 MiB measured here; 524 MB in the report).
const HUGE_RESULT_PEAK_KIB: u64 = (96 + 2 * 64) * 1024;

/// One OpenAI-compatible answer: the tool call `big`, then (after the test says so) `Done.`.
/// Sends each request's body to the test; holds the second answer until `go` is told, so the
/// test can read the process's peak memory after the result was logged and sent.
fn holding_server(
    bodies: std::sync::mpsc::Sender<Value>,
    go: std::sync::mpsc::Receiver<()>,
) -> (String, std::thread::JoinHandle<()>) {
    let delta = |d: Value| json!({"choices": [{"index": 0, "delta": d}]});
    let finish = |why: &str| json!({"choices": [{"index": 0, "delta": {}, "finish_reason": why}]});
    let answers = vec![
        vec![
            delta(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1",
                "type": "function", "function": {"name": "big", "arguments": "{}"}}]}),
            ),
            finish("tool_calls"),
        ],
        vec![delta(json!({"content": "Done."})), finish("stop")],
    ];
    common::openai_serving_with(answers, move |i, body| {
        let _ = bodies.send(body);
        i != 1 || go.recv().is_ok()
    })
}

/// A line of `/proc/PID/status`, in KiB (`None` where there is no `/proc`).
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Regression (issue 40, finding 8): a guest answering 50 MB made a 52 MB session log and
/// 524 MB RSS, and the result went whole into every later request. The answer is cut to its
/// head and tail (`cordis_tools::MAX_RESULT_TEXT`, saying how much was cut) before it reaches
/// the registry: the next request and the log hold the cut text, and the process's peak
/// resident set stays under [`HUGE_RESULT_PEAK_KIB`] (measured after the result was logged and
/// sent, before the run ends).
#[test]
fn a_50_mb_wasm_result_reaches_the_model_and_the_log_cut_and_memory_stays_bounded() {
    let dir = temp("huge");
    write_guest(&dir, "big.wasm", &guests::big(HUGE_RESULT));
    let (bodies_tx, bodies) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel();
    let (base, server) = holding_server(bodies_tx, go_rx);
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "{BASE}- id: llm\n  name: llm\n  config: {{adapter: openai, model: m, baseUrl: \"{base}\", apiKeyEnv: CORDIS_TEST_KEY}}\n\
             - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
             - {{id: agent-loop, name: agent-loop}}\n\
             - id: big\n  name: ./big.wasm\n  config: {{fuel: 1000000000}}\n"
        ),
    )
    .unwrap();
    let mut cmd = common::cordis_command(&dir, &["run", "cordis.yml"]);
    let _ = cmd.env("CORDIS_TEST_KEY", "k");
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"fetch it\n")
            .unwrap();
    }
    let first: Value = bodies.recv().unwrap();
    assert!(first.to_string().len() < 64 * 1024);
    // The second request carries the tool's result; the process waits for its answer.
    let second: Value = bodies.recv().unwrap();
    let peak = status_kib(child.id(), "VmHWM:");
    eprintln!("peak resident set of the run: {peak:?} KiB");
    go.send(()).unwrap();
    let ran = child.wait_with_output().unwrap();
    server.join().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr),
    );
    assert_eq!(ran.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("Done."), "{out}\n{err}");

    let bound = cordis_tools::MAX_RESULT_TEXT as u64;
    let sent = second.to_string();
    assert!(
        (sent.len() as u64) < 2 * bound,
        "the next request is {} bytes",
        sent.len()
    );
    assert!(
        sent.contains(&format!("bytes omitted; {HUGE_RESULT} bytes in all")),
        "{}",
        &sent[..sent.len().min(2000)]
    );
    let (events, log_bytes) = session_events(&dir);
    assert!(
        log_bytes < 2 * bound,
        "the session log is {log_bytes} bytes"
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap_or_else(|| panic!("{events:#?}"))
        .to_string();
    assert!(result.contains("xxxx"), "{result}");
    assert!(
        result.contains(&format!("bytes omitted; {HUGE_RESULT} bytes in all")),
        "{result}"
    );
    match peak {
        Some(peak) => assert!(
            peak < HUGE_RESULT_PEAK_KIB,
            "peak resident set {peak} KiB, bound {HUGE_RESULT_PEAK_KIB} KiB"
        ),
        None => eprintln!("SKIP the memory bound: no /proc"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
