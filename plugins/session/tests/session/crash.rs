//! Kill the writer mid-append (SIGKILL at random points) and reopen: no durable event lost,
//! the torn tail repaired, the reopened log valid.
//!
//! The test re-executes its own binary with `CORDIS_SESSION_APPENDER` set, which turns
//! `appender_child` into an appender that prints `durable <seq>` after every flush.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use cordis_session::*;

const ENV_DIR: &str = "CORDIS_SESSION_APPENDER";
const ENV_ID: &str = "CORDIS_SESSION_APPENDER_ID";
const RUNS: u64 = 100;

#[test]
fn appender_child() {
    let (Ok(dir), Ok(id)) = (std::env::var(ENV_DIR), std::env::var(ENV_ID)) else {
        return; // not the child
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let store = SessionStore::new(Some(dir.into()), Durability::Fsync);
        let (s, _) = store.open_or_create(&id).await.unwrap();
        let padding = "x".repeat(3000);
        let mut out = std::io::stdout().lock();
        for turn in 1.. {
            s.append(&TurnStartData { turn }, None).unwrap();
            s.append(
                &UserMessageData {
                    turn,
                    content: format!("{turn} {padding}"),
                    prompt: None,
                },
                None,
            )
            .unwrap();
            s.append(&StepStartData { turn, step: 1 }, None).unwrap();
            s.flush().await.unwrap();
            writeln!(out, "durable {}", s.len() - 1).unwrap();
            out.flush().unwrap();
            s.append(&StepEndData { turn, step: 1 }, None).unwrap();
            s.append(
                &TurnEndData {
                    turn,
                    reason: TurnEndReason::Completed,
                },
                None,
            )
            .unwrap();
            s.flush().await.unwrap();
            writeln!(out, "durable {}", s.len() - 1).unwrap();
            out.flush().unwrap();
        }
    });
}

/// A tiny deterministic generator (xorshift), so failures replay.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn a_writer_killed_at_random_points_loses_no_durable_event() {
    let dir = std::env::temp_dir().join(format!("cordis-session-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = SessionStore::new(Some(dir.clone()), Durability::Fsync);
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
    let (mut torn, mut repaired, mut durable_total) = (0, 0, 0);
    for run in 0..RUNS {
        let id = format!("run-{run}");
        let wait = Duration::from_millis(5 + next(&mut rng) % 40);
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash::appender_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV_DIR, &dir)
            .env(ENV_ID, &id)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut max = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(seq) = line.strip_prefix("durable ") {
                    max = Some(seq.trim().parse::<u64>().unwrap());
                }
            }
            max
        });
        std::thread::sleep(wait);
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        let durable = reader.join().unwrap();
        let opened = rt.block_on(store.open(&id));
        let (session, report) = match opened {
            Err(SessionError::NotFound { .. }) => {
                assert!(
                    durable.is_none(),
                    "run {run}: durable {durable:?} but no file"
                );
                continue;
            }
            other => other.unwrap_or_else(|e| panic!("run {run} (wait {wait:?}): {e}")),
        };
        if let Some(max) = durable {
            durable_total += 1;
            assert!(
                session.len() as u64 > max,
                "run {run}: durable seq {max} lost ({} events)",
                session.len()
            );
        }
        torn += u64::from(report.truncated_bytes.is_some());
        repaired += u64::from(!report.repaired.is_empty());
        assert!(
            open_turn(&session.events()).unwrap().is_none(),
            "run {run}: turn left open"
        );
        drop(session);
        let (again, second) = rt.block_on(store.open(&id)).unwrap();
        assert_eq!(
            second,
            OpenReport::default(),
            "run {run}: the repair did not stick"
        );
        let events = again.events();
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e.seq, i as u64);
        }
        assert_eq!(derive_messages(&events).unwrap(), again.messages());
    }
    eprintln!(
        "{RUNS} kills: {durable_total} with durable events, {torn} torn tails truncated, {repaired} open turns closed"
    );
    assert!(
        durable_total > RUNS / 2,
        "most runs should get events on disk before the kill"
    );
    let _ = std::fs::remove_dir_all(dir);
}
