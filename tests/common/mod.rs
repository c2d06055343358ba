//! Helpers for root tests that spawn the `cordis` binary and read its output as it runs.
#![allow(
    dead_code,
    reason = "shared by several test binaries; each uses only some of it"
)]

pub mod brute;
pub mod npm;
pub mod plugins;
pub mod pty;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cordis::cli::{Io, run};

/// The events of session `session`'s log under `dir/.sessions` (a `sessions` entry with
/// `root: .sessions`), parsed, header left out.
pub fn log_events(dir: &std::path::Path, session: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join(format!(".sessions/{session}.jsonl")))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Reads lines from a child's stream on a thread, so a test can wait with a deadline.
pub fn lines(stream: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (at most 30 s) for a line containing `needle` and returns it; panics with every line
/// seen meanwhile if none comes.
pub fn wait_for(rx: &mpsc::Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    panic!("no line containing {needle:?}; saw:\n{}", seen.join("\n"));
}

/// Path of a fixture in `tests/fixtures/` at the workspace root.
pub fn fixture(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", name]
        .iter()
        .collect();
    p.display().to_string()
}

/// Output of one CLI run.
pub struct Run {
    pub code: u8,
    pub out: String,
    pub err: String,
}

/// The state directory the tests' in-process runs get when `env` names none (session logs of
/// a config without a `root` go under it, never under the user's own).
pub fn test_state_home() -> PathBuf {
    std::env::temp_dir().join("cordis-test-state")
}

/// Where a spawned test run in `dir` keeps its state (`XDG_STATE_HOME`): inside `dir`, so the
/// test's cleanup removes it.
pub fn state_home(dir: &std::path::Path) -> PathBuf {
    dir.join(".state")
}

/// Where sessions of the config in `dir` go by default when `XDG_STATE_HOME` is
/// [`state_home`]`(dir)`: the state directory's folder for that project.
pub fn sessions_dir(dir: &std::path::Path) -> PathBuf {
    sessions_of(dir, dir)
}

/// Where sessions of a config file in `config_dir` go by default when `XDG_STATE_HOME` is
/// [`state_home`]`(dir)`.
pub fn sessions_of(dir: &std::path::Path, config_dir: &std::path::Path) -> PathBuf {
    let project = std::fs::canonicalize(config_dir).unwrap();
    state_home(dir)
        .join("cordis/sessions")
        .join(cordis_session::project_key(&project))
}

/// Runs `cordis <args>` in-process with an environment holding only `env` (and, unless `env`
/// has one, `XDG_STATE_HOME` = [`test_state_home`]).
pub fn cordis(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut vars: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    if !vars.iter().any(|(k, _)| k == "XDG_STATE_HOME") {
        vars.push((
            "XDG_STATE_HOME".to_owned(),
            test_state_home().display().to_string(),
        ));
    }
    let lookup = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let mut io = Io {
        out: &mut out,
        err: &mut err,
        env: &lookup,
        progress: false,
    };
    let mut argv = vec!["cordis"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut io, &cordis::builtins::standard());
    Run {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

/// `cordis ARGS` in `dir` as the spawning tests run it: offline (no `CORDIS_LLM`), tracing off,
/// state (session logs without a `root`) under [`state_home`]`(dir)`, stdin, stdout and stderr
/// piped.
pub fn cordis_command(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.args(args)
        .current_dir(dir)
        .env("XDG_STATE_HOME", state_home(dir))
        .env_remove("CORDIS_LLM")
        .env_remove("CORDIS_WORKSPACE")
        .env("RUST_LOG", "off")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// A loopback OpenAI-compatible server answering one request per entry of `answers` (each a
/// list of stream events), one connection each; the request bodies it got.
pub fn openai_serving(
    answers: Vec<Vec<serde_json::Value>>,
) -> (String, std::thread::JoinHandle<Vec<serde_json::Value>>) {
    let (tx, rx) = mpsc::channel();
    let (base, server) = openai_serving_with(answers, move |_, body| tx.send(body).is_ok());
    let bodies = std::thread::spawn(move || {
        server.join().unwrap();
        rx.iter().collect()
    });
    (base, bodies)
}

/// [`openai_serving`], calling `seen(i, body)` with request `i` before answering it (false: stop
/// without answering), so a test can hold an answer back.
pub fn openai_serving_with(
    answers: Vec<Vec<serde_json::Value>>,
    mut seen: impl FnMut(usize, serde_json::Value) -> bool + Send + 'static,
) -> (String, std::thread::JoinHandle<()>) {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        for (i, events) in answers.into_iter().enumerate() {
            let (mut sock, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            let body: serde_json::Value = loop {
                let n = sock.read(&mut buf).unwrap();
                assert!(n > 0, "the request ended early");
                got.extend_from_slice(&buf[..n]);
                let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let length: usize = String::from_utf8_lossy(&got[..end])
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    break serde_json::from_slice(&got[end + 4..end + 4 + length]).unwrap();
                }
            };
            if !seen(i, body) {
                return;
            }
            let mut stream: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            stream.push_str("data: [DONE]\n\n");
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                stream.len()
            );
            sock.write_all(head.as_bytes()).unwrap();
            sock.write_all(stream.as_bytes()).unwrap();
        }
    });
    (base, server)
}

/// `cordis ARGS` in `dir` with `input` piped in: (exit code, stdout, stderr).
pub fn piped(dir: &std::path::Path, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    use std::io::Write as _;
    let mut child = cordis_command(dir, args).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let ran = child.wait_with_output().unwrap();
    (
        ran.status.code(),
        String::from_utf8_lossy(&ran.stdout).into_owned(),
        String::from_utf8_lossy(&ran.stderr).into_owned(),
    )
}
