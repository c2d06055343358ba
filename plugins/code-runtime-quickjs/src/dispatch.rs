//! The host's side of sub-calls: starts them in submission order within the concurrency rules,
//! and commits them one at a time in submission order.

use std::collections::{BTreeMap, VecDeque};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::Value as Json;

use cordis_code_runtime::{
    BoxFuture, Concurrency, Executed, RunOver, SubCall, ToolBindings, ToolCallError,
};

/// A call whose execution ended: its class and what `call` returned.
type Finished = (Concurrency, Executed);

/// A committed call, ready for the program.
pub(crate) struct Settled {
    pub(crate) seq: u64,
    pub(crate) name: String,
    pub(crate) result: Result<Json, ToolCallError>,
}

struct Queued {
    seq: u64,
    name: String,
    arguments: Json,
}

/// Submission-order scheduling. Read-only calls execute side by side up to `max_parallel`; a
/// mutating call starts once everything before it is committed and holds a barrier until its
/// own commit has ended. Commits run one at a time, in submission order.
///
/// # Determinism
/// Every decision to start a call or a commit is made on a submission or at the end of a
/// commit, never when an execution happens to finish: a parallel slot is free again when its
/// call is committed, and a commit waits until the program has taken in the previous result
/// and run until it waits again ([`Dispatch::hold`], [`Dispatch::release`]). So the sequence of
/// starts and commits (what the bindings log, in that order) depends on the program and the
/// results, not on which tool was faster.
pub(crate) struct Dispatch<'a> {
    bindings: &'a dyn ToolBindings,
    max_parallel: usize,
    run_over: RunOver,
    queue: VecDeque<Queued>,
    barrier: bool,
    /// No call starts any more: the run has settled.
    closed: bool,
    /// No commit starts: the program has a result it has not finished taking in.
    held: bool,
    /// Calls started and not yet committed (what the parallel limit counts).
    open: usize,
    /// Executions in flight; polled by the run's own future, never spawned, so dropping the run
    /// drops them.
    in_flight: FuturesUnordered<BoxFuture<'a, Finished>>,
    /// Executions that ended, waiting for every earlier call's commit.
    finished: BTreeMap<u64, Finished>,
    next_commit: u64,
    committing: Option<BoxFuture<'a, (Concurrency, Settled)>>,
}

impl<'a> Dispatch<'a> {
    pub(crate) fn new(
        bindings: &'a dyn ToolBindings,
        max_parallel: usize,
        run_over: RunOver,
    ) -> Self {
        Self {
            bindings,
            max_parallel,
            run_over,
            queue: VecDeque::new(),
            barrier: false,
            closed: false,
            held: false,
            open: 0,
            in_flight: FuturesUnordered::new(),
            finished: BTreeMap::new(),
            next_commit: 1,
            committing: None,
        }
    }

    /// Queues a call (sequence numbers arrive as 1, 2, …) and starts whatever may start.
    pub(crate) fn submit(&mut self, seq: u64, name: String, arguments: Json) {
        self.queue.push_back(Queued {
            seq,
            name,
            arguments,
        });
        self.start_ready();
    }

    /// Starts no more calls; queued ones are abandoned, started ones may still commit.
    pub(crate) fn close(&mut self) {
        self.closed = true;
        self.held = false;
        self.queue.clear();
    }

    /// Starts no commit until [`Dispatch::release`]: the program is taking in a result (and may
    /// submit calls that must start before the next commit).
    pub(crate) fn hold(&mut self) {
        self.held = true;
    }

    /// The program waits again: commits may go on.
    pub(crate) fn release(&mut self) {
        self.held = false;
    }

    /// Whether a started call has not been committed yet (and still can be).
    pub(crate) fn busy(&self) -> bool {
        !self.in_flight.is_empty()
            || self.committing.is_some()
            || self.finished.contains_key(&self.next_commit)
    }

    /// Drives executions and commits until the next commit ends; pending forever when nothing
    /// is under way.
    ///
    /// # Cancel safety
    /// Cancel safe: all progress is kept in `self`, so a dropped call loses nothing.
    pub(crate) async fn next_settled(&mut self) -> Settled {
        loop {
            self.start_commit();
            let commit = async {
                match &mut self.committing {
                    Some(commit) => commit.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                (class, settled) = commit => {
                    self.committing = None;
                    self.next_commit += 1;
                    self.open -= 1;
                    if class == Concurrency::Mutating {
                        self.barrier = false;
                    }
                    self.start_ready();
                    return settled;
                }
                Some((class, executed)) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    // Nothing starts here: a finish frees no slot (see the type's docs).
                    self.finished.insert(executed.seq, (class, executed));
                }
            }
        }
    }

    fn start_commit(&mut self) {
        if self.committing.is_some() || self.held {
            return;
        }
        let Some((class, executed)) = self.finished.remove(&self.next_commit) else {
            return;
        };
        let bindings = self.bindings;
        self.committing = Some(Box::pin(async move {
            let (seq, name) = (executed.seq, executed.name.clone());
            let result = bindings.commit(executed).await;
            (class, Settled { seq, name, result })
        }));
    }

