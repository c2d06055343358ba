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
//! [`Footprint`]): a name both claim, or a service one injects optionally and the other
//! provides. Entries that do not interact commute —
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
//! # Entries that state nothing
//! A plugin that has not said what it claims ([`cordis_runtime::Plugin::open_claims`] `None`:
//! *silent*) may read, while applying, what others registered. Guessing that it reads every
//! name of the kinds whose registry it injects orders it against every registrant, and k such
//! entries multiply the classes past any budget. Instead each boot observes what every entry
//! did with names ([`cordis_runtime::NameFootprint`]: the names it claimed, the tools and
//! services it looked up, the registries it listed), a silent entry starts out interacting
//! with nothing it does not state, and [`prove_with`] adds each pair the boots show meeting
//! (one wrote what the other wrote, looked up or listed) and boots the new classes, the same
//! fixpoint as for events: dynamic partial-order reduction (Flanagan and Godefroid, POPL
//! 2005). It is exact when every read that can change what an entry does is observed, so
//! what cannot be is guessed instead ([`Footprint::interacts_observed`]): a silent entry is
//! ordered against every entry injecting a service it injects whose use is not observed (all
//! but [`OBSERVED_SERVICES`]). Not observed at all: reads from a task spawned with bare
//! `tokio::spawn` rather than [`cordis_runtime::Context::spawn`], and a plugin inspecting the
//! runtime itself (`scopes()`); such a plugin must state its claims. A boot that does not
//! observe (the `--preset` proof's joined boot) uses the guess ([`Space::unseen`]).
//!
//! # Determinism
//! Orders are enumerated in lexicographic order; above `max`, `max` seeded shuffles are drawn
//! from the permutation seed, so a run replays exactly. Each distinct outcome is reported with
//! the first order (in that enumeration) that produced it.
//!
//! # Modules
//! - `footprint`: what an entry may touch ([`Footprint`]), what it was seen to touch, and which
//!   entries are permuted;
//! - `orders`: the orders of a run (permutations, shuffles, [`normal_forms`]);
//! - `outcome`: one boot of an order ([`boot`]) and what it shows ([`OrderOutcome`]);
//! - `space`: the permuted elements and their interacting pairs ([`Space`]);
//! - `driver`: boots orders on worker threads and reports ([`PermuteReport`]);
//! - `proof`: [`prove`], [`prove_with`], [`permute`], [`permute_with`].

#[cfg(test)]
mod dpor_tests;
mod driver;
mod footprint;
mod orders;
mod outcome;
mod proof;
mod space;
#[cfg(test)]
mod tests;

pub use driver::PermuteReport;
pub use footprint::{Footprint, OBSERVED_SERVICES, OPEN_KINDS, plugin_entries, tool_entries};
pub use orders::{Orders, ProofOrders, factorial, normal_forms, order_of, start_order};
pub use outcome::{OrderOutcome, boot, event_footprints, name_footprints};
pub use proof::{BootOne, ProofOptions, permute, permute_with, prove, prove_with};
pub use space::Space;
