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

/// The sandbox tests run real commands; where the kernel has no Landlock they assert the
/// fail-closed refusal instead (and say so).
fn landlock() -> bool {
    let present = cordis_sandbox::landlock_abi().is_some();
    if !present {
        eprintln!("SKIP: this kernel has no Landlock; asserting the fail-closed refusal instead");
    }
    present
}

fn mode(sandbox: cordis_sandbox::SandboxMode, network: bool) -> ShellConfig {
    ShellConfig {
        sandbox,
        network,
        ..config()
    }
}

#[tokio::test]
async fn workspace_write_writes_inside_and_nowhere_else() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let out = outside.path().display().to_string();
    let c = mode(cordis_sandbox::SandboxMode::WorkspaceWrite, false);
    if !landlock() {
        let e = run_bash(&root, &c, json!({"command": "true"}))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("cannot be enforced"), "{e}");
        return;
    }
    std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let probe = format!("{home}/cordis-sandbox-probe-{}", std::process::id());
    for (what, line) in [
        ("home", format!("echo x > {probe}")),
        ("outside", format!("echo x > {out}/direct")),
        ("symlink", "echo x > link/through-link".to_owned()),
        (
            "grandchild",
            format!("bash -c 'bash -c \"echo x > {out}/grandchild\"'"),
        ),
        ("cd /", format!("cd / && echo x > {out}/after-cd")),
        ("mkdir", format!("mkdir {out}/dir")),
        (
            "rename in",
            format!("mv {root}/../x {out}/y", root = root.display()),
        ),
    ] {
        let r = bash(&root, &c, &line).await;
        assert_ne!(r["exit_code"], 0, "{what}: {r}");
    }
    assert!(!std::path::Path::new(&probe).exists());
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
    let r = bash(
        &root,
        &c,
        "echo inside > inside.txt && mkdir d && echo t > \"$TMPDIR/t\" && cat inside.txt $TMPDIR/t",
    )
    .await;
    assert_eq!(
        (r["exit_code"].clone(), r["stdout"].clone()),
        (json!(0), json!("inside\nt\n")),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("inside.txt")).unwrap(),
        "inside\n"
    );
    let r = bash(
        &root,
        &c,
        "echo ok 2>/dev/null >/dev/null; cat /etc/hostname >/dev/null && echo read",
    )
    .await;
    assert_eq!(r["stdout"], "read\n", "reading and /dev/null work: {r}");
}

#[tokio::test]
async fn read_only_writes_nothing_but_its_private_temp_dir() {
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let c = mode(cordis_sandbox::SandboxMode::ReadOnly, false);
    if !landlock() {
        assert!(
            run_bash(&root, &c, json!({"command": "true"}))
                .await
                .is_err()
        );
        return;
    }
    std::fs::write(root.join("kept.txt"), "kept\n").unwrap();
    let r = bash(&root, &c, "echo x > new.txt").await;
    assert_ne!(r["exit_code"], 0, "{r}");
    let r = bash(&root, &c, "rm kept.txt").await;
    assert_ne!(r["exit_code"], 0, "{r}");
    let r = bash(
        &root,
        &c,
        "cat kept.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo \"$TMPDIR\"",
    )
    .await;
    let out = r["stdout"].as_str().unwrap();
    assert!(out.starts_with("kept\nt\n"), "{r}");
    let tmp = out.lines().nth(2).unwrap();
    assert!(tmp.contains("cordis-bash-"), "{tmp}");
    assert!(
        !std::path::Path::new(tmp).exists(),
        "the temp dir is removed after the call"
    );
    assert!(!root.join("new.txt").exists() && root.join("kept.txt").exists());
}

#[tokio::test]
async fn without_network_a_connection_to_a_local_listener_fails() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = std::env::temp_dir();
    let line = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let c = mode(cordis_sandbox::SandboxMode::WorkspaceWrite, false);
    if landlock() {
        let r = bash(&root, &c, &line).await;
        assert_ne!(r["exit_code"], 0, "{r}");
        assert_eq!(r["stdout"], "", "{r}");
        let r = bash(&root, &c, "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)' 2>&1; echo $?").await;
        assert!(
            r["stdout"].as_str().unwrap().contains("Permission denied"),
            "UDP too: {r}"
        );
    }
    // Full access without network: the socket filter alone still refuses it.
    let r = bash(
        &root,
        &mode(cordis_sandbox::SandboxMode::FullAccess, false),
        &line,
    )
    .await;
    assert_ne!(r["exit_code"], 0, "{r}");
    let c = mode(cordis_sandbox::SandboxMode::WorkspaceWrite, true);
    if landlock() {
        let r = bash(&root, &c, &line).await;
        assert_eq!(r["stdout"], "connected\n", "network: true allows it: {r}");
    }
    drop(listener);
}

