//! "Fork from here" in the page (`cordis serve`), in a real headless Chromium: a user message's
//! button forks the session through that message's turn, the fork opens in the page and goes
//! on there, and its log names its parent. Without Chromium it says SKIP and checks the API.

use crate::common;
use crate::serve_web::{Browser, chromium};

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Child;

use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-serve-fork-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// A scripted model answering `one`, `two`, … in order; sessions under `.sessions`.
const CONFIG: &str = "\
- {id: system-prompt, name: system-prompt, config: {persona: Terse.}}
- {id: tools, name: tools}
- {id: llm, name: llm, config: {adapter: scripted, model: m, responses: [{text: one}, {text: two}, {text: three}, {text: four}]}}
- {id: sessions, name: sessions, config: {root: .sessions}}
- {id: agent-loop, name: agent-loop}
";

/// A running `cordis serve`: the process, its page's URL, port and token.
struct Served {
    child: Child,
    url: String,
    port: u16,
    token: String,
    /// Its stderr, read (a closed pipe would fail its writes).
    _stderr: std::sync::mpsc::Receiver<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path) -> Served {
    let mut child = common::cordis_command(dir, &["serve", "--port", "0"])
        .spawn()
        .unwrap();
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let url = stdout
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("cordis serve prints its URL");
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap().to_owned();
    let (port, token) = rest.split_once("/?token=").unwrap();
    Served {
        port: port.parse().unwrap(),
        token: token.to_owned(),
        url,
        child,
        _stderr: stderr,
    }
}

/// `POST path` with a JSON `body`, as the page sends it; the status and the body.
fn post(s: &Served, path: &str, body: &str) -> (u16, Value) {
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{}\r\nx-cordis-token: {}\r\ncontent-type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.port,
        s.token,
        body.len()
    );
    sock.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    sock.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn log(dir: &Path, id: &str) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(dir.join(format!(".sessions/{id}.jsonl"))).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    (lines.next().unwrap(), lines.collect())
}

#[test]
fn fork_from_here_in_the_page_opens_a_new_session_through_that_turn() {
    let dir = scratch("page");
    std::fs::write(dir.join("cordis.yml"), CONFIG).unwrap();
    let (code, _, stderr) = common::piped(
        &dir,
        &["run", "--session", "p"],
        "the first turn\nthe second turn\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    let parent_path = dir.join(".sessions/p.jsonl");
    let before = std::fs::read(&parent_path).unwrap();
    let (_, parent) = log(&dir, "p");
    let first_end = parent.iter().find(|e| e["type"] == "turn/end").unwrap()["seq"]
        .as_u64()
        .unwrap();

    let s = serve(&dir);
    // The API refuses what cannot be forked, saying why.
    let (status, body) = post(&s, "/api/sessions/nope/fork", "{}");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "cannot fork session nope: no such session");
    let (status, body) = post(&s, "/api/sessions/p/fork", r#"{"seq": 9999}"#);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("its log ends at seq"),
        "{body}"
    );

    let Some(binary) = chromium() else {
        eprintln!("SKIP: no chromium on this machine (run .ci/install-browser)");
        return;
    };
    let mut page = Browser::open(&binary, &format!("{}#sessions/p", s.url));
    page.wait_for("document.body.dataset.ready === 'true'", "the page ready");
    page.wait_for(
        "document.querySelectorAll('.card.user button.fork').length === 2",
        "a fork button on each user message",
    );
    page.screenshot("fork-before.png");
    // The first message's button: the fork holds the first turn only.
    page.eval("document.querySelector('.card.user button.fork').click()");
    let fork = page
        .wait_for(
            "location.hash !== '#sessions/p' && document.getElementById('prompt') && decodeURIComponent(location.hash.slice('#sessions/'.length))",
            "the fork open in the page",
        )
        .as_str()
        .unwrap()
        .to_owned();
    page.wait_for(
        "[...document.querySelectorAll('.card.user pre')].map(p => p.textContent).join('|') === 'the first turn'",
        "the fork's transcript: the first turn only",
    );
    page.eval(
        "document.getElementById('prompt').value = 'a new second turn'; document.getElementById('send').click()",
    );
    page.wait_for(
        "[...document.querySelectorAll('.card.user pre')].map(p => p.textContent).join('|') === 'the first turn|a new second turn' && document.querySelectorAll('.card.assistant').length === 2 && document.getElementById('turn-state').dataset.busy === 'false'",
        "the fork's own turn answered in the page",
    );
    page.screenshot("fork-after.png");
    drop(page);
    drop(s);

    let (header, events) = log(&dir, &fork);
    assert_eq!(header["parentSession"], "p");
    assert_eq!(header["forkedAt"], first_end + 1);
    assert_eq!(header["cwd"], dir.display().to_string());
    assert_eq!(events[..=first_end as usize], parent[..=first_end as usize]);
    let reasons: Vec<&Value> = events[first_end as usize + 1..]
        .iter()
        .filter(|e| e["type"] == "request/header")
        .map(|e| &e["data"]["reason"])
        .collect();
    assert_eq!(reasons, ["fork"]);
    assert_eq!(
        std::fs::read(&parent_path).unwrap(),
        before,
        "forking wrote the parent"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
