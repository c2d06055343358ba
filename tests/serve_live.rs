//! `cordis serve`'s page while a turn runs, in a real headless Chromium: the answer grows in
//! its card as it streams (and the logged message replaces it), and a running command's
//! output shows in its call's card before it ends, with its clock; what streams goes only to
//! the pages showing that session. Screenshots in `target/serve-screens/`; without a chromium
//! the tests say SKIP on stderr.

use crate::common;
use crate::serve_web::{Browser, chromium, new_session_in_page};

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc;

use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-live-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// A `cordis serve` of `config` (the scripted model replaying `script`), killed when dropped.
pub(crate) struct Served {
    child: Child,
    /// The page's address, as the server printed it.
    pub(crate) url: String,
    _stderr: mpsc::Receiver<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Serves `config` in `dir` (its workspace) with the scripted model replaying `script`.
pub(crate) fn serve(dir: &Path, config: &str, script: &Value) -> Served {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut cmd = common::cordis_command(dir, &["serve", config, "--port", "0"]);
    cmd.env("ACP_SCRIPT", &path).env("CORDIS_WORKSPACE", dir);
    let mut child = cmd.spawn().unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let url = stdout
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("cordis serve prints its URL");
    Served {
        child,
        url,
        _stderr: stderr,
    }
}

/// Serves the ACP tests' composition (`bash` running without a question) replaying `script`.
fn serve_script(dir: &Path, script: &Value) -> Served {
    serve(dir, &common::fixture("acp/agent.yml"), script)
}

/// Listens in the page on a second event stream that names no session: what it receives is
/// kept in `window.unshown` (event names).
fn listen_unshown(page: &mut Browser) {
    page.eval(
        "window.unshown = []; { const es = new EventSource(`/api/events?token=${encodeURIComponent(new URLSearchParams(location.search).get('token'))}`); for (const k of ['agent', 'delta', 'output']) es.addEventListener(k, () => window.unshown.push(k)); } true",
    );
}

/// Listens in the page on a second event stream that names `session`: the texts of its
/// `delta` events are kept in `window.deltas`.
fn listen_shown(page: &mut Browser, session: &str) {
    page.eval(&format!(
        "window.deltas = []; {{ const es = new EventSource(`/api/events?token=${{encodeURIComponent(new URLSearchParams(location.search).get('token'))}}&session=${{encodeURIComponent({})}}`); es.addEventListener('delta', (m) => window.deltas.push(JSON.parse(m.data).text)); }} true",
        Value::String(session.to_owned())
    ));
}

/// The event names the unshown stream received.
fn unshown(page: &mut Browser) -> Vec<String> {
    serde_json::from_value(page.eval("window.unshown")).unwrap()
}

fn send(page: &mut Browser, text: &str) {
    page.eval(&format!(
        "document.getElementById('prompt').value = {}; document.getElementById('send').click()",
        Value::String(text.to_owned())
    ));
}

#[test]
fn the_answer_grows_in_its_card_as_it_streams_and_the_message_replaces_it() {
    let dir = scratch("stream");
    let pieces = ["The answer ", "comes ", "in ", "several ", "pieces."];
    let whole: String = pieces.concat();
    let served = serve_script(&dir, &serde_json::json!([{"text": pieces, "delayMs": 350}]));
    let Some(binary) = chromium() else {
        eprintln!("SKIP: no chromium on this machine (run .ci/install-browser)");
        return;
    };
    let (mut page, session) = new_session_in_page(&binary, &served.url);
    listen_unshown(&mut page);
    listen_shown(&mut page, &session);
    send(&mut page, "answer slowly");
    // Each text the growing card shows, until the logged message replaces it.
    let mut seen: Vec<String> = Vec::new();
    let start = std::time::Instant::now();
    loop {
        let now = page.eval(
            "(() => { const s = document.querySelector('#transcript [data-streaming]'); const done = [...document.querySelectorAll('#transcript .card.assistant[data-seq]')].map(c => c.textContent); return {streaming: s ? s.textContent : null, done}; })()",
        );
        if let Some(text) = now["streaming"].as_str()
            && seen.last().map(String::as_str) != Some(text)
        {
            if seen.len() == 1 {
                page.screenshot("live-streaming.png");
            }
            seen.push(text.to_owned());
        }
        if now["done"].as_array().unwrap().iter().any(|t| *t == whole) {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the answer never ended; streamed so far: {seen:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(40));
    }
    let partial: Vec<&String> = seen.iter().filter(|t| **t != whole).collect();
    assert!(
        partial.len() >= 2,
        "the card grew piece by piece before the message came; it showed {seen:?}"
    );
    for text in &seen {
        assert!(
            whole.starts_with(text.as_str()),
            "{text:?} is not how {whole:?} begins"
        );
    }
    page.wait_for(
        "!document.querySelector('#transcript [data-streaming]') && document.getElementById('turn-state').dataset.busy === 'false'",
        "the streaming card replaced by the message, and the turn ended",
    );
    page.screenshot("live-streamed.png");
    // The text came as it streamed, delta by delta, to a page showing the session.
    let deltas: Vec<String> = serde_json::from_value(page.eval("window.deltas")).unwrap();
    assert_eq!(deltas, pieces, "the deltas a page showing the session got");
    let others = unshown(&mut page);
    assert!(others.iter().any(|k| k == "agent"), "{others:?}");
    assert!(
        !others.iter().any(|k| k == "delta"),
        "a page not showing the session got its text: {others:?}"
    );
}

#[test]
fn a_running_commands_output_shows_in_its_card_before_it_ends() {
    let dir = scratch("output");
    let served = serve_script(
        &dir,
        &serde_json::json!([
            {"toolCalls": [{"id": "slow1", "name": "bash",
                            "arguments": {"command": "echo first-line; printf '\\033[31mcoloured\\033[0m\\n'; sleep 3; echo last-line"}}]},
            {"text": "It ran."}
        ]),
    );
    let Some(binary) = chromium() else {
        eprintln!("SKIP: no chromium on this machine (run .ci/install-browser)");
        return;
    };
    let (mut page, _session) = new_session_in_page(&binary, &served.url);
    listen_unshown(&mut page);
    send(&mut page, "run the slow command");
    // While it runs: its first line in its card, not its last, and the clock.
    let live = page.wait_for(
        "(() => { const p = document.querySelector('[data-call=\"slow1\"] [data-live=\"slow1\"] [data-card=live]'); return p && p.textContent.includes('first-line') && p.textContent; })()",
        "the command's first line in its card while it runs",
    );
    let live = live.as_str().unwrap();
    assert!(
        !live.contains("last-line"),
        "the command had not ended: {live}"
    );
    // Shown as text: a colour's escape sequence is not.
    let live = page.wait_for(
        "(() => { const p = document.querySelector('[data-live=\"slow1\"] [data-card=live]'); return p && p.textContent.includes('coloured') && p.textContent; })()",
        "the coloured line in the card",
    );
    assert_eq!(live, "first-line\ncoloured\n", "{live}");
    assert_eq!(
        page.eval("!!document.querySelector('[data-call=\"slow1\"] .result:not(.pending)')"),
        Value::Bool(false),
        "no result yet"
    );
    page.wait_for(
        "(() => { const e = document.querySelector('[data-live=\"slow1\"] .elapsed'); return e && /^[1-9]\\d* s$/.test(e.textContent); })()",
        "the running command's clock past 0 s",
    );
    page.screenshot("live-command.png");
    // Ended: the result's card takes the running one's place, with the whole output.
    page.wait_for(
        "!document.querySelector('[data-live=\"slow1\"]') && document.querySelector('[data-call=\"slow1\"] .result').textContent.includes('last-line') && document.getElementById('turn-state').dataset.busy === 'false'",
        "the command's result and the turn ended",
    );
    page.screenshot("live-command-ended.png");
    let others = unshown(&mut page);
    assert!(others.iter().any(|k| k == "agent"), "{others:?}");
    assert!(
        !others.iter().any(|k| k == "output"),
        "a page not showing the session got its output: {others:?}"
    );
}
