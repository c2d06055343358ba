//! The commands cordis's hints print name the binary that prints them: the same program under
//! another name (a link, as an embedding binary would be) prints hints that run itself.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-program-name-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("cordis.yml"),
        dir.join("cordis.yml"),
    )
    .unwrap();
    dir.canonicalize().unwrap()
}

/// `program args…` in `dir` (the bundled config, offline); its exit code and stderr.
fn run(program: &Path, dir: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("XDG_STATE_HOME", common::state_home(dir))
        .env_remove("CORDIS_LLM")
        .env_remove("CORDIS_WORKSPACE")
        .env("RUST_LOG", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hints_name_the_binary_that_prints_them() {
    let dir = scratch();
    let linked = dir.join("my-agent");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_cordis"), &linked).unwrap();
    for (program, name) in [
        (linked.as_path(), "my-agent"),
        (Path::new(env!("CARGO_BIN_EXE_cordis")), "cordis"),
    ] {
        // A headless task's "continue it with" line.
        let (code, err) = run(program, &dir, &["run", "--yes", "-p", "hello"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains(&format!("; continue it with: {name} run --resume ")),
            "{name}: {err}"
        );
        // A usage hint of stress.
        let (code, err) = run(program, &dir, &["stress"]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&format!("(see {name} stress --help)")),
            "{name}: {err}"
        );
        // An unknown session's hint.
        let (code, err) = run(program, &dir, &["history", "no-such-session"]);
        assert_eq!(code, 4, "{err}");
        assert!(
            err.contains(&format!("(`{name} run` prints the id of each new session)")),
            "{name}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
