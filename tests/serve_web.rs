//! `cordis serve`: its API as an attacker would try it (no token, another Host, another
//! Origin, a form post, secrets in the environment), and its page in a real headless Chromium
//! (`chromium --headless --dump-dom`: the DOM after the page's scripts ran against the real
//! server), with screenshots kept in `target/serve-screens/`.
//!
//! The browser part needs Debian's `chromium` (`.ci/install-browser` installs it; set
//! `CORDIS_CHROMIUM` to use another binary); without one it says SKIP on stderr and checks the
//! API only.

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use serde_json::Value;

/// The secret a test config reads from the environment: it must never reach a response.
const SECRET: &str = "sk-serve-secret-5f3a9c";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// The bundled cordis.yml in `dir`, its `llm` entry reading an API key from `SERVE_TEST_KEY`.
fn config_in(dir: &Path) {
    let bundled =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("cordis.yml")).unwrap();
    let with_key = bundled.replacen(
        "    apiKeyEnv:",
        "    apiKey: \"${{ env.SERVE_TEST_KEY }}\"\n    apiKeyEnv:",
        1,
    );
    assert_ne!(with_key, bundled, "the bundled file's llm entry");
    std::fs::write(dir.join("cordis.yml"), with_key).unwrap();
}

/// A running `cordis serve`.
struct Server {
    child: Child,
    url: String,
    port: u16,
    token: String,
    stderr: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["serve", "--port", "0"];
    args.extend_from_slice(extra);
    let mut cmd = common::cordis_command(dir, &args);
    cmd.env("SERVE_TEST_KEY", SECRET);
    let mut child = cmd.spawn().unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let url = stdout
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("cordis serve prints its URL");
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, token) = rest.split_once("/?token=").unwrap();
    Server {
        child,
        port: port.parse().unwrap(),
        token: token.to_owned(),
        url,
        stderr,
    }
}

