//! Which orders a proof boots: every permutation, seeded shuffles, or one order per class of
//! orders that can differ ([`normal_forms`]).

use cordis_runtime::{Policy, Schedule};

use super::proof::ProofOptions;

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

/// The start order of plan indices that puts the entry at `positions[order[k]]` in the place of
/// `positions[k]`: the boot of the file with those entries written in that order.
pub fn start_order(n: usize, positions: &[usize], order: &[usize]) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..n).collect();
    for (k, &from) in order.iter().enumerate() {
        indices[positions[k]] = positions[from];
    }
    indices
}

/// Whether orders `x` and `y` of the same elements put every `dependent` pair the same way
/// round: whether they lie in one class.
pub(super) fn same_class(x: &[usize], y: &[usize], dependent: &[Vec<bool>]) -> bool {
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

/// The orders a proof boots: one per class ([`Space::orders`](super::Space::orders)) or every order
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use proptest::prelude::*;

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
}
