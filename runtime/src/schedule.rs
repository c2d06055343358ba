//! The seeded schedule: perturbs task interleaving at named points so load races replay.
//!
//! Choose a policy by what you want to find:
//! - `fifo`: no perturbation; tasks interleave as the tokio scheduler runs them.
//! - `random`: at every point a task yields a seeded number of times (0 to 15), which reorders
//!   concurrent applies and registrations; over many seeds it reaches every order of a few
//!   independent entries.
//! - `pct:<d>`: a PCT-style policy (Burckhardt et al., "A randomized scheduler with probabilistic
//!   guarantees of finding bugs"): each task gets a seeded priority, lower priorities yield more at
//!   every point, and `d - 1` seeded change points demote the task that reaches them. It favours
//!   bugs that need a few specific orderings over uniform shuffles. A point named `kind/actor`
//!   (e.g. `tool-call/alpha`) gives `actor` a priority of its own within its task, so futures
//!   joined in one task are perturbed against each other too.
//!
//! Every draw comes from a ChaCha stream of its own per named site (seed + site name), so adding
//! a site never shifts the draws of another.
//!
//! # Determinism
//! On a current-thread runtime the same seed gives exactly the same interleaving. On a
//! multi-thread runtime a seed replays the perturbations, not the operating system.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};

use crate::scope::lock;

/// One yield on a current-thread runtime: the task wakes itself and goes to the back of the run
/// queue, behind every task that is ready. `tokio::task::yield_now` defers that wake until the
/// scheduler has polled the I/O and time drivers, a system call per round of yields (about fifty
/// per seeded boot of the bundled composition), and lets operating-system events in between;
/// this yield does neither. On a multi-thread runtime a self-wake would land in the worker's
/// LIFO slot and not yield at all, so [`Schedule::point`] uses tokio's yield there.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        note_self_wake(cx.waker());
        std::task::Poll::Pending
    }
}

/// `tokio::task::yield_now` (the multi-thread yield), noting its self-wake like [`YieldOnce`].
async fn tokio_yield() {
    let mut inner = std::pin::pin!(tokio::task::yield_now());
    std::future::poll_fn(|cx| {
        let poll = inner.as_mut().poll(cx);
        if poll.is_pending() {
            note_self_wake(cx.waker());
        }
        poll
    })
    .await;
}

/// A waker's identity (data and vtable addresses, as [`std::task::Waker::will_wake`] compares).
type WakerId = (*const (), *const std::task::RawWakerVTable);

thread_local! {
    /// The waker a schedule point on this thread last woke itself with, since the last
    /// [`clear_self_wake`].
    static SELF_WOKEN: std::cell::Cell<Option<WakerId>> = const { std::cell::Cell::new(None) };
}

fn waker_id(waker: &std::task::Waker) -> WakerId {
    (waker.data(), std::ptr::from_ref(waker.vtable()))
}

fn note_self_wake(waker: &std::task::Waker) {
    SELF_WOKEN.with(|w| w.set(Some(waker_id(waker))));
}

/// Forgets the last self-wake of a schedule point on this thread (before polling a future
/// whose pend [`self_woken`] is to explain).
pub(crate) fn clear_self_wake() {
    SELF_WOKEN.with(|w| w.set(None));
}

/// Whether a schedule point woke `waker` itself since [`clear_self_wake`] on this thread: a
/// future polled with `waker` that returned `Pending` then is sure to be polled again without
/// any outside event (the point yielded). A waker a combinator substituted does not match, so
/// the answer errs towards "no".
pub(crate) fn self_woken(waker: &std::task::Waker) -> bool {
    SELF_WOKEN.with(|w| w.get() == Some(waker_id(waker)))
}

/// Which perturbation a [`Schedule`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// No perturbation.
    Fifo,
    /// Seeded yields at every point.
    Random,
    /// Seeded priorities with `depth - 1` change points.
    Pct {
        /// The PCT bug depth `d` (at least 1).
        depth: u32,
    },
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Fifo => f.write_str("fifo"),
            Policy::Random => f.write_str("random"),
            Policy::Pct { depth } => write!(f, "pct:{depth}"),
        }
    }
}

/// A schedule policy name that is not `fifo`, `random`, `pct` or `pct:<depth>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown schedule policy \"{0}\": use fifo, random, pct or pct:<depth> (depth 1 to 64)")]
pub struct PolicyParseError(pub String);

