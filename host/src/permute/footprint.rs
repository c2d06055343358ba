//! What an entry may touch that another entry's order could matter to ([`Footprint`]), and
//! which entries a proof permutes.

use cordis_runtime::{Claim, NameFootprint, Service};

use crate::claims::entry_claims;
use crate::plan::{LoadPlan, PlannedEntry, Step};

/// Indices (in the plan) of the entries that require the `tools` service: what
/// [`permute`](super::permute()) reorders when asked for registration orders only.
pub fn tool_entries(plan: &LoadPlan) -> Vec<usize> {
    plan.entries
        .iter()
        .enumerate()
        .filter(|(_, e)| requires(e, cordis_tools::ToolRegistry::NAME))
        .map(|(i, _)| i)
        .collect()
}

/// Indices of every plugin entry: what [`prove`](super::prove()) reorders (any of them may
/// claim, listen or guard).
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

/// The services whose reads and writes a boot observes (see [`cordis_runtime::NameFootprint`]):
/// the tool registry and the prompt sections note every look-up, and the runtime notes claims
/// and service look-ups itself.
pub const OBSERVED_SERVICES: [&str; 2] = [
    cordis_tools::ToolRegistry::NAME,
    cordis_system_prompt::SystemPrompt::NAME,
];

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
    /// Its plugin has not said what it claims ([`cordis_runtime::Plugin::open_claims`] is
    /// `None`): [`Self::open`] and [`Self::observes`] are a guess, which a proof that observes
    /// its boots replaces by what the entry was seen to do.
    pub silent: bool,
    /// Services it injects whose use a boot cannot observe (all but [`OBSERVED_SERVICES`]),
    /// sorted. A silent entry may read through them what another entry injecting the same
    /// service did, so an observing proof orders the two (it cannot see whether they meet).
    pub opaque: Vec<String>,
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
        let stated = prepared.plugin.open_claims_erased(&*prepared.config);
        let silent = stated.is_none();
        let (open, observes) = match stated {
            Some(open) => (open, Vec::new()),
            None => (guess.clone(), guess),
        };
        let mut opaque: Vec<String> = injected(entry)
            .into_iter()
            .filter(|s| !OBSERVED_SERVICES.contains(&s.as_str()))
            .collect();
        opaque.sort();
        opaque.dedup();
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
            silent,
            opaque,
        }
    }

    /// Whether the order of this entry and `other` can matter, for a proof that observes its
    /// boots ([`Self::interacts_seen`] adds what they were seen to do): as [`Self::interacts`],
    /// but a silent entry's guessed [`Self::open`] and [`Self::observes`] are left out, and a
    /// silent entry meets every entry injecting a service whose use cannot be observed that it
    /// injects too ([`Self::opaque`]).
    pub fn interacts_observed(&self, other: &Footprint) -> bool {
        let stated = |f: &Footprint| {
            if f.silent {
                Footprint {
                    open: Vec::new(),
                    observes: Vec::new(),
                    ..f.clone()
                }
            } else {
                f.clone()
            }
        };
        let opaque = |a: &Footprint, b: &Footprint| {
            a.silent && a.opaque.iter().any(|s| b.opaque.binary_search(s).is_ok())
        };
        stated(self).interacts(&stated(other)) || opaque(self, other) || opaque(other, self)
    }

    /// Whether this entry, seen to do `mine`, and `other`, seen to do `theirs`, meet through
    /// names (symmetric): one wrote a name the other wrote or read, read the listing of a kind
    /// the other wrote a name of, or read a name (or the listing) of a kind the other may
    /// write any name of (a stated open kind, or one it changed wholesale). What an entry
    /// writes is what it states ([`Self::claims`]) and what it was seen to write. Names are
    /// compared by kind and name, whatever their layer.
    pub fn interacts_seen(
        &self,
        mine: &NameFootprint,
        other: &Footprint,
        theirs: &NameFootprint,
    ) -> bool {
        meets_seen(mine, other, theirs) || meets_seen(theirs, self, mine)
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

/// Whether an entry seen to do `na` met `b` (seen to do `nb`): one direction of
/// [`Footprint::interacts_seen`]. Two writes of one name meet (as two stated claims of one
/// name do in [`Footprint::interacts`]); a read meets a write of its name, a listing any write
/// of its kind, and both meet every name of a kind `b` may write without naming it (its stated
/// open kinds, what it was seen to change wholesale).
fn meets_seen(na: &NameFootprint, b: &Footprint, nb: &NameFootprint) -> bool {
    let same = |x: &Claim, y: &Claim| x.kind == y.kind && x.name == y.name;
    let b_any =
        |kind: &str| (!b.silent && b.open.contains(&kind)) || nb.changes.iter().any(|k| k == kind);
    let b_names =
        |c: &Claim| b.claims.iter().any(|w| same(w, c)) || nb.writes.iter().any(|w| same(w, c));
    let b_kind = |kind: &str| {
        b_any(kind)
            || b.claims.iter().any(|w| w.kind == kind)
            || nb.writes.iter().any(|w| w.kind == kind)
    };
    na.writes.iter().any(&b_names)
        || na.reads.iter().any(|c| b_names(c) || b_any(&c.kind))
        || na.lists.iter().any(|k| b_kind(k))
}

/// Every service `entry` injects (its plugin's and its config's, required or optional).
fn injected(entry: &PlannedEntry) -> Vec<String> {
    match &entry.step {
        Step::Plugin {
            prepared, inject, ..
        } => prepared
            .plugin
            .inject()
            .iter()
            .map(|i| i.name.to_string())
            .chain(inject.iter().cloned())
            .collect(),
        _ => Vec::new(),
    }
}
