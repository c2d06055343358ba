//! `cordis serve`'s page while an MCP tool runs, in a real headless Chromium: the server's
//! progress notifications show in the call's card as they come (how far, of how much, its
//! message, a bar), before the result replaces them; and the page's MCP servers are declared
//! the elicitation modes the page shows (forms and pages), while a piped `cordis run`'s are
//! declared none. Screenshots in `target/serve-screens/`; without a chromium the browser test
//! says SKIP on stderr.

use crate::common;
use crate::mcp_determinism::fixture_server;
use crate::serve_live::serve;
use crate::serve_web::{Browser, chromium, new_session_in_page};

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-progress-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// The ACP tests' composition with the fixture MCP server (`args`) as entry `fixture`, its
/// tools allowed without a question; written to `dir/agent.yml`.
fn config_with_fixture(dir: &Path, args: &[&str]) -> String {
    let base = std::fs::read_to_string(common::fixture("acp/agent.yml")).unwrap();
    let allowed = base.replace(
        "config: {tools: {bash: write}}",
        "config: {tools: {bash: write, mcp__fixture__progress: allow, mcp__fixture__add: allow}}",
    );
    assert_ne!(allowed, base, "the fixture's approvals entry changed");
    let args: Vec<String> = args.iter().map(|a| json!(a).to_string()).collect();
    let file = dir.join("agent.yml");
    std::fs::write(
        &file,
        format!(
            "{allowed}\n- id: fixture\n  name: mcp\n  config: {{transport: stdio, server: fixture, command: {}, args: [{}]}}\n",
            json!(fixture_server()),
            args.join(", ")
        ),
    )
    .unwrap();
    file.display().to_string()
}

fn send(page: &mut Browser, text: &str) {
    page.eval(&format!(
        "document.getElementById('prompt').value = {}; document.getElementById('send').click()",
        Value::String(text.to_owned())
    ));
}

/// The capabilities the fixture server was declared at its `initialize` (waiting for its
/// handshake, which a boot may finish after it prints the URL).
fn declared(file: &Path) -> Value {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(value) = serde_json::from_str(&text)
        {
            return value;
        }
        assert!(
            std::time::Instant::now() < end,
            "the server never wrote {}",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn an_mcp_tools_progress_shows_in_its_card_while_it_runs() {
    let dir = scratch("page");
    let capabilities = dir.join("capabilities.json");
    let config = config_with_fixture(
        &dir,
        &[
            "--tools",
            "progress",
            "--capabilities",
            &capabilities.display().to_string(),
        ],
    );
    let served = serve(
        &dir,
        &config,
        &json!([
            {"toolCalls": [{"id": "p1", "name": "mcp__fixture__progress",
                            "arguments": {"steps": 4, "everyMs": 900}}]},
            {"text": "It progressed."}
        ]),
    );
    // The page fills in forms and shows pages: its servers are told both.
    assert_eq!(
        declared(&capabilities)["elicitation"],
        json!({"form": {}, "url": {}})
    );
    let Some(binary) = chromium() else {
        eprintln!("SKIP: no chromium on this machine (run .ci/install-browser)");
        return;
    };
    let (mut page, _session) = new_session_in_page(&binary, &served.url);
    send(&mut page, "make progress");
    // While it runs: a step's progress in its card, with the server's message and a bar.
    let shown = page.wait_for(
        "(() => { const p = document.querySelector('[data-call=\"p1\"] [data-live=\"p1\"] [data-card=progress]'); return p && /of 4: step [123]$/.test(p.textContent) && p.textContent; })()",
        "the tool's progress in its card while it runs",
    );
    let shown = shown.as_str().unwrap();
    assert!(shown.starts_with(['1', '2', '3']), "{shown}");
    let bar = page.eval(
        "(() => { const b = document.querySelector('[data-live=\"p1\"] [data-card=progress] progress'); return b && [b.value, b.max]; })()",
    );
    assert_eq!(bar[1], json!(4), "{bar}");
    assert_eq!(
        page.eval("!!document.querySelector('[data-call=\"p1\"] .result:not(.pending)')"),
        Value::Bool(false),
        "no result yet"
    );
    // No command output: no empty output box beside the progress.
    assert_eq!(
        page.eval("!!document.querySelector('[data-live=\"p1\"] [data-card=live]')"),
        Value::Bool(false)
    );
    page.screenshot("progress-running.png");
    // Later steps replace earlier ones in the card.
    page.wait_for(
        "(() => { const p = document.querySelector('[data-live=\"p1\"] [data-card=progress]'); return p && /^[34] of 4: step [34]$/.test(p.textContent); })()",
        "a later step's progress",
    );
    // Ended: the result takes the running card's place.
    page.wait_for(
        "!document.querySelector('[data-live=\"p1\"]') && document.querySelector('[data-call=\"p1\"] .result').textContent.includes('done after 4 steps') && document.getElementById('turn-state').dataset.busy === 'false'",
        "the tool's result and the turn ended",
    );
    page.screenshot("progress-ended.png");
}

#[test]
fn a_piped_run_declares_its_mcp_servers_no_elicitation() {
    let dir = scratch("run");
    let capabilities = dir.join("capabilities.json");
    let config = config_with_fixture(
        &dir,
        &[
            "--tools",
            "add",
            "--capabilities",
            &capabilities.display().to_string(),
        ],
    );
    let script = dir.join("script.json");
    std::fs::write(&script, json!([{"text": "Hi."}]).to_string()).unwrap();
    let mut cmd = common::cordis_command(&dir, &["run", &config]);
    cmd.env("ACP_SCRIPT", &script).env("CORDIS_WORKSPACE", &dir);
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"hello\n").unwrap();
    }
    let ran = child.wait_with_output().unwrap();
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let declared = declared(&capabilities);
    assert_eq!(declared["elicitation"], Value::Null, "{declared}");
    assert_eq!(
        declared["roots"],
        json!({"listChanged": false}),
        "{declared}"
    );
}