impl FromStr for Policy {
    type Err = PolicyParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fifo" => Ok(Policy::Fifo),
            "random" => Ok(Policy::Random),
            "pct" => Ok(Policy::Pct { depth: 3 }),
            other => other
                .strip_prefix("pct:")
                .and_then(|d| d.parse::<u32>().ok())
                .filter(|d| (1..=64).contains(d))
                .map(|depth| Policy::Pct { depth })
                .ok_or_else(|| PolicyParseError(other.to_owned())),
        }
    }
}

/// Yields at most this many times at one point under `random`.
const MAX_YIELDS: u64 = 16;
/// PCT change points are drawn among this many first points.
const PCT_HORIZON: u64 = 64;

#[derive(Default)]
struct PctState {
    /// Actors (a task, or an actor named by a site within a task) with their priorities
    /// (higher runs earlier).
    /// `None` as the task is the runtime's root future (`block_on`), which is no task.
    priorities: HashMap<(Option<tokio::task::Id>, Option<String>), u64>,
    steps: u64,
    change_points: Vec<u64>,
    demoted: u64,
}

struct Inner {
    policy: Policy,
    seed: u64,
    /// Each site's stream, by name. Fx: the names are the program's own, looked up at every
    /// point, and the map is never iterated (no order reaches an output).
    sites: Mutex<rustc_hash::FxHashMap<String, ChaCha8Rng>>,
    pct: Mutex<PctState>,
}

/// A seeded schedule shared by every task of one load. Cheap to clone.
#[derive(Clone)]
pub struct Schedule {
    inner: Arc<Inner>,
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Schedule({}, seed {})",
            self.inner.policy, self.inner.seed
        )
    }
}

/// FNV-1a: a stable hash of a site name (std's hasher may change between releases).
fn site_stream(site: &str) -> u64 {
    site.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The named perturbation sites and trace kinds, so a site or kind is spelled once.
impl Schedule {
    /// Site: before a plugin's `apply` runs.
    pub const BEFORE_APPLY: &'static str = "before-apply";
    /// Site: before a plugin registers something (a tool, a section, a service, an effect).
    pub const BEFORE_REGISTER: &'static str = "before-register";

    /// Trace kind: a plugin's `apply` started.
    pub const TRACE_APPLY: &'static str = "apply";
    /// Trace kind: a registration (a tool, an effect), with its name as the detail.
    pub const TRACE_REGISTER: &'static str = "register";
    /// Trace kind: a prompt section registration, with the section name.
    pub const TRACE_SECTION: &'static str = "section";
    /// Trace kind: a service provided, with the service name.
    pub const TRACE_PROVIDE: &'static str = "provide";
}

impl Schedule {
    /// The schedule that perturbs nothing.
    pub fn fifo() -> Schedule {
        Schedule::new(Policy::Fifo, 0)
    }

    /// A schedule with `policy`, seeded by `seed`.
    pub fn new(policy: Policy, seed: u64) -> Schedule {
        let mut pct = PctState::default();
        if let Policy::Pct { depth } = policy {
            let mut rng = stream(seed, "pct/change-points");
            pct.change_points = (1..depth).map(|_| bounded(&mut rng, PCT_HORIZON)).collect();
            pct.change_points.sort_unstable();
        }
        Schedule {
            inner: Arc::new(Inner {
                policy,
                seed,
                sites: Mutex::new(rustc_hash::FxHashMap::default()),
                pct: Mutex::new(pct),
            }),
        }
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.inner.policy
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.inner.seed
    }

    /// A seeded draw in `0..bound` from `site`'s own stream (for plugins that choose by seed).
    /// Under `fifo` the stream is still seeded, so a fault plugin can pick its fault by seed.
    pub fn draw(&self, site: &str, bound: u64) -> u64 {
        let mut sites = lock(&self.inner.sites);
        // Look up before inserting: a point is hit once per task, and the common case must not
        // allocate the site name.
        if let Some(rng) = sites.get_mut(site) {
            return bounded(rng, bound.max(1));
        }
        let rng = sites
            .entry(site.to_owned())
            .or_insert_with(|| stream(self.inner.seed, site));
        bounded(rng, bound.max(1))
    }

    /// A perturbation point named `site` (`before-apply`, `before-register`, …).
    ///
    /// # Cancel safety
    /// Cancel safe: it only yields.
    pub async fn point(&self, site: &str) {
        let yields = match self.inner.policy {
            Policy::Fifo => 0,
            Policy::Random => self.draw(site, MAX_YIELDS),
            Policy::Pct { .. } => self.pct_yields(site),
        };
        if yields == 0 {
            return;
        }
        let current_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        for _ in 0..yields {
            if current_thread {
                YieldOnce(false).await;
            } else {
                tokio_yield().await;
            }
        }
    }

    fn pct_yields(&self, site: &str) -> u64 {
        let task = tokio::task::try_id();
        let fresh = self.draw(&format!("pct/priority/{site}"), MAX_YIELDS);
        // A site `kind/actor` names an actor inside its task: futures joined in one task (the
        // parallel tool calls of one step) are separate actors with priorities of their own.
        let actor = (task, site.split_once('/').map(|(_, who)| who.to_owned()));
        let mut pct = lock(&self.inner.pct);
        pct.steps += 1;
        let step = pct.steps;
        let priority = *pct.priorities.entry(actor.clone()).or_insert(fresh);

        if pct.change_points.contains(&step) {
            pct.demoted += 1;
            let low = MAX_YIELDS + pct.demoted;
            pct.priorities.insert(actor, low);
            low
        } else {
            priority
        }
    }
}

fn stream(seed: u64, site: &str) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(site_stream(site));
    rng
}

