//! Permutation proofs: boot a plan once per order of its tool-registering entries and prove that
//! every order yields the same request digest.
//!
//! Under the `fifo` schedule on a current-thread runtime an entry's apply (and so its tool
//! registrations) follows its position in the file, so reordering the entries in the plan *is*
//! reordering the registrations: each permutation is a full boot of a cordis.yml written in that
//! order. The report counts the distinct registration orders it observed, so a vacuous proof
//! (every order registering the same way) shows up as `registration_orders: 1`.
//!
//! A tool-registering entry is a plugin entry that requires the `tools` service.
//!
//! # Determinism
//! All n! orders are enumerated in lexicographic order; above `max`, `max` seeded shuffles are
//! drawn from the permutation seed, so a run replays exactly.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use cordis_runtime::{Context, Policy, Schedule, ScopeStatus, Service};

use crate::assembly::{HeaderBytes, header_bytes};
use crate::loader::start_entries_in_order;
use crate::plan::{LoadPlan, Step};

/// Indices (in the plan) of the entries whose registrations are permuted.
pub fn tool_entries(plan: &LoadPlan) -> Vec<usize> {
    plan.entries
        .iter()
        .enumerate()
        .filter(|(_, e)| match &e.step {
            Step::Plugin { prepared, .. } => prepared
                .plugin
                .inject()
                .iter()
                .any(|i| i.required && i.name == cordis_tools::ToolRegistry::NAME),
            _ => false,
        })
        .map(|(i, _)| i)
        .collect()
}

/// What a permutation run found.
#[derive(Debug, Clone)]
pub struct PermuteReport {
    /// Ids of the permuted entries, in file order.
    pub entries: Vec<String>,
    /// Orders booted.
    pub orders: u64,
    /// True when every order was booted (not a seeded sample).
    pub exhaustive: bool,
    /// Each distinct digest with the first order (entry ids) that produced it.
    pub digests: BTreeMap<String, Vec<String>>,
    /// How many distinct tool-registration orders the boots went through.
    pub registration_orders: usize,
    /// The first order in which an entry was not active or the assembly failed, with why.
    pub unhealthy: Option<(Vec<String>, String)>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// n! (saturating).
pub fn factorial(n: usize) -> u64 {
    (1..=n as u64).fold(1u64, |acc, k| acc.saturating_mul(k))
}

/// The `index`-th permutation of `0..n` in lexicographic order (factorial number system).
fn nth_permutation(n: usize, mut index: u64) -> Vec<usize> {
    let mut pool: Vec<usize> = (0..n).collect();
    let mut out = Vec::with_capacity(n);
    for k in (0..n).rev() {
        let f = factorial(k);
        let i = usize::try_from(index / f).unwrap_or(0).min(pool.len() - 1);
        index %= f;
        out.push(pool.remove(i));
    }
    out
}

/// A seeded uniform shuffle of `0..n` (Fisher–Yates), sample number `k` of `seed`.
fn sampled_permutation(n: usize, seed: u64, k: u64) -> Vec<usize> {
    let schedule = Schedule::new(Policy::Random, seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = schedule.draw("permute", i as u64 + 1) as usize;
        order.swap(i, j);
    }
    order
}

/// The order of sample `k`: lexicographic when exhaustive, else a seeded shuffle.
pub fn order_of(n: usize, exhaustive: bool, seed: u64, k: u64) -> Vec<usize> {
    if exhaustive {
        nth_permutation(n, k)
    } else {
        sampled_permutation(n, seed, k)
    }
}

struct Partial {
    /// Distinct header bytes with the first order that produced them; hashed once at the end.
    headers: HashMap<HeaderBytes, Vec<String>>,
    registrations: HashSet<Vec<String>>,
    unhealthy: Option<(u64, Vec<String>, String)>,
}

/// What one boot of a permutation shows: less than a full report, as much as the proof needs.
struct Outcome {
    header: HeaderBytes,
    registrations: Vec<String>,
    unhealthy: Option<String>,
}

/// Boots `plan` under the `fifo` schedule with its plugin entries started in `order` (plan
/// indices), and disposes it again.
async fn boot_outcome(plan: &LoadPlan, order: &[usize]) -> Outcome {
    let root = Context::root_with(Schedule::fifo());
    let mut handles = vec![None; plan.entries.len()];
    crate::loader::preload(&root, plan).await;
    start_entries_in_order(&root, plan, &mut handles, &mut order.iter().copied());
    root.idle().await;
    let bad: Vec<String> = plan
        .entries
        .iter()
        .zip(&handles)
        .filter_map(|(e, h)| {
            let h = h.as_ref()?;
            let status = h.status();
            (status != ScopeStatus::Active).then(|| match h.failure() {
                Some(failure) => format!("{} is {status}: {failure}", e.id),
                None => format!("{} is {status}", e.id),
            })
        })
        .collect();
    let header = header_bytes(&root).await;
    let unhealthy = match &header {
        HeaderBytes::Failed(message) => Some(message.clone()),
        _ if !bad.is_empty() => Some(bad.join(", ")),
        _ => None,
    };
    let registrations = root.trace_details(Schedule::TRACE_REGISTER);
    root.dispose();
    Outcome {
        header,
        registrations,
        unhealthy,
    }
}

/// The start order of plan indices that puts the entry at `positions[order[k]]` in the place of
/// `positions[k]`: the boot of the file with those entries written in that order.
fn start_order(n: usize, positions: &[usize], order: &[usize]) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..n).collect();
    for (k, &from) in order.iter().enumerate() {
        indices[positions[k]] = positions[from];
    }
    indices
}