#[tokio::test]
async fn full_access_writes_anywhere_and_keeps_the_environment_allowlist() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let c = ShellConfig {
        env: vec!["PATH".into()],
        ..mode(cordis_sandbox::SandboxMode::FullAccess, false)
    };
    let line = format!(
        "echo x > {}/f && echo \"${{HOME-unset}}\"",
        outside.path().display()
    );
    let r = bash(ws.path(), &c, &line).await;
    assert_eq!(r["stdout"], "unset\n", "{r}");
    assert!(outside.path().join("f").exists());
}

#[tokio::test]
async fn a_command_cannot_read_the_hosts_environment_through_proc() {
    if !landlock() {
        return;
    }
    // The host holds a variable the allowlist hides from the command (cargo's CARGO_PKG_NAME
    // stands for an API key); /proc/$PPID (the reaper, a copy of the host) and the host itself
    // must not give it back.
    let secret = "CARGO_PKG_NAME=";
    cordis_sandbox::protect_host().unwrap();
    assert_eq!(
        std::env::var("CARGO_PKG_NAME").unwrap(),
        "cordis-tool-shell",
        "the host still reads it"
    );
    let root = std::env::temp_dir();
    let c = mode(cordis_sandbox::SandboxMode::WorkspaceWrite, false);
    let host = std::process::id();
    for target in ["$PPID".to_owned(), host.to_string()] {
        let line = format!(
            "cat /proc/{target}/environ /proc/{target}/mem 2>/dev/null | grep -a -c {secret}; true"
        );
        let r = bash(&root, &c, &line).await;
        assert_eq!(r["stdout"], "0\n", "/proc/{target}: {r}");
    }
    let r = bash(&root, &c, "env | grep -c CARGO_PKG_NAME; true").await;
    assert_eq!(r["stdout"], "0\n", "the allowlist still hides it: {r}");
}

#[tokio::test]
async fn a_process_that_leaves_the_group_is_gone_when_the_call_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    for c in [
        config(),
        mode(cordis_sandbox::SandboxMode::FullAccess, true),
    ] {
        if c.sandbox != cordis_sandbox::SandboxMode::FullAccess && !landlock() {
            continue;
        }
        let pid_file = root.join(format!("pid-{}", c.sandbox));
        let line = format!(
            "setsid sleep 300 & echo $! > {}; echo started",
            pid_file.display()
        );
        let r = bash(&root, &c, &line).await;
        assert_eq!(r["stdout"], "started\n", "{r}");
        wait_dead(read_pid(&pid_file).await).await;
        // A double fork that re-parents the sleeper away from the shell.
        let pid_file = root.join(format!("pid2-{}", c.sandbox));
        let line = format!(
            "( setsid sh -c 'sleep 300 & echo $! > {}' & ); sleep 0.2",
            pid_file.display()
        );
        let _ = bash(&root, &c, &line).await;
        wait_dead(read_pid(&pid_file).await).await;
    }
}

#[test]
fn temp_dirs_are_private_and_those_of_gone_hosts_are_swept() {
    use std::os::unix::fs::PermissionsExt;
    let own = private_temp_dir().unwrap();
    let mode = std::fs::metadata(own.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    // A host that is gone: a process that ran and was reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let tmp = std::env::temp_dir();
    let stale = tmp.join(format!("{TEMP_PREFIX}{gone}-stale"));
    std::fs::create_dir_all(stale.join("inner")).unwrap();
    let target = tempfile::tempdir().unwrap();
    let link = tmp.join(format!("{TEMP_PREFIX}{gone}-link"));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(target.path(), &link).unwrap();
    std::fs::write(target.path().join("kept"), "x").unwrap();
    sweep_stale_temp_dirs();
    assert!(!stale.exists(), "a gone host's dir is removed");
    assert!(own.path().exists(), "a live host's dir stays");
    assert!(
        target.path().join("kept").exists(),
        "a symlink is never followed"
    );
    let _ = std::fs::remove_file(&link);
}

#[tokio::test]
async fn live_output_arrives_whole_characters_and_stops_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let seen = std::sync::Mutex::new(String::new());
    let sink = |text: &str| seen.lock().unwrap().push_str(text);
    let live = Live::new(&sink);
    // "é" split across two writes (and so, often, two reads): never a replacement character.
    let r = run_bash_live(
        dir.path(),
        &config(),
        json!({"command": "printf 'h\\303'; sleep 0.05; printf '\\251llo\\n'"}),
        Some(&live),
    )
    .await
    .unwrap();
    assert_eq!(r["stdout"], "héllo\n");
    assert_eq!(*seen.lock().unwrap(), "héllo\n");
    // Three MiB of output: the live copy stops at the limit with one note; the result is the
    // command's as ever.
    let seen = std::sync::Mutex::new(String::new());
    let sink = |text: &str| seen.lock().unwrap().push_str(text);
    let live = Live::new(&sink);
    let r = run_bash_live(
        dir.path(),
        &config(),
        json!({"command": "head -c 3145728 /dev/zero | tr '\\0' a"}),
        Some(&live),
    )
    .await
    .unwrap();
    assert_eq!(r["exit_code"], 0);
    let seen = seen.lock().unwrap();
    let note = "[live output stops after";
    assert_eq!(seen.matches(note).count(), 1);
    let shown = seen.split('\n').next().unwrap().len();
    assert!(shown <= LIVE_OUTPUT_LIMIT, "{shown} bytes shown live");
    assert!(
        seen.len() < LIVE_OUTPUT_LIMIT + 200,
        "{} bytes in all",
        seen.len()
    );
}

