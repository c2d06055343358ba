//! The permutation driver: boots orders on worker threads and keeps each distinct outcome with
//! the first order that produced it; and the report of a run ([`PermuteReport`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use cordis_runtime::{EventFootprint, NameFootprint};

use super::orders::{Orders, factorial, order_of};
use super::outcome::{Key, OrderOutcome};
use super::proof::BootOne;

/// What a permutation run found.
#[derive(Debug, Clone)]
pub struct PermuteReport {
    /// Ids of the permuted entries, in file order.
    pub entries: Vec<String>,
    /// Orders booted.
    pub orders: u64,
    /// All n! orders of the permuted entries, covered by the orders booted when
    /// [`Self::exhaustive`].
    pub all_orders: u64,
    /// True when every order was covered: booted, or stood for by a booted order of its class.
    pub exhaustive: bool,
    /// Pairs of permuted entries whose relative order was explored (ids, file order); `None`
    /// for a brute-force run, which explores every pair.
    pub interacting: Option<Vec<(String, String)>>,
    /// Pairs of permuted entries (ids, file order) of which one dispatched, while applying, an
    /// event the other listens to, with those events (sorted), as the boots observed them;
    /// [`prove_with`](super::prove_with()) explores their orders too (they are in
    /// [`Self::interacting`]).
    pub through_events: Vec<(String, String, Vec<String>)>,
    /// Claims of the permuted entries by kind, and `open <kind>` for entries registering names
    /// of a kind without stating them.
    pub claims: BTreeMap<String, usize>,
    /// Each distinct outcome with the first order (entry ids) that produced it, first first.
    pub outcomes: Vec<(Vec<String>, OrderOutcome)>,
    /// Each distinct digest with the first order that produced it.
    pub digests: BTreeMap<String, Vec<String>>,
    /// How many distinct tool-registration orders the boots went through.
    pub registration_orders: usize,
    /// The first order in which an entry was not where the config asked or the assembly failed,
    /// with why.
    pub unhealthy: Option<(Vec<String>, String)>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// A distinct outcome with the first order (element ids) that produced it.
type FirstOutcome = (Vec<String>, OrderOutcome);

/// One worker's findings.
#[derive(Default)]
struct Partial {
    /// Distinct outcomes with the first order index that produced them.
    outcomes: HashMap<Key, (u64, Vec<String>, OrderOutcome)>,
    registrations: HashSet<Vec<String>>,
    /// Every boot's event footprints, unioned by element id.
    events: BTreeMap<String, EventFootprint>,
    /// Every boot's name footprints, unioned by element id.
    names: BTreeMap<String, NameFootprint>,
}

impl Partial {
    fn add_events(&mut self, events: &BTreeMap<String, EventFootprint>) {
        for (id, footprint) in events {
            self.events.entry(id.clone()).or_default().union(footprint);
        }
    }

