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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use cordis_runtime::{Claim, Context, EventFootprint, Policy, Schedule, ScopeId, Service};

use crate::assembly::{HeaderBytes, header_bytes};
use crate::claims::entry_claims;
use crate::loader::{EntryStatus, entry_report, start_entries_in_order};
use crate::plan::{LoadPlan, PlannedEntry, Step};

/// Indices (in the plan) of the entries that require the `tools` service: what [`permute`]
/// reorders when asked for registration orders only.
pub fn tool_entries(plan: &LoadPlan) -> Vec<usize> {
    plan.entries
        .iter()
        .enumerate()
        .filter(|(_, e)| requires(e, cordis_tools::ToolRegistry::NAME))
        .map(|(i, _)| i)
        .collect()
}

/// Indices of every plugin entry: what [`prove`] reorders (any of them may claim, listen or
/// guard).
pub fn plugin_entries(plan: &LoadPlan) -> Vec<usize> {
    plan.entries
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.step, Step::Plugin { .. }))
        .map(|(i, _)| i)
        .collect()
}

fn requires(entry: &PlannedEntry, service: &str) -> bool {
    match &entry.step {
        Step::Plugin {
            prepared, inject, ..
        } => {
            prepared
                .plugin
                .inject()
                .iter()
                .any(|i| i.required && i.name == service)
                || inject.iter().any(|i| i == service)
        }
        _ => false,
    }
}

/// The kinds of name an entry registers at run time without stating which.
pub const OPEN_KINDS: [&str; 2] = ["tool", "section"];

/// What an entry may touch that another entry's order could matter to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The names it claims (services it provides included), sorted.
    pub claims: Vec<Claim>,
    /// Kinds of name it may claim without stating them ([`cordis_runtime::Plugin::open_claims`];
    /// a plugin that has not said is taken to claim [`OPEN_KINDS`] names of each registry it
    /// requires — `tools`, `system-prompt` — unless it states such names).
    pub open: Vec<&'static str>,
    /// Kinds of name whose registrations it may read while applying (what is registered when
    /// it applies may change what it does): the same guess for a plugin that has not said what
    /// it claims, nothing for one that has. Claims themselves commute (a name two entries claim
    /// is contested whoever came first); reading what others registered does not.
    pub observes: Vec<&'static str>,
    /// Services it injects optionally (it behaves differently with and without them).
    pub optional: Vec<String>,
}

impl Footprint {
    /// The footprint of `entry` (empty for groups and disabled entries).
    pub fn of(entry: &PlannedEntry) -> Footprint {
        let Step::Plugin { prepared, .. } = &entry.step else {
            return Footprint::default();
        };
        let claims = entry_claims(entry);
        let registries = [
            ("tool", cordis_tools::ToolRegistry::NAME),
            ("section", cordis_system_prompt::SystemPrompt::NAME),
        ];
        // What the plugin says, else a guess from the registries it injects.
        let guess: Vec<&'static str> = registries
            .into_iter()
            .filter(|(kind, service)| {
                requires(entry, service) && !claims.iter().any(|c| c.kind == *kind)
            })
            .map(|(kind, _)| kind)
            .collect();
        let (open, observes) = match prepared.plugin.open_claims_erased(&*prepared.config) {
            Some(open) => (open, Vec::new()),
            None => (guess.clone(), guess),
        };
        let mut optional: Vec<String> = prepared
            .plugin
            .inject()
            .iter()
            .filter(|i| !i.required)
            .map(|i| i.name.to_string())
            .collect();
        optional.sort();
        Footprint {
            claims,
            open,
            observes,
            optional,
        }
    }

    /// Whether the order of this entry and `other` can matter (symmetric): they claim one name,
    /// one may read what the other registers, or one injects optionally what the other provides.
    pub fn interacts(&self, other: &Footprint) -> bool {
        let shares = self
            .claims
            .iter()
            .any(|c| other.claims.binary_search(c).is_ok());
        let reads = |a: &Footprint, b: &Footprint| {
            a.observes
                .iter()
                .any(|k| b.open.contains(k) || b.claims.iter().any(|c| c.kind == *k))
        };
        let optional_meets = |a: &Footprint, b: &Footprint| {
            a.optional
                .iter()
                .any(|s| b.claims.iter().any(|c| c.kind == "service" && c.name == *s))
        };
        shares
            || reads(self, other)
            || reads(other, self)
            || optional_meets(self, other)
            || optional_meets(other, self)
    }
}