/// What booting one order shows: the digest the proof compares, and why it was unhealthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderOutcome {
    /// The request digest of this order.
    pub digest: String,
    /// Why an entry was not active or the assembly failed, if so.
    pub unhealthy: Option<String>,
    /// The tool registrations in the order they happened (`who: tool`).
    pub registrations: Vec<String>,
}

/// Boots one order of the tool-registering entries (`order[k]` indexes [`tool_entries`]),
/// exactly as [`permute`] boots each of its orders, so a printed order replays what failed.
///
/// # Errors
/// Only if a tokio runtime cannot be built.
pub fn boot_order(plan: &LoadPlan, order: &[usize]) -> std::io::Result<OrderOutcome> {
    let positions = tool_entries(plan);
    let starts = start_order(plan.entries.len(), &positions, order);
    let rt = crate::shutdown::current_thread()?;
    let outcome = rt.block_on(boot_outcome(plan, &starts));
    crate::shutdown::end(rt);
    Ok(OrderOutcome {
        digest: outcome.header.digest(),
        unhealthy: outcome.unhealthy,
        registrations: outcome.registrations,
    })
}

/// Boots `plan` once per order of its tool-registering entries (all of them when n! ≤ `max`,
/// else `max` seeded shuffles of `seed`), on `threads` current-thread runtimes.
///
/// # Errors
/// Only if a tokio runtime cannot be built.
pub fn permute(
    plan: &LoadPlan,
    max: u64,
    seed: u64,
    threads: usize,
    on_progress: &(dyn Fn(u64) + Sync),
) -> std::io::Result<PermuteReport> {
    let positions = tool_entries(plan);
    let n = positions.len();
    let all = factorial(n);
    let exhaustive = all <= max;
    let orders = if exhaustive { all } else { max };
    let threads = threads.clamp(1, 16) as u64;
    let started = Instant::now();
    let done = std::sync::atomic::AtomicU64::new(0);
    let partials: Vec<std::io::Result<Partial>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let positions = &positions;
                let done = &done;
                s.spawn(move || -> std::io::Result<Partial> {
                    let rt = crate::shutdown::current_thread()?;
                    let mut part = Partial {
                        headers: HashMap::new(),
                        registrations: HashSet::new(),
                        unhealthy: None,
                    };
                    let (from, to) = (orders * t / threads, orders * (t + 1) / threads);
                    for k in from..to {
                        let order = order_of(n, exhaustive, seed, k);
                        let starts = start_order(plan.entries.len(), positions, &order);
                        let ids: Vec<String> = order
                            .iter()
                            .map(|&i| plan.entries[positions[i]].id.clone())
                            .collect();
                        let outcome = rt.block_on(boot_outcome(plan, &starts));
                        part.registrations.insert(outcome.registrations);
                        if part.unhealthy.is_none()
                            && let Some(why) = outcome.unhealthy
                        {
                            part.unhealthy = Some((k, ids.clone(), why));
                        }
                        part.headers.entry(outcome.header).or_insert(ids);
                        let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        on_progress(d);
                    }
                    crate::shutdown::end(rt);
                    Ok(part)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a permutation thread panicked")))
            })
            .collect()
    });
    let mut digests = BTreeMap::new();
    let mut registrations = HashSet::new();
    let mut unhealthy: Option<(u64, Vec<String>, String)> = None;
    for part in partials {
        let part = part?;
        for (header, ids) in part.headers {
            digests.entry(header.digest()).or_insert(ids);
        }
        registrations.extend(part.registrations);
        if let Some(u) = part.unhealthy
            && unhealthy.as_ref().is_none_or(|(k, _, _)| u.0 < *k)
        {
            unhealthy = Some(u);
        }
    }
    Ok(PermuteReport {
        entries: positions
            .iter()
            .map(|&i| plan.entries[i].id.clone())
            .collect(),
        orders,
        exhaustive,
        digests,
        registration_orders: registrations.len(),
        unhealthy: unhealthy.map(|(_, ids, why)| (ids, why)),
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_permutation_enumerates_every_order_once() {
        let all: HashSet<Vec<usize>> = (0..24).map(|k| nth_permutation(4, k)).collect();
        assert_eq!(all.len(), 24);
        assert_eq!(nth_permutation(3, 0), [0, 1, 2]);
        assert_eq!(nth_permutation(3, 5), [2, 1, 0]);
    }

    #[test]
    fn sampled_permutations_replay_from_the_seed_and_vary() {
        assert_eq!(sampled_permutation(8, 3, 10), sampled_permutation(8, 3, 10));
        let distinct: HashSet<Vec<usize>> =
            (0..200).map(|k| sampled_permutation(8, 3, k)).collect();
        assert!(distinct.len() > 190, "{}", distinct.len());
        for k in 0..50 {
            let mut p = sampled_permutation(8, 1, k);
            p.sort_unstable();
            assert_eq!(p, (0..8).collect::<Vec<_>>());
        }
    }
}
