//! The space a proof permutes ([`Space`]): its elements, their footprints and which pairs
//! interact.

use std::collections::BTreeMap;

use super::footprint::{Footprint, plugin_entries};
use super::orders::{Orders, ProofOrders, normal_forms, start_order};
use super::proof::ProofOptions;
use crate::plan::LoadPlan;

/// The entries [`prove`](super::prove()) permutes, their footprints' interacting pairs and
/// claim counts.
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
    /// The boots observe what every element does with names
    /// ([`cordis_runtime::NameFootprint`], keyed by element id in
    /// [`OrderOutcome::names`](super::OrderOutcome::names)), so a silent entry starts from what
    /// it states ([`Footprint::interacts_observed`]) and
    /// [`prove_with`](super::prove_with()) adds what the boots show
    /// ([`Footprint::interacts_seen`]). False: silent entries are guessed to interact with
    /// every entry registering names of the kinds whose registry they inject
    /// ([`Footprint::interacts`]).
    pub seen: bool,
}

impl Space {
    /// Every plugin entry of `plan` with its footprint, for boots that observe names
    /// ([`Self::seen`]: [`boot`](super::boot()) does).
    pub fn of(plan: &LoadPlan) -> Space {
        let positions = plugin_entries(plan);
        let footprints: Vec<Footprint> = positions
            .iter()
            .map(|&p| Footprint::of(&plan.entries[p]))
            .collect();
        let mut space = Space {
            ids: positions
                .iter()
                .map(|&p| plan.entries[p].id.clone())
                .collect(),
            positions,
            footprints,
            dependent: Vec::new(),
            seen: true,
        };
        space.dependent = space.relation();
        space
    }

    /// This space for boots that do not observe names: silent entries guessed.
    #[must_use]
    pub fn unseen(mut self) -> Space {
        self.seen = false;
        self.dependent = self.relation();
        self
    }

    /// The plan-time relation of the footprints (see [`Self::seen`]).
    fn relation(&self) -> Vec<Vec<bool>> {
        let f = &self.footprints;
        (0..f.len())
            .map(|a| {
                (0..f.len())
                    .map(|b| {
                        a != b
                            && if self.seen {
                                f[a].interacts_observed(&f[b])
                            } else {
                                f[a].interacts(&f[b])
                            }
                    })
                    .collect()
            })
            .collect()
    }

    /// This space followed by `rows`' elements (ids prefixed `prefix/`), none of them
    /// interacting with this space's: a preset's rows mount after the host's boot is over.
    /// The joined boot does not observe names, so both parts are [`Self::unseen`].
    pub fn then(self, rows: Space, prefix: &str) -> Space {
        let mut this = self.unseen();
        let rows = rows.unseen();
        let (n, m) = (this.ids.len(), rows.ids.len());
        this.ids
            .extend(rows.ids.iter().map(|id| format!("{prefix}/{id}")));
        this.footprints.extend(rows.footprints);
        for row in &mut this.dependent {
            row.extend(std::iter::repeat_n(false, m));
        }
        for row in rows.dependent {
            let mut full = vec![false; n];
            full.extend(row);
            this.dependent.push(full);
        }
        this
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
            if f.silent && self.seen {
                *out.entry("silent (seen)".to_owned()).or_default() += 1;
                continue;
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

    /// What [`prove_with`](super::prove_with()) boots under `options`: one order per class
    /// when there are at most `max` classes, else `max` seeded shuffles. Computed once, so a
    /// caller can show the count before the boots start.
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
