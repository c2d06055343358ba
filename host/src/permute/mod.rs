//! Permutation proofs: boot a plan once per order of its entries and prove that every order
//! yields the same outcome — the request digest, every entry's status and reason, and the
//! incidents.
//!
//! Under the `fifo` schedule on a current-thread runtime an entry's apply (and so what it
//! registers) follows its start order, so starting the entries in another order *is* booting the
//! cordis.yml written in that order.
//!
//! # Which orders
//! [`prove`] permutes every plugin entry and explores one order per class of orders that can
//! differ (partial-order reduction): two entries *interact* when their footprints meet (see
//! [`Footprint`]): a name both claim; a plugin that has not said what it claims (so it may read
//! what is registered when it applies) and an entry registering names of that kind; or a
//! service one injects optionally and the other provides. Entries that do not interact commute —
//! a name two entries claim is contested whoever came first, the runtime orders listeners
//! canonically, the registry and the assembly sort, and a required service is waited for — so
//! two orders that agree on the relative order of every interacting pair boot the same. One order of each class (its lexicographically least, see
//! [`normal_forms`]) stands for all of it. Events are the one thing a footprint cannot state:
//! an event dispatched during an apply reaches only the listeners registered so far, and which
//! events a plugin uses it decides at run time. So each boot reports what every entry listened
//! to and dispatched while applying, and [`prove_with`] adds each pair meeting through an event
//! and boots the classes that adds, until the boots show no new pair. That commutation is itself a claim, so the suite checks
//! it against brute force ([`permute`], every order of the chosen entries) on small
//! compositions.
//!
//! # Determinism
//! Orders are enumerated in lexicographic order; above `max`, `max` seeded shuffles are drawn
//! from the permutation seed, so a run replays exactly. Each distinct outcome is reported with
//! the first order (in that enumeration) that produced it.
//!
//! # Modules
//! - `footprint`: what an entry may touch ([`Footprint`]) and which entries are permuted;
//! - `orders`: the orders of a run (permutations, shuffles, [`normal_forms`]);
//! - `outcome`: one boot of an order ([`boot`]) and what it shows ([`OrderOutcome`]);
//! - `space`: the permuted elements and their interacting pairs ([`Space`]);
//! - `driver`: boots orders on worker threads and reports ([`PermuteReport`]);
//! - `proof`: [`prove`], [`prove_with`], [`permute`], [`permute_with`].

mod driver;
mod footprint;
mod orders;
mod outcome;
mod proof;
mod space;
#[cfg(test)]
mod tests;

pub use driver::PermuteReport;
pub use footprint::{Footprint, OPEN_KINDS, plugin_entries, tool_entries};
pub use orders::{Orders, ProofOrders, factorial, normal_forms, order_of, start_order};
pub use outcome::{OrderOutcome, boot, event_footprints};
pub use proof::{BootOne, ProofOptions, permute, permute_with, prove, prove_with};
pub use space::Space;