#[tokio::test]
async fn a_command_reads_and_writes_no_shared_memory_and_no_terminal() {
    use std::os::unix::fs::OpenOptionsExt as _;
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let c = mode(cordis_sandbox::SandboxMode::WorkspaceWrite, false);
    if !landlock() {
        return;
    }
    // Another program's private shared memory.
    let shm = format!("/dev/shm/cordis-test-{}", std::process::id());
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&shm)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"theirs"));
    let fresh = format!("{shm}-new");
    // A terminal: a pseudo-terminal this test opens, standing for the user's.
    let master =
        rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY)
            .unwrap();
    rustix::pty::grantpt(&master).unwrap();
    rustix::pty::unlockpt(&master).unwrap();
    let pts = rustix::pty::ptsname(&master, Vec::new()).unwrap();
    let pts = pts.to_str().unwrap().to_owned();
    for (what, line) in [
        ("overwrite shm", format!("echo x > {shm}")),
        ("read shm", format!("cat {shm}")),
        ("new shm", format!("head -c 1000000 /dev/zero > {fresh}")),
        ("write pts", format!("printf '\\033]0;evil\\007' > {pts}")),
        ("read pts", format!("head -c 0 < {pts}")),
        ("ptmx", "exec 3<> /dev/ptmx".to_owned()),
        ("tty", "echo x > /dev/tty".to_owned()),
    ] {
        let r = bash(&root, &c, &line).await;
        assert_ne!(r["exit_code"], 0, "{what}: {r}");
    }
    assert_eq!(std::fs::read(&shm).unwrap(), b"theirs");
    assert!(!std::path::Path::new(&fresh).exists());
    let _ = std::fs::remove_file(&shm);
    // What a command needs of /dev still works.
    let r = bash(
        &root,
        &c,
        "echo x > /dev/null && head -c 4 /dev/urandom | wc -c && head -c 2 /dev/zero | wc -c",
    )
    .await;
    assert_eq!(r["stdout"], "4\n2\n", "{r}");
}

#[tokio::test]
async fn a_call_cleared_read_only_runs_in_a_read_only_sandbox_and_is_told_so() {
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let tool = crate::bash_tool(root.clone(), config());
    let call = |clearance| cordis_tools::ToolCallContext {
        call_id: "c".into(),
        scope: None,
        clearance,
    };
    let run = |clearance, line: &str| (tool.handler)(json!({"command": line}), call(clearance));
    if !landlock() {
        assert!(
            run(cordis_tools::Clearance::ReadOnly, "true")
                .await
                .is_err()
        );
        return;
    }
    std::fs::write(root.join("kept.txt"), "kept\n").unwrap();
    let r = run(
        cordis_tools::Clearance::ReadOnly,
        "echo gone > kept.txt; echo x > new.txt",
    )
    .await
    .unwrap()
    .content;
    assert_ne!(r["exit_code"], 0, "{r}");
    assert_eq!(r["sandbox"], "read-only", "{r}");
    assert!(
        r["note"].as_str().unwrap().contains("without a question"),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("kept.txt")).unwrap(),
        "kept\n"
    );
    assert!(!root.join("new.txt").exists());
    // A person's yes runs it in the entry's own sandbox.
    let r = run(cordis_tools::Clearance::Full, "echo x > new.txt")
        .await
        .unwrap()
        .content;
    assert_eq!(
        (r["exit_code"].clone(), r.get("sandbox")),
        (json!(0), None),
        "{r}"
    );
    assert!(root.join("new.txt").exists());
}
