//! What `cordis check` tells a person about `mcp` entries: a server that cannot start leaves
//! its entry pending with the reason (a warning, exit 0), and fails the boot only with
//! `failOnStartupError`; a bad server name points at its value.

use crate::common;

use common::{cordis, fixture, log_events};

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
        err.contains("cordis: skills and MCP prompts (sent as your message):\n  /mcp__fx__greeting [name=…]  Greets someone.\n  /mcp__fx__review file=… [focus=…]  Asks for a review of one file.\n  /mcp__fx__summarize  Summarizes the conversation.\n"),
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
fn an_mcp_tools_image_and_audio_reach_a_model_that_takes_them_after_the_tool_results() {
    use serde_json::json;
    let delta = |d: serde_json::Value| json!({"choices": [{"index": 0, "delta": d}]});
    let finish = |why: &str| json!({"choices": [{"index": 0, "delta": {}, "finish_reason": why}]});
    let (base, server) = common::openai_serving(vec![
        vec![
            delta(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "function",
                "function": {"name": "mcp__fx__image", "arguments": "{}"}},
                {"index": 1, "id": "c2", "type": "function",
                "function": {"name": "mcp__fx__audio", "arguments": "{}"}}]}),
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
             - id: llm\n  name: llm\n  config: {{adapter: openai, baseUrl: \"{base}\", apiKey: k, model: m, imageInput: true, audioInput: true}}\n\
             - {{id: sessions, name: sessions}}\n- {{id: agent-loop, name: agent-loop}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--tools, \"image,audio\"]}}\n",
            fixture.display()
        ),
    );
    let (code, out, err) = common::piped(
        &dir,
        &[
            "run",
            "--approve",
            "mcp__fx__image",
            "--approve",
            "mcp__fx__audio",
        ],
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
        ["user", "assistant", "tool", "tool", "user"],
        "{}",
        bodies[1]
    );
    for (at, said) in [(2, "a pixel"), (3, "a silence")] {
        let result = messages[at]["content"].as_str().unwrap();
        assert!(
            result.contains(said) && result.contains("sent after the tool results"),
            "{result}"
        );
    }
    let url = messages[4]["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap();
    assert!(url.starts_with("data:image/png;base64,iVBOR"), "{url}");
    assert_eq!(
        messages[4]["content"][2],
        json!({"type": "input_audio", "input_audio": {"format": "wav",
               "data": "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="}})
    );
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

/// What the tool results of `session` say, in log order.
fn tool_results(dir: &std::path::Path, session: &str) -> Vec<String> {
    log_events(dir, session)
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| e["data"]["content"].to_string())
        .collect()
}

/// Plays `dialogue` on `term`: waits until the screen shows each text (the n-th time, counted
/// from the start), then types what follows it.
#[cfg(unix)]
fn converse(term: &mut common::pty::Pty, dialogue: &[(&str, usize, &str)]) {
    for (shown, times, typed) in dialogue {
        term.wait_for_count(shown, *times, std::time::Duration::from_secs(60));
        if !typed.is_empty() {
            term.send(typed);
        }
    }
}

/// How long the form test waits for the terminal and for the run to end.
#[cfg(unix)]
const FORM_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// `cordis run` on `session` of the form test's project, its `ask` tool allowed.
#[cfg(unix)]
fn form_run(dir: &std::path::Path, session: &str) -> std::process::Command {
    common::cordis_command(
        dir,
        &["run", "--session", session, "--approve", "mcp__fx__ask"],
    )
}

#[cfg(unix)]
#[test]
fn an_mcp_servers_form_is_filled_in_at_the_terminal_field_by_field_and_declined_when_piped() {
    let server = crate::mcp_determinism::fixture_server();
    let dir = project(
        "mcp-form",
        &format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: llm\n  name: llm\n  config:\n    adapter: scripted\n    model: m\n    responses:\n\
             \x20     - {{text: [Looking, ' you up.'], delayMs: 600, toolCalls: [{{id: a1, name: mcp__fx__ask, arguments: {{}}}}]}}\n\
             \x20     - text: Hello there.\n\
             \x20     - toolCalls: [{{id: a2, name: mcp__fx__ask, arguments: {{}}}}]\n\
             \x20     - text: Declined then.\n\
             \x20     - text: Hi Bob.\n\
             \x20     - toolCalls: [{{id: a4, name: mcp__fx__ask, arguments: {{url: true}}}}]\n\
             \x20     - text: Paged.\n\
             \x20     - toolCalls: [{{id: a3, name: mcp__fx__ask, arguments: {{}}}}]\n\
             \x20     - text: Never reached.\n\
             - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n- {{id: agent-loop, name: agent-loop}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--tools, ask, --catalog, --log, fx.log]}}\n",
            server.display()
        ),
    );
    forms_are_filled_in_at_the_terminal_field_by_field(&dir);
    fields_are_read_as_lines_with_the_transcript_in_a_file(&dir);
    a_piped_run_declines_the_form(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// At a terminal: forms asked during a turn and between turns, a page to open, and Ctrl-C
/// both while a server holds a prompt command and at a form's field.
#[cfg(unix)]
fn forms_are_filled_in_at_the_terminal_field_by_field(dir: &std::path::Path) {
    let mut term = common::pty::Pty::spawn_controlling(form_run(dir, "f"));
    // The dialogue: what the screen shows (the n-th time, counted from the start), then what
    // is typed.
    let dialogue: &[(&str, usize, &str)] = &[
        ("> ", 1, "who am I?\r"),
        // Typed while the model works: the next message, never the form's first value.
        ("Looking", 1, "and then?\r"),
        ("kept as your next message", 1, ""),
        ("cordis: MCP server fx asks:\r\n  Who are you?", 1, ""),
        ("  name (text, at least 1 character, required): ", 1, "\r"),
        ("✗ name is required", 1, "Ada\r"),
        ("  age (a whole number, at least 0, optional): ", 1, "old\r"),
        ("✗ age is a whole number, like 42", 1, "36\r"),
        ("  color (one of 1 red, 2 blue, Enter: red): ", 1, "\r"),
        ("cordis: answered fx's form (age, name)", 1, ""),
        ("Hello there.", 1, ""),
        // The kept message runs next; its form is declined.
        ("> and then?", 1, ""),
        ("cordis: MCP server fx asks:", 2, ""),
        ("  name (text", 3, "/decline\r"),
        ("cordis: declined fx's form", 1, ""),
        // Between turns too: the server asks while rendering a prompt (a command).
        ("Declined then.", 1, "/mcp__fx__greeting\r"),
        (
            "cordis: MCP server fx asks:\r\n  Who should be greeted?",
            1,
            "",
        ),
        ("  name (text, required): ", 1, "Bob\r"),
        ("cordis: answered fx's form (name)", 1, ""),
        // A page (URL mode): shown whole, opened by nobody but the person.
        ("Hi Bob.", 1, "a page\r"),
        (
            "cordis: MCP server fx asks you to open a page:\r\n  Open this\r\n  https://example.test/x",
            1,
            "",
        ),
        ("  will you open it? (yes, no or cancel): ", 1, "maybe\r"),
        ("✗ yes, no or cancel", 1, "y\r"),
        (
            "cordis: told fx you will open https://example.test/x",
            1,
            "",
        ),
        ("cordis: fx says the page is done (e1)", 1, ""),
        ("Paged.", 1, "/mcp__fx__greeting wait\r"),
    ];
    converse(&mut term, dialogue);
    // Ctrl-C while a server holds a prompt command: the run stops waiting, nothing is sent.
    let deadline = std::time::Instant::now() + FORM_WAIT;
    while !std::fs::read_to_string(dir.join("fx.log"))
        .unwrap_or_default()
        .contains("greeting wait")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the prompt was never asked for"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    term.send("\x03");
    let dialogue: &[(&str, usize, &str)] = &[
        (
            "cordis: stopped waiting for the server; nothing was sent",
            1,
            "once more\r",
        ),
        ("cordis: MCP server fx asks:", 4, ""),
        // Ctrl-C at a field cancels the form and the turn; the run goes on.
        ("  name (text", 5, "\x03"),
        ("cordis: cancelled fx's form", 1, ""),
        ("cancelling the turn", 1, ""),
    ];
    converse(&mut term, dialogue);
    term.send("\x04");
    assert_eq!(term.wait_exit(FORM_WAIT), Some(0), "{}", term.screen());
    let users: Vec<String> = log_events(dir, "f")
        .iter()
        .filter(|e| e["type"] == "user/message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        users,
        [
            "who am I?",
            "and then?",
            "Say hello to Bob.",
            "a page",
            "once more"
        ]
    );
    let results = tool_results(dir, "f");
    // What the server got: the values typed, the form's default for the field left empty.
    assert!(
        results[0].contains(
            r#"{\"action\":\"accept\",\"content\":{\"age\":36,\"color\":\"red\",\"name\":\"Ada\"}}"#
        ),
        "{results:?}"
    );
    assert!(
        results[1].contains(r#"{\"action\":\"decline\"}"#),
        "{results:?}"
    );
    assert!(
        results[2].contains(r#"{\"action\":\"accept\"}"#),
        "{results:?}"
    );
    assert!(
        results.get(3).is_none_or(|r| !r.contains("accept")),
        "{results:?}"
    );
}

/// At a terminal with the transcript redirected to a file, fields are read as lines.
#[cfg(unix)]
fn fields_are_read_as_lines_with_the_transcript_in_a_file(dir: &std::path::Path) {
    let mut line_mode = std::process::Command::new("sh");
    line_mode
        .current_dir(dir)
        .args(["-c", "exec \"$0\" \"$@\" > transcript.txt"])
        .args(form_run(dir, "l").get_program().to_str())
        .args(form_run(dir, "l").get_args());
    for (key, value) in form_run(dir, "l").get_envs() {
        match value {
            Some(value) => line_mode.env(key, value),
            None => line_mode.env_remove(key),
        };
    }
    let mut term = common::pty::Pty::spawn(line_mode);
    converse(
        &mut term,
        &[
            ("> ", 1, "who am I?\n"),
            (
                "  name (text, at least 1 character, required): ",
                1,
                "Ada\n",
            ),
            ("  age (a whole number", 1, "\n"),
            ("  color (one of", 1, "2\n"),
            ("cordis: answered fx's form (color, name)", 1, ""),
        ],
    );
    term.send("\x04");
    assert_eq!(term.wait_exit(FORM_WAIT), Some(0), "{}", term.screen());
    let results = tool_results(dir, "l");
    assert!(
        results[0].contains(
            r#"{\"action\":\"accept\",\"content\":{\"color\":\"blue\",\"name\":\"Ada\"}}"#
        ),
        "{results:?}"
    );
    assert!(
        std::fs::read_to_string(dir.join("transcript.txt"))
            .unwrap()
            .contains("Hello there."),
        "the transcript went to the file"
    );
}

/// Piped, nobody can be asked: the form is declined and the call goes on.
#[cfg(unix)]
fn a_piped_run_declines_the_form(dir: &std::path::Path) {
    let (code, out, err) = common::piped(
        dir,
        &["run", "--session", "p", "--approve", "mcp__fx__ask"],
        "who am I?\n",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(!err.contains("asks:"), "{err}");
    let results = tool_results(dir, "p");
    assert!(
        results[0].contains(r#"{\"action\":\"decline\"}"#),
        "{results:?}"
    );
}

/// Regression (issue 40, finding 8): a 3 MB text result went whole into the next model request
/// (and the log, and one ACP message). Now the model and the log get its head and tail within
/// `maxResultText` (64 KiB by default), saying how much was cut.
#[test]
fn a_three_megabyte_mcp_result_reaches_the_model_and_the_log_cut_to_the_bound() {
    use serde_json::json;
    let delta = |d: serde_json::Value| json!({"choices": [{"index": 0, "delta": d}]});
    let finish = |why: &str| json!({"choices": [{"index": 0, "delta": {}, "finish_reason": why}]});
    let (base, server) = common::openai_serving(vec![
        vec![
            delta(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "function",
                "function": {"name": "mcp__fx__big", "arguments": "{\"bytes\": 3000000}"}}]}),
            ),
            finish("tool_calls"),
        ],
        vec![delta(json!({"content": "Long."})), finish("stop")],
    ]);
    let fixture = crate::mcp_determinism::fixture_server();
    let dir = project(
        "mcp-big",
        &format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: llm\n  name: llm\n  config: {{adapter: openai, baseUrl: \"{base}\", apiKey: k, model: m}}\n\
             - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n- {{id: agent-loop, name: agent-loop}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--tools, big]}}\n",
            fixture.display()
        ),
    );
    let (code, out, err) = common::piped(
        &dir,
        &["run", "--session", "big", "--approve", "mcp__fx__big"],
        "how long is it?\n",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let bodies = server.join().unwrap();
    let tool = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result is sent")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let bound = cordis_tools::MAX_RESULT_TEXT + 256;
    assert!(tool.len() <= bound, "{} bytes reach the model", tool.len());
    assert!(
        tool.contains("BEGINxxx")
            && tool.contains("xxxEND")
            && tool.contains("bytes omitted; 3000000 bytes in all"),
        "{}",
        &tool[..200]
    );
    let logged = tool_results(&dir, "big");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(
        logged[0].len() <= bound + 1024,
        "{} bytes logged",
        logged[0].len()
    );
    assert!(logged[0].contains("bytes omitted; 3000000 bytes in all"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 40, finding 15): an answer over `maxMessageBytes` was skipped and the call
/// waited out `callTimeoutMs` with a message that never named the limit.
#[test]
fn an_mcp_answer_over_max_message_bytes_fails_the_call_naming_the_limit() {
    let fixture = crate::mcp_determinism::fixture_server();
    let dir = project(
        "mcp-over-limit",
        &format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--tools, big], maxMessageBytes: 1048576, callTimeoutMs: 20000}}\n",
            fixture.display()
        ),
    );
    let file = dir.join("cordis.yml").display().to_string();
    let run = cordis(
        &["call", &file, "mcp__fx__big", r#"{"bytes": 2000000}"#],
        &[],
    );
    assert_ne!(run.code, 0, "{}\n{}", run.out, run.err);
    let all = format!("{}{}", run.out, run.err);
    assert!(
        all.contains("the server's answer is over the maxMessageBytes limit of 1048576 bytes"),
        "{all}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 40, finding 14): a server that failed to start said only "handshake
/// failed: connection closed"; its stderr (the real reason) showed only with `RUST_LOG=debug`.
#[test]
fn a_server_that_fails_to_start_is_pending_with_the_last_lines_of_its_stderr() {
    let fixture = crate::mcp_determinism::fixture_server();
    let dir = project(
        "mcp-stderr",
        &format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: db\n  name: mcp\n  config: {{transport: stdio, server: db, command: {}, args: [--stderr, \"fatal: DATABASE_URL is not set\"]}}\n",
            fixture.display()
        ),
    );
    let file = dir.join("cordis.yml").display().to_string();
    let check = cordis(&["check", &file], &[]);
    assert_eq!(check.code, 0, "{}\n{}", check.out, check.err);
    let row = check.out.lines().find(|l| l.starts_with("db ")).unwrap();
    assert!(row.contains(" pending "), "{row}");
    assert!(
        row.contains(
            "mcp(db): cannot connect: handshake failed: the server closed the connection; the server's stderr ended with: fatal: DATABASE_URL is not set; retry 1 of 10"
        ),
        "{row}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 40, finding 13): server `a`'s prompt `b__c` and server `a__b`'s prompt `c`
/// both became `/mcp__a__b__c`, one silently hiding the other. Now the command name is a claim:
/// both entries report the conflict and neither offers the command.
#[test]
fn two_servers_prompts_that_make_one_command_name_are_a_conflict_both_entries_report() {
    let fixture = crate::mcp_determinism::fixture_server();
    let config = format!(
        "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
         - id: llm\n  name: llm\n  config: {{adapter: scripted, model: m, responses: [{{text: Ok.}}], repeat: true}}\n\
         - {{id: sessions, name: sessions}}\n- {{id: agent-loop, name: agent-loop}}\n\
         - id: one\n  name: mcp\n  config: {{transport: stdio, server: a, command: {bin}, args: [--tools, add, --catalog, --prompts, \"b__c,mine\"]}}\n\
         - id: two\n  name: mcp\n  config: {{transport: stdio, server: a__b, command: {bin}, args: [--tools, add, --catalog, --prompts, c]}}\n",
        bin = fixture.display()
    );
    let dir = project("mcp-prompt-clash", &config);
    let file = dir.join("cordis.yml").display().to_string();
    let check = cordis(&["check", &file], &[]);
    assert_eq!(check.code, 1, "{}\n{}", check.out, check.err);
    let said = "prompt command \"mcp__a__b__c\" is claimed by entries \"one\" and \"two\", so none of them gets it";
    for id in ["one ", "two "] {
        let row = check.out.lines().find(|l| l.starts_with(id)).unwrap();
        assert!(row.contains(" conflict ") && row.contains(said), "{row}");
    }
    let (_, out, err) = common::piped(&dir, &["run"], "/help\n");
    assert!(err.contains("  /mcp__a__mine  "), "{out}\n{err}");
    assert!(!err.contains("/mcp__a__b__c"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A composition of two fixture servers with instructions, entries `b-docs` (server `alpha`)
/// then `a-docs` (server `zeta`), the one named by `slow` answering `initialize` 400 ms late.
fn instructed(slow: &str, zeta_says: &str) -> String {
    let server = crate::mcp_determinism::fixture_server()
        .display()
        .to_string();
    let delay = |id: &str| if id == slow { "400" } else { "0" };
    format!(
        "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
         - id: llm\n  name: llm\n  config: {{adapter: scripted, model: m, responses: [{{text: Done.}}], repeat: true}}\n\
         - {{id: sessions, name: sessions}}\n- {{id: agent-loop, name: agent-loop}}\n\
         - id: b-docs\n  name: mcp\n  config: {{transport: stdio, server: alpha, command: {server}, args: [--tools, add, --instructions, 'Alpha: keep {{{{x}}}} literal.', --handshake-delay-ms, '{}'], failOnStartupError: true}}\n\
         - id: a-docs\n  name: mcp\n  config: {{transport: stdio, server: zeta, command: {server}, args: [--tools, greet, --instructions, '{zeta_says}', --handshake-delay-ms, '{}'], failOnStartupError: true}}\n",
        delay("b-docs"),
        delay("a-docs"),
    )
}

#[test]
fn servers_instructions_are_prompt_sections_in_entry_order_whatever_order_they_connect_in() {
    let mut views = Vec::new();
    for slow in ["a-docs", "b-docs"] {
        let dir = project(
            &format!("mcp-instructions-{slow}"),
            &instructed(slow, "Zeta first."),
        );
        let out = common::cordis_command(&dir, &["check", "--json", "--seed", "1"])
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let sections: Vec<String> = report["assembly"]["sections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .filter(|n| n.starts_with("mcp:"))
            .collect();
        assert_eq!(sections, ["mcp:a-docs", "mcp:b-docs"], "slow {slow}");
        views.push(report["digest"].clone());

        // The request carries them, in that order, the server's text as text.
        let (code, _, err) = common::piped(&dir, &["run", "--session", "i"], "hi\n");
        assert_eq!(code, Some(0), "{err}");
        let header = std::fs::read_to_string(common::sessions_dir(&dir).join("i.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|e| e["type"] == "request/header")
            .expect("a request header");
        let system = header["data"]["header"]["system"]
            .as_str()
            .unwrap()
            .to_owned();
        let zeta = system
            .find("## Instructions of MCP server \"zeta\"\n\nZeta first.")
            .unwrap_or_else(|| panic!("{system}"));
        let alpha = system
            .find("## Instructions of MCP server \"alpha\"\n\nAlpha: keep {{x}} literal.")
            .unwrap_or_else(|| panic!("{system}"));
        assert!(zeta < alpha, "{system}");
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(views[0], views[1], "one digest whichever server was first");

    // Other instructions, another digest: they are part of what is digested.
    let dir = project(
        "mcp-instructions-other",
        &instructed("a-docs", "Zeta second."),
    );
    let out = common::cordis_command(&dir, &["check", "--json", "--seed", "1"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(report["digest"], views[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cordis_call_interrupted_tells_the_server_the_request_is_cancelled_before_it_exits() {
    let server = crate::mcp_determinism::fixture_server();
    let dir = project("mcp-call-cancel", "");
    let log = dir.join("server.log");
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--tools, slow, --log, {}], failOnStartupError: true, callTimeoutMs: 120000}}\n",
            server.display(),
            log.display()
        ),
    )
    .unwrap();
    let child = common::cordis_command(
        &dir,
        &[
            "call",
            "--yes",
            "cordis.yml",
            "mcp__fx__slow",
            r#"{"ms": 60000}"#,
        ],
    )
    .stdin(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("slow started")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never reached the server"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("cordis: mcp__fx__slow cancelled (Ctrl-C); an MCP server was told"),
        "{err}"
    );
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("cancelled slow"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