/// The lexicographically least order of every class of orders of `0..n` under the commutation
/// of independent elements (`dependent(a, b)` false); at most `cap` of them. Returns the orders
/// and whether that is all of them.
///
/// A class is fixed by which of each dependent pair comes first: an acyclic orientation of the
/// dependency graph. Orientations are enumerated edge by edge (a direction that closes a cycle
/// is pruned at once), and each one's least order is its topological order taking the smallest
/// ready element first. Independent elements add no edges, so twenty entries that all commute
/// are one class found in one step.
pub fn normal_forms(
    n: usize,
    dependent: &dyn Fn(usize, usize) -> bool,
    cap: u64,
) -> (Vec<Vec<usize>>, bool) {
    let edges: Vec<(usize, usize)> = (0..n)
        .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
        .filter(|&(a, b)| dependent(a, b))
        .collect();
    struct Search {
        n: usize,
        edges: Vec<(usize, usize)>,
        /// `succ[u]`: the elements oriented after `u` so far.
        succ: Vec<Vec<usize>>,
        cap: u64,
        out: Vec<Vec<usize>>,
        complete: bool,
    }
    impl Search {
        /// Whether `to` is reachable from `from` along the edges oriented so far.
        fn reaches(&self, from: usize, to: usize) -> bool {
            let mut seen = vec![false; self.n];
            let mut stack = vec![from];
            while let Some(u) = stack.pop() {
                if u == to {
                    return true;
                }
                for &v in &self.succ[u] {
                    if !seen[v] {
                        seen[v] = true;
                        stack.push(v);
                    }
                }
            }
            false
        }

        /// The least topological order of the full orientation.
        fn least_order(&self) -> Vec<usize> {
            let mut indegree = vec![0usize; self.n];
            for succ in &self.succ {
                for &v in succ {
                    indegree[v] += 1;
                }
            }
            let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..self.n)
                .filter(|&v| indegree[v] == 0)
                .map(std::cmp::Reverse)
                .collect();
            let mut order = Vec::with_capacity(self.n);
            while let Some(std::cmp::Reverse(u)) = ready.pop() {
                order.push(u);
                for &v in &self.succ[u] {
                    indegree[v] -= 1;
                    if indegree[v] == 0 {
                        ready.push(std::cmp::Reverse(v));
                    }
                }
            }
            order
        }

        fn go(&mut self, edge: usize) {
            if !self.complete {
                return;
            }
            let Some(&(a, b)) = self.edges.get(edge) else {
                if self.out.len() as u64 >= self.cap {
                    self.complete = false;
                } else {
                    self.out.push(self.least_order());
                }
                return;
            };
            // a before b, then b before a; a direction closing a cycle is no class.
            for (u, v) in [(a, b), (b, a)] {
                if !self.reaches(v, u) {
                    self.succ[u].push(v);
                    self.go(edge + 1);
                    self.succ[u].pop();
                }
            }
        }
    }
    let mut search = Search {
        n,
        edges,
        succ: vec![Vec::new(); n],
        cap,
        out: Vec::new(),
        complete: true,
    };
    search.go(0);
    (search.out, search.complete)
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

/// What booting one order shows: everything the proof compares, and the registrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderOutcome {
    /// The request digest of this order.
    pub digest: String,
    /// Why `assemble()` failed, if it did.
    pub assembly_error: Option<String>,
    /// The digest of what the entries offer beside the request (an MCP server's prompts and
    /// resources; see [`cordis_runtime::Offered`]).
    pub catalog: Option<String>,
    /// Every entry's id, status and reason, in file order.
    pub entries: Vec<(String, EntryStatus, Option<String>)>,
    /// Contained failures (panicking listeners, undos, tasks), sorted.
    pub incidents: Vec<String>,
    /// The tool registrations in the order they happened (`who: tool`); not compared.
    pub registrations: Vec<String>,
    /// What each element (by id) listened to and dispatched while applying; not compared:
    /// [`prove_with`] unions it over every order to find interactions through events.
    pub events: BTreeMap<String, EventFootprint>,
}

impl OrderOutcome {
    /// Why this order did not boot cleanly: an entry not where the config asked, or a failed
    /// assembly.
    pub fn unhealthy(&self) -> Option<String> {
        if let Some(error) = &self.assembly_error {
            return Some(format!("the assembly failed: {error}"));
        }
        let bad: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, status, _)| !status.is_as_configured())
            .map(|(id, status, error)| match error {
                Some(error) => format!("{id} is {status}: {error}"),
                None => format!("{id} is {status}"),
            })
            .collect();
        (!bad.is_empty()).then(|| bad.join(", "))
    }

    /// How `other` differs from this outcome, one line each (empty when they agree), naming
    /// this one's order `mine` and the other's `theirs`.
    pub fn differences(&self, mine: &str, other: &OrderOutcome, theirs: &str) -> Vec<String> {
        let mut out = Vec::new();
        let status = |s: EntryStatus, e: &Option<String>| match e {
            Some(e) => format!("{s} ({e})"),
            None => s.to_string(),
        };
        for ((id, s1, e1), (_, s2, e2)) in self.entries.iter().zip(&other.entries) {
            if (s1, e1) != (s2, e2) {
                out.push(format!(
                    "entry {id} is {} in order {mine}, {} in order {theirs}",
                    status(*s1, e1),
                    status(*s2, e2)
                ));
            }
        }
        if self.digest != other.digest {
            out.push(format!(
                "the request differs: digest {} in order {mine}, {} in order {theirs}",
                self.digest, other.digest
            ));
        }
        if self.catalog != other.catalog {
            out.push(format!(
                "what the entries offer differs (prompts, resources): catalog {} in order {mine}, {} in order {theirs}",
                self.catalog.as_deref().unwrap_or("none"),
                other.catalog.as_deref().unwrap_or("none")
            ));
        }
        if self.incidents != other.incidents {
            out.push(format!(
                "the incidents differ: {:?} in order {mine}, {:?} in order {theirs}",
                self.incidents, other.incidents
            ));
        }
        out
    }
}

