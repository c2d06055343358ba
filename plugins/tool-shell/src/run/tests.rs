use std::time::{Duration, Instant};

use serde_json::json;

use super::*;

fn config() -> ShellConfig {
    ShellConfig::default()
}

async fn bash(root: &Path, c: &ShellConfig, command: &str) -> Value {
    run_bash(root, c, json!({"command": command}))
        .await
        .unwrap()
}

/// True once `pid` is gone or a zombie (killed, waiting for whoever reaps orphans).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits for `pid` to die; the deadline only guards against a hang.
async fn wait_dead(pid: u32) {
    let give_up = Instant::now() + Duration::from_secs(20);
    while !dead(pid) {
        assert!(Instant::now() < give_up, "process {pid} is still alive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn read_pid(path: &Path) -> u32 {
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < give_up, "no pid file");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_command_runs_in_the_root_with_its_output_and_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let r = bash(&root, &config(), "pwd; echo oops >&2; exit 3").await;
    assert_eq!(r["exit_code"], 3);
    assert_eq!(r["stdout"], format!("{}\n", root.display()));
    assert_eq!(r["stderr"], "oops\n");
    assert!(r.get("timed_out").is_none());
    let r = bash(&root, &config(), "false").await;
    assert_eq!(r["exit_code"], 1);
    let r = bash(&root, &config(), "kill -TERM $$").await;
    assert_eq!(
        (r["exit_code"].clone(), r["signal"].clone()),
        (Value::Null, json!(15))
    );
}

#[tokio::test]
async fn bad_arguments_are_errors() {
    let root = std::env::temp_dir();
    let e = run_bash(&root, &config(), json!({"cmd": "ls"}))
        .await
        .unwrap_err();
    assert!(e.to_string().starts_with("invalid bash arguments"), "{e}");
    let e = run_bash(&root, &config(), json!({"command": "ls", "timeout_ms": 0}))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "timeout_ms must be positive");
    let c = ShellConfig {
        shell: "/no/such/shell".into(),
        ..config()
    };
    let e = run_bash(&root, &c, json!({"command": "ls"}))
        .await
        .unwrap_err();
    assert!(
        e.to_string().starts_with("cannot start /no/such/shell"),
        "{e}"
    );
}

#[tokio::test]
async fn output_is_capped_to_its_head_and_tail() {
    let root = std::env::temp_dir();
    let c = ShellConfig {
        max_output_bytes: 100,
        ..config()
    };
    let r = bash(&root, &c, "for i in $(seq 1 10000); do echo line$i; done").await;
    let out = r["stdout"].as_str().unwrap();
    assert!(out.starts_with("line1\nline2\n"), "{out}");
    assert!(out.ends_with("line10000\n"), "{out}");
    assert!(out.contains("bytes omitted"), "{out}");
    assert!(out.len() < 200, "{}", out.len());
    assert_eq!(r["exit_code"], 0);
}

#[tokio::test]
async fn the_environment_is_filtered_by_the_allowlist() {
    let root = std::env::temp_dir();
    let c = ShellConfig {
        env: vec!["PATH".into()],
        ..config()
    };
    let r = bash(&root, &c, "echo \"${HOME-unset} ${CARGO_PKG_NAME-unset}\"").await;
    assert_eq!(r["stdout"], "unset unset\n");
    let c = ShellConfig {
        env: vec!["PATH".into(), "CARGO_PKG_*".into()],
        ..config()
    };
    let r = bash(&root, &c, "echo \"$CARGO_PKG_NAME\"").await;
    assert_eq!(r["stdout"], "cordis-tool-shell\n");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_group() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pid");
    let command = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
    let r = run_bash(
        tmp.path(),
        &config(),
        json!({"command": command, "timeout_ms": 300}),
    )
    .await
    .unwrap();
    assert_eq!(r["timed_out"], true);
    assert_eq!(r["exit_code"], Value::Null);
    assert!(r["note"].as_str().unwrap().contains("within 300 ms"));
    wait_dead(read_pid(&pid_file).await).await;
}

#[tokio::test]
async fn background_jobs_do_not_outlive_a_finished_command() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pid");
    let command = format!("sleep 300 & echo $! > {}; echo started", pid_file.display());
    let r = bash(tmp.path(), &config(), &command).await;
    assert_eq!(
        (r["exit_code"].clone(), r["stdout"].clone()),
        (json!(0), json!("started\n"))
    );
    wait_dead(read_pid(&pid_file).await).await;
}

#[tokio::test]
async fn cancelling_the_call_kills_the_whole_group() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pid");
    let command = format!(
        "(sleep 300; echo never) & echo $! > {}; wait",
        pid_file.display()
    );
    let root = tmp.path().to_path_buf();
    let c = config();
    let mut call = Box::pin(run_bash(&root, &c, json!({"command": command})));
    let pid = tokio::select! {
        _ = &mut call => panic!("the command cannot finish"),
        pid = read_pid(&pid_file) => pid,
    };
    assert!(!dead(pid));
    drop(call);
    wait_dead(pid).await;
}
