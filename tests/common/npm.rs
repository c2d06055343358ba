//! npm packages the tests drive (the official MCP conformance suite, the ACP SDK, the reference
//! MCP server) and the in-repo MCP fixture server: each installed or built once per test binary
//! and reused; without `node` and `npm` a test says `SKIPPED:` and passes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Whether `program --version` runs and succeeds.
pub fn on_path(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `node` and `npm` are both on PATH.
pub fn node_and_npm() -> bool {
    on_path("node") && on_path("npm")
}

/// Says `SKIPPED: TEST needs … to install WHAT` on the stderr handle (not through `eprintln!`:
/// the harness captures the macros of a passing test, and this line must be seen).
pub fn skipped(test: &str, what: &str) {
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {test} needs `node` and `npm` on PATH to install {what}"
    );
}

/// Installs `packages` with npm into `dir`'s `node_modules` unless `dir/marker` is already a
/// file: into a fresh directory beside, moved in whole, so a run cut short leaves no half
/// installation and two runs racing keep one. Panics naming npm's error when it fails.
pub fn install_once(dir: &Path, packages: &[&str], marker: &str) {
    if dir.join(marker).is_file() {
        return;
    }
    let fresh = dir.with_extension(format!("new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    std::fs::create_dir_all(&fresh).unwrap();
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&fresh)
        .args(packages)
        .output()
        .expect("running npm");
    assert!(
        out.status.success(),
        "npm install {} failed:\n{}",
        packages.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
    if std::fs::rename(&fresh, dir).is_err() {
        // Another run installed it meanwhile.
        let _ = std::fs::remove_dir_all(&fresh);
    }
    assert!(
        dir.join(marker).is_file(),
        "{} is missing",
        dir.join(marker).display()
    );
}

/// The MCP fixture server binary (`plugins/examples/mcp-fixture`), built once per test binary in
/// a target directory of its own (`cargo test` does not build other packages' binaries for this
/// crate's tests, and the running cargo holds the lock on the main one).
pub fn mcp_fixture_server() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap();
        // Shared with the dylib tests' fixture builds (`tests/common/plugins.rs`), so common
        // dependencies are built once.
        let target = profile_dir.parent().unwrap().join("plugin-fixtures");
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "build",
                "--quiet",
                "-p",
                "cordis-mcp-fixture",
                "--target-dir",
            ])
            .arg(&target)
            .status()
            .expect("running cargo");
        assert!(status.success(), "building cordis-mcp-fixture failed");
        target.join("debug").join("cordis-mcp-fixture")
    })
}