/// The compared part of an outcome: all of it but the registrations.
type Key = (
    String,
    Option<String>,
    Option<String>,
    Vec<(String, EntryStatus, Option<String>)>,
    Vec<String>,
);

impl OrderOutcome {
    fn key(&self) -> Key {
        (
            self.digest.clone(),
            self.assembly_error.clone(),
            self.catalog.clone(),
            self.entries.clone(),
            self.incidents.clone(),
        )
    }
}

/// Boots `plan` under the `fifo` schedule with its plugin entries started in `order` (plan
/// indices), and disposes it again: one boot of a proof.
///
/// # Cancel safety
/// Not cancel safe: dropped before the root is disposed (at any await), the runtime it made is
/// never disposed and no handle to it is returned: the entries started so far stay, their tasks
/// run on in the tokio runtime and their effects are never undone. Its callers run it to
/// completion (`block_on`).
pub async fn boot(plan: &LoadPlan, order: &[usize]) -> OrderOutcome {
    let root = Context::root_with(Schedule::fifo());
    let mut handles = vec![None; plan.entries.len()];
    crate::loader::preload(&root, plan).await;
    start_entries_in_order(&root, plan, &mut handles, &mut order.iter().copied());
    root.idle().await;
    let entries = plan
        .entries
        .iter()
        .zip(&handles)
        .map(|(e, h)| {
            let r = entry_report(e, h.as_ref());
            (r.id, r.status, r.error)
        })
        .collect();
    let header = header_bytes(&root).await;
    let catalog = crate::loader::offered_digest(&root).await;
    let incidents = crate::loader::incident_lines(&root);
    let registrations = root.trace_details(Schedule::TRACE_REGISTER);
    let events = event_footprints(&root);
    root.dispose();
    OrderOutcome {
        digest: header.digest(),
        assembly_error: match header {
            HeaderBytes::Failed(message) => Some(message),
            _ => None,
        },
        catalog,
        entries,
        incidents,
        registrations,
        events,
    }
}

/// The event footprint of every entry of the runtime under `root`, by entry id: each scope's
/// own, added to its nearest labelled scope (the loader labels an entry's scope with its id),
/// so a child scope an entry applies counts as the entry's. Entries that used no event are left
/// out.
pub fn event_footprints(root: &Context) -> BTreeMap<String, EventFootprint> {
    let scopes = root.scopes();
    let by_id: HashMap<ScopeId, &cordis_runtime::ScopeInfo> =
        scopes.iter().map(|s| (s.id, s)).collect();
    let mut out: BTreeMap<String, EventFootprint> = BTreeMap::new();
    for scope in scopes.iter().filter(|s| !s.events.is_empty()) {
        let mut at = Some(scope);
        while let Some(s) = at {
            if let Some(label) = &s.label {
                out.entry(label.clone()).or_default().union(&scope.events);
                break;
            }
            at = s.parent.and_then(|p| by_id.get(&p).copied());
        }
    }
    out
}

/// The start order of plan indices that puts the entry at `positions[order[k]]` in the place of
/// `positions[k]`: the boot of the file with those entries written in that order.
pub fn start_order(n: usize, positions: &[usize], order: &[usize]) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..n).collect();
    for (k, &from) in order.iter().enumerate() {
        indices[positions[k]] = positions[from];
    }
    indices
}

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
    /// [`prove_with`] explores their orders too (they are in [`Self::interacting`]).
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

/// Where the orders of a run come from.
#[derive(Debug, Clone)]
pub enum Orders {
    /// Order `k` of every order (lexicographic), or of `max` seeded shuffles.
    Indexed {
        /// Every order, in lexicographic order (else seeded shuffles).
        exhaustive: bool,
        /// The shuffles' seed.
        seed: u64,
    },
    /// These orders.
    Listed(Vec<Vec<usize>>),
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
}

impl Partial {
    fn add_events(&mut self, events: &BTreeMap<String, EventFootprint>) {
        for (id, footprint) in events {
            self.events.entry(id.clone()).or_default().union(footprint);
        }
    }
}