/// A uniform draw in `0..bound` (Lemire's multiply-shift; the bias is below 2^-32 for our bounds).
fn bounded(rng: &mut ChaCha8Rng, bound: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(bound)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        for s in ["fifo", "random", "pct:3", "pct:1"] {
            assert_eq!(s.parse::<Policy>().unwrap().to_string(), s);
        }
        assert_eq!("pct".parse::<Policy>().unwrap(), Policy::Pct { depth: 3 });
        let err = "lifo".parse::<Policy>().unwrap_err().to_string();
        assert!(
            err.contains("\"lifo\"") && err.contains("fifo, random"),
            "{err}"
        );
        assert!("pct:0".parse::<Policy>().is_err());
    }

    #[test]
    fn the_same_seed_draws_the_same_numbers() {
        let a = Schedule::new(Policy::Random, 7);
        let b = Schedule::new(Policy::Random, 7);
        let da: Vec<u64> = (0..32).map(|_| a.draw("x", 1000)).collect();
        let db: Vec<u64> = (0..32).map(|_| b.draw("x", 1000)).collect();
        assert_eq!(da, db);
        let c = Schedule::new(Policy::Random, 8);
        let dc: Vec<u64> = (0..32).map(|_| c.draw("x", 1000)).collect();
        assert_ne!(da, dc);
    }

    #[test]
    fn a_new_site_does_not_shift_another_sites_draws() {
        let a = Schedule::new(Policy::Random, 42);
        let b = Schedule::new(Policy::Random, 42);
        let mut da = Vec::new();
        let mut db = Vec::new();
        for _ in 0..16 {
            da.push(a.draw("before-apply", 100));
            let _ = b.draw("another-site", 100);
            db.push(b.draw("before-apply", 100));
        }
        assert_eq!(da, db);
    }

    /// A waker that only counts its wakes (each one a distinct waker).
    struct Counting(std::sync::atomic::AtomicUsize);
    impl std::task::Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_point_yield_is_told_apart_from_other_pends_by_its_waker() {
        use std::future::Future;
        let mine = std::task::Waker::from(Arc::new(Counting(0.into())));
        let other = std::task::Waker::from(Arc::new(Counting(0.into())));
        clear_self_wake();
        assert!(!self_woken(&mine));
        let mut y = std::pin::pin!(YieldOnce(false));
        let mut cx = std::task::Context::from_waker(&mine);
        assert!(y.as_mut().poll(&mut cx).is_pending());
        assert!(self_woken(&mine), "the yield woke this waker itself");
        assert!(!self_woken(&other), "another waker was not woken");
        clear_self_wake();
        assert!(!self_woken(&mine), "a cleared mark is gone");
        // A pend that is no yield leaves no mark.
        let mut never = std::pin::pin!(std::future::pending::<()>());
        assert!(never.as_mut().poll(&mut cx).is_pending());
        assert!(!self_woken(&mine));
    }

    #[test]
    fn draws_stay_in_bounds() {
        let s = Schedule::new(Policy::Random, 1);
        assert!((0..1000).all(|_| s.draw("b", 3) < 3));
        assert_eq!(s.draw("zero", 0), 0);
    }
}
