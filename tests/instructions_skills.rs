//! Project instructions (`AGENTS.md`) and skills (`SKILL.md`) as people meet them: in `check`'s
//! view and digest, in the request, re-read between turns as a logged header change naming the
//! file, a skill in the catalog read by the `skill` tool, and a bad skill that only warns.

use crate::common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde_json::{Value, json};

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-instr-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".config")).unwrap();
    dir
}

/// `cordis ARGS` in `dir` with the user's config directory inside `dir` (empty unless a test
/// writes there) and warnings on stderr.
fn command(dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = common::cordis_command(dir, args);
    cmd.env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("RUST_LOG", "warn");
    cmd
}

fn run(dir: &Path, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    let mut child = command(dir, args).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn check_json(dir: &Path) -> Value {
    let (code, out, err) = run(dir, &["check", "--json", "--seed", "7", "cordis.yml"], "");
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(&out).unwrap()
}

fn section_names(view: &Value) -> Vec<&str> {
    view["assembly"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect()
}

/// The `request/header` events of session `s` under `dir/.sessions`.
fn headers(dir: &Path) -> Vec<Value> {
    common::log_events(dir, "s")
        .into_iter()
        .filter(|e| e["type"] == "request/header")
        .collect()
}

/// A streamed answer `text`.
fn answer(text: &str) -> Vec<Value> {
    vec![
        json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 3}}),
    ]
}

/// A small composition over `llm` (flow style) with the workspace in `.` and both plugins.
fn composition(llm: &str) -> String {
    format!(
        "- {{id: system-prompt, name: system-prompt, config: {{persona: Terse.}}}}\n\
         - {{id: tools, name: tools}}\n\
         - {{id: llm, name: llm, config: {llm}}}\n\
         - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
         - {{id: agent-loop, name: agent-loop}}\n\
         - {{id: workspace, name: workspace, config: {{root: .}}}}\n\
         - {{id: instructions, name: instructions}}\n\
         - {{id: skills, name: skills}}\n"
    )
}

#[test]
fn check_json_on_the_bundled_file_shows_agents_md_and_a_different_digest() {
    let dir = fresh_dir("check");
    // The bundled file, as a user copies it into a project.
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("cordis.yml");
    std::fs::copy(bundled, dir.join("cordis.yml")).unwrap();
    let without = check_json(&dir);
    assert!(
        !section_names(&without).contains(&"instructions:AGENTS.md"),
        "{without}"
    );
    std::fs::write(dir.join("AGENTS.md"), "Run the tests before you answer.\n").unwrap();
    let with = check_json(&dir);
    assert!(
        section_names(&with).contains(&"instructions:AGENTS.md"),
        "{with}"
    );
    assert_ne!(with["digest"], without["digest"]);
    // The same file again: the same digest (nothing per run in the prompt).
    assert_eq!(check_json(&dir)["digest"], with["digest"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_changed_agents_md_between_two_piped_turns_is_one_header_change_naming_it() {
    let dir = fresh_dir("change");
    std::fs::write(dir.join("AGENTS.md"), "First rules {{kept as written}}.\n").unwrap();
    let (tx, rx) = mpsc::channel();
    let agents = dir.join("AGENTS.md");
    // The file changes while the first turn's request is being answered.
    let (base, server) =
        common::openai_serving_with(vec![answer("one"), answer("two")], move |i, body| {
            if i == 0 {
                std::fs::write(&agents, "Second rules.\n").unwrap();
            }
            tx.send(body).is_ok()
        });
    let llm = format!("{{adapter: openai, baseUrl: \"{base}\", model: m, maxRetries: 0}}");
    std::fs::write(dir.join("cordis.yml"), composition(&llm)).unwrap();
    let (code, _, stderr) = run(&dir, &["run", "--session", "s"], "a\nb\n");
    assert_eq!(code, Some(0), "{stderr}");
    server.join().unwrap();
    let bodies: Vec<Value> = rx.iter().collect();
    let system = |body: &Value| body["messages"][0]["content"].as_str().unwrap().to_owned();
    // In the request the model got, under its path, braces as written.
    assert!(
        system(&bodies[0])
            .ends_with("Instructions from AGENTS.md:\n\nFirst rules {{kept as written}}.\n"),
        "{}",
        system(&bodies[0])
    );
    assert!(system(&bodies[1]).ends_with("Instructions from AGENTS.md:\n\nSecond rules.\n"));
    let headers = headers(&dir);
    let reasons: Vec<&Value> = headers.iter().map(|h| &h["data"]["reason"]).collect();
    assert_eq!(reasons, [&json!("initial"), &json!("change")]);
    assert_eq!(headers[0]["data"].get("changed"), None);
    assert_eq!(
        headers[1]["data"]["changed"],
        json!(["instructions:AGENTS.md"])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_skill_is_in_the_catalog_its_tool_returns_the_body_and_a_bad_one_only_warns() {
    let dir = fresh_dir("skills");
    let skills = dir.join(".agents/skills");
    std::fs::create_dir_all(skills.join("deploy")).unwrap();
    std::fs::write(
        skills.join("deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship a release.\n---\nRun make release.\n",
    )
    .unwrap();
    std::fs::create_dir_all(skills.join("broken")).unwrap();
    std::fs::write(
        skills.join("broken/SKILL.md"),
        "---\nname: broken\ndescription: [unclosed\n---\nNever shown.\n",
    )
    .unwrap();
    let llm = "{adapter: scripted, responses: [\
               {toolCalls: [{name: skill, arguments: {name: deploy}}]}, {text: done}]}";
    std::fs::write(dir.join("cordis.yml"), composition(llm)).unwrap();
    let (code, stdout, stderr) = run(&dir, &["run", "--session", "s"], "ship it\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("done"), "{stdout}");
    assert!(
        stderr.contains("skills: .agents/skills/broken/SKILL.md:3: "),
        "{stderr}"
    );
    let system = headers(&dir)[0]["data"]["header"]["system"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.ends_with("\n\n- deploy: Ship a release."),
        "{system}"
    );
    assert!(!system.contains("broken"), "{system}");
    let result = common::log_events(&dir, "s")
        .into_iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    assert_eq!(
        result["data"]["content"],
        json!("Run make release.\n"),
        "{result}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_skill_typed_as_a_command_sends_its_body_with_the_arguments() {
    let dir = fresh_dir("skill-command");
    let skills = dir.join(".agents/skills");
    std::fs::create_dir_all(skills.join("deploy")).unwrap();
    std::fs::write(
        skills.join("deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship a release.\n---\nShip $ARGUMENTS to production.\n",
    )
    .unwrap();
    let llm = "{adapter: scripted, responses: [{text: shipped}]}";
    std::fs::write(dir.join("cordis.yml"), composition(llm)).unwrap();
    let (code, stdout, stderr) = run(&dir, &["run", "--session", "s"], "/help\n/deploy v1.2\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("shipped"), "{stdout}");
    assert!(
        stderr.contains("  /deploy [ARGS]  Ship a release."),
        "the skill is listed with the commands: {stderr}"
    );
    let sent: Vec<String> = common::log_events(&dir, "s")
        .iter()
        .filter(|e| e["type"] == "user/message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].contains("Ship v1.2 to production."), "{sent:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