/// One HTTP/1.1 request, `Connection: close`; the status and the body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    sock.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    sock.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn the_api_refuses_without_token_host_origin_or_json_and_never_answers_a_secret() {
    let dir = scratch("api");
    config_in(&dir);
    let s = serve(&dir, &[]);
    let token = s.token.as_str();
    let port = s.port;
    let host = format!("127.0.0.1:{port}");
    let refusals = [
        ("no token", "GET", "/api/composition", vec![], "", 401),
        (
            "a wrong token",
            "GET",
            "/api/composition",
            vec![("x-cordis-token", "0000")],
            "",
            401,
        ),
        (
            "another Host (DNS rebinding)",
            "GET",
            "/api/composition",
            vec![("x-cordis-token", token), ("Host", "attacker.example:80")],
            "",
            403,
        ),
        (
            "another Origin",
            "GET",
            "/api/composition",
            vec![
                ("x-cordis-token", token),
                ("Origin", "http://attacker.example"),
            ],
            "",
            403,
        ),
        (
            "a form post",
            "POST",
            "/api/diff",
            vec![
                ("x-cordis-token", token),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            "a=1",
            415,
        ),
    ];
    for (what, method, path, headers, body, want) in refusals {
        let (status, _) = http(port, method, path, &headers, body);
        assert_eq!(status, want, "{what}");
    }
    let ok = [
        ("x-cordis-token", token),
        ("Origin", &format!("http://{host}")),
    ];
    let mut answered = String::new();
    for path in [
        "/",
        "/app.js",
        "/style.css",
        "/api/composition",
        "/api/sessions",
    ] {
        let (status, body) = http(port, "GET", path, &ok, "");
        assert_eq!(status, 200, "{path}: {body}");
        answered.push_str(&body);
    }
    let (status, body) = http(
        port,
        "POST",
        "/api/diff",
        &[
            ("x-cordis-token", token),
            ("Content-Type", "application/json"),
        ],
        r#"{"a": "x\ny", "b": "x\nz"}"#,
    );
    assert_eq!(status, 200, "{body}");
    answered.push_str(&body);
    assert!(!answered.contains(SECRET), "a response holds the API key");
    let composition: Value =
        serde_json::from_str(&http(port, "GET", "/api/composition", &ok, "").1).unwrap();
    assert!(
        composition["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(as_configured),
        "{composition}"
    );
}

/// Where the file puts it: active, or disabled by the file (`enabled: false`).
fn as_configured(entry: &Value) -> bool {
    entry["status"] == "active" || entry["status"] == "disabled"
}

/// The Chromium to drive, if this machine has one.
pub(crate) fn chromium() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("CORDIS_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// The DOM of `url` after its scripts ran, and a screenshot of it saved as `shot`.
fn browse(browser: &Path, url: &str, shot: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let screens = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/serve-screens");
    std::fs::create_dir_all(&screens).unwrap();
    let common_flags = [
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-quic".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--virtual-time-budget=10000".to_owned(),
        format!("--user-data-dir={}", profile.path().display()),
    ];
    let run = |extra: &[String]| {
        let out = Command::new(browser)
            .args(&common_flags)
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "chromium: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&[
        format!("--screenshot={}", screens.join(shot).display()),
        "--window-size=1280,1800".to_owned(),
        url.to_owned(),
    ]);
    run(&["--dump-dom".to_owned(), url.to_owned()])
}

#[test]
fn the_page_in_headless_chromium_shows_the_composition_its_digest_and_a_session() {
    let dir = scratch("browser");
    config_in(&dir);
    // A session to show: one piped turn of the offline demo.
    let mut run = common::cordis_command(&dir, &["run"]);
    run.env("SERVE_TEST_KEY", SECRET);
    let mut child = run.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let ran = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&ran.stderr).into_owned();
    let session = err
        .split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .expect("the run names its session")
        .trim_end_matches([',', '.', ')'])
        .to_owned();
    let mut check = common::cordis_command(&dir, &["check", "--json"]);
    check.env("SERVE_TEST_KEY", SECRET);
    let checked: Value = serde_json::from_slice(&check.output().unwrap().stdout).unwrap();
    let digest = checked["digest"].as_str().unwrap().to_owned();
    let entries = checked["entries"].as_array().unwrap();
    assert!(entries.iter().all(as_configured), "{checked}");
    let active = entries.iter().filter(|e| e["status"] == "active").count();

    let s = serve(&dir, &[]);
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIP: no chromium on this machine (run .ci/install-browser); the page was not checked in a browser"
        );
        return;
    };
    let still = format!("{}&live=0", s.url);
    let dom = browse(&browser, &still, "composition.png");
    assert!(
        dom.contains(r#"data-ready="true""#),
        "the page's script ran to the end:\n{dom}"
    );
    assert_eq!(
        dom.matches(r#"data-entry-status="active""#).count(),
        active,
        "every entry the file enables is active:\n{dom}"
    );
    assert!(!dom.contains(r#"data-entry-status="failed""#));
    assert!(
        dom.contains(&format!(r#"<code id="digest">{digest}</code>"#)),
        "the digest of `cordis check`"
    );
    assert!(
        dom.contains(r#"data-verified="true""#),
        "the page checked the digest against the bytes it shows"
    );
    assert!(
        dom.contains(&format!(r#"data-session="{session}""#)),
        "the session is listed:\n{dom}"
    );
    assert!(!dom.contains(SECRET));
    // The dependency graph: an arrow from each provider to each entry injecting its service.
    let (_, composition) = http(
        s.port,
        "GET",
        "/api/composition",
        &[("x-cordis-token", s.token.as_str())],
        "",
    );
    let composition: Value = serde_json::from_str(&composition).unwrap();
    let needs = |id: &str| {
        composition["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap()["needs"]
            .clone()
    };
    assert!(
        needs("agent-loop")
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({"service": "llm", "required": true, "from": ["llm"]})),
        "{composition}"
    );
    let edges: usize = composition["entries"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["needs"].as_array().unwrap().clone())
        .map(|n| n["from"].as_array().unwrap().len())
        .sum();
    assert!(edges > 10, "{composition}");
    assert!(dom.contains(&format!(r#"data-edges="{edges}""#)), "{dom}");
    assert!(dom.contains(r#"data-edge="llm to agent-loop""#));
    // The session's transcript, as the transcript model gives it to every front end.
    let dom = browse(
        &browser,
        &format!("{still}#sessions/{session}"),
        "session.png",
    );
    let (_, transcript) = http(
        s.port,
        "GET",
        &format!("/api/sessions/{session}"),
        &[("x-cordis-token", s.token.as_str())],
        "",
    );
    let transcript: Value = serde_json::from_str(&transcript).unwrap();
    let items = transcript["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] != "usage" && i["type"] != "plan")
        .count();
    assert!(items > 0, "{transcript}");
    assert_eq!(
        dom.matches(r#"data-kind=""#).count(),
        items,
        "one card per item of the transcript"
    );
    assert!(
        dom.contains(r#"<div class="card user" data-kind="user" data-seq="#),
        "{dom}"
    );
}

#[test]
fn with_watch_a_broken_edit_shows_as_rejected_while_the_last_good_composition_stays() {
    let dir = scratch("watch");
    config_in(&dir);
    let s = serve(&dir, &["--watch"]);
    let text = std::fs::read_to_string(dir.join("cordis.yml")).unwrap();
    std::fs::write(dir.join("cordis.yml"), format!("{text}\n- id: [\n")).unwrap();
    common::wait_for(&s.stderr, "the last good composition keeps running");
    let ok = [("x-cordis-token", s.token.as_str())];
    let composition: Value =
        serde_json::from_str(&http(s.port, "GET", "/api/composition", &ok, "").1).unwrap();
    assert_eq!(
        composition["reloads"][0]["outcome"], "rejected",
        "{composition}"
    );
    assert!(
        composition["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(as_configured)
    );
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIP: no chromium on this machine (run .ci/install-browser); the page was not checked in a browser"
        );
        return;
    };
    let dom = browse(
        &browser,
        &format!("{}&live=0", s.url),
        "rejected-reload.png",
    );
    assert!(dom.contains(r#"data-reload="rejected""#), "{dom}");
    assert!(!dom.contains(r#"data-entry-status="failed""#));
}

/// Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: commands
/// on fd 3, answers on fd 4, each message ended by a NUL), `bash` mapping that pipe to the
/// child's stdin and stdout. Clicks are the page's own buttons' `click()`.
pub(crate) struct Browser {
    child: Child,
    commands: std::process::ChildStdin,
    messages: mpsc::Receiver<Value>,
    next: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// A headless Chromium with one tab on `url`.
    pub(crate) fn open(binary: &Path, url: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null"#)
            .arg(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-pipe",
                "--window-size=1280,1800",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let commands = child.stdin.take().unwrap();
        let mut answers = child.stdout.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut pending = Vec::new();
            let mut buf = [0u8; 64 << 10];
            loop {
                let n = match answers.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.iter().position(|&b| b == 0) {
                    let message: Vec<u8> = pending.drain(..=end).collect();
                    if let Ok(value) = serde_json::from_slice(&message[..end])
                        && tx.send(value).is_err()
                    {
                        return;
                    }
                }
            }
        });
        let mut browser = Browser {
            child,
            commands,
            messages,
            next: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", serde_json::json!({"url": url}));
        let attached = browser.call(
            "Target.attachToTarget",
            serde_json::json!({"targetId": target["targetId"], "flatten": true}),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        browser
    }

    /// Sends a command (to the tab once attached) and waits for its answer.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = serde_json::json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = Value::String(self.session.clone());
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        self.commands.flush().unwrap();
        loop {
            let answer = self
                .messages
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("chromium did not answer {method}"));
            if answer["id"] == id {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// The value of `expression` in the page (promises awaited), or the exception it threw.
    fn try_eval(&mut self, expression: &str) -> Result<Value, Value> {
        let result = self.call(
            "Runtime.evaluate",
            serde_json::json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
        );
        match result.get("exceptionDetails") {
            Some(exception) => Err(exception.clone()),
            None => Ok(result["result"]["value"].clone()),
        }
    }

    /// The value of `expression` in the page (promises awaited); it must not throw.
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        self.try_eval(expression)
            .unwrap_or_else(|e| panic!("{expression}: {e}"))
    }

    /// Waits until `expression` is truthy in the page; its value. Fails after a minute, saying
    /// what it waited for and what the page showed.
    pub(crate) fn wait_for(&mut self, expression: &str, what: &str) -> Value {
        let start = std::time::Instant::now();
        loop {
            // A page still loading has no body yet: that is "not yet", not a failure.
            let value = self.try_eval(expression).unwrap_or(Value::Null);
            let truthy =
                !matches!(&value, Value::Null | Value::Bool(false)) && value != 0 && value != "";
            if truthy {
                return value;
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                let text = self.try_eval("document.body.innerText");
                panic!("never saw {what}; the page shows:\n{text:?}");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Saves a screenshot of the whole page as `target/serve-screens/NAME`.
    pub(crate) fn screenshot(&mut self, name: &str) {
        use base64::Engine;
        let shot = self.call(
            "Page.captureScreenshot",
            serde_json::json!({"format": "png", "captureBeyondViewport": true}),
        );
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        let screens = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/serve-screens");
        std::fs::create_dir_all(&screens).unwrap();
        std::fs::write(screens.join(name), bytes).unwrap();
    }
}

/// The page at `url` in a browser, with a new session opened by its *New session* button; the
/// session's id.
pub(crate) fn new_session_in_page(binary: &Path, url: &str) -> (Browser, String) {
    let mut page = Browser::open(binary, url);
    page.wait_for("document.body.dataset.ready === 'true'", "the page ready");
    page.wait_for(
        "!document.getElementById('agent-bar').hidden",
        "the agent bar",
    );
    page.eval("document.getElementById('new-session').click()");
    let session = page
        .wait_for(
            "document.getElementById('prompt') && decodeURIComponent(location.hash.slice('#sessions/'.length))",
            "a new session open in the page",
        )
        .as_str()
        .unwrap()
        .to_owned();
    (page, session)
}

/// Through the API alone: a prompt to a session not open here, and a bad answer, are refused.
fn the_api_refuses_an_unknown_session_and_a_bad_answer(port: u16, token: &str) {
    let auth = [
        ("x-cordis-token", token),
        ("content-type", "application/json"),
    ];
    let (status, _) = http(
        port,
        "POST",
        "/api/agents/sessions/nope/prompt",
        &auth,
        r#"{"text":"hi"}"#,
    );
    assert_eq!(status, 404);
    let (status, _) = http(
        port,
        "POST",
        "/api/approvals/1",
        &auth,
        r#"{"answer":"maybe"}"#,
    );
    assert_eq!(status, 400);
}

/// `cordis history` reads the same log as the page: the page showed (`shown`, by sequence
/// number) each message and call it reads, and the decision is logged.
fn history_reads_what_the_page_showed(
    dir: &Path,
    session: &str,
    fixture: &str,
    script: &Path,
    shown: &[u64],
) {
    let mut history = common::cordis_command(
        dir,
        &["history", session, fixture, "--json", "--max", "2000"],
    );
    history
        .env("ACP_SCRIPT", script)
        .env("CORDIS_WORKSPACE", dir);
    let out = history.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let logged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let seqs: Vec<u64> = logged["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            let kind = e["event"]["type"].as_str().unwrap();
            let text = e["event"]["data"]["content"].as_str().unwrap_or_default();
            matches!(kind, "user/message" | "tool/call")
                || (kind == "assistant/message" && !text.trim().is_empty())
                || (kind == "turn/end" && e["event"]["data"]["reason"]["kind"] != "completed")
        })
        .map(|e| e["event"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        shown, seqs,
        "the page shows every message, call and unfinished turn cordis history reads"
    );
    let kinds: Vec<&str> = logged["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"]["type"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"tool/approval"), "{kinds:?}");
    let approval = logged["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"]["type"] == "tool/approval")
        .unwrap();
    assert_eq!(approval["event"]["data"]["allowed"], true, "{approval}");
    assert_eq!(approval["event"]["data"]["by"], "approver", "{approval}");
}

#[test]
fn a_session_started_in_the_page_asks_there_and_its_log_is_the_one_cordis_history_reads() {
    let dir = scratch("agent");
    // The ACP tests' composition: a scripted model that writes a file (write_file asks).
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"toolCalls": [{"id": "w1", "name": "write_file",
                            "arguments": {"path": "notes.txt", "content": "from the page\n"}}]},
            {"text": "Wrote it."},
            {"toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": "sleep 30"}}]},
            {"text": "never said: the turn is cancelled"}
        ])
        .to_string(),
    )
    .unwrap();
    let fixture = common::fixture("acp/agent.yml");
    let mut cmd = common::cordis_command(&dir, &["serve", &fixture, "--port", "0"]);
    cmd.env("ACP_SCRIPT", &script).env("CORDIS_WORKSPACE", &dir);
    let mut child = cmd.spawn().unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let _stderr = common::lines(child.stderr.take().unwrap());
    let url = stdout
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("cordis serve prints its URL");
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|r| r.split_once('/'))
        .map(|(p, _)| p.parse().unwrap())
        .unwrap();
    let token = url.split_once("token=").unwrap().1.to_owned();
    let mut server = Server {
        child,
        url: url.clone(),
        port,
        token: token.clone(),
        stderr: _stderr,
    };

    the_api_refuses_an_unknown_session_and_a_bad_answer(port, &token);

    let Some(binary) = chromium() else {
        eprintln!(
            "SKIP: no chromium on this machine (run .ci/install-browser); the agent plane was not checked in a browser"
        );
        return;
    };
    let (mut page, session) = new_session_in_page(&binary, &url);
    // The page lists the slash commands the session core answers, and answers one without a
    // turn (nothing reaches the model: the script's first answer stays for the next prompt).
    page.wait_for(
        "document.querySelector('#commands [data-command=\"permissions\"]')",
        "the commands listed",
    );
    page.eval("document.getElementById('prompt').value = '/permissions'; document.getElementById('send').click()");
    let answered = page.wait_for(
        "!document.getElementById('command-answer').hidden && document.getElementById('command-answer').textContent",
        "the answer to /permissions",
    );
    assert!(
        answered
            .as_str()
            .unwrap()
            .starts_with("permission mode: ask"),
        "{answered}"
    );
    page.eval("document.getElementById('prompt').value = 'write the notes'; document.getElementById('send').click()");
    // The question comes to the page, with the edit's diff.
    page.wait_for(
        "document.querySelector('[data-approval][data-tool=\"write_file\"] [data-card=diff] .diff-add')",
        "the write_file question with its diff",
    );
    page.screenshot("agent-approval.png");
    assert!(
        !dir.join("notes.txt").exists(),
        "nothing is written before the answer"
    );
    page.eval("document.querySelector('[data-approval] button.allow').click()");
    // The answer runs the call; the session's cards show the diff and the model's reply.
    page.wait_for(
        "[...document.querySelectorAll('.card.assistant pre')].some(p => p.textContent === 'Wrote it.')",
        "the model's reply after the write",
    );
    page.wait_for(
        "document.querySelector('.card.tool [data-card=diff] .diff-add') && document.getElementById('turn-state').dataset.busy === 'false'",
        "the diff card and the turn ended",
    );
    assert!(
        page.eval("document.querySelectorAll('[data-approval]').length === 0") == Value::Bool(true)
    );
    page.screenshot("agent-session.png");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "from the page\n"
    );
    // A turn held by a long command is cancelled from the page.
    page.eval("document.getElementById('prompt').value = 'hold on'; document.getElementById('send').click()");
    page.wait_for(
        "document.getElementById('turn-state').dataset.busy === 'true' && [...document.querySelectorAll('.card.tool .title')].some(t => t.textContent === 'sleep 30')",
        "the held turn running its command",
    );
    page.eval("document.getElementById('cancel').click()");
    page.wait_for(
        "document.getElementById('turn-state').dataset.busy === 'false' && [...document.querySelectorAll('[data-kind=\"notice\"] pre')].some(p => p.textContent.includes('cancelled'))",
        "the turn ended as cancelled",
    );
    let shown: Vec<u64> = serde_json::from_value(page.eval(
        "[...document.querySelectorAll('#transcript > [data-seq]')].map(c => Number(c.dataset.seq))",
    ))
    .unwrap();

    history_reads_what_the_page_showed(&dir, &session, &fixture, &script, &shown);
    drop(page);
    let _ = server.child.kill();
    let _ = &mut server;
}

#[test]
fn a_stress_report_with_a_divergence_opened_in_the_page_shows_the_verdict_and_the_replays() {
    let dir = scratch("report");
    config_in(&dir);
    // A real divergence: an entry that fails under some schedules.
    let diverging = dir.join("diverging.yml");
    std::fs::write(
        &diverging,
        "- {id: steady, name: debug/noop}\n- id: flaky\n  name: debug/fault\n  config: {mode: seeded}\n",
    )
    .unwrap();
    let report = dir.join("report.json");
    let stress = common::cordis_command(
        &dir,
        &[
            "stress",
            diverging.to_str().unwrap(),
            "--seeds",
            "200",
            "--timeout-ms",
            "200",
            "--report",
            report.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    assert_eq!(stress.status.code(), Some(1));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let replays: Vec<String> =
        serde_json::from_value(written["failure"]["replay"].clone()).unwrap();
    assert_eq!(replays.len(), 2);

    let s = serve(&dir, &[]);
    let Some(binary) = chromium() else {
        eprintln!(
            "SKIP: no chromium on this machine (run .ci/install-browser); the report view was not checked"
        );
        return;
    };
    let mut page = Browser::open(&binary, &format!("{}#reports", s.url));
    page.wait_for("document.body.dataset.ready === 'true'", "the page ready");
    // The file picker, as a person fills it.
    let document = page.call("DOM.getDocument", serde_json::json!({}));
    let input = page.call(
        "DOM.querySelector",
        serde_json::json!({"nodeId": document["root"]["nodeId"], "selector": "#report-file"}),
    );
    page.call(
        "DOM.setFileInputFiles",
        serde_json::json!({"nodeId": input["nodeId"], "files": [report.to_str().unwrap()]}),
    );
    let verdict = page.wait_for(
        "document.getElementById('report-verdict') && document.getElementById('report-verdict').textContent",
        "the report's verdict",
    );
    let seeds = &written["failure"]["seeds"];
    assert_eq!(
        verdict,
        format!(
            "Divergence found in flaky (seeds {} and {}) under schedule random.",
            seeds[0], seeds[1]
        )
        .as_str(),
        "{written}"
    );
    let shown: Vec<String> =
        serde_json::from_value(page.eval(
            "[...document.querySelectorAll('#report-view pre.replay')].map(p => p.textContent)",
        ))
        .unwrap();
    assert_eq!(shown, replays);
    page.screenshot("report.png");
}

#[test]
fn the_mcp_panel_shows_each_server_connected_or_pending_with_what_it_offers() {
    let dir = scratch("mcp");
    let fixture = crate::mcp_determinism::fixture_server();
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
             - id: mcp-fx\n  name: mcp\n  config:\n    transport: stdio\n    server: fx\n    command: {}\n    args: [--catalog]\n\
             - id: mcp-down\n  name: mcp\n  config:\n    transport: stdio\n    server: down\n    command: /nonexistent/mcp-server\n",
            fixture.display()
        ),
    )
    .unwrap();
    let check = common::cordis_command(&dir, &["check"]).output().unwrap();
    let checked = String::from_utf8_lossy(&check.stdout).into_owned();
    let tools: usize = checked
        .lines()
        .find_map(|l| l.trim().strip_prefix("tools (canonical order, "))
        .and_then(|r| r.trim_end_matches("):").trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("{checked}"));
    assert!(tools > 0, "{checked}");

    let s = serve(&dir, &[]);
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIP: no chromium on this machine (run .ci/install-browser); the MCP panel was not checked"
        );
        return;
    };
    let mut page = Browser::open(&browser, &format!("{}&live=0#mcp", s.url));
    page.wait_for("document.body.dataset.ready === 'true'", "the page ready");
    let row = |page: &mut Browser, server: &str| -> Vec<String> {
        serde_json::from_value(page.eval(&format!(
            "[...document.querySelectorAll('tr[data-mcp={server}] td')].map(td => td.textContent)"
        )))
        .unwrap()
    };
    let fx = row(&mut page, "fx");
    // server, entry, transport, state, tools, prompts, resources (the fixture's `--catalog`
    // offers three of each), note.
    assert_eq!(
        fx[..7],
        [
            "fx",
            "mcp-fx",
            "stdio",
            "connected",
            &tools.to_string(),
            "3",
            "3"
        ],
        "{fx:?}"
    );
    let down = row(&mut page, "down");
    assert_eq!(down[3], "pending", "{down:?}");
    assert_eq!(down[4], "0");
    assert!(
        down[7].starts_with("mcp(down): cannot connect: cannot start"),
        "{down:?}"
    );
    page.screenshot("mcp.png");
}

#[test]
fn an_mcp_servers_form_is_filled_in_the_page_and_a_value_it_does_not_take_is_said_there() {
    let dir = scratch("form");
    let fixture = crate::mcp_determinism::fixture_server();
    // A free field, a titled choice with a default, a multi-select of titled choices.
    let form = serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}], "default": "l"},
        "tags": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}, {"const": "y", "title": "Why"}]}, "maxItems": 2}
    }, "required": ["name"]});
    let call =
        serde_json::json!([{"id": "a1", "name": "mcp__fx__ask", "arguments": {"form": form}}]);
    std::fs::write(
        dir.join("cordis.yml"),
        format!(
            "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
             - id: llm\n  name: llm\n  config:\n    adapter: scripted\n    model: m\n    responses:\n\
             \x20     - toolCalls: {call}\n\
             \x20     - text: Hello there.\n\
             \x20     - toolCalls: [{{id: a2, name: mcp__fx__ask, arguments: {{url: true}}}}]\n\
             \x20     - text: Paged.\n\
             - {{id: sessions, name: sessions, config: {{root: .sessions}}}}\n- {{id: agent-loop, name: agent-loop}}\n\
             - {{id: approvals, name: approvals, config: {{tools: {{mcp__fx__ask: allow}}}}}}\n\
             - id: fx\n  name: mcp\n  config: {{transport: stdio, server: fx, command: {}, args: [--tools, ask]}}\n",
            fixture.display()
        ),
    )
    .unwrap();
    let server = serve(&dir, &[]);
    let auth = [
        ("x-cordis-token", server.token.as_str()),
        ("content-type", "application/json"),
    ];
    let (status, _) = http(
        server.port,
        "POST",
        "/api/forms/7",
        &auth,
        r#"{"action":"accept","content":{}}"#,
    );
    assert_eq!(status, 410, "no form waits");

    let Some(binary) = chromium() else {
        eprintln!(
            "SKIP: no chromium on this machine (run .ci/install-browser); forms were not checked in a browser"
        );
        return;
    };
    let (mut page, session) = new_session_in_page(&binary, &server.url);
    page.eval("document.getElementById('prompt').value = 'who am I?'; document.getElementById('send').click()");
    page.wait_for(
        "document.querySelector('[data-form=\"fx\"] [data-field=\"name\"]')",
        "the server's form",
    );
    // Required first, then by name; the default chosen; an approval's answer is refused.
    let fields = page.eval(
        "[...document.querySelectorAll('[data-form] [data-field]')].map(f => f.dataset.field + '=' + (f.tagName === 'SELECT' ? [...f.selectedOptions].map(o => o.text).join('+') : f.value))",
    );
    assert_eq!(
        fields,
        serde_json::json!(["name=", "size=Large", "tags="]),
        "the choices' titles shown, the default chosen"
    );
    let n = page.eval("Number(document.querySelector('[data-form]').dataset.approval)");
    let (status, body) = http(
        server.port,
        "POST",
        &format!("/api/approvals/{n}"),
        &auth,
        r#"{"answer":"allow"}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("is a form: answer it with POST /api/forms/"),
        "{body}"
    );
    // Sent without the required name: said in the form, which keeps waiting.
    page.eval("document.querySelector('[data-form] button.accept').click()");
    page.wait_for(
        "document.querySelector('[data-form-error]').textContent.includes('required property \"name\" is missing')",
        "the missing name said in the form",
    );
    page.screenshot("mcp-form.png");
    page.eval(
        "document.querySelector('[data-field=\"name\"]').value = 'Ada'; for (const o of document.querySelector('[data-field=\"tags\"]').options) o.selected = true; document.querySelector('[data-form] button.accept').click()",
    );
    page.wait_for(
        "[...document.querySelectorAll('.card.assistant pre')].some(p => p.textContent === 'Hello there.')",
        "the model's reply after the form",
    );
    // The answered form leaves the page (its removal may land just after the reply's card).
    page.wait_for(
        "document.querySelectorAll('[data-form]').length === 0",
        "the answered form gone from the page",
    );
    // A page (URL mode): the whole URL and a link the person clicks; nothing is opened.
    page.eval("document.getElementById('prompt').value = 'a page'; document.getElementById('send').click()");
    page.wait_for(
        "document.querySelector('[data-page=\"fx\"] a')",
        "the server's page",
    );
    assert_eq!(
        page.eval("[document.querySelector('[data-page] pre.url').textContent, document.querySelector('[data-page] a').href, document.querySelector('[data-page] a').rel]"),
        serde_json::json!(["https://example.test/x", "https://example.test/x", "noopener noreferrer"])
    );
    page.eval("document.querySelector('[data-page] button.accept').click()");
    page.wait_for(
        "[...document.querySelectorAll('.card.assistant pre')].some(p => p.textContent === 'Paged.')",
        "the model's reply after the page",
    );
    let log = std::fs::read_to_string(dir.join(format!(".sessions/{session}.jsonl"))).unwrap();
    assert!(log.contains(r#"{\"action\":\"accept\"}"#), "{log}");
    assert!(
        log.contains(
            r#"{\"action\":\"accept\",\"content\":{\"name\":\"Ada\",\"size\":\"l\",\"tags\":[\"x\",\"y\"]}}"#
        ),
        "{log}"
    );
    drop(page);
}

#[test]
fn the_pages_question_for_a_write_over_a_file_carries_the_files_text_to_diff_against() {
    // The question's card used to have no `oldText`: the page drew every line as added, the
    // file as new.
    let dir = scratch("write-over");
    std::fs::write(dir.join("notes.txt"), "keep\nold line\n").unwrap();
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"toolCalls": [{"id": "w1", "name": "write_file",
                            "arguments": {"path": "notes.txt", "content": "keep\nnew line\n"}}]},
            {"text": "Asked."}
        ])
        .to_string(),
    )
    .unwrap();
    let fixture = common::fixture("acp/agent.yml");
    let mut cmd = common::cordis_command(&dir, &["serve", &fixture, "--port", "0"]);
    cmd.env("ACP_SCRIPT", &script).env("CORDIS_WORKSPACE", &dir);
    let mut child = cmd.spawn().unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let url = stdout
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("cordis serve prints its URL");
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, token) = rest.split_once("/?token=").unwrap();
    let server = Server {
        child,
        port: port.parse().unwrap(),
        token: token.to_owned(),
        url: url.clone(),
        stderr,
    };
    let auth = [
        ("x-cordis-token", server.token.as_str()),
        ("content-type", "application/json"),
    ];
    let (status, body) = http(server.port, "POST", "/api/agents/sessions", &auth, "{}");
    assert_eq!(status, 200, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = http(
        server.port,
        "POST",
        &format!("/api/agents/sessions/{id}/prompt"),
        &auth,
        r#"{"text":"write the notes"}"#,
    );
    assert_eq!(status, 202, "{body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let question = loop {
        let (_, body) = http(server.port, "GET", "/api/agents", &auth, "");
        let overview: Value = serde_json::from_str(&body).unwrap();
        if let Some(q) = overview["approvals"].as_array().and_then(|a| a.first()) {
            break q.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no question reached the page: {overview}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(question["tool"], "write_file", "{question}");
    assert_eq!(
        question["view"]["card"],
        serde_json::json!({"type": "diff", "path": "notes.txt",
                           "oldText": "keep\nold line\n", "newText": "keep\nnew line\n"}),
        "{question}"
    );
    let (status, _) = http(
        server.port,
        "POST",
        &format!("/api/approvals/{}", question["id"]),
        &auth,
        r#"{"answer":"deny"}"#,
    );
    assert_eq!(status, 200);
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "keep\nold line\n"
    );
}

/// The session id a run names on stderr (`cordis: new session ID (…)`).
fn session_named(stderr: &str) -> String {
    stderr
        .split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .expect("the run names its session")
        .trim_end_matches([',', '.', ')'])
        .to_owned()
}

#[test]
fn the_page_follows_a_terminal_run_in_another_process_without_a_reload() {
    let dir = scratch("follow");
    config_in(&dir);
    let s = serve(&dir, &[]);
    let Some(binary) = chromium() else {
        eprintln!("SKIP: no chromium on this machine (run .ci/install-browser)");
        return;
    };
    let mut page = Browser::open(&binary, &s.url);
    page.wait_for("document.body.dataset.ready === 'true'", "the page ready");

    // A terminal run in another process, started after the page opened.
    let mut run = common::cordis_command(&dir, &["run", "--session", "from-terminal", "--yes"]);
    run.env("SERVE_TEST_KEY", SECRET);
    let mut term = common::pty::Pty::spawn_controlling(run);
    let limit = std::time::Duration::from_secs(60);
    term.wait_for("> ", limit);
    term.send("the first turn\r");
    term.wait_for("Noted.", limit);
    // The session list shows it without a reload.
    page.wait_for(
        "document.querySelector('[data-session=\"from-terminal\"]')",
        "the terminal's session in the list",
    );
    page.eval("location.hash = '#sessions/from-terminal'");
    page.wait_for(
        "[...document.querySelectorAll('.card.user pre')].some(p => p.textContent === 'the first turn')",
        "the first turn on the page",
    );
    let held = page.wait_for(
        "document.getElementById('held-by') && document.getElementById('held-by').textContent",
        "where the session's questions are answered",
    );
    assert!(held.as_str().unwrap().contains("answered there"), "{held}");
    let users_before = page.eval("document.querySelectorAll('.card.user').length");
    assert_eq!(users_before, 1);

    // A new turn in the terminal shows on the open page: no reload, no click.
    term.send("a second turn\r");
    page.wait_for(
        "[...document.querySelectorAll('.card.user pre')].some(p => p.textContent === 'a second turn') && document.querySelectorAll('.card.assistant pre').length >= 6",
        "the terminal's second turn, answered, on the page",
    );
    page.screenshot("follow-terminal.png");
    term.send("\x04");
    assert_eq!(term.wait_exit(limit), Some(0), "{}", term.screen());
}

/// Whether `text` holds each of `tokens` in order (each after the one before); the first one
/// missing.
fn in_order<'a>(text: &str, tokens: &'a [String]) -> Result<(), &'a str> {
    let mut at = 0;
    for token in tokens {
        match text[at..].find(token.as_str()) {
            Some(i) => at += i + token.len(),
            None => return Err(token),
        }
    }
    Ok(())
}

