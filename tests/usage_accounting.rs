//! Cache, context and cost accounting as people meet it: a provider's cached-token counts (the
//! OpenAI and the DeepSeek shapes) in the log, `/usage` and the terminal's footer, a price table's
//! cost, ACP's `usage_update` with its `cost`, and the budgets that end a turn.

use crate::cli_acp_common;
use crate::common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(60);

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-usage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A composition on `llm` (the llm entry's config, flow style) with sessions under `.sessions`
/// and `agent_loop` as the loop's config.
fn composition(dir: &Path, llm: &str, agent_loop: &str) {
    let config = format!(
        "- {{id: system-prompt, name: system-prompt, config: {{persona: Terse.}}}}\n\
         - {{id: tools, name: tools}}\n\
         - {{id: llm, name: llm, config: {llm}}}\n\
         - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n\
         - {{id: agent-loop, name: agent-loop, config: {agent_loop}}}\n"
    );
    std::fs::write(dir.join("cordis.yml"), config).unwrap();
}

/// A streamed answer `text` whose last event reports `usage` (the provider's own shape).
fn answer(text: &str, usage: Value) -> Vec<Value> {
    vec![
        json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}),
    ]
}

/// The usage each `assistant/message` of session `id` logged.
fn logged_usage(dir: &Path, id: &str) -> Vec<Value> {
    common::log_events(dir, id)
        .into_iter()
        .filter(|e| e["type"] == "assistant/message")
        .map(|e| e["data"]["usage"].clone())
        .collect()
}

