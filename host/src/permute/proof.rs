//! The proofs: the reduced one ([`prove`]: one boot per class of orders, refined by what the
//! boots show of events) and brute force ([`permute`]: every order).

use std::collections::BTreeMap;
use std::time::Instant;

use super::driver::{Found, PermuteReport, drive, event_meetings, name_meetings, report};
use super::orders::{Orders, ProofOrders, normal_forms, same_class, start_order};
use super::outcome::{OrderOutcome, boot};
use super::space::Space;
use crate::plan::LoadPlan;

/// How a proof runs.
#[derive(Debug, Clone, Copy)]
pub struct ProofOptions {
    /// Boot at most this many orders: every class of orders when there are no more, else this
    /// many seeded shuffles.
    pub max: u64,
    /// Seed of the shuffles.
    pub seed: u64,
    /// Worker threads, each with its own current-thread runtime.
    pub threads: usize,
}

/// The reduced proof: every plugin entry of `plan`, one boot per class of orders (see the
/// module docs), the whole outcome compared. More classes than `max`: `max` seeded shuffles.
///
/// # Errors
/// Only if a tokio runtime cannot be built.
pub fn prove(
    plan: &LoadPlan,
    options: &ProofOptions,
    on_progress: &(dyn Fn(u64) + Sync),
) -> std::io::Result<PermuteReport> {
    let space = Space::of(plan);
    let orders = space.orders(options);
    prove_with(&space, &orders, options, on_progress, &|rt, order| {
        Ok(rt.block_on(boot(plan, &space.starts(plan, order))))
    })
}

/// Boots one order of a proof's elements (indices into its [`Space`]) on a runtime: [`boot`]
/// of the plan's [`Space::starts`], or a boot that does more (the `--preset` proof mounts the preset's rows in
/// their part of the order after the host's entries).
pub type BootOne<'a> =
    dyn Fn(&tokio::runtime::Runtime, &[usize]) -> std::io::Result<OrderOutcome> + Sync + 'a;

/// [`prove`] over `space`, booting each start order with `boot_one`.
///
/// The footprints cannot say which events an entry listens to or dispatches while applying (a
/// plugin decides that at run time), so the boots report it, and the proof closes over it: an
/// event one entry dispatched while applying reaches only the listeners registered so far, so
/// every pair of which one dispatched what the other listens to (in any booted order) interacts
/// too. So does every pair with a silent entry that the boots saw meet through names (see
/// [`Footprint::interacts_seen`](super::Footprint::interacts_seen); only in a space whose
/// boots observe them, [`Space::seen`]). When that adds pairs, the classes of the finer
/// relation that no booted order lies in are booted as well, until the boots show no new pair
/// (or `max` orders are booted: then the proof is a sample, [`PermuteReport::exhaustive`]
/// false). A seeded sample is not refined.
///
/// # Errors
/// Only if a tokio runtime cannot be built, or `boot_one` fails.
pub fn prove_with(
    space: &Space,
    orders: &ProofOrders,
    options: &ProofOptions,
    on_progress: &(dyn Fn(u64) + Sync),
    boot_one: &BootOne<'_>,
) -> std::io::Result<PermuteReport> {
    let started = Instant::now();
    let n = space.ids.len();
    let mut dependent = space.dependent.clone();
    let mut found = Found::default();
    let mut booted: Vec<Vec<usize>> = Vec::new();
    let (mut count, mut complete) = (0u64, orders.complete);
    let mut round = orders.orders.clone();
    let mut round_count = orders.count;
    loop {
        let offset = count;
        found.then(drive(
            &space.ids,
            &round,
            round_count,
            options.threads,
            &|done| on_progress(offset + done),
            boot_one,
        )?);
        count += round_count;
        let Orders::Listed(list) = round else {
            break;
        };
        booted.extend(list);
        let mut refined = false;
        let through_names = name_meetings(space, &found.names);
        let through_events = event_meetings(&space.ids, &found.events)
            .into_iter()
            .map(|(a, b, _)| (a, b));
        for (a, b) in through_names.into_iter().chain(through_events) {
            if !dependent[a][b] {
                dependent[a][b] = true;
                dependent[b][a] = true;
                refined = true;
            }
        }
        if !refined {
            break;
        }
        let (forms, all) = normal_forms(n, &|a, b| dependent[a][b], options.max);
        let fresh: Vec<Vec<usize>> = forms
            .into_iter()
            .filter(|form| !booted.iter().any(|b| same_class(b, form, &dependent)))
            .collect();
        let room = usize::try_from(options.max.saturating_sub(count)).unwrap_or(usize::MAX);
        if !all || fresh.len() > room {
            complete = false;
        }
        let fresh: Vec<Vec<usize>> = fresh.into_iter().take(room).collect();
        if fresh.is_empty() {
            break;
        }
        round_count = fresh.len() as u64;
        round = Orders::Listed(fresh);
    }
    let interacting = (0..n)
        .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
        .filter(|&(a, b)| dependent[a][b])
        .map(|(a, b)| (space.ids[a].clone(), space.ids[b].clone()))
        .collect();
    Ok(report(
        &space.ids,
        found,
        (count, complete),
        Some(interacting),
        space.claim_counts(),
        started,
    ))
}

/// The brute-force proof: boots `plan` once per order of the entries at `positions` (all of
/// them when n! ≤ `max`, else `max` seeded shuffles of `seed`), on `threads` runtimes, the whole
/// outcome compared. [`tool_entries`](super::tool_entries()) gives the registration-order proof.
///
/// # Errors
/// Only if a tokio runtime cannot be built.
pub fn permute(
    plan: &LoadPlan,
    positions: &[usize],
    options: &ProofOptions,
    on_progress: &(dyn Fn(u64) + Sync),
) -> std::io::Result<PermuteReport> {
    let ids: Vec<String> = positions
        .iter()
        .map(|&p| plan.entries[p].id.clone())
        .collect();
    let claims = Space::of(plan).claim_counts();
    let orders = ProofOrders::every(ids.len(), options);
    permute_with(&ids, claims, &orders, options, on_progress, &|rt, order| {
        let starts = start_order(plan.entries.len(), positions, order);
        Ok(rt.block_on(boot(plan, &starts)))
    })
}

/// [`permute`] of the elements `ids` (whose claims are `claims`) through `orders` (see
/// [`ProofOrders::every`]), booting each order with `boot_one`.
///
/// # Errors
/// Only if a tokio runtime cannot be built, or `boot_one` fails.
pub fn permute_with(
    ids: &[String],
    claims: BTreeMap<String, usize>,
    orders: &ProofOrders,
    options: &ProofOptions,
    on_progress: &(dyn Fn(u64) + Sync),
    boot_one: &BootOne<'_>,
) -> std::io::Result<PermuteReport> {
    let started = Instant::now();
    let found = drive(
        ids,
        &orders.orders,
        orders.count,
        options.threads,
        on_progress,
        boot_one,
    )?;
    Ok(report(
        ids,
        found,
        (orders.count, orders.complete),
        None,
        claims,
        started,
    ))
}
