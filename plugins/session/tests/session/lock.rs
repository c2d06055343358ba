//! One writer per session: a second opener, in this process or another, is refused with the
//! holder's pid; a dead holder (and its stale pid file) blocks nobody.
//!
//! The cross-process test re-executes its own binary with `CORDIS_SESSION_HOLDER` set, which
//! turns `holder_child` into a process that opens a session, prints `holder-open`, and waits for stdin
//! to close.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{complete_turn, temp_dir};
use cordis_session::*;

const ENV_DIR: &str = "CORDIS_SESSION_HOLDER";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn holder_child() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return; // not the child
    };
    rt().block_on(async move {
        let store = SessionStore::new(Some(dir.into()), Durability::Fsync);
        let (s, _) = store.open_or_create("shared").await.unwrap();
        s.append(&TurnStartData { turn: 1 }, None).unwrap();
        s.flush().await.unwrap();
        println!("\nholder-open");
        // Hold the session until the parent closes our stdin (or kills us).
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        drop(s);
    });
}

#[tokio::test]
async fn two_stores_in_one_process_cannot_both_write_a_session() {
    let dir = temp_dir("lock-local");
    let one = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let two = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let s = one.create("s", None, None).await.unwrap();
    complete_turn(&s, 1, vec![]);
    s.flush().await.unwrap();

    let err = two.open("s").await.unwrap_err();
    let me = std::process::id();
    assert!(
        matches!(&err, SessionError::SessionLocked { id, pid } if id == "s" && *pid == Some(me)),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("session s is open in process {me}")
    );
    let err = two.create("s", None, None).await.unwrap_err();
    assert!(matches!(err, SessionError::SessionLocked { .. }), "{err:?}");
    // The owning store still shares its live session.
    let (same, _) = one.open("s").await.unwrap();
    assert_eq!(same.len(), s.len());

    // Once every handle is gone the lock is released (after the queued lines are written).
    let n = s.len();
    drop((s, same));
    let (again, report) = two.open("s").await.unwrap();
    assert_eq!(report, OpenReport::default());
    assert_eq!(again.len(), n);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn appends_of_a_session_dropped_in_flight_are_written_before_the_next_writer_reads() {
    let dir = temp_dir("lock-drop");
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    for round in 1..=20u64 {
        let (s, _) = store.open_or_create("d").await.unwrap();
        complete_turn(&s, round, vec![]);
        let n = s.len();
        drop(s); // no flush: the writer thread still holds the lock and the queue
        let other = SessionStore::new(Some(dir.clone()), Durability::Fsync);
        let (s, report) = other.open("d").await.unwrap();
        assert_eq!(report, OpenReport::default(), "round {round}");
        assert_eq!(s.len(), n, "round {round}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_second_process_is_refused_with_the_holders_pid_and_a_dead_holder_blocks_nobody() {
    let dir = temp_dir("lock-process");
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(&exe)
        .args([
            "--exact",
            "lock::holder_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV_DIR, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.trim() == "holder-open" {
                let _ = tx.send(());
            }
        }
    });
    // Guards only against a hang: the child prints `holder-open` once it holds the session.
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the holder never opened the session");
    let rt = rt();
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let err = rt.block_on(store.open("shared")).unwrap_err();
    let pid = child.id();
    assert!(
        matches!(&err, SessionError::SessionLocked { pid: Some(p), .. } if *p == pid),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("session shared is open in process {pid}")
    );

    // kill -9: the advisory lock dies with the process; its pid stays in the lock file.
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    let stale = std::fs::read_to_string(dir.join("shared.lock")).unwrap();
    assert_eq!(stale.trim(), pid.to_string(), "the stale pid file is left");
    let (s, _) = rt.block_on(store.open("shared")).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("shared.lock"))
            .unwrap()
            .trim(),
        std::process::id().to_string()
    );
    assert!(!s.is_empty());
    drop(s);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_stale_lock_file_naming_a_live_pid_does_not_block() {
    let dir = temp_dir("lock-stale");
    // A pid that is certainly alive (ours) but holds no lock: only the flock counts.
    std::fs::write(dir.join("st.lock"), std::process::id().to_string()).unwrap();
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let s = store.create("st", None, None).await.unwrap();
    drop(s);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_or_fifo_planted_at_the_lock_path_is_refused_and_its_target_untouched() {
    let dir = temp_dir("lock-attack");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("ln.lock")).unwrap();
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let err = store.create("ln", None, None).await.unwrap_err();
    assert!(matches!(err, SessionError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("ln.lock"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!dir.join("ln.jsonl").exists());

    let fifo = dir.join("ff.lock");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        // Guards only against a hang: opening a FIFO must not block.
        let opened = tokio::time::timeout(Duration::from_secs(30), store.create("ff", None, None))
            .await
            .expect("opening a FIFO lock path hung");
        assert!(matches!(opened, Err(SessionError::Io { .. })), "{opened:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