/// What [`drive`] found over some orders.
#[derive(Default)]
struct Found {
    /// Each distinct outcome with the first order producing it, first first.
    outcomes: Vec<FirstOutcome>,
    /// The distinct tool-registration orders.
    registrations: HashSet<Vec<String>>,
    /// The event footprints of every boot, unioned by element id.
    events: BTreeMap<String, EventFootprint>,
}

impl Found {
    /// Adds a later run's findings: its outcomes after this one's, those already found dropped.
    fn then(&mut self, later: Found) {
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
    }
}

/// The one permutation driver: boots `count` orders from `orders` of the elements `ids` with
/// `boot_one` (the caller's boot strategy), on `threads` current-thread runtimes, and keeps each
/// distinct outcome with the first order (in enumeration order) that produced it, first first,
/// and the number of distinct registration orders.
///
/// # Errors
/// Only if a tokio runtime cannot be built, or `boot_one` fails.
fn drive(
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
    })
}

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

/// The orders a proof boots: one per class ([`Space::orders`]) or every order
/// ([`ProofOrders::every`]).
#[derive(Debug, Clone)]
pub struct ProofOrders {
    /// The orders.
    pub orders: Orders,
    /// How many.
    pub count: u64,
    /// True when they stand for every order (each booted, or one per class).
    pub complete: bool,
}

impl ProofOrders {
    /// What the brute-force proof boots of `n` elements: all n! orders (lexicographic) when
    /// there are at most `options.max`, else `max` seeded shuffles.
    pub fn every(n: usize, options: &ProofOptions) -> ProofOrders {
        let all = factorial(n);
        let complete = all <= options.max;
        ProofOrders {
            orders: Orders::Indexed {
                exhaustive: complete,
                seed: options.seed,
            },
            count: all.min(options.max),
            complete,
        }
    }
}

/// The entries [`prove`] permutes, their footprints' interacting pairs and claim counts.
#[derive(Debug, Clone)]
pub struct Space {
    /// The permuted elements' names: entry ids, then `preset/row` ids for a joined preset.
    pub ids: Vec<String>,
    /// Plan indices of the permuted host entries, in file order: the first elements.
    pub positions: Vec<usize>,
    /// Each permuted entry's footprint.
    pub footprints: Vec<Footprint>,
    /// `dependent[a][b]`: entries `a` and `b` (indices into `positions`) interact.
    pub dependent: Vec<Vec<bool>>,
}

impl Space {
    /// Every plugin entry of `plan` with its footprint.
    pub fn of(plan: &LoadPlan) -> Space {
        let positions = plugin_entries(plan);
        let footprints: Vec<Footprint> = positions
            .iter()
            .map(|&p| Footprint::of(&plan.entries[p]))
            .collect();
        let n = positions.len();
        let mut dependent = vec![vec![false; n]; n];
        for a in 0..n {
            for b in a + 1..n {
                let d = footprints[a].interacts(&footprints[b]);
                dependent[a][b] = d;
                dependent[b][a] = d;
            }
        }
        Space {
            ids: positions
                .iter()
                .map(|&p| plan.entries[p].id.clone())
                .collect(),
            positions,
            footprints,
            dependent,
        }
    }

    /// This space followed by `rows`' elements (ids prefixed `prefix/`), none of them
    /// interacting with this space's: a preset's rows mount after the host's boot is over.
    pub fn then(mut self, rows: Space, prefix: &str) -> Space {
        let (n, m) = (self.ids.len(), rows.ids.len());
        self.ids
            .extend(rows.ids.iter().map(|id| format!("{prefix}/{id}")));
        self.footprints.extend(rows.footprints);
        for row in &mut self.dependent {
            row.extend(std::iter::repeat_n(false, m));
        }
        for row in rows.dependent {
            let mut full = vec![false; n];
            full.extend(row);
            self.dependent.push(full);
        }
        self
    }