/// What every renderer must show, in order: each message's text, each call's title, and the
/// command's output (`Status: final`) after its call.
fn tokens_of(transcript: &Value) -> Vec<String> {
    let mut tokens = Vec::new();
    for item in transcript["items"].as_array().unwrap() {
        match item["type"].as_str().unwrap() {
            "user" | "assistant" => tokens.push(item["text"].as_str().unwrap().to_owned()),
            "call" => {
                tokens.push(item["view"]["title"].as_str().unwrap().to_owned());
                assert!(
                    item["result"].is_object(),
                    "every call has its result: {item}"
                );
                // The command's result: its output.
                if item["name"] == "bash" {
                    tokens.push("Status: final".to_owned());
                }
            }
            _ => {}
        }
    }
    assert_eq!(tokens.len(), 10, "{tokens:?}");
    tokens
}

/// Two messages a page, the newest first; `before` reads back to the first item, and the pages
/// put together are the whole transcript.
fn pages_put_together_are_the_whole_transcript(s: &Server, session: &str, transcript: &Value) {
    let page_of = |query: &str| -> Value {
        let (status, body) = http(
            s.port,
            "GET",
            &format!("/api/sessions/{session}{query}"),
            &[("x-cordis-token", s.token.as_str())],
            "",
        );
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    let mut query = "?max=2".to_owned();
    let mut paged: Vec<Value> = Vec::new();
    for _ in 0..20 {
        let page = page_of(&query);
        let messages = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "user" || i["type"] == "assistant")
            .count();
        assert!(messages <= 2, "{page}");
        let mut items = page["items"].as_array().unwrap().clone();
        items.append(&mut paged);
        paged = items;
        if page["hasMore"] != true {
            break;
        }
        query = format!("?max=2&before={}", page["firstSeq"]);
    }
    assert_eq!(
        serde_json::to_string(&paged).unwrap(),
        serde_json::to_string(&transcript["items"]).unwrap(),
        "the pages, put together, are the whole transcript"
    );
}

