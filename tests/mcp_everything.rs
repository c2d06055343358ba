//! End to end against the npm reference server `@modelcontextprotocol/server-everything`: the
//! test installs a pinned version into a temporary directory and drives it through `cordis
//! check` and `cordis call`. Without `node` and `npm` on PATH it prints a `SKIPPED:` line and
//! passes (CI has both, so it runs there).

mod common;

use std::process::{Command, Stdio};

use common::cordis;

/// The pinned reference server.
const PACKAGE: &str = "@modelcontextprotocol/server-everything@2026.8.31";

fn on_path(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_reference_server_everything_lists_and_answers_through_cordis() {
    if !on_path("node") || !on_path("npm") {
        println!("SKIPPED: mcp_everything needs `node` and `npm` on PATH to install {PACKAGE}");
        eprintln!("SKIPPED: mcp_everything needs `node` and `npm` on PATH to install {PACKAGE}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let install = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(dir.path())
        .arg(PACKAGE)
        .output()
        .expect("running npm");
    assert!(
        install.status.success(),
        "npm install {PACKAGE} failed:\n{}",
        String::from_utf8_lossy(&install.stderr)
    );
    let entry = dir
        .path()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(entry.is_file(), "{} is missing", entry.display());
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

    let echo = cordis(
        &[
            "call",
            &file,
            "mcp__everything__echo",
            r#"{"message":"hello"}"#,
        ],
        &[],
    );
    assert_eq!(echo.code, 0, "{}\n{}", echo.out, echo.err);
    assert!(echo.out.contains("Echo: hello"), "{}", echo.out);

    let sum = cordis(
        &[
            "call",
            &file,
            "mcp__everything__get-sum",
            r#"{"a":3,"b":7}"#,
        ],
        &[],
    );
    assert_eq!(sum.code, 0, "{}\n{}", sum.out, sum.err);
    assert!(sum.out.contains("10"), "{}", sum.out);
}
