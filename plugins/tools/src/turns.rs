//! Turns: places handed out in one order at decision time, and the async work of each place
//! let through in that order, however the work's futures happen to be polled.
//!
//! `run_code` takes a place when the scheduler decides to start a sub-call or finishes its
//! commit (both decisions follow a deterministic sequence), and announces the record in its
//! turn, so a listener sees (and the session logs) starts and settles in the scheduler's order.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The places of one sequence.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    state: Mutex<State>,
    advanced: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// The next place to hand out.
    issued: u64,
    /// The place whose turn it is.
    current: u64,
    /// Places after `current` already done (ended out of turn, e.g. dropped).
    done: BTreeSet<u64>,
}

impl Turns {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the next place. Its turn comes after every earlier place is done; a place is done
    /// when its [`Turn`] is dropped, so an abandoned place holds up nobody.
    pub(crate) fn take(self: &Arc<Self>) -> Turn {
        let mut state = self.state();
        let place = state.issued;
        state.issued += 1;
        Turn {
            turns: Arc::clone(self),
            place,
        }
    }

    fn finish(&self, place: u64) {
        let mut state = self.state();
        state.done.insert(place);
        loop {
            let current = state.current;
            if !state.done.remove(&current) {
                break;
            }
            state.current += 1;
        }
        drop(state);
        self.advanced.notify_waiters();
    }
}

/// One place in a [`Turns`] sequence.
#[derive(Debug)]
pub(crate) struct Turn {
    turns: Arc<Turns>,
    place: u64,
}

impl Turn {
    /// Resolves when every earlier place is done.
    ///
    /// # Cancel safety
    /// Cancel safe: the place stays taken until the `Turn` is dropped.
    pub(crate) async fn reached(&self) {
        loop {
            let advanced = self.turns.advanced.notified();
            tokio::pin!(advanced);
            advanced.as_mut().enable();
            if self.turns.state().current >= self.place {
                return;
            }
            advanced.await;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.turns.finish(self.place);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_goes_through_in_place_order_whatever_order_it_arrives_in() {
        let turns = Arc::new(Turns::default());
        let places: Vec<Turn> = (0..4).map(|_| turns.take()).collect();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Places 3, 2, 1, 0 ask first; they are let through 0, 1, 2, 3.
        for (i, turn) in places.into_iter().enumerate().rev() {
            let seen = seen.clone();
            tasks.push(tokio::spawn(async move {
                turn.reached().await;
                seen.lock().unwrap().push(i);
                tokio::task::yield_now().await;
                drop(turn);
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*seen.lock().unwrap(), [0, 1, 2, 3]);
    }

    #[tokio::test]
    async fn a_dropped_place_holds_up_nobody() {
        let turns = Arc::new(Turns::default());
        let first = turns.take();
        let second = turns.take();
        let third = turns.take();
        drop(second);
        drop(first);
        // Both earlier places are done: the third's turn has come.
        third.reached().await;
        assert_eq!(turns.state().current, 2);
    }
}