    /// Starts queued calls strictly in order while the head may start; the class is read right
    /// before a call starts.
    fn start_ready(&mut self) {
        while !self.closed {
            let Some(head) = self.queue.front() else {
                break;
            };
            let class = self.bindings.concurrency(&head.name);
            let may_start = !self.barrier
                && match class {
                    Concurrency::ReadOnly => self.open < self.max_parallel,
                    Concurrency::Mutating => {
                        self.in_flight.is_empty() && self.next_commit == head.seq
                    }
                };
            if !may_start {
                break;
            }
            let Some(Queued {
                seq,
                name,
                arguments,
            }) = self.queue.pop_front()
            else {
                break;
            };
            self.barrier = class == Concurrency::Mutating;
            self.open += 1;
            let call = SubCall {
                seq,
                name: name.clone(),
                arguments,
                run_over: self.run_over.clone(),
            };
            let future = self.bindings.call(call);
            self.in_flight.push(Box::pin(async move {
                (
                    class,
                    Executed {
                        seq,
                        name,
                        result: future.await,
                    },
                )
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    /// Records starts and commits; `w*` tools are mutating.
    #[derive(Default)]
    struct Recorder {
        events: Mutex<Vec<String>>,
        /// Earlier calls finish first (the default is the reverse).
        in_order: bool,
    }

    impl ToolBindings for Recorder {
        fn names(&self) -> Vec<String> {
            Vec::new()
        }
        fn concurrency(&self, name: &str) -> Concurrency {
            if name.starts_with('w') {
                Concurrency::Mutating
            } else {
                Concurrency::ReadOnly
            }
        }
        fn call(&self, call: SubCall) -> BoxFuture<'_, Result<Json, ToolCallError>> {
            self.events
                .lock()
                .unwrap()
                .push(format!("start {}", call.name));
            // Later calls finish first: each yields fewer times than the one before it.
            let yields = if self.in_order {
                call.seq
            } else {
                10 - call.seq
            };
            Box::pin(async move {
                for _ in 0..yields {
                    tokio::task::yield_now().await;
                }
                Ok(json!(call.seq))
            })
        }
        fn commit(&self, executed: Executed) -> BoxFuture<'_, Result<Json, ToolCallError>> {
            self.events
                .lock()
                .unwrap()
                .push(format!("commit {}", executed.name));
            Box::pin(std::future::ready(executed.result))
        }
    }

    #[tokio::test]
    async fn calls_start_in_order_within_the_limits_and_commit_in_order() {
        let recorder = Recorder::default();
        let (_tx, over) = RunOver::channel();
        let mut dispatch = Dispatch::new(&recorder, 2, over);
        for (seq, name) in ["r1", "r2", "r3", "w4", "r5"].into_iter().enumerate() {
            dispatch.submit(seq as u64 + 1, name.into(), json!({}));
        }
        // The parallel limit holds r3 back; nothing else may start yet.
        assert_eq!(*recorder.events.lock().unwrap(), ["start r1", "start r2"]);
        let mut settled = Vec::new();
        while dispatch.busy() {
            settled.push(dispatch.next_settled().await.seq);
        }
        assert_eq!(settled, [1, 2, 3, 4, 5]);
        let events = recorder.events.lock().unwrap().clone();
        let position = |event: &str| events.iter().position(|e| e == event).unwrap();
        // w4 starts only after r1..r3 are committed; r5 only after w4's commit.
        assert!(position("start w4") > position("commit r3"), "{events:?}");
        assert!(position("start r5") > position("commit w4"), "{events:?}");
        let commits: Vec<_> = events.iter().filter(|e| e.starts_with("commit")).collect();
        assert_eq!(
            commits,
            [
                "commit r1",
                "commit r2",
                "commit r3",
                "commit w4",
                "commit r5"
            ]
        );
    }

    #[tokio::test]
    async fn the_sequence_of_starts_and_commits_is_the_same_whichever_call_finishes_first() {
        let mut seen = Vec::new();
        for in_order in [false, true] {
            let recorder = Recorder {
                in_order,
                ..Recorder::default()
            };
            let (_tx, over) = RunOver::channel();
            let mut dispatch = Dispatch::new(&recorder, 2, over);
            for (seq, name) in ["r1", "r2", "r3", "r4", "w5", "r6"].into_iter().enumerate() {
                dispatch.submit(seq as u64 + 1, name.into(), json!({}));
            }
            while dispatch.busy() {
                dispatch.next_settled().await;
            }
            seen.push(recorder.events.lock().unwrap().clone());
        }
        // A slot frees when its call commits: r3 starts after r1's commit even when r2 was done
        // first (it used to start the moment any call finished).
        assert_eq!(seen[0], seen[1]);
        assert_eq!(
            seen[0][..5],
            ["start r1", "start r2", "commit r1", "start r3", "commit r2"]
        );
    }

    #[tokio::test]
    async fn a_held_dispatch_commits_nothing_until_released() {
        let recorder = Recorder::default();
        let (_tx, over) = RunOver::channel();
        let mut dispatch = Dispatch::new(&recorder, 4, over);
        dispatch.hold();
        dispatch.submit(1, "r1".into(), json!({}));
        let waited = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            dispatch.next_settled(),
        )
        .await;
        assert!(waited.is_err(), "a held dispatch committed");
        assert_eq!(*recorder.events.lock().unwrap(), ["start r1"]);
        dispatch.release();
        assert_eq!(dispatch.next_settled().await.seq, 1);
    }

    #[tokio::test]
    async fn a_closed_dispatch_starts_nothing_more() {
        let recorder = Recorder::default();
        let (_tx, over) = RunOver::channel();
        let mut dispatch = Dispatch::new(&recorder, 1, over);
        dispatch.submit(1, "r1".into(), json!({}));
        dispatch.submit(2, "r2".into(), json!({}));
        dispatch.close();
        while dispatch.busy() {
            dispatch.next_settled().await;
        }
        assert_eq!(*recorder.events.lock().unwrap(), ["start r1", "commit r1"]);
    }
}