/// The text an editor is shown by `session/load` of `session`: messages, call titles, results.
fn loaded_in_an_editor(dir: &Path, session: &str) -> String {
    let mut acp = common::cordis_command(dir, &["acp"]);
    acp.env("SERVE_TEST_KEY", SECRET);
    let mut acp = acp.spawn().unwrap();
    let replies = common::lines(acp.stdout.take().unwrap());
    let mut to_acp = acp.stdin.take().unwrap();
    for request in [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
            "params": {"sessionId": session, "cwd": dir, "mcpServers": []}}),
    ] {
        writeln!(to_acp, "{request}").unwrap();
    }
    let mut editor = String::new();
    loop {
        let line = replies
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("cordis acp answers session/load");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            assert!(message.get("error").is_none(), "{message}");
            break;
        }
        let update = &message["params"]["update"];
        match update["sessionUpdate"].as_str().unwrap_or_default() {
            "user_message_chunk" | "agent_message_chunk" => {
                editor.push_str(update["content"]["text"].as_str().unwrap_or_default());
            }
            "tool_call" => {
                editor.push('\n');
                editor.push_str(update["title"].as_str().unwrap_or_default());
                editor.push('\n');
            }
            "tool_call_update" => {
                editor.push_str(&update["content"].to_string().replace("\\n", "\n"));
                editor.push('\n');
            }
            _ => {}
        }
    }
    drop(to_acp);
    let _ = acp.wait();
    editor
}

