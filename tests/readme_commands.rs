//! Every command the README shows in its shell code blocks (```sh) still works: each one that
//! can run offline runs, as written, in a scratch directory holding a copy of the bundled
//! cordis.yml (the scripted model), and must exit as documented (0 for all of them today).
//! `cordis` and `cargo run --release --` run the binary under test; placeholders are filled in
//! (ID: a session of the scratch directory, `ID[@SEQ]`: that session); `run` without `-p`
//! reads one message on stdin. The real-model commands run against a loopback OpenAI-compatible
//! stand-in (the base URL swapped for its address, the key variables set to a dummy), so
//! their variable names and the adapter switch are checked without the network. What cannot
//! run here is listed in [`SKIPPED`] with the reason; a command that fits no rule fails the
//! test, so a new README command is either run or skipped on purpose.
//!
//! Two commands the README's prose names are run too: `cordis --version` (it names the
//! commit) and `cargo run --release -- check`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Commands not run, by how they begin, and why.
const SKIPPED: &[(&str, &str)] = &[
    (
        "cargo test",
        "the whole test suite (this test is part of it; CI runs it)",
    ),
    (
        "cargo install",
        "installing: writes into ~/.cargo/bin, and `--git <URL>` needs the network",
    ),
];

/// The longest one command may take.
const DEADLINE: Duration = Duration::from_secs(120);

/// One command of a shell block: where it is, the variables it sets, its words.
#[derive(Debug)]
struct Shown {
    line: usize,
    text: String,
    env: Vec<(String, String)>,
    words: Vec<String>,
}

/// The commands of the README's shell blocks, in order: continuation lines joined, comments
/// and blank lines dropped; `export NAME=VALUE` lines become variables of the block's later
/// commands.
fn shown_commands(readme: &str) -> Vec<Shown> {
    let mut commands = Vec::new();
    let mut in_shell = None::<bool>;
    let mut exported: Vec<(String, String)> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in readme.lines().enumerate() {
        let line = raw.trim_end();
        if let Some(fence) = line.trim_start().strip_prefix("```") {
            in_shell = match in_shell {
                None => Some(matches!(fence.trim(), "sh" | "bash" | "shell" | "console")),
                Some(_) => None,
            };
            exported.clear();
            continue;
        }
        if in_shell != Some(true) {
            continue;
        }
        let (start, mut text) = pending.take().unwrap_or((i + 1, String::new()));
        let code = strip_comment(line);
        if let Some(head) = code.trim_end().strip_suffix('\\') {
            text.push_str(head);
            text.push(' ');
            pending = Some((start, text));
            continue;
        }
        text.push_str(&code);
        let text = text.trim().to_owned();
        if text.is_empty() {
            continue;
        }
        let mut words = split_words(&text);
        if words.first().map(String::as_str) == Some("export") {
            exported.extend(words.drain(1..).filter_map(|w| assignment(&w)));
            continue;
        }
        let mut env = exported.clone();
        while let Some(set) = words.first().and_then(|w| assignment(w)) {
            env.push(set);
            words.remove(0);
        }
        commands.push(Shown {
            line: start,
            text,
            env,
            words,
        });
    }
    commands
}

/// `NAME=VALUE` as a pair.
fn assignment(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let fits = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    fits.then(|| (name.to_owned(), value.to_owned()))
}

/// `line` without a comment (a `#` that starts a word, outside quotes).
fn strip_comment(line: &str) -> String {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => return line[..at].to_owned(),
            _ => {}
        }
        previous = c;
    }
    line.to_owned()
}

/// The words of a command line: split at blanks, single and double quotes kept together.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut started = false;
    for c in text.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// A scratch directory with the bundled cordis.yml.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("cordis.yml"),
        dir.join("cordis.yml"),
    )
    .unwrap();
    dir.canonicalize().unwrap()
}

/// What one command did.
struct Ran {
    code: Option<i32>,
    out: String,
    err: String,
}

/// `cordis args…` in `dir` with `env` set and `input` on stdin, within [`DEADLINE`].
fn cordis(dir: &Path, args: &[String], env: &[(String, String)], input: &str) -> Ran {
    use std::io::Write as _;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.args(args)
        .current_dir(dir)
        .env("XDG_STATE_HOME", common::state_home(dir))
        .env_remove("CORDIS_LLM")
        .env_remove("CORDIS_WORKSPACE")
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "off")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    let stdout = common::lines(child.stdout.take().unwrap());
    let stderr = common::lines(child.stderr.take().unwrap());
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let err: Vec<String> = stderr.try_iter().collect();
            panic!(
                "`cordis {}` did not end within {DEADLINE:?}; stderr:\n{}",
                args.join(" "),
                err.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let gather = |rx: std::sync::mpsc::Receiver<String>| {
        let mut all = Vec::new();
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
            all.push(line);
        }
        all.join("\n")
    };
    Ran {
        code,
        out: gather(stdout),
        err: gather(stderr),
    }
}