    /// The start order (plan indices) of `plan` that boots the host part of `order`.
    pub fn starts(&self, plan: &LoadPlan, order: &[usize]) -> Vec<usize> {
        let host: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| i < self.positions.len())
            .collect();
        start_order(plan.entries.len(), &self.positions, &host)
    }

    /// The row part of `order`, as indices into the rows' own plan.
    pub fn row_order(&self, order: &[usize]) -> Vec<usize> {
        let n = self.positions.len();
        order.iter().filter(|&&i| i >= n).map(|&i| i - n).collect()
    }

    /// Claims by kind, and `open <kind>` counts.
    pub fn claim_counts(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for f in &self.footprints {
            for c in &f.claims {
                *out.entry(c.kind.to_string()).or_default() += 1;
            }
            for k in &f.open {
                *out.entry(format!("open {k}")).or_default() += 1;
            }
            for k in &f.observes {
                *out.entry(format!("reads {k}")).or_default() += 1;
            }
        }
        out
    }

    /// What [`prove_with`] boots under `options`: one order per class when there are at most
    /// `max` classes, else `max` seeded shuffles. Computed once, so a caller can show the count
    /// before the boots start.
    pub fn orders(&self, options: &ProofOptions) -> ProofOrders {
        let (classes, complete) = self.classes(options.max);
        if complete {
            ProofOrders {
                count: classes.len() as u64,
                orders: Orders::Listed(classes),
                complete,
            }
        } else {
            ProofOrders {
                orders: Orders::Indexed {
                    exhaustive: false,
                    seed: options.seed,
                },
                count: options.max,
                complete,
            }
        }
    }

    /// One order per class (at most `cap`), and whether that is all of them.
    pub fn classes(&self, cap: u64) -> (Vec<Vec<usize>>, bool) {
        normal_forms(self.ids.len(), &|a, b| self.dependent[a][b], cap)
    }
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
/// too. When that adds pairs, the classes of the finer relation that no booted order lies in
/// are booted as well, until the boots show no new pair (or `max` orders are booted: then the
/// proof is a sample, [`PermuteReport::exhaustive`] false). A seeded sample is not refined.
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
        for (a, b, _) in event_meetings(&space.ids, &found.events) {
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
/// outcome compared. [`tool_entries`] gives the registration-order proof.
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

/// The pairs of elements `ids` (indices, file order) that meet through events in `events`
/// (one dispatched while applying what the other listens to), with those events.
fn event_meetings(
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

/// Whether orders `x` and `y` of the same elements put every `dependent` pair the same way
/// round: whether they lie in one class.
fn same_class(x: &[usize], y: &[usize], dependent: &[Vec<bool>]) -> bool {
    let at = |order: &[usize]| {
        let mut at = vec![0; order.len()];
        for (i, &v) in order.iter().enumerate() {
            at[v] = i;
        }
        at
    };
    let (ax, ay) = (at(x), at(y));
    let n = x.len();
    (0..n)
        .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
        .filter(|&(a, b)| dependent[a][b])
        .all(|(a, b)| (ax[a] < ax[b]) == (ay[a] < ay[b]))
}

/// The report of a proof of the elements `ids` that found `found` in `booted` orders
/// (`(count, whether they stand for every order)`); `interacting` is `None` for brute force,
/// which explores every pair.
fn report(
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    /// A fake boot strategy: the outcome is which element comes first (element 3 first fails
    /// the assembly), the registrations are the order itself.
    fn fake_boot(_: &tokio::runtime::Runtime, order: &[usize]) -> std::io::Result<OrderOutcome> {
        Ok(OrderOutcome {
            digest: format!("first {}", order[0]),
            assembly_error: (order[0] == 3).then(|| "three went first".to_owned()),
            catalog: None,
            entries: Vec::new(),
            incidents: Vec::new(),
            registrations: order.iter().map(ToString::to_string).collect(),
            events: BTreeMap::new(),
        })
    }

    /// Each distinct outcome of `orders` (element ids) with the first order producing it.
    fn firsts(
        orders: impl Iterator<Item = Vec<usize>>,
        ids: &[String],
    ) -> Vec<(Vec<String>, String)> {
        let mut out: Vec<(Vec<String>, String)> = Vec::new();
        for order in orders {
            let digest = format!("first {}", order[0]);
            if !out.iter().any(|(_, d)| *d == digest) {
                out.push((order.iter().map(|&i| ids[i].clone()).collect(), digest));
            }
        }
        out
    }

    #[test]
    fn the_driver_reports_the_first_order_of_each_distinct_outcome_on_any_thread_count() {
        let ids: Vec<String> = ["a", "b", "c", "d"].map(str::to_owned).to_vec();
        for (max, threads) in [(24, 1), (24, 3), (24, 16), (7, 1), (7, 2)] {
            let options = ProofOptions {
                max,
                seed: 5,
                threads,
            };
            let orders = ProofOrders::every(ids.len(), &options);
            let report = permute_with(
                &ids,
                BTreeMap::new(),
                &orders,
                &options,
                &|_| {},
                &fake_boot,
            )
            .unwrap();
            let exhaustive = max >= 24;
            assert_eq!(report.exhaustive, exhaustive);
            assert_eq!(report.orders, max);
            assert_eq!(report.all_orders, 24);
            let expected = firsts(
                (0..max).map(|k| order_of(ids.len(), exhaustive, 5, k)),
                &ids,
            );
            let found: Vec<(Vec<String>, String)> = report
                .outcomes
                .iter()
                .map(|(order, o)| (order.clone(), o.digest.clone()))
                .collect();
            assert_eq!(found, expected, "max {max}, {threads} threads");
            assert_eq!(report.digests.len(), expected.len());
            for (order, digest) in &expected {
                assert_eq!(&report.digests[digest], order);
            }
            let unhealthy = expected.iter().find(|(_, d)| d == "first 3");
            assert_eq!(
                report.unhealthy.as_ref().map(|(order, _)| order),
                unhealthy.map(|(order, _)| order)
            );
            assert_eq!(
                report.registration_orders as u64, max,
                "every order registers apart"
            );
        }
        // Exhaustively, the first order with `k` in front is `k` then the rest ascending.
        let options = ProofOptions {
            max: 24,
            seed: 0,
            threads: 2,
        };
        let orders = ProofOrders::every(ids.len(), &options);
        let report = permute_with(
            &ids,
            BTreeMap::new(),
            &orders,
            &options,
            &|_| {},
            &fake_boot,
        )
        .unwrap();
        let heads: Vec<String> = report.outcomes.iter().map(|(o, _)| o.join("")).collect();
        assert_eq!(heads, ["abcd", "bacd", "cabd", "dabc"]);
        assert_eq!(
            report.unhealthy,
            Some((
                "dabc".chars().map(String::from).collect(),
                "the assembly failed: three went first".to_owned()
            ))
        );
    }

    #[test]
    fn the_driver_boots_a_listed_order_set_in_its_own_order() {
        let space = Space {
            ids: ["a", "b", "c"].map(str::to_owned).to_vec(),
            positions: vec![0, 1, 2],
            footprints: vec![Footprint::default(); 3],
            dependent: vec![vec![false; 3]; 3],
        };
        let listed = vec![vec![2, 0, 1], vec![1, 2, 0], vec![2, 1, 0], vec![0, 1, 2]];
        let orders = ProofOrders {
            orders: Orders::Listed(listed.clone()),
            count: 4,
            complete: true,
        };
        let report = prove_with(&space, &orders, &OPTIONS, &|_| {}, &fake_boot).unwrap();
        let expected = firsts(listed.into_iter(), &space.ids);
        let found: Vec<(Vec<String>, String)> = report
            .outcomes
            .iter()
            .map(|(order, o)| (order.clone(), o.digest.clone()))
            .collect();
        assert_eq!(found, expected);
        assert_eq!(report.interacting, Some(Vec::new()));
    }

    /// The class of `order`: the relative order of every dependent pair.
    fn class_of(order: &[usize], dep: &[Vec<bool>]) -> Vec<bool> {
        let mut at = vec![0; order.len()];
        for (i, &v) in order.iter().enumerate() {
            at[v] = i;
        }
        let n = order.len();
        (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter(|&(a, b)| dep[a][b])
            .map(|(a, b)| at[a] < at[b])
            .collect()
    }

    #[test]
    fn independent_elements_give_one_class_and_a_clique_gives_every_order() {
        let none = |_: usize, _: usize| false;
        let (forms, complete) = normal_forms(20, &none, 10);
        assert!(complete);
        assert_eq!(forms, vec![(0..20).collect::<Vec<_>>()]);
        let all = |_: usize, _: usize| true;
        let (forms, complete) = normal_forms(5, &all, 1_000);
        assert!(complete);
        assert_eq!(forms.len(), 120);
        let (forms, complete) = normal_forms(5, &all, 7);
        assert!(!complete);
        assert_eq!(forms.len(), 7);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The reduction agrees with brute force: its orders lie in distinct classes and every
        /// order of `0..n` lies in the class of one of them.
        #[test]
        fn normal_forms_are_one_per_class_of_all_orders(
            n in 1usize..=6,
            bits in proptest::collection::vec(any::<bool>(), 15),
        ) {
            let mut dep = vec![vec![false; n]; n];
            let pairs: Vec<(usize, usize)> =
                (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b))).collect();
            for (&(a, b), &d) in pairs.iter().zip(&bits) {
                dep[a][b] = d;
                dep[b][a] = d;
            }
            let (forms, complete) = normal_forms(n, &|a, b| dep[a][b], u64::MAX);
            prop_assert!(complete);
            let reduced: HashSet<Vec<bool>> = forms.iter().map(|o| class_of(o, &dep)).collect();
            prop_assert_eq!(reduced.len(), forms.len(), "two forms in one class");
            // Every order by brute force, in lexicographic order: the first of each class is
            // its least.
            let mut least: BTreeMap<Vec<bool>, Vec<usize>> = BTreeMap::new();
            for k in 0..factorial(n) {
                let order = nth_permutation(n, k);
                least.entry(class_of(&order, &dep)).or_insert(order);
            }
            let brute: HashSet<Vec<bool>> = least.keys().cloned().collect();
            prop_assert_eq!(reduced, brute);
            for form in &forms {
                prop_assert_eq!(&least[&class_of(form, &dep)], form);
            }
        }
    }

    /// One `debug/claim` entry: its tools, sections, services, and whether it adds a note.
    type Claimer = (
        Vec<&'static str>,
        Vec<&'static str>,
        Vec<&'static str>,
        bool,
    );

    /// A composition of `debug/claim` entries.
    fn composition(entries: &[Claimer]) -> LoadPlan {
        let mut yml = String::from(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n",
        );
        for (i, (tools, sections, services, note)) in entries.iter().enumerate() {
            yml.push_str(&format!(
                "- id: c{i}\n  name: debug/claim\n  config: {{tools: {tools:?}, sections: {sections:?}, services: {services:?}{}}}\n",
                if *note { format!(", note: \"note of c{i}\"") } else { String::new() }
            ));
        }
        crate::plan::load_plan(
            &yml,
            "generated.yml",
            &|_| None,
            &crate::builtins::Builtins::host(),
            &crate::plan::PlanOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}\n{yml}"))
    }

    const OPTIONS: ProofOptions = ProofOptions {
        max: 1_000,
        seed: 0,
        threads: 1,
    };

    #[test]
    fn names_two_entries_register_at_run_time_resolve_the_same_in_every_order() {
        let plan = composition(&[
            (vec!["echo", "mine"], vec!["guide"], vec!["alpha"], true),
            (vec!["echo"], vec!["guide"], vec!["alpha"], true),
            (vec!["other"], vec![], vec![], true),
        ]);
        let positions: Vec<usize> = (2..5).collect();
        let brute = permute(&plan, &positions, &OPTIONS, &|_| {}).unwrap();
        assert_eq!(brute.orders, 6);
        assert_eq!(brute.outcomes.len(), 1, "{:#?}", brute.outcomes);
        let outcome = &brute.outcomes[0].1;
        let conflict = "section \"guide\", service \"alpha\", tool \"echo\" are claimed by entries \"c0\" and \"c1\", so none of them gets them; remove them from all but one (or disable all but one of the entries)";
        assert_eq!(
            outcome.entries[2..4],
            [
                (
                    "c0".to_owned(),
                    EntryStatus::Conflict,
                    Some(conflict.to_owned())
                ),
                (
                    "c1".to_owned(),
                    EntryStatus::Conflict,
                    Some(conflict.to_owned())
                ),
            ]
        );
        assert_eq!(outcome.entries[4].1, EntryStatus::Active);
        assert!(brute.registration_orders > 1, "the proof is not vacuous");
        // The reduced proof explores the interacting orders only and finds the same outcome.
        let reduced = prove(&plan, &OPTIONS, &|_| {}).unwrap();
        assert!(reduced.exhaustive);
        assert!(reduced.orders < factorial(5), "{}", reduced.orders);
        assert_eq!(reduced.outcomes.len(), 1);
        assert_eq!(reduced.outcomes[0].1.key(), outcome.key());
    }

    /// A random composition of 2–4 `debug/claim` entries drawing from few names.
    fn arbitrary_composition() -> impl Strategy<Value = Vec<Claimer>> {
        let entry = (
            proptest::sample::subsequence(vec!["a", "b", "c"], 0..=2),
            proptest::sample::subsequence(vec!["s1", "s2"], 0..=1),
            proptest::sample::subsequence(vec!["alpha", "beta"], 0..=1),
            any::<bool>(),
        );
        proptest::collection::vec(entry, 2..=4)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Random compositions whose entries claim overlapping names at run time (tools,
        /// sections, services) and listen to one waterfall: every order of them boots to one
        /// outcome, and the reduced proof finds exactly that outcome.
        #[test]
        fn every_order_of_overlapping_claims_gives_one_outcome(entries in arbitrary_composition()) {
            let plan = composition(&entries);
            let positions: Vec<usize> = (2..plan.entries.len()).collect();
            let brute = permute(&plan, &positions, &OPTIONS, &|_| {}).unwrap();
            prop_assert!(brute.exhaustive);
            prop_assert_eq!(brute.outcomes.len(), 1, "{:#?}", brute.outcomes);
            let reduced = prove(&plan, &OPTIONS, &|_| {}).unwrap();
            prop_assert_eq!(reduced.outcomes.len(), 1);
            prop_assert_eq!(reduced.outcomes[0].1.key(), brute.outcomes[0].1.key());
        }
    }

    struct Ping;
    impl cordis_runtime::Event for Ping {
        const NAME: &'static str = "test/ping";
        type Output = ();
    }
    struct Pong;
    impl cordis_runtime::Event for Pong {
        const NAME: &'static str = "test/pong";
        type Output = ();
    }

    /// Which events an element of [`event_boot`] listens to (counting the calls) and emits
    /// while applying: `ping`, `pong` or `none`.
    type Uses = (&'static str, &'static str);

    /// A boot strategy for elements that only listen and emit: each element is a plugin applied
    /// in its place of `order` under the `fifo` schedule; the outcome is how often each
    /// element's listener ran, the footprints are what the runtime recorded.
    fn event_boot(
        uses: &'static [Uses],
    ) -> impl Fn(&tokio::runtime::Runtime, &[usize]) -> std::io::Result<OrderOutcome> + Sync {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        move |rt, order| {
            Ok(rt.block_on(async {
                let root = Context::root_with(Schedule::fifo());
                let hits: Vec<Arc<AtomicUsize>> = (0..uses.len())
                    .map(|_| Arc::new(AtomicUsize::new(0)))
                    .collect();
                for &i in order {
                    let (listen, emit) = uses[i];
                    let hit = hits[i].clone();
                    let plugin = cordis_runtime::FnPlugin::new("uses", move |ctx: Context, ()| {
                        let hit = hit.clone();
                        async move {
                            let count = move || {
                                hit.fetch_add(1, Ordering::SeqCst);
                            };
                            match listen {
                                "ping" => drop(ctx.on::<Ping>(move |_| count())),
                                "pong" => drop(ctx.on::<Pong>(move |_| count())),
                                _ => {}
                            }
                            match emit {
                                "ping" => ctx.emit(Ping),
                                "pong" => ctx.emit(Pong),
                                _ => {}
                            }
                            Ok(())
                        }
                    });
                    let _ = root.plugin_with(
                        cordis_runtime::Prepared::new(plugin, ()),
                        cordis_runtime::PluginOptions {
                            label: Some(format!("e{i}")),
                            place: Some(i as u64),
                            ..Default::default()
                        },
                    );
                }
                root.idle().await;
                let counts: Vec<String> = hits
                    .iter()
                    .enumerate()
                    .map(|(i, h)| format!("e{i}:{}", h.load(Ordering::SeqCst)))
                    .collect();
                let events = event_footprints(&root);
                root.dispose();
                OrderOutcome {
                    digest: counts.join(" "),
                    assembly_error: None,
                    catalog: None,
                    entries: Vec::new(),
                    incidents: Vec::new(),
                    registrations: Vec::new(),
                    events,
                }
            }))
        }
    }

    /// A space of `n` elements `e0..` whose footprints say nothing about events (as the
    /// plan-time footprints cannot), so the first round boots one order.
    fn silent_space(n: usize) -> Space {
        Space {
            ids: (0..n).map(|i| format!("e{i}")).collect(),
            positions: (0..n).collect(),
            footprints: vec![Footprint::default(); n],
            dependent: vec![vec![false; n]; n],
        }
    }

    #[test]
    fn entries_that_emit_while_applying_what_the_other_listens_to_are_proved_in_both_orders() {
        // e1 and e2 each listen to ping and emit it while applying: whichever applies first
        // misses nothing, the later one's emit reaches both. e0 and e3 use no event.
        static USES: [Uses; 4] = [
            ("none", "none"),
            ("ping", "ping"),
            ("ping", "ping"),
            ("pong", "none"),
        ];
        let space = silent_space(USES.len());
        let orders = space.orders(&OPTIONS);
        assert_eq!(orders.count, 1, "the plan-time footprints see one class");
        let report = prove_with(&space, &orders, &OPTIONS, &|_| {}, &event_boot(&USES)).unwrap();
        assert!(report.exhaustive);
        assert_eq!(report.orders, 2, "the class with e2 first is booted too");
        assert_eq!(
            report.through_events,
            [(
                "e1".to_owned(),
                "e2".to_owned(),
                vec!["test/ping".to_owned()]
            )]
        );
        assert_eq!(
            report.interacting,
            Some(vec![("e1".to_owned(), "e2".to_owned())])
        );
        let found: Vec<(String, String)> = report
            .outcomes
            .iter()
            .map(|(order, o)| (order.join(","), o.digest.clone()))
            .collect();
        assert_eq!(
            found,
            [
                ("e0,e1,e2,e3".to_owned(), "e0:0 e1:2 e2:1 e3:0".to_owned()),
                ("e0,e2,e1,e3".to_owned(), "e0:0 e1:1 e2:2 e3:0".to_owned()),
            ]
        );
        // Brute force agrees: exactly these two outcomes.
        let brute = permute_with(
            &space.ids,
            BTreeMap::new(),
            &ProofOrders::every(USES.len(), &OPTIONS),
            &OPTIONS,
            &|_| {},
            &event_boot(&USES),
        )
        .unwrap();
        assert_eq!(brute.outcomes.len(), 2);
    }

    #[test]
    fn an_emitter_and_a_listener_of_different_events_stay_one_class() {
        // e0 listens to ping; e1 emits pong while applying (and listens to it itself, which
        // meets no other entry).
        static DISJOINT: [Uses; 2] = [("ping", "none"), ("pong", "pong")];
        let space = silent_space(DISJOINT.len());
        let orders = space.orders(&OPTIONS);
        let report =
            prove_with(&space, &orders, &OPTIONS, &|_| {}, &event_boot(&DISJOINT)).unwrap();
        assert!(report.exhaustive);
        assert_eq!(report.orders, 1);
        assert!(
            report.through_events.is_empty(),
            "{:?}",
            report.through_events
        );
        assert_eq!(report.interacting, Some(Vec::new()));
        assert_eq!(report.outcomes.len(), 1);
    }
}
