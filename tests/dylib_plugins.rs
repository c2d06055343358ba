//! Third-party tool plugins as shared libraries: the C ABI end to end, with Rust (SDK) and C
//! plugins, and every way a library can be bad failing its own entry while the host goes on.
#![cfg(unix)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::cordis;
use common::plugins::{self, lib, lib_name};
use cordis_host::LoadPlan;
use cordis_host::plan::{PlanOptions, Step, load_plan};
use cordis_runtime::{Context, Inject, PluginOptions, ScopeHandle, ScopeStatus};
use cordis_tools::{ToolCall, ToolRegistry, codes};
use serde_json::{Value, json};

/// Writes `yml` as `name` next to the fixture libraries and returns its path.
fn config(name: &str, yml: &str) -> String {
    let path = plugins::dir().join(name);
    std::fs::write(&path, yml).unwrap();
    path.display().to_string()
}

fn dylib(id: &str, stem: &str, config: &str) -> String {
    format!(
        "- id: {id}\n  name: ./{}\n  config: {config}\n",
        lib_name(stem)
    )
}

const BASE: &str = "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n";

fn declare(id: &str, tool: &str) -> String {
    format!(
        "- id: {id}\n  name: tool-declare\n  config:\n    tools:\n      - {{name: {tool}, description: built-in stub, parameters: {{type: object}}}}\n"
    )
}

fn check_json(file: &str, extra: &[&str]) -> (u8, Value, String) {
    let mut args = vec!["check", file, "--json", "--seed", "3"];
    args.extend_from_slice(extra);
    let run = cordis(&args, &[]);
    let json = serde_json::from_str(&run.out).unwrap_or(Value::Null);
    (run.code, json, run.err)
}

fn entry<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("no entry {id} in {report:#}"))
}

