//! Session append throughput: in memory, to a file without sync, and with group-commit fsync.

use cordis_session::{Durability, Session, SessionStore, UserMessageData};
use tokio::runtime::Runtime;

fn main() {
    divan::main();
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn message(i: u64) -> UserMessageData {
    UserMessageData {
        turn: i,
        content: "a short user message of about sixty bytes, typical enough".into(),
        prompt: None,
    }
}

fn file_session(rt: &Runtime, durability: Durability, name: &str) -> (Session, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "cordis-session-bench-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let store = SessionStore::new(Some(dir.clone()), durability);
    (rt.block_on(store.create("bench", None, None)).unwrap(), dir)
}

/// 100 appends to an in-memory session.
#[divan::bench]
fn memory_100(bencher: divan::Bencher) {
    bencher
        .with_inputs(|| Session::in_memory("m"))
        .bench_local_values(|s| {
            for i in 0..100 {
                s.append(&message(i), None).unwrap();
            }
            s
        });
}

/// 100 appends then one flush, file without fsync (writer thread, one write per batch).
#[divan::bench(sample_count = 50)]
fn file_no_sync_100_then_flush(bencher: divan::Bencher) {
    let rt = runtime();
    let (s, dir) = file_session(&rt, Durability::None, "nosync");
    bencher.bench_local(|| {
        for i in 0..100 {
            s.append(&message(i), None).unwrap();
        }
        rt.block_on(s.flush()).unwrap();
    });
    let _ = std::fs::remove_dir_all(dir);
}

/// 100 appends then one flush with fsync: group commit.
#[divan::bench(sample_count = 20)]
fn file_fsync_100_then_flush(bencher: divan::Bencher) {
    let rt = runtime();
    let (s, dir) = file_session(&rt, Durability::Fsync, "fsync100");
    bencher.bench_local(|| {
        for i in 0..100 {
            s.append(&message(i), None).unwrap();
        }
        rt.block_on(s.flush()).unwrap();
    });
    let _ = std::fs::remove_dir_all(dir);
}

/// One append and its flush with fsync: the latency of a durable append.
#[divan::bench(sample_count = 20)]
fn file_fsync_1_then_flush(bencher: divan::Bencher) {
    let rt = runtime();
    let (s, dir) = file_session(&rt, Durability::Fsync, "fsync1");
    bencher.bench_local(|| {
        s.append(&message(0), None).unwrap();
        rt.block_on(s.flush()).unwrap();
    });
    let _ = std::fs::remove_dir_all(dir);
}
