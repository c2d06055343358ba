//! What `cordis check` tells a person about `mcp` entries: a server that cannot start leaves
//! its entry pending with the reason (a warning, exit 0), and fails the boot only with
//! `failOnStartupError`; a bad server name points at its value.

use crate::common;

use common::{cordis, fixture};

#[test]
fn a_down_server_is_a_pending_entry_with_its_reason_by_default_and_a_failed_entry_when_strict() {
    let lenient = cordis(&["check", &fixture("mcp/down-lenient.yml")], &[]);
    assert_eq!(lenient.code, 0, "{}\n{}", lenient.out, lenient.err);
    let row = lenient
        .out
        .lines()
        .find(|l| l.starts_with("down "))
        .unwrap();
    assert!(row.contains(" pending "), "{row}");
    assert!(
        row.contains(
            "mcp(down): cannot connect: cannot start \"/nonexistent/mcp-server\": No such file or directory (os error 2); retry 1 of 10 in 500 ms"
        ),
        "{row}"
    );
    assert!(
        lenient.out.contains("tools (canonical order, 0)"),
        "{}",
        lenient.out
    );
    assert!(
        lenient
            .err
            .contains("cordis: warning: entry \"down\" is pending and retries by itself: mcp(down): cannot connect"),
        "{}",
        lenient.err
    );
    assert!(!lenient.err.contains("not active"), "{}", lenient.err);

    let strict = cordis(&["check", &fixture("mcp/down-strict.yml")], &[]);
    assert_eq!(strict.code, 1, "{}\n{}", strict.out, strict.err);
    let row = strict.out.lines().find(|l| l.starts_with("down ")).unwrap();
    assert!(row.contains("failed"), "{row}");
    assert!(
        row.contains(
            "mcp(down): initial connection or tool synchronization failed: cannot connect: cannot start \"/nonexistent/mcp-server\""
        ),
        "{row}"
    );
}

#[test]
fn a_bad_server_name_points_at_its_value() {
    let file = fixture("mcp/bad-server-name.yml");
    let run = cordis(&["check", &file], &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.out, run.err);
    assert!(
        run.err.contains(&format!(
            "{file}:7:13: entry \"files\": config.server: mcp: server name \"my files\" is invalid"
        )),
        "{}",
        run.err
    );
}

#[test]
fn a_tool_filter_naming_one_tool_in_both_lists_or_with_an_unknown_key_points_at_it() {
    let file = fixture("mcp/bad-tool-filter.yml");
    let run = cordis(&["check", &file], &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.out, run.err);
    assert!(
        run.err.contains(&format!("{file}:10:7: entry \"files\": config.tools: tool \"write\" is both in `tools.allow` and in `tools.deny`")),
        "{}",
        run.err
    );
    assert!(
        run.err.contains(&format!("{file}:20:13: entry \"docs\": config.tools.only: unknown field `only`, expected `allow` or `deny`")),
        "{}",
        run.err
    );
}

/// A fresh scratch directory for test `name` holding `cordis.yml` = `config`.
fn project(name: &str, config: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), config).unwrap();
    dir
}

