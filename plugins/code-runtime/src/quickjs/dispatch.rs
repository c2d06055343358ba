//! The host's side of sub-calls: starts them in submission order within the concurrency rules.

use std::collections::VecDeque;

use futures_util::stream::FuturesUnordered;
use serde_json::Value as Json;

use crate::{BoxFuture, Concurrency, RunOver, ToolBindings, ToolCall, ToolCallError};

/// A finished sub-call: its sequence number, name, class and result.
pub(crate) type Finished = (u64, String, Concurrency, Result<Json, ToolCallError>);

struct Queued {
    seq: u64,
    name: String,
    arguments: Json,
}

/// Submission-order scheduling: read-only calls overlap up to `max_parallel`; a mutating call
/// waits for everything before it, then runs alone.
pub(crate) struct Dispatch<'a> {
    bindings: &'a dyn ToolBindings,
    max_parallel: usize,
    run_over: RunOver,
    queue: VecDeque<Queued>,
    running: usize,
    exclusive: bool,
    /// Calls in flight; polled by the run's own future, never spawned, so dropping the run
    /// drops them.
    pub(crate) in_flight: FuturesUnordered<BoxFuture<'a, Finished>>,
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
            running: 0,
            exclusive: false,
            in_flight: FuturesUnordered::new(),
        }
    }

    /// Queues a call and starts whatever may start.
    pub(crate) fn submit(&mut self, seq: u64, name: String, arguments: Json) {
        self.queue.push_back(Queued {
            seq,
            name,
            arguments,
        });
        self.start_ready();
    }

    /// Records a finished call and starts whatever may start now.
    pub(crate) fn finished(&mut self, class: Concurrency) {
        self.running -= 1;
        if class == Concurrency::Mutating {
            self.exclusive = false;
        }
        self.start_ready();
    }

    /// Starts queued calls strictly in order while the head may start; the class is read right
    /// before a call starts.
    fn start_ready(&mut self) {
        while let Some(head) = self.queue.front() {
            let class = self.bindings.concurrency(&head.name);
            let may_start = match class {
                Concurrency::ReadOnly => !self.exclusive && self.running < self.max_parallel,
                Concurrency::Mutating => self.running == 0,
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
            self.running += 1;
            self.exclusive = class == Concurrency::Mutating;
            let call = ToolCall {
                seq,
                name: name.clone(),
                arguments,
                run_over: self.run_over.clone(),
            };
            let future = self.bindings.call(call);
            self.in_flight
                .push(Box::pin(async move { (seq, name, class, future.await) }));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures_util::StreamExt;
    use serde_json::json;

    use super::*;

    /// Records start order; `w*` tools are mutating.
    struct Recorder(Mutex<Vec<String>>);

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
        fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<Json, ToolCallError>> {
            self.0.lock().unwrap().push(call.name);
            Box::pin(async { Ok(json!(null)) })
        }
    }

    #[tokio::test]
    async fn a_mutating_call_waits_for_earlier_reads_and_blocks_later_ones() {
        let recorder = Recorder(Mutex::new(Vec::new()));
        let (_tx, over) = RunOver::channel();
        let mut dispatch = Dispatch::new(&recorder, 2, over);
        for (seq, name) in ["r1", "r2", "r3", "w4", "r5"].into_iter().enumerate() {
            dispatch.submit(seq as u64 + 1, name.into(), json!({}));
        }
        // The parallel limit holds r3 back; nothing else may start yet.
        assert_eq!(*recorder.0.lock().unwrap(), ["r1", "r2"]);
        let mut order = Vec::new();
        while let Some((seq, _, class, _)) = dispatch.in_flight.next().await {
            order.push(seq);
            dispatch.finished(class);
        }
        assert_eq!(*recorder.0.lock().unwrap(), ["r1", "r2", "r3", "w4", "r5"]);
        assert_eq!(order.len(), 5);
    }
}