/// The id of a session of `dir` (one is started, with one message, when there is none).
fn a_session(dir: &Path) -> String {
    let listed = |dir: &Path| {
        let ran = cordis(dir, &["sessions".into(), "--json".into()], &[], "");
        let rows: serde_json::Value = serde_json::from_str(&ran.out).unwrap_or_default();
        rows[0]["id"].as_str().map(str::to_owned)
    };
    if let Some(id) = listed(dir) {
        return id;
    }
    let ran = cordis(dir, &["run".into()], &[], "hello\n");
    assert_eq!(ran.code, Some(0), "{}", ran.err);
    listed(dir).expect("the run left a session")
}

/// A loopback OpenAI-compatible server answering one message with text; its base URL.
fn stand_in() -> (String, std::thread::JoinHandle<Vec<serde_json::Value>>) {
    let delta = serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello from the stand-in."}}]});
    let finish =
        serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    common::openai_serving(vec![vec![delta, finish]])
}

/// Runs one README command in `dir`; panics saying which and why when it does not work.
fn run_shown(dir: &Path, shown: &Shown) {
    let mut words = shown.words.clone();
    // `cargo run --release -- ARGS` is the binary under test with ARGS.
    if words.starts_with(&["cargo", "run", "--release", "--"].map(String::from)) {
        words.splice(..4, ["cordis".to_owned()]);
    }
    assert_eq!(
        words.first().map(String::as_str),
        Some("cordis"),
        "README line {}: `{}` is neither a cordis command nor in SKIPPED",
        shown.line,
        shown.text
    );
    words.remove(0);
    let mut env = shown.env.clone();
    // The real-model commands: against the stand-in, keys set to a dummy.
    let real_model = env.iter().any(|(k, v)| k == "CORDIS_LLM" && v == "openai");
    let server = real_model.then(|| {
        let (base, server) = stand_in();
        env.retain(|(k, _)| k != "CORDIS_BASE_URL");
        env.push(("CORDIS_BASE_URL".into(), base));
        for key in ["DEEPSEEK_API_KEY", "OPENAI_API_KEY"] {
            env.retain(|(k, _)| k != key);
            env.push((key.into(), "sk-readme-test".into()));
        }
        server
    });
    for word in &mut words {
        if word == "ID" || word == "ID[@SEQ]" {
            *word = a_session(dir);
        }
    }
    let headless = words.iter().any(|w| w == "-p" || w == "--prompt");
    let input = if words.first().map(String::as_str) == Some("run") && !headless {
        "hello\n"
    } else {
        ""
    };
    let ran = cordis(dir, &words, &env, input);
    assert_eq!(
        ran.code,
        Some(0),
        "README line {}: `{}` exited {:?}\nstdout:\n{}\nstderr:\n{}",
        shown.line,
        shown.text,
        ran.code,
        ran.out,
        ran.err
    );
    if headless && words.windows(2).any(|w| w == ["--output-format", "json"]) {
        let result: serde_json::Value = serde_json::from_str(ran.out.trim()).unwrap_or_else(|e| {
            panic!(
                "README line {}: not one JSON object ({e}): {}",
                shown.line, ran.out
            )
        });
        assert!(result["sessionId"].is_string(), "{result}");
    }
    if let Some(server) = server {
        let bodies = server.join().unwrap();
        assert_eq!(
            bodies.len(),
            1,
            "README line {}: the model was asked once",
            shown.line
        );
        assert!(
            ran.out.contains("Hello from the stand-in."),
            "README line {}: {}",
            shown.line,
            ran.out
        );
    }
}

#[test]
fn every_command_in_the_readmes_shell_blocks_still_works() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let shown = shown_commands(&readme);
    assert!(shown.len() >= 5, "the README's shell blocks: {shown:?}");
    let dir = scratch();
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for command in &shown {
        let text = command.words.join(" ");
        if let Some((_, why)) = SKIPPED.iter().find(|(start, _)| text.starts_with(start)) {
            skipped.push(format!("line {}: `{}` ({why})", command.line, command.text));
            continue;
        }
        run_shown(&dir, command);
        ran.push(command.text.clone());
    }
    eprintln!(
        "ran {} README commands; skipped {}:\n{}",
        ran.len(),
        skipped.len(),
        skipped.join("\n")
    );
    // The prose's two: the version names the commit, and the CI-style check passes.
    let version = cordis(&dir, &["--version".into()], &[], "");
    assert_eq!(version.code, Some(0));
    assert!(
        version.out.starts_with("cordis ") && version.out.contains('('),
        "{}",
        version.out
    );
    let check = cordis(&dir, &["check".into()], &[], "");
    assert_eq!(check.code, Some(0), "{}", check.err);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shell_blocks_are_read_as_a_shell_would() {
    let readme = "text\n```sh\nexport KEY=sk-1   # a comment\nA=1 cordis run \\\n  --x \"two words\" # why\n\n```\n```yaml\ncordis: no\n```\n";
    let shown = shown_commands(readme);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0].line, 4);
    assert_eq!(shown[0].words, ["cordis", "run", "--x", "two words"]);
    assert_eq!(
        shown[0].env,
        [
            ("KEY".to_owned(), "sk-1".to_owned()),
            ("A".to_owned(), "1".to_owned())
        ]
    );
}
