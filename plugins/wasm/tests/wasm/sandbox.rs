//! What a guest can reach: the workspace only as granted, the listed variables only, nothing
//! without a grant.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cordis_wasm::{Capabilities, FsAccess, Limits, Runner, RunnerOptions};
use serde_json::Value;

use crate::guests;
use crate::{block_on, load};

fn with_workspace(access: FsAccess, root: PathBuf) -> Runner {
    let grants = Capabilities {
        workspace: Some(access),
        ..Capabilities::default()
    };
    let guest = load(&guests::files(), &grants).unwrap();
    Runner::new(
        Arc::new(guest),
        RunnerOptions {
            entry: "files".into(),
            limits: Limits::default(),
            grants,
            workspace: Some(root),
            config: "{}".to_owned(),
            seed: None,
            deadline: Duration::from_secs(30),
        },
    )
}

/// A workspace `root/ws` holding `inside.txt`, beside a secret `root/outside.txt`.
fn layout() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("inside.txt"), "hello from the workspace").unwrap();
    std::fs::write(dir.path().join("outside.txt"), "secret").unwrap();
    (dir, ws)
}

/// `wasi:filesystem/types.error-code.not-permitted` (case 31), as the probe writes it.
const NOT_PERMITTED: &str = "denied:000000000000001f";

fn probe(r: &Runner) -> Value {
    let text = block_on(r.call("probe", "{}")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn workspace_read_reads_the_root_but_cannot_write_or_leave_it() {
    let (dir, ws) = layout();
    let answer = probe(&with_workspace(FsAccess::Read, ws.clone()));
    assert_eq!(answer["read"], "hello from the workspace", "{answer}");
    assert_eq!(answer["write"], NOT_PERMITTED, "{answer}");
    assert_eq!(answer["escape"], NOT_PERMITTED, "{answer}");
    assert!(!ws.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("outside.txt")).unwrap(),
        "secret"
    );
}

#[test]
fn workspace_write_writes_inside_the_root_and_still_cannot_leave_it() {
    let (dir, ws) = layout();
    let answer = probe(&with_workspace(FsAccess::Write, ws.clone()));
    assert_eq!(answer["write"], "wrote", "{answer}");
    assert_eq!(
        std::fs::read_to_string(ws.join("new.txt")).unwrap(),
        "written by the guest"
    );
    assert_eq!(answer["escape"], NOT_PERMITTED, "{answer}");
    assert!(!dir.path().join("new.txt").exists());
}

#[test]
fn a_guest_with_no_grants_cannot_even_load_if_it_imports_files_environment_or_clocks() {
    let none = Capabilities::default();
    for (spec, import) in [
        (guests::files(), "wasi:filesystem/"),
        (guests::env(), "wasi:cli/environment@0.2.12"),
        (guests::clock(), "wasi:clocks/wall-clock@0.2.12"),
        (guests::random(), "wasi:random/random@0.2.12"),
    ] {
        let e = load(&spec, &none).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("the component imports {import}")),
            "{e}"
        );
        assert!(e.contains("which its entry does not grant"), "{e}");
    }
}

#[test]
fn granted_environment_shows_the_listed_variables_only() {
    // PATH and HOME are set in every test environment; only HOME is granted.
    assert!(std::env::var("PATH").is_ok() && std::env::var("HOME").is_ok());
    let grants = Capabilities {
        env: Some(vec!["HOME".to_owned(), "CORDIS_WASM_NOT_SET".to_owned()]),
        ..Capabilities::default()
    };
    let r = crate::runner(&guests::env(), Limits::default(), grants, None);
    let text = block_on(r.call("env", "{}")).unwrap();
    let answer: Value = serde_json::from_str(&text).unwrap();
    let home = std::env::var("HOME").unwrap();
    assert_eq!(answer["env"], format!("HOME={home};"));
    // Granted the interface with no variables: sees none.
    let empty = Capabilities {
        env: Some(vec![]),
        ..Capabilities::default()
    };
    let r = crate::runner(&guests::env(), Limits::default(), empty, None);
    assert_eq!(block_on(r.call("env", "{}")).unwrap(), r#"{"env":""}"#);
}