/// The text of the page's view of `session` in a real browser (empty without Chromium).
fn shown_in_the_page(s: &Server, session: &str) -> String {
    match chromium() {
        Some(binary) => {
            let mut page = Browser::open(&binary, &format!("{}#sessions/{session}", s.url));
            page.wait_for(
                "document.querySelectorAll('#transcript .card.assistant').length >= 3",
                "the session's transcript",
            );
            page.eval("document.getElementById('transcript').innerText")
                .as_str()
                .unwrap()
                .to_owned()
        }
        None => {
            eprintln!("SKIP: no chromium; the page's view was not compared");
            String::new()
        }
    }
}

#[test]
fn one_session_reads_the_same_in_history_on_resume_in_the_page_and_in_an_editor() {
    let dir = scratch("golden");
    config_in(&dir);
    // The scripted session: the bundled demo's turn (a write, a read, an edit, a command, a
    // todo), every call allowed.
    let mut run = common::cordis_command(&dir, &["run", "--yes", "--color", "never"]);
    run.env("SERVE_TEST_KEY", SECRET);
    let mut child = run.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"show me the demo\n")
        .unwrap();
    let ran = child.wait_with_output().unwrap();
    let live = String::from_utf8_lossy(&ran.stdout).into_owned();
    let session = session_named(&String::from_utf8_lossy(&ran.stderr));

    // The transcript model, as the page's API serves it: what every renderer must show.
    let s = serve(&dir, &[]);
    let (status, body) = http(
        s.port,
        "GET",
        &format!("/api/sessions/{session}"),
        &[("x-cordis-token", s.token.as_str())],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let transcript: Value = serde_json::from_str(&body).unwrap();
    let tokens = tokens_of(&transcript);
    pages_put_together_are_the_whole_transcript(&s, &session, &transcript);
    let history = common::cordis_command(&dir, &["history", &session, "--color", "never"])
        .env("SERVE_TEST_KEY", SECRET)
        .output()
        .unwrap();
    let history = String::from_utf8_lossy(&history.stdout).into_owned();
    let mut resume =
        common::cordis_command(&dir, &["run", "--resume", &session, "--color", "never"]);
    resume.env("SERVE_TEST_KEY", SECRET);
    let resumed = resume.output().unwrap();
    let resumed = String::from_utf8_lossy(&resumed.stderr).into_owned();
    let resumed = resumed
        .split_once("left off")
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or_default();

    let editor = loaded_in_an_editor(&dir, &session);

    let page_text = shown_in_the_page(&s, &session);

    for (renderer, text) in [
        ("the live run", &live),
        ("cordis history", &history),
        ("the resume view", &resumed),
        ("ACP session/load", &editor),
        ("the page", &page_text),
    ] {
        if text.is_empty() && renderer == "the page" {
            continue;
        }
        if let Err(missing) = in_order(text, &tokens) {
            panic!(
                "{renderer} does not show {missing:?} in order:\n{text}\n(expected, in order: {tokens:?})"
            );
        }
    }
}

