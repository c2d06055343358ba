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
fn chromium() -> Option<PathBuf> {
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
    // The session's history, as the history service gives it to every front end.
    let dom = browse(
        &browser,
        &format!("{still}#sessions/{session}"),
        "session.png",
    );
    let mut history =
        common::cordis_command(&dir, &["history", &session, "--json", "--max", "2000"]);
    history.env("SERVE_TEST_KEY", SECRET);
    let page: Value = serde_json::from_slice(&history.output().unwrap().stdout).unwrap();
    let events = page["events"].as_array().unwrap().len();
    assert!(events > 0);
    assert_eq!(
        dom.matches(r#"data-kind=""#).count(),
        events,
        "one card per event of `cordis history`"
    );
    assert!(
        dom.contains(r#"<div class="card user" data-kind="user/message">"#),
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