#[test]
fn cached_tokens_of_both_provider_shapes_are_logged_and_usage_prices_them() {
    let (base, bodies) = common::openai_serving(vec![
        // OpenAI: the cached count nested in the prompt's details.
        answer(
            "one",
            json!({"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010,
                   "prompt_tokens_details": {"cached_tokens": 768}}),
        ),
        // DeepSeek: hits and misses beside the prompt's count.
        answer(
            "two",
            json!({"prompt_tokens": 1200, "completion_tokens": 20,
                   "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 176}),
        ),
    ]);
    let llm = format!(
        "{{adapter: openai, baseUrl: \"{base}\", model: m, contextWindow: 10000, maxRetries: 0, \
         prices: {{m: {{input: 2, cachedInput: 0.5, output: 8}}}}}}"
    );
    let dir = fresh_dir("cached");
    composition(&dir, &llm, "{}");
    let (code, _, stderr) = common::piped(&dir, &["run", "--session", "u"], "a\nb\n/usage\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(bodies.join().unwrap().len(), 2);
    assert_eq!(
        logged_usage(&dir, "u"),
        [
            json!({"inputTokens": 1000, "outputTokens": 10, "cachedInputTokens": 768}),
            json!({"inputTokens": 1200, "outputTokens": 20, "cachedInputTokens": 1024}),
        ]
    );
    // 1792 of 2200 cached; the last request's 1200 of the 10000 window; 408 fresh × $2 +
    // 1792 cached × $0.5 + 30 out × $8 per million = $0.001952.
    let line = "cordis: session u: 2200 tokens in, 30 tokens out, over 2 model answers that \
                reported usage; cached input: 1792 of 2200 tokens (81.5%); context: 1200 of \
                10000 tokens (12.0%); cost: $0.001952\n";
    assert!(stderr.contains(line), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn usage_without_cached_counts_or_prices_says_so_and_claims_no_cost() {
    let (base, bodies) = common::openai_serving(vec![answer(
        "one",
        json!({"prompt_tokens": 50, "completion_tokens": 5}),
    )]);
    let llm = format!("{{adapter: openai, baseUrl: \"{base}\", model: m, maxRetries: 0}}");
    let dir = fresh_dir("unpriced");
    composition(&dir, &llm, "{}");
    let (code, _, stderr) = common::piped(&dir, &["run", "--session", "n"], "a\n/usage\n");
    assert_eq!(code, Some(0), "{stderr}");
    bodies.join().unwrap();
    assert_eq!(
        logged_usage(&dir, "n"),
        [json!({"inputTokens": 50, "outputTokens": 5})]
    );
    assert!(
        stderr.contains(
            "cordis: session n: 50 tokens in, 5 tokens out, over 1 model answers that reported \
             usage; cached input: not reported\n"
        ),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_footer_after_a_turn_says_cached_tokens_context_and_cost_on_one_line() {
    use common::pty::Pty;
    let dir = fresh_dir("footer");
    composition(
        &dir,
        "{adapter: scripted, model: m, contextWindow: 4000, \
          prices: {m: {input: 2, cachedInput: 0.5, output: 8}}, \
          responses: [{text: hey, usage: {inputTokens: 1000, outputTokens: 10, cachedInputTokens: 800}}]}",
        "{}",
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env("XDG_STATE_HOME", dir.join(".state"))
        .args(["run", "--session", "f"])
        .current_dir(&dir)
        .env_remove("CORDIS_LLM")
        .env_remove("RUST_LOG");
    let mut term = Pty::spawn(cmd);
    term.wait_for("> ", LIMIT);
    term.send("hi\r");
    // 200 fresh × $2 + 800 cached × $0.5 + 10 out × $8 per million = $0.000880.
    let footer = " s · 1000 tokens in (800 cached, 80.0%), 10 out · context 1000 of 4000 tokens \
                  (25.0%) · $0.000880";
    term.wait_for(footer, LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    let screen = term.screen();
    let line = screen.lines().find(|l| l.contains(footer)).unwrap();
    assert!(line.trim_start().starts_with("cordis: "), "{line:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `turn/end` reasons of session `id`.
fn turn_ends(dir: &Path, id: &str) -> Vec<Value> {
    common::log_events(dir, id)
        .into_iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"].clone())
        .collect()
}

#[test]
fn a_token_budget_ends_the_turn_before_the_request_that_would_pass_it() {
    // One answer only: a second request would find no server and fail the turn instead.
    let (base, bodies) = common::openai_serving(vec![answer(
        "one",
        json!({"prompt_tokens": 80, "completion_tokens": 30}),
    )]);
    let llm = format!("{{adapter: openai, baseUrl: \"{base}\", model: m, maxRetries: 0}}");
    let dir = fresh_dir("tokens");
    composition(&dir, &llm, "{budget: {maxTokens: 100}}");
    let (_, stdout, stderr) = common::piped(&dir, &["run", "--session", "t"], "a\nb\n");
    assert_eq!(bodies.join().unwrap().len(), 1);
    assert!(stdout.contains("one"), "{stdout}");
    let why = "the session's token budget is spent: 110 tokens used of budget.maxTokens 100";
    assert!(
        stderr.contains(&format!("cordis: turn 2 stopped: {why}\n")),
        "{stderr}"
    );
    assert_eq!(
        turn_ends(&dir, "t"),
        [
            json!({"kind": "completed"}),
            json!({"kind": "budget", "message": why})
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cost_budget_ends_the_turn_once_the_priced_answers_reach_it() {
    let (base, bodies) = common::openai_serving(vec![answer(
        "one",
        json!({"prompt_tokens": 400, "completion_tokens": 200,
               "prompt_tokens_details": {"cached_tokens": 0}}),
    )]);
    // $1000 per million tokens: 600 tokens are $0.60, past the $0.50 budget.
    let llm = format!(
        "{{adapter: openai, baseUrl: \"{base}\", model: m, maxRetries: 0, \
         prices: {{m: {{input: 1000, output: 1000}}}}}}"
    );
    let dir = fresh_dir("cost");
    composition(&dir, &llm, "{budget: {maxCostUsd: 0.5}}");
    let (_, _, stderr) = common::piped(&dir, &["run", "--session", "c"], "a\nb\n/usage\n");
    assert_eq!(bodies.join().unwrap().len(), 1);
    let why = "the session's cost budget is spent: $0.6000 used of budget.maxCostUsd $0.5000";
    assert!(
        stderr.contains(&format!("cordis: turn 2 stopped: {why}\n")),
        "{stderr}"
    );
    assert!(stderr.contains("; cost: $0.6000\n"), "{stderr}");
    assert_eq!(
        turn_ends(&dir, "c")[1],
        json!({"kind": "budget", "message": why})
    );
    // Headless: the result names the budget and the process fails.
    let (code, stdout, stderr) = common::piped(
        &dir,
        &[
            "run",
            "--resume",
            "c",
            "-p",
            "more",
            "--output-format",
            "json",
        ],
        "",
    );
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        result["endReason"],
        json!({"kind": "budget", "message": why})
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cost_budget_without_a_price_for_the_model_is_refused_at_load() {
    let dir = fresh_dir("unpriced-budget");
    composition(
        &dir,
        "{adapter: scripted, model: m, responses: [{text: hi}], prices: {other: {input: 1, output: 1}}}",
        "{budget: {maxCostUsd: 1}}",
    );
    let (code, _, stderr) = common::piped(&dir, &["run", "--session", "r"], "a\n");
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("budget.maxCostUsd needs the cost of every model, but the llm entry has no price for model m"),
        "{stderr}"
    );
    // A negative price is refused naming the model and the field.
    composition(
        &dir,
        "{adapter: scripted, model: m, responses: [{text: hi}], prices: {m: {input: 1, output: -1}}}",
        "{}",
    );
    let (code, _, stderr) = common::piped(&dir, &["run", "--session", "r"], "a\n");
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("llm: prices.m.output must be a finite number of US dollars per million tokens, at least 0, not -1"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bare ACP client: requests in order, each run to its response, every message kept.
struct Client {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<Value>,
    next_id: u64,
}

impl Client {
    fn start(dir: &Path) -> Client {
        let mut cmd = common::cordis_command(dir, &["acp", "agent.yml"]);
        cmd.env("ACP_SCRIPT", dir.join("script.json"));
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let lines = common::lines(child.stdout.take().unwrap());
        Client {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            next_id: 0,
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let stdin = self.stdin.as_mut().unwrap();
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = self.lines.recv_timeout(LIMIT).expect("an answer in time");
            let message: Value = serde_json::from_str(&line).unwrap();
            self.seen.push(message.clone());
            if message["id"] == id && message.get("method").is_none() {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// The `usage_update`s sent so far, each checked against the ACP schema.
    fn usage_updates(&self) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|m| {
                m["method"] == "session/update"
                    && m["params"]["update"]["sessionUpdate"] == "usage_update"
            })
            .map(|m| {
                cli_acp_common::validate("SessionNotification", &m["params"]).unwrap();
                m["params"]["update"].clone()
            })
            .collect()
    }

    fn close(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn acp_usage_updates_carry_the_sessions_cumulative_cost_live_and_on_load() {
    let dir = fresh_dir("acp");
    let config = std::fs::read_to_string(common::fixture("acp/agent.yml"))
        .unwrap()
        .replace(
            "model: acp-model",
            "model: acp-model\n    contextWindow: 1000\n    prices: {acp-model: {input: 1000, cachedInput: 100, output: 1000}}",
        );
    assert!(config.contains("prices"), "the fixture names its model");
    std::fs::write(dir.join("agent.yml"), config).unwrap();
    let script = json!([
        {"text": "One.", "usage": {"inputTokens": 300, "outputTokens": 20}},
        {"text": "Two.", "usage": {"inputTokens": 340, "outputTokens": 30, "cachedInputTokens": 300}},
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let mut acp = Client::start(&dir);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let session = acp.call("session/new", json!({"cwd": dir, "mcpServers": []}))["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    for text in ["one", "two"] {
        let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        assert_eq!(acp.call("session/prompt", prompt)["stopReason"], "end_turn");
    }
    let live = acp.usage_updates();
    acp.close();
    // $1000 per million: 320 tokens are $0.32; then 40 fresh ($0.04), 300 cached at a tenth
    // ($0.03) and 30 out ($0.03): $0.42 in all.
    let cost = |u: &Value| u["cost"]["amount"].as_f64().unwrap();
    assert_eq!(live.len(), 2, "{live:?}");
    assert_eq!(
        (live[0]["used"].as_u64(), live[0]["size"].as_u64()),
        (Some(320), Some(1000))
    );
    assert_eq!(live[1]["used"], 370);
    assert!((cost(&live[0]) - 0.32).abs() < 1e-9, "{live:?}");
    assert!((cost(&live[1]) - 0.42).abs() < 1e-9, "{live:?}");
    assert!(
        live.iter().all(|u| u["cost"]["currency"] == "USD"),
        "{live:?}"
    );
    // A load replays the same updates with the same costs.
    let mut again = Client::start(&dir);
    again.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    again.call(
        "session/load",
        json!({"sessionId": session, "cwd": dir, "mcpServers": []}),
    );
    let replayed = again.usage_updates();
    again.close();
    assert_eq!(replayed, live);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A running `cordis serve`, killed on drop: the process, its URL, port and token.
struct Served {
    child: std::process::Child,
    url: String,
    port: u16,
    token: String,
    _stderr: mpsc::Receiver<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` as the page sends it: the body as JSON.
fn get(s: &Served, path: &str) -> Value {
    use std::io::Read as _;
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{}\r\nx-cordis-token: {}\r\n\r\n",
        s.port, s.token
    );
    sock.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    sock.read_to_string(&mut response).unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
}

#[test]
fn the_page_shows_the_sessions_usage_with_cached_tokens_context_and_cost() {
    let dir = fresh_dir("page").canonicalize().unwrap();
    composition(
        &dir,
        "{adapter: scripted, model: m, contextWindow: 4000, \
          prices: {m: {input: 2, cachedInput: 0.5, output: 8}}, responses: [\
          {text: one, usage: {inputTokens: 1000, outputTokens: 10, cachedInputTokens: 800}}, \
          {text: two, usage: {inputTokens: 1100, outputTokens: 20, cachedInputTokens: 1000}}]}",
        "{}",
    );
    let (code, _, stderr) = common::piped(&dir, &["run", "--session", "p"], "a\nb\n");
    assert_eq!(code, Some(0), "{stderr}");
    let mut child = common::cordis_command(&dir, &["serve", "--port", "0"])
        .spawn()
        .unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let url = stdout
        .recv_timeout(LIMIT)
        .expect("cordis serve prints its URL");
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap().to_owned();
    let (port, token) = rest.split_once("/?token=").unwrap();
    let served = Served {
        port: port.parse().unwrap(),
        token: token.to_owned(),
        url,
        child,
        _stderr: stderr,
    };
    // 300 fresh × $2 + 1800 cached × $0.5 + 30 out × $8 per million = $0.00174.
    let page = get(&served, "/api/sessions/p");
    let usage = &page["usage"];
    assert_eq!(
        [
            &usage["answers"],
            &usage["inputTokens"],
            &usage["cachedInputTokens"],
            &usage["outputTokens"],
            &usage["contextTokens"],
            &usage["contextWindow"],
        ],
        [
            &json!(2),
            &json!(2100),
            &json!(1800),
            &json!(30),
            &json!(1100),
            &json!(4000)
        ],
        "{page}"
    );
    assert!(
        (usage["costUsd"].as_f64().unwrap() - 0.00174).abs() < 1e-12,
        "{usage}"
    );
    // An older page carries no usage (the newest one has the whole session's).
    let older = get(&served, "/api/sessions/p?before=3");
    assert!(older.get("usage").is_none(), "{older}");
    let Some(binary) = crate::serve_web::chromium() else {
        eprintln!("SKIP: no chromium; the page's usage panel was not looked at");
        return;
    };
    let mut browser =
        crate::serve_web::Browser::open(&binary, &format!("{}#sessions/p", served.url));
    let shown = browser.wait_for(
        "document.getElementById('usage') && document.getElementById('usage').innerText",
        "the usage panel",
    );
    let shown = shown
        .as_str()
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        shown,
        "2100 tokens in 1800 cached (85.7%) 30 out context 1100 of 4000 (27.5%) $0.001740"
    );
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}