    fn add_names(&mut self, names: &BTreeMap<String, NameFootprint>) {
        for (id, footprint) in names {
            self.names.entry(id.clone()).or_default().union(footprint);
        }
    }
}

/// What [`drive`] found over some orders.
#[derive(Default)]
pub(super) struct Found {
    /// Each distinct outcome with the first order producing it, first first.
    outcomes: Vec<FirstOutcome>,
    /// The distinct tool-registration orders.
    registrations: HashSet<Vec<String>>,
    /// The event footprints of every boot, unioned by element id.
    pub(super) events: BTreeMap<String, EventFootprint>,
    /// The name footprints of every boot, unioned by element id.
    pub(super) names: BTreeMap<String, NameFootprint>,
}

impl Found {
    /// Adds a later run's findings: its outcomes after this one's, those already found dropped.
    pub(super) fn then(&mut self, later: Found) {
        for (ids, outcome) in later.outcomes {
            let key = outcome.key();
            if !self.outcomes.iter().any(|(_, o)| o.key() == key) {
                self.outcomes.push((ids, outcome));
            }
        }
        self.registrations.extend(later.registrations);
        for (id, footprint) in &later.events {
            self.events.entry(id.clone()).or_default().union(footprint);
        }
        for (id, footprint) in &later.names {
            self.names.entry(id.clone()).or_default().union(footprint);
        }
    }
}

/// The one permutation driver: boots `count` orders from `orders` of the elements `ids` with
/// `boot_one` (the caller's boot strategy), on `threads` current-thread runtimes, and keeps each
/// distinct outcome with the first order (in enumeration order) that produced it, first first,
/// and the number of distinct registration orders.
///
/// # Errors
/// Only if a tokio runtime cannot be built, or `boot_one` fails.
pub(super) fn drive(
    ids: &[String],
    orders: &Orders,
    count: u64,
    threads: usize,
    on_progress: &(dyn Fn(u64) + Sync),
    boot_one: &BootOne<'_>,
) -> std::io::Result<Found> {
    let n = ids.len();
    let threads = threads.clamp(1, 16) as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    let order_at = |k: u64| match orders {
        Orders::Indexed { exhaustive, seed } => order_of(n, *exhaustive, *seed, k),
        Orders::Listed(list) => list[k as usize].clone(),
    };
    let partials: Vec<std::io::Result<Partial>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (done, order_at) = (&done, &order_at);
                s.spawn(move || -> std::io::Result<Partial> {
                    let rt = crate::shutdown::current_thread()?;
                    let mut part = Partial::default();
                    for k in count * t / threads..count * (t + 1) / threads {
                        let order = order_at(k);
                        let ids: Vec<String> = order.iter().map(|&i| ids[i].clone()).collect();
                        let mut outcome = boot_one(&rt, &order)?;
                        part.registrations
                            .insert(std::mem::take(&mut outcome.registrations));
                        part.add_events(&std::mem::take(&mut outcome.events));
                        part.add_names(&std::mem::take(&mut outcome.names));
                        let key = outcome.key();
                        let first = part
                            .outcomes
                            .entry(key)
                            .or_insert((k, ids.clone(), outcome));
                        if k < first.0 {
                            first.0 = k;
                            first.1 = ids;
                        }
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
    let mut outcomes: HashMap<Key, (u64, Vec<String>, OrderOutcome)> = HashMap::new();
    let mut registrations = HashSet::new();
    let mut events = Partial::default();
    for part in partials {
        let part = part?;
        events.add_events(&part.events);
        events.add_names(&part.names);
        for (key, first) in part.outcomes {
            match outcomes.get_mut(&key) {
                Some(slot) if first.0 < slot.0 => *slot = first,
                Some(_) => {}
                None => {
                    outcomes.insert(key, first);
                }
            }
        }
        registrations.extend(part.registrations);
    }
    let mut outcomes: Vec<(u64, Vec<String>, OrderOutcome)> = outcomes.into_values().collect();
    outcomes.sort_by_key(|(k, _, _)| *k);
    Ok(Found {
        outcomes: outcomes
            .into_iter()
            .map(|(_, ids, outcome)| (ids, outcome))
            .collect(),
        registrations,
        events: events.events,
        names: events.names,
    })
}

/// The pairs of elements `ids` (indices, file order) that meet through events in `events`
/// (one dispatched while applying what the other listens to), with those events.
pub(super) fn event_meetings(
    ids: &[String],
    events: &BTreeMap<String, EventFootprint>,
) -> Vec<(usize, usize, Vec<&'static str>)> {
    let footprints: Vec<Option<&EventFootprint>> = ids.iter().map(|id| events.get(id)).collect();
    let mut out = Vec::new();
    for a in 0..ids.len() {
        for b in a + 1..ids.len() {
            if let (Some(fa), Some(fb)) = (footprints[a], footprints[b]) {
                let met = fa.meets(fb);
                if !met.is_empty() {
                    out.push((a, b, met));
                }
            }
        }
    }
    out
}

/// The pairs of elements of `space` (indices, file order), at least one of them silent, that
/// meet through what the boots saw them do with names (`names`, by element id); nothing for a
/// space whose boots do not observe names.
pub(super) fn name_meetings(
    space: &super::Space,
    names: &BTreeMap<String, NameFootprint>,
) -> Vec<(usize, usize)> {
    if !space.seen {
        return Vec::new();
    }
    let none = NameFootprint::default();
    let seen: Vec<&NameFootprint> = space
        .ids
        .iter()
        .map(|id| names.get(id).unwrap_or(&none))
        .collect();
    let f = &space.footprints;
    let mut out = Vec::new();
    for a in 0..f.len() {
        for b in a + 1..f.len() {
            if (f[a].silent || f[b].silent) && f[a].interacts_seen(seen[a], &f[b], seen[b]) {
                out.push((a, b));
            }
        }
    }
    out
}

/// The report of a proof of the elements `ids` that found `found` in `booted` orders
/// (`(count, whether they stand for every order)`); `interacting` is `None` for brute force,
/// which explores every pair.
pub(super) fn report(
    ids: &[String],
    found: Found,
    (orders, exhaustive): (u64, bool),
    interacting: Option<Vec<(String, String)>>,
    claims: BTreeMap<String, usize>,
    started: Instant,
) -> PermuteReport {
    let mut digests = BTreeMap::new();
    for (ids, outcome) in &found.outcomes {
        digests
            .entry(outcome.digest.clone())
            .or_insert_with(|| ids.clone());
    }
    let unhealthy = found
        .outcomes
        .iter()
        .find_map(|(ids, o)| o.unhealthy().map(|why| (ids.clone(), why)));
    let through_events = event_meetings(ids, &found.events)
        .into_iter()
        .map(|(a, b, events)| {
            (
                ids[a].clone(),
                ids[b].clone(),
                events.into_iter().map(str::to_owned).collect(),
            )
        })
        .collect();
    PermuteReport {
        entries: ids.to_vec(),
        orders,
        all_orders: factorial(ids.len()),
        exhaustive,
        interacting,
        through_events,
        claims,
        outcomes: found.outcomes,
        digests,
        registration_orders: found.registrations.len(),
        unhealthy,
        seconds: started.elapsed().as_secs_f64(),
    }
}