#[test]
fn the_page_fits_a_390_px_window_without_sideways_scrolling_and_has_an_icon() {
    let dir = scratch("narrow");
    config_in(&dir);
    let mut run = common::cordis_command(&dir, &["run", "--yes"]);
    run.env("SERVE_TEST_KEY", SECRET);
    let mut child = run.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let ran = child.wait_with_output().unwrap();
    let session = session_named(&String::from_utf8_lossy(&ran.stderr));
    let s = serve(&dir, &[]);
    let (status, icon) = http(s.port, "GET", "/favicon.svg", &[], "");
    assert_eq!(status, 200);
    assert!(icon.starts_with("<svg"), "{icon}");
    let Some(binary) = chromium() else {
        eprintln!("SKIP: no chromium on this machine (run .ci/install-browser)");
        return;
    };
    let mut page = Browser::open(&binary, "about:blank");
    page.call(
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": false}),
    );
    page.call(
        "Page.navigate",
        serde_json::json!({"url": format!("{}&live=0#sessions/{session}", s.url)}),
    );
    page.wait_for(
        "document.body.dataset.ready === 'true' && document.querySelector('#transcript .card.assistant')",
        "the page with the session's transcript",
    );
    let widths: Vec<u64> = serde_json::from_value(
        page.eval("[document.documentElement.scrollWidth, window.innerWidth]"),
    )
    .unwrap();
    page.screenshot("narrow.png");
    let wide = page.eval(
        "[...document.querySelectorAll('body *')].filter(e => { if (e.getBoundingClientRect().right <= window.innerWidth + 1) return false; for (let a = e.parentElement; a; a = a.parentElement) { if (getComputedStyle(a).overflowX !== 'visible') return false; } return true; }).slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))",
    );
    assert!(
        widths[0] <= widths[1],
        "the page is {} px wide in a {} px window; wider: {wide}",
        widths[0],
        widths[1]
    );
    assert_eq!(widths[1], 390);
}

