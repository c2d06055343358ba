//! Foreign calls on threads the host can abandon.
//!
//! # Why not `spawn_blocking`
//! A tokio runtime's shutdown waits for every blocking task it started, so a plugin call that
//! never returns (a `create` stuck in a loop, a tool waiting on a socket) would keep the whole
//! process alive after its timeout fired. Calls into a plugin therefore run on plain, detached
//! threads of a small pool here; the caller awaits a oneshot ([`Foreign`]). Dropping that future
//! (a timeout, a disposed scope, a runtime shut down) abandons the call: its thread keeps running
//! the plugin until it returns and then goes back to the pool, and nothing waits for it — not
//! the runtime, not process exit.
//!
//! # Observability
//! [`stats`] counts running jobs, idle threads, and abandoned calls (in total, and those still
//! stuck in the plugin), so tests and introspection can see a hung plugin.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::oneshot;

/// How long an idle pool thread waits for work before it exits.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

/// Idle threads, each waiting on its own channel; the id lets a thread that times out remove
/// itself.
static IDLE: Mutex<Vec<(u64, mpsc::Sender<Job>)>> = Mutex::new(Vec::new());
static NEXT_WORKER: AtomicU64 = AtomicU64::new(0);
static RUNNING: AtomicUsize = AtomicUsize::new(0);
static THREADS: AtomicUsize = AtomicUsize::new(0);
static ABANDONED: AtomicU64 = AtomicU64::new(0);
static STUCK: AtomicUsize = AtomicUsize::new(0);

/// A snapshot of the foreign-call threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ForeignStats {
    /// Jobs running now (in a plugin, or destroying an instance).
    pub running: usize,
    /// Pool threads alive (running a job or idle).
    pub threads: usize,
    /// Calls whose caller stopped waiting before the plugin returned, since the process started.
    pub abandoned: u64,
    /// Abandoned calls whose plugin has still not returned.
    pub stuck: usize,
}

/// The current counts.
pub fn stats() -> ForeignStats {
    ForeignStats {
        running: RUNNING.load(Ordering::SeqCst),
        threads: THREADS.load(Ordering::SeqCst),
        abandoned: ABANDONED.load(Ordering::SeqCst),
        stuck: STUCK.load(Ordering::SeqCst),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hands `job` to an idle thread, or starts one.
fn submit(mut job: Job) {
    loop {
        let Some((_, tx)) = lock(&IDLE).pop() else {
            break;
        };
        match tx.send(job) {
            Ok(()) => return,
            // That thread is gone (it cannot be: a thread removes itself before it exits, but a
            // lost job would be worse than a retry).
            Err(mpsc::SendError(back)) => job = back,
        }
    }
    THREADS.fetch_add(1, Ordering::SeqCst);
    let spawned = std::thread::Builder::new()
        .name("cordis-foreign".to_owned())
        .spawn(move || worker(job));
    if let Err(e) = spawned {
        THREADS.fetch_sub(1, Ordering::SeqCst);
        // The job (and its oneshot sender) is dropped: the caller sees `Lost`.
        tracing::error!("cannot start a thread for a plugin call: {e}");
    }
}

fn run(job: Job) {
    RUNNING.fetch_add(1, Ordering::SeqCst);
    // A job never unwinds out (`Foreign` catches), but a pool thread must survive anything.
    let _ = catch_unwind(AssertUnwindSafe(job));
    RUNNING.fetch_sub(1, Ordering::SeqCst);
}

fn worker(first: Job) {
    run(first);
    loop {
        let id = NEXT_WORKER.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel::<Job>();
        lock(&IDLE).push((id, tx));
        match rx.recv_timeout(KEEP_ALIVE) {
            Ok(job) => run(job),
            Err(_) => {
                let mut idle = lock(&IDLE);
                if let Some(i) = idle.iter().position(|(w, _)| *w == id) {
                    idle.swap_remove(i);
                    drop(idle);
                    THREADS.fetch_sub(1, Ordering::SeqCst);
                    return;
                }
                drop(idle);
                // A submitter took our sender just now and is sending: take that job.
                match rx.recv() {
                    Ok(job) => run(job),
                    Err(_) => {
                        THREADS.fetch_sub(1, Ordering::SeqCst);
                        return;
                    }
                }
            }
        }
    }
}

const RUNNING_STATE: u8 = 0;
const DONE_STATE: u8 = 1;
const ABANDONED_STATE: u8 = 2;

/// The job panicked or its thread could not start: no result will come.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the plugin call was lost: {0}")]
pub struct Lost(pub String);

/// The result of a foreign call; dropping it before it resolves abandons the call.
///
/// # Cancel safety
/// Cancel safe in the sense that matters here: dropping it never blocks and never leaks the
/// result's destructor into the caller; the result (if it ever comes) is dropped on the pool
/// thread.
#[must_use = "a foreign call is abandoned when its future is dropped"]
pub struct Foreign<T> {
    rx: oneshot::Receiver<std::thread::Result<T>>,
    state: Arc<AtomicU8>,
}

/// Runs `f` on a pool thread and returns a future of its result; a panic in `f` is the
/// `Err` of the inner [`std::thread::Result`] (so callers can resume it where they want).
pub fn spawn<T, F>(f: F) -> Foreign<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let state = Arc::new(AtomicU8::new(RUNNING_STATE));
    let job_state = state.clone();
    submit(Box::new(move || {
        let result = catch_unwind(AssertUnwindSafe(f));
        if job_state.swap(DONE_STATE, Ordering::SeqCst) == ABANDONED_STATE {
            STUCK.fetch_sub(1, Ordering::SeqCst);
        }
        // Nobody waiting: the result (e.g. an instance) is dropped here, on this thread.
        let _ = tx.send(result);
    }));
    Foreign { rx, state }
}

/// Runs `f` on a pool thread with nobody waiting (e.g. destroying an instance, which may wait
/// for a hung call to return).
pub fn detach<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    submit(Box::new(f));
}

impl<T> Future for Foreign<T> {
    type Output = Result<std::thread::Result<T>, Lost>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.map_err(|_| Lost("its thread ended without an answer".to_owned())))
    }
}

impl<T> Drop for Foreign<T> {
    fn drop(&mut self) {
        if self
            .state
            .compare_exchange(
                RUNNING_STATE,
                ABANDONED_STATE,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
        {
            ABANDONED.fetch_add(1, Ordering::SeqCst);
            STUCK.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_call_is_counted_abandoned_and_its_thread_serves_again_once_it_returns() {
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let before = stats();
        let call = spawn(move || release_rx.recv().is_ok());
        drop(call);
        let during = stats();
        assert!(during.abandoned > before.abandoned, "{during:?}");
        assert!(during.stuck >= 1, "{during:?}");
        release_tx.send(()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let answer = rt.block_on(spawn(|| 41 + 1)).unwrap().unwrap();
        assert_eq!(answer, 42);
    }

    #[test]
    fn a_panicking_job_is_an_error_value_and_the_pool_survives() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let r = rt.block_on(spawn(|| -> u8 { panic!("boom") })).unwrap();
        assert!(r.is_err());
        assert_eq!(rt.block_on(spawn(|| 7)).unwrap().unwrap(), 7);
    }

    #[test]
    fn dropping_a_runtime_does_not_wait_for_a_hung_call() {
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let hung = spawn(|| std::thread::sleep(Duration::from_secs(3600)));
                let _ = tokio::time::timeout(Duration::from_millis(10), hung).await;
            });
            drop(rt);
            done_tx.send(()).unwrap();
        });
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the runtime was dropped");
    }
}