fn plan_of(file: &str) -> LoadPlan {
    let source = std::fs::read_to_string(file).unwrap();
    load_plan(
        &source,
        file,
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Applies every plugin entry of `plan` under `root`, returning the handles by entry id.
async fn apply(root: &Context, plan: &LoadPlan) -> Vec<(String, ScopeHandle)> {
    let mut handles = Vec::new();
    for e in &plan.entries {
        if let Step::Plugin {
            prepared, inject, ..
        } = &e.step
        {
            let options = PluginOptions {
                label: Some(e.id.clone()),
                inject: inject.iter().map(Inject::required_named).collect(),
                timeout: Some(Duration::from_secs(10)),
                place: None,
            };
            handles.push((e.id.clone(), root.plugin_with(prepared.clone(), options)));
        }
    }
    root.idle().await;
    handles
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        call_id: "1".into(),
        name: name.into(),
        arguments: args,
    }
}

#[test]
fn rust_and_c_plugins_load_and_list_their_tools_in_canonical_order_with_built_ins() {
    let yml = format!(
        "{BASE}{}{}{}",
        declare("stub", "mike"),
        dylib("text", "cordis-example-text-tools", "{prefix: t_}"),
        dylib("c", "c_good", "c_"),
    );
    let file = config("happy.yml", &yml);
    let (code, report, err) = check_json(&file, &[]);
    assert_eq!(code, 0, "{err}\n{report:#}");
    for id in ["stub", "text", "c"] {
        assert_eq!(entry(&report, id)["status"], "active");
    }
    let tools: Vec<&str> = report["assembly"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "c_echo",
            "c_fail",
            "c_garbage",
            "c_hang",
            "c_slow",
            "mike",
            "t_reverse",
            "t_word_count"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_tools_answer_and_disposal_unregisters_them() {
    let yml = format!(
        "{BASE}{}{}",
        dylib("text", "cordis-example-text-tools", "null"),
        dylib("c", "c_good", "k_"),
    );
    let plan = plan_of(&config("invoke.yml", &yml));
    let root = Context::root();
    let handles = apply(&root, &plan).await;
    assert!(
        handles
            .iter()
            .all(|(_, h)| h.status() == ScopeStatus::Active),
        "{:?}",
        handles.iter().map(|(_, h)| h.info()).collect::<Vec<_>>()
    );
    let reg = root.get::<ToolRegistry>().unwrap();
    let run = |name: &str, args: Value| reg.execute(call(name, args), None);

    let r = run("reverse", json!({"text": "abc"})).await;
    assert_eq!((r.is_error, r.content), (false, json!("cba")));
    let r = run("word_count", json!({"text": "one two  three"})).await;
    assert_eq!(r.content, json!({"words": 3}));
    // Arguments that break the declared schema never reach the plugin.
    let r = run("word_count", json!({"text": 7})).await;
    assert_eq!(r.code.as_deref(), Some(codes::INVALID_ARGUMENTS), "{r:?}");

    let r = run("k_echo", json!({"x": [1, "é"]})).await;
    assert_eq!(r.content, json!({"echo": {"x": [1, "é"]}}));
    let r = run("k_garbage", json!({})).await;
    assert_eq!(r.code.as_deref(), Some(codes::TOOL_ERROR));
    assert!(
        r.content
            .as_str()
            .unwrap()
            .contains("tool \"k_garbage\" returned invalid JSON"),
        "{r:?}"
    );
    let r = run("k_fail", json!({})).await;
    assert_eq!(r.code.as_deref(), Some(codes::TOOL_ERROR));
    assert!(
        r.content
            .as_str()
            .unwrap()
            .ends_with("c-plugin: fail always fails")
    );
    let r = run("k_hang", json!({})).await;
    assert_eq!(r.code.as_deref(), Some(codes::TOOL_TIMEOUT), "{r:?}");
    // The host keeps serving the same (serialized) plugin once the hung call returns.
    let r = run("k_echo", json!({"n": 1})).await;
    assert_eq!(r.content, json!({"echo": {"n": 1}}));

    let names = |reg: &ToolRegistry| -> Vec<String> {
        reg.schemas(None).into_iter().map(|s| s.name).collect()
    };
    assert_eq!(names(&reg).len(), 7);
    for (id, h) in &handles {
        if id == "c" {
            h.dispose();
        }
    }
    assert_eq!(names(&reg), ["reverse", "word_count"], "c's tools are gone");
    let r = run("k_echo", json!(1)).await;
    assert_eq!(r.code.as_deref(), Some(codes::UNKNOWN_TOOL));
    root.dispose();
    root.tasks_finished().await;
    assert!(root.live().is_zero(), "{:?}", root.live());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_plugin_fails_alone_and_the_host_keeps_serving() {
    let yml = format!(
        "{BASE}{}{}{}{}",
        dylib("p-create", "cordis-example-panicky", "{panic_in: create}"),
        dylib(
            "p-describe",
            "cordis-example-panicky",
            "{panic_in: describe}"
        ),
        dylib("p", "cordis-example-panicky", "null"),
        dylib("text", "cordis-example-text-tools", "null"),
    );
    let plan = plan_of(&config("panics.yml", &yml));
    let root = Context::root();
    let handles = apply(&root, &plan).await;
    let failure = |id: &str| {
        let h = &handles.iter().find(|(i, _)| i == id).unwrap().1;
        assert_eq!(h.status(), ScopeStatus::Failed, "{id}");
        h.failure().unwrap().to_string()
    };
    let lib = lib_name("cordis-example-panicky");
    let create = failure("p-create");
    assert!(
        create.contains(&format!(
            "./{lib}: create panicked: panicky: create was told to panic"
        )),
        "{create}"
    );
    let describe = failure("p-describe");
    assert!(
        describe.contains("describe panicked: panicky: describe was told to panic"),
        "{describe}"
    );
    let reg = root.get::<ToolRegistry>().unwrap();
    for _ in 0..2 {
        let r = reg.execute(call("boom", json!({})), None).await;
        assert_eq!(r.code.as_deref(), Some(codes::TOOL_PANICKED), "{r:?}");
        let text = r.content.as_str().unwrap();
        assert!(
            text.starts_with("tool \"boom\" panicked: panicky: boom went the tool"),
            "{text}"
        );
        let r = reg.execute(call("calm", json!({})), None).await;
        assert_eq!(r.content, json!("calm"));
        let r = reg
            .execute(call("reverse", json!({"text": "ab"})), None)
            .await;
        assert_eq!(r.content, json!("ba"));
    }
    root.dispose();
}

#[test]
fn every_bad_library_fails_its_own_entry_with_a_clear_message_and_the_host_goes_on() {
    let dir = plugins::dir();
    std::fs::write(dir.join("libjunk.so"), "this is not an ELF file").unwrap();
    let wrong_pin = "0".repeat(64);
    let good_pin = sha256_hex(&lib("c_good"));
    let mut yml = String::from(BASE);
    let cases: &[(&str, &str, &str)] = &[
        (
            "wrong-magic",
            "c_wrong_magic",
            "wrong magic 0x1234567812345678",
        ),
        (
            "other-major",
            "c_other_major",
            "the plugin uses ABI 2.0; this host speaks ABI 1.0",
        ),
        (
            "small-struct",
            "c_small_struct",
            "struct_size is 16 bytes, smaller than ABI 1.0's 56",
        ),
        (
            "needs-newer-host",
            "c_needs_newer_host",
            "c-plugin: needs host ABI 1.7 or newer",
        ),
        (
            "no-symbol",
            "c_no_symbol",
            "does not export `cordis_plugin_descriptor`",
        ),
        (
            "null-create",
            "c_null_create",
            "the descriptor has no `create` function",
        ),
        (
            "create-panics",
            "c_create_panics",
            "create panicked: c-plugin: create blew up",
        ),
        (
            "describe-panics",
            "c_describe_panics",
            "describe panicked: c-plugin: describe blew up",
        ),
        ("bad-json", "c_bad_json", "describe returned invalid JSON"),
        (
            "reserved",
            "c_reserved_name",
            "tool name \"run_code\" is reserved",
        ),
        (
            "duplicate",
            "c_duplicate_name",
            "describe returned tool \"d_echo\" twice",
        ),
        ("bad-name", "c_bad_name", "invalid tool name \"has space\""),
        (
            "rust-config",
            "cordis-example-text-tools",
            "create failed: config.prefix must be a string",
        ),
    ];
    for (id, stem, _) in cases {
        let config = match *id {
            "duplicate" => "d_",
            "rust-config" => "{prefix: 3}",
            _ => "null",
        };
        yml.push_str(&dylib(id, stem, config));
    }
    yml.push_str("- id: junk\n  name: ./libjunk.so\n");
    yml.push_str(&format!(
        "{}  sha256: {wrong_pin}\n",
        dylib("pinned-wrong", "c_thread_safe", "w_")
    ));
    yml.push_str(&format!(
        "{}  sha256: {good_pin}\n",
        dylib("pinned", "c_good", "g_")
    ));
    yml.push_str(&dylib("twin-a", "c_good", "twin_"));
    yml.push_str(&dylib("twin-b", "c_good", "twin_"));
    yml.push_str(&declare("stub", "alpha"));
    let file = config("bad-libs.yml", &yml);
    let (code, report, err) = check_json(&file, &[]);
    assert_eq!(code, 1, "{err}");
    for (id, stem, message) in cases {
        let e = entry(&report, id);
        assert_eq!(e["status"], "failed", "{id}: {e}");
        let error = e["error"].as_str().unwrap();
        assert!(error.contains(message), "{id}: {error}");
        assert!(
            error.contains(&format!("./{}", lib_name(stem))),
            "{id} names its library: {error}"
        );
    }
    let junk = entry(&report, "junk")["error"].as_str().unwrap().to_owned();
    assert!(
        junk.contains("./libjunk.so: not a loadable shared library"),
        "{junk}"
    );
    let pinned = entry(&report, "pinned-wrong")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        pinned.contains(&format!("sha256 mismatch: the entry pins {wrong_pin}")),
        "{pinned}"
    );
    assert_eq!(entry(&report, "pinned")["status"], "active");
    // Two entries registering one name: a conflict both report identically (not the first to
    // register winning), and the names are withheld from the model.
    let twins = [entry(&report, "twin-a"), entry(&report, "twin-b")];
    for twin in &twins {
        assert_eq!(twin["status"], "conflict", "{twin}");
    }
    assert_eq!(twins[0]["error"], twins[1]["error"]);
    assert_eq!(
        twins[0]["error"],
        "tool \"twin_echo\", tool \"twin_fail\", tool \"twin_garbage\", tool \"twin_hang\", tool \"twin_slow\" are claimed by entries \"twin-a\" and \"twin-b\", so none of them gets them; remove them from all but one (or disable all but one of the entries)"
    );
    let tools = report["assembly"]["tools"].as_array().unwrap();
    assert!(
        !tools
            .iter()
            .any(|t| t.as_str().unwrap().starts_with("twin_")),
        "{tools:?}"
    );
    assert_eq!(entry(&report, "stub")["status"], "active");
    let tools = report["assembly"]["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("alpha")) && tools.contains(&json!("g_echo")));
    assert!(
        !tools.iter().any(|t| t.as_str().unwrap().starts_with("d_")),
        "{tools:?}"
    );
}

fn sha256_hex(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn configuration_problems_are_reported_with_file_line_and_entry() {
    let outside = plugins::dir().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let elsewhere = outside.join(lib_name("c_good"));
    std::fs::copy(lib("c_good"), &elsewhere).unwrap();
    let inside = plugins::dir().join("inside");
    std::fs::create_dir_all(&inside).unwrap();
    let link = inside.join("liblink.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    std::fs::copy(lib("c_good"), inside.join("libinside.so")).unwrap();
    let yml = format!(
        "- id: missing\n  name: ./libmissing.so\n\
         - id: absolute\n  name: {abs}\n\
         - id: dotdot\n  name: ../outside/{lib}\n\
         - id: symlink\n  name: ./liblink.so\n\
         - id: bad-pin\n  name: ./libinside.so\n  sha256: abc\n\
         - id: pinned-builtin\n  name: tools\n  sha256: {zeros}\n",
        abs = elsewhere.display(),
        lib = lib_name("c_good"),
        zeros = "0".repeat(64),
    );
    let file = inside.join("cfg.yml");
    std::fs::write(&file, &yml).unwrap();
    let file = file.display().to_string();
    let run = cordis(&["check", &file, "--seed", "1"], &[]);
    assert_eq!(run.code, 2, "{}", run.err);
    let lines: Vec<&str> = run.err.lines().collect();
    let line = |n: usize, id: &str| {
        let prefix = format!("{file}:{n}:");
        lines
            .iter()
            .find(|l| l.starts_with(&prefix) && l.contains(&format!("entry \"{id}\": ")))
            .unwrap_or_else(|| panic!("no error for {id} at line {n}: {}", run.err))
            .to_string()
    };
    // Positions point at the offending value: the `name` line, the `sha256` line.
    assert!(line(2, "missing").contains("plugin library \"./libmissing.so\" not found"));
    for (n, id) in [(4, "absolute"), (6, "dotdot"), (8, "symlink")] {
        let l = line(n, id);
        assert!(l.contains("outside the allowed plugin directories"), "{l}");
        assert!(
            l.contains(&format!(
                "resolves to {}",
                elsewhere.canonicalize().unwrap().display()
            )),
            "{l}"
        );
    }
    assert!(line(11, "bad-pin").contains("key \"sha256\" must be a SHA-256 hash as 64 hex digits"));
    assert!(line(14, "pinned-builtin").contains("\"tools\" is a built-in plugin"));
    let summary = format!("cordis: 6 configuration errors in {file}\n");
    assert!(run.err.ends_with(&summary), "{}", run.err);

    // Allowing the other directory (flag or environment) admits the same libraries.
    let yml = format!(
        "{BASE}- id: absolute\n  name: {}\n  config: a_\n- id: symlink\n  name: ./liblink.so\n  config: s_\n",
        elsewhere.display()
    );
    std::fs::write(inside.join("ok.yml"), yml).unwrap();
    let ok = inside.join("ok.yml").display().to_string();
    let outside_text = outside.display().to_string();
    let run = cordis(&["check", &ok, "--plugin-dir", &outside_text], &[]);
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    let run = cordis(&["check", &ok], &[("CORDIS_PLUGIN_PATH", &outside_text)]);
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_loads_once_and_its_calls_are_serialized_unless_it_is_thread_safe() {
    let good = lib("c_good").canonicalize().unwrap();
    let first = cordis_dylib::open(&good, None).unwrap();
    let again = cordis_dylib::open(&good, None).unwrap();
    assert!(std::ptr::eq(first, again), "the leaked handle is reused");
    assert_eq!(first.abi_version(), (1, 0));
    assert!(!first.thread_safe());

    let yml = format!(
        "{BASE}{}{}",
        dylib("serial", "c_good", "s_"),
        dylib("parallel", "c_thread_safe", "p_"),
    );
    let plan = plan_of(&config("concurrency.yml", &yml));
    let root = Context::root();
    apply(&root, &plan).await;
    let reg = root.get::<ToolRegistry>().unwrap();
    let peak = |name: &'static str| {
        let reg = reg.clone();
        async move {
            let calls = (0..4).map(|_| reg.execute(call(name, json!({})), None));
            let results = futures_util::future::join_all(calls).await;
            results
                .iter()
                .map(|r| r.content["max_inflight"].as_i64().unwrap())
                .max()
                .unwrap()
        }
    };
    assert_eq!(
        peak("s_slow").await,
        1,
        "a plugin that is not thread-safe runs one call at a time"
    );
    assert!(
        peak("p_slow").await > 1,
        "a thread-safe plugin runs calls concurrently"
    );
    root.dispose();
}
