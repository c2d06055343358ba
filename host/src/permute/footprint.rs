//! What an entry may touch that another entry's order could matter to ([`Footprint`]), and
//! which entries a proof permutes.

use cordis_runtime::{Claim, Service};

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