#[test]
fn compact_in_the_page_answers_and_the_transcript_shows_the_summary() {
    let dir = scratch("compact");
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([{"text": "Hello."}, {"text": "SUMMARY: greeted."}]).to_string(),
    )
    .unwrap();
    let fixture = common::fixture("acp/agent.yml");
    let mut cmd = common::cordis_command(&dir, &["serve", &fixture, "--port", "0"]);
    cmd.env("ACP_SCRIPT", &script).env("CORDIS_WORKSPACE", &dir);
    let mut child = cmd.spawn().unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let url = stdout
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("cordis serve prints its URL");
    let _server = Server {
        child,
        url: url.clone(),
        port: 0,
        token: String::new(),
        stderr,
    };
    let Some(binary) = chromium() else {
        eprintln!("SKIP: no chromium on this machine (run .ci/install-browser)");
        return;
    };
    let (mut page, session) = new_session_in_page(&binary, &url);
    page.eval(
        "document.getElementById('prompt').value = 'hi'; document.getElementById('send').click()",
    );
    page.wait_for(
        "[...document.querySelectorAll('[data-kind=assistant]')].some(c => c.textContent.includes('Hello.'))",
        "the answer",
    );
    page.wait_for(
        "document.getElementById('turn-state') && document.getElementById('turn-state').dataset.busy === 'false'",
        "the turn ended",
    );
    page.eval("document.getElementById('prompt').value = '/compact'; document.getElementById('send').click()");
    let answered = page.wait_for(
        "!document.getElementById('command-answer').hidden && document.getElementById('command-answer').textContent",
        "the answer to /compact",
    );
    assert!(
        answered
            .as_str()
            .unwrap()
            .starts_with("conversation compacted (/compact): 2 messages replaced by a summary"),
        "{answered}"
    );
    let card = page.wait_for(
        "document.querySelector('[data-kind=compaction]') && document.querySelector('[data-kind=compaction]').textContent",
        "the compaction in the transcript",
    );
    assert!(
        card.as_str().unwrap().contains("SUMMARY: greeted."),
        "{card}"
    );
    assert!(!session.is_empty());
}
