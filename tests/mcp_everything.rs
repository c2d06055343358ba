//! End to end against the npm reference server `@modelcontextprotocol/server-everything`: the
//! test installs a pinned version once (under the target directory) and drives it through `cordis
//! check` and `cordis call`, over stdio and over streamable HTTP: tools, a resource read through
//! `read_resource`, image content, and progress that keeps a long call alive. Without `node` and `npm` on PATH it prints a `SKIPPED:` line and
//! passes (CI has both, so it runs there).

use crate::common;
use crate::common::npm;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::cordis;

/// The pinned reference server.
const PACKAGE: &str = "@modelcontextprotocol/server-everything@2026.8.31";

#[test]
fn the_reference_server_everything_lists_and_answers_through_cordis() {
    if !npm::node_and_npm() {
        npm::skipped("mcp_everything", PACKAGE);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let entry = install();
    let file = dir.path().join("cordis.yml");
    std::fs::write(
        &file,
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
             - id: everything\n  name: mcp\n  config:\n    transport: stdio\n    server: everything\n\
             \x20   command: node\n    args: [{entry:?}, stdio]\n    failOnStartupError: true\n"
        ),
    )
    .unwrap();
    let file = file.display().to_string();

    let check = cordis(&["check", &file], &[]);
    assert_eq!(check.code, 0, "{}\n{}", check.out, check.err);
    let listed = check
        .out
        .lines()
        .filter(|l| l.contains(". mcp__everything__"))
        .count();
    assert!(
        listed >= 8,
        "at least 8 tools, got {listed}:\n{}",
        check.out
    );
    tools_answer_over_stdio(&file);
    progress_keeps_a_long_call_alive(dir.path(), &file);
    prompts_are_commands_of_cordis_run(dir.path(), &file, &check.out);
    the_same_server_answers_over_http(dir.path(), &entry);
}

/// Installs the pinned server, once (later runs reuse it); its entry script.
fn install() -> PathBuf {
    let version = PACKAGE.rsplit('@').next().unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("server-everything-{version}"));
    let entry = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    npm::install_once(&dir, &[PACKAGE], entry);
    dir.join(entry)
}

/// Tools over stdio: echo and sum answer; the server offers resources, so it gets the
/// reader; image content comes back as it came.
fn tools_answer_over_stdio(file: &str) {
    let echo = cordis(
        &[
            "call",
            file,
            "mcp__everything__echo",
            r#"{"message":"hello"}"#,
        ],
        &[],
    );
    assert_eq!(echo.code, 0, "{}\n{}", echo.out, echo.err);
    assert!(echo.out.contains("Echo: hello"), "{}", echo.out);

    let sum = cordis(
        &["call", file, "mcp__everything__get-sum", r#"{"a":3,"b":7}"#],
        &[],
    );
    assert_eq!(sum.code, 0, "{}\n{}", sum.out, sum.err);
    assert!(sum.out.contains("10"), "{}", sum.out);

    // Resources: the server offers them, so it gets the reader; a template's text resource
    // comes back as text.
    let read = cordis(
        &[
            "call",
            file,
            "mcp__everything__read_resource",
            r#"{"uri":"demo://resource/dynamic/text/1"}"#,
        ],
        &[],
    );
    assert_eq!(read.code, 0, "{}\n{}", read.out, read.err);
    assert!(
        read.out
            .contains("Resource 1: This is a plaintext resource"),
        "{}",
        read.out
    );

    // Image content: passed on as it came (a model that takes images gets it after the tool
    // results; others get it named).
    let image = cordis(
        &["call", file, "mcp__everything__get-tiny-image", "{}"],
        &[],
    );
    assert_eq!(image.code, 0, "{}\n{}", image.out, image.err);
    assert!(
        image.out.contains(r#""type": "image""#) && image.out.contains("image/png"),
        "{}",
        image.out
    );
}

/// Progress: a 3 s operation reporting every 0.5 s outlives a 1.5 s `callTimeoutMs`, since
/// each report starts the wait again.
fn progress_keeps_a_long_call_alive(dir: &Path, file: &str) {
    let slow_file = dir.join("progress.yml");
    std::fs::write(
        &slow_file,
        std::fs::read_to_string(file).unwrap().replace(
            "failOnStartupError: true",
            "failOnStartupError: true\n    callTimeoutMs: 1500",
        ),
    )
    .unwrap();
    let long = cordis(
        &[
            "call",
            &slow_file.display().to_string(),
            "mcp__everything__trigger-long-running-operation",
            r#"{"duration":3,"steps":6}"#,
        ],
        &[],
    );
    assert_eq!(long.code, 0, "{}\n{}", long.out, long.err);
    assert!(
        long.out.contains("Long running operation completed"),
        "{}",
        long.out
    );
}

/// Prompts: the catalog is digested (`check_out`, what `cordis check` printed), and each prompt
/// is a slash command of `cordis run` whose rendering is the user's message.
fn prompts_are_commands_of_cordis_run(dir: &Path, file: &str, check_out: &str) {
    assert!(check_out.contains("\ncatalog: "), "{}", check_out);
    let agent_file = dir.join("agent.yml");
    std::fs::write(
        &agent_file,
        std::fs::read_to_string(file).unwrap()
            + "- id: llm\n  name: llm\n  config: {adapter: scripted, model: m, responses: [{text: Noted.}], repeat: true}\n\
               - {id: sessions, name: sessions}\n- {id: agent-loop, name: agent-loop}\n",
    )
    .unwrap();
    let run = |input: &str| common::piped(dir, &["run", agent_file.to_str().unwrap()], input);
    let (code, _, help) = run("/help\n");
    assert_eq!(code, Some(0), "{help}");
    let prompts: Vec<&str> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("/mcp__everything__"))
        .collect();
    assert!(!prompts.is_empty(), "no prompt commands:\n{help}");
    // One that takes no arguments (its usage is its name alone).
    let bare = prompts
        .iter()
        .map(|l| l.split("  ").next().unwrap_or_default())
        .find(|usage| !usage.contains(' '))
        .unwrap_or_else(|| panic!("no prompt without arguments:\n{help}"));
    let (code, out, err) = run(&format!("/mcp__everything__{bare}\n"));
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains("Noted."),
        "the prompt reached the model:\n{out}\n{err}"
    );
}

/// The same server over streamable HTTP, on a port nobody else uses; the header's value comes
/// through `${{ env.… }}` interpolation.
fn the_same_server_answers_over_http(dir: &Path, entry: &Path) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Command::new("node")
        .arg(entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting server-everything over HTTP");
    let _server = KillOnDrop(server);
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "server-everything did not listen on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let http_file = dir.join("http.yml");
    std::fs::write(
        &http_file,
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n\
             - id: everything\n  name: mcp\n  config:\n    transport: http\n    server: everything\n\
             \x20   url: \"http://127.0.0.1:{port}/mcp\"\n\
             \x20   headers: {{x-cordis-test: \"${{{{ env.CORDIS_TEST_HEADER }}}}\"}}\n\
             \x20   failOnStartupError: true\n"
        ),
    )
    .unwrap();
    let http_file = http_file.display().to_string();
    let env = [("CORDIS_TEST_HEADER", "from-env")];
    let echo = cordis(
        &[
            "call",
            &http_file,
            "mcp__everything__echo",
            r#"{"message":"over http"}"#,
        ],
        &env,
    );
    assert_eq!(echo.code, 0, "{}\n{}", echo.out, echo.err);
    assert!(echo.out.contains("Echo: over http"), "{}", echo.out);
}

/// Kills the child when the test ends, passing or failing.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