#[test]
fn an_mcp_prompt_is_a_slash_command_whose_rendering_is_the_message() {
    let server = crate::mcp_determinism::fixture_server();
    let dir = project(
        "mcp-prompt",
        &format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: llm\n  name: llm\n  config: {{adapter: scripted, model: m, responses: [{{text: Reviewed.}}], repeat: true}}\n\
             - {{id: sessions, name: sessions}}\n- {{id: agent-loop, name: agent-loop}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--catalog]}}\n",
            server.display()
        ),
    );
    let (code, out, err) = common::piped(
        &dir,
        &["run"],
        "/help\n/mcp__fx__review\n/mcp__fx__review src/a.rs focus=tests\n",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    // /help lists the server's prompts, sorted, with their arguments.
    assert!(
        err.contains("cordis: MCP prompts (sent as your message):\n  /mcp__fx__greeting [name=…]  Greets someone.\n  /mcp__fx__review file=… [focus=…]  Asks for a review of one file.\n  /mcp__fx__summarize  Summarizes the conversation.\n"),
        "{err}"
    );
    // A missing required argument is named; nothing is sent.
    assert!(
        err.contains("cordis: the prompt review needs file (usage: /… file=… [focus=…])"),
        "{err}"
    );
    assert_eq!(out.matches("Reviewed.").count(), 1, "{out}");
    // The rendering is the user's message in the log.
    let session = err
        .split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .expect("the run names its session")
        .trim_end_matches([',', '.', ')'])
        .to_owned();
    let history = common::cordis_command(&dir, &["history", &session, "--json"])
        .output()
        .unwrap();
    let page: serde_json::Value = serde_json::from_slice(&history.stdout).unwrap();
    let users: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["type"] == "user/message")
        .map(|e| e["event"]["data"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["Review src/a.rs (focus: tests)."]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_mcp_calls_progress_shows_in_the_terminal_while_it_runs() {
    let server = crate::mcp_determinism::fixture_server();
    let dir = project(
        "mcp-progress",
        &format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: llm\n  name: llm\n  config:\n    adapter: scripted\n    model: m\n    responses:\n\
             \x20     - toolCalls: [{{id: p1, name: mcp__fx__progress, arguments: {{steps: 3, everyMs: 30}}}}]\n\
             \x20     - text: Built.\n\
             - {{id: sessions, name: sessions}}\n- {{id: agent-loop, name: agent-loop}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--tools, progress]}}\n",
            server.display()
        ),
    );
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--approve", "mcp__fx__progress"],
        "build it\n",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let shown: Vec<&str> = err.lines().filter(|l| l.starts_with("  … ")).collect();
    assert_eq!(
        shown,
        [
            "  … mcp__fx__progress: 1/3 step 1",
            "  … mcp__fx__progress: 2/3 step 2",
            "  … mcp__fx__progress: 3/3 step 3"
        ],
        "{err}"
    );
    assert!(out.contains("Built."), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_mcp_tools_image_reaches_a_model_that_takes_images_after_the_tool_results() {
    use serde_json::json;
    let delta = |d: serde_json::Value| json!({"choices": [{"index": 0, "delta": d}]});
    let finish = |why: &str| json!({"choices": [{"index": 0, "delta": {}, "finish_reason": why}]});
    let (base, server) = common::openai_serving(vec![
        vec![
            delta(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "function",
                "function": {"name": "mcp__fx__image", "arguments": "{}"}}]}),
            ),
            finish("tool_calls"),
        ],
        vec![delta(json!({"content": "A red pixel."})), finish("stop")],
    ]);
    let fixture = crate::mcp_determinism::fixture_server();
    let dir = project(
        "mcp-image",
        &format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: llm\n  name: llm\n  config: {{adapter: openai, baseUrl: \"{base}\", apiKey: k, model: m, imageInput: true}}\n\
             - {{id: sessions, name: sessions}}\n- {{id: agent-loop, name: agent-loop}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--tools, image]}}\n",
            fixture.display()
        ),
    );
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--approve", "mcp__fx__image"],
        "what is it?\n",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("A red pixel."), "{out}\n{err}");
    let bodies = server.join().unwrap();
    let messages = bodies[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    // (No system prompt: the composition has no persona.)
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "user"],
        "{}",
        bodies[1]
    );
    let result = messages[2]["content"].as_str().unwrap();
    assert!(
        result.contains("a pixel") && result.contains("sent after the tool results"),
        "{result}"
    );
    let url = messages[3]["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap();
    assert!(url.starts_with("data:image/png;base64,iVBOR"), "{url}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_mcp_resource_mentioned_with_at_is_attached_to_the_message() {
    let server = crate::mcp_determinism::fixture_server();
    let dir = project(
        "mcp-mention",
        &format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: llm\n  name: llm\n  config: {{adapter: scripted, model: m, responses: [{{text: Read.}}], repeat: true}}\n\
             - {{id: sessions, name: sessions}}\n- {{id: agent-loop, name: agent-loop}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--catalog]}}\n",
            server.display()
        ),
    );
    let (code, out, err) = common::piped(
        &dir,
        &["run"],
        "explain @fx:mem://readme, please\nand @fx:mem://nothing-here\nmail me@host:x\n",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    // A resource the server cannot read is named; nothing is sent.
    assert!(
        err.contains(
            "cordis: cannot attach @fx:mem://nothing-here: mcp(fx): resources/read failed"
        ),
        "{err}"
    );
    let session = err
        .split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .expect("the run names its session")
        .trim_end_matches([',', '.', ')'])
        .to_owned();
    let history = common::cordis_command(&dir, &["history", &session, "--json"])
        .output()
        .unwrap();
    let page: serde_json::Value = serde_json::from_slice(&history.stdout).unwrap();
    let users: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["type"] == "user/message")
        .map(|e| e["event"]["data"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        [
            "explain @fx:mem://readme, please\n\n[resource uri=mem://readme]\ncontents of mem://readme\n[/resource]",
            "mail me@host:x"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
