//! One boot of an order ([`boot`]) and what it shows ([`OrderOutcome`]).

use std::collections::{BTreeMap, HashMap};

use cordis_runtime::{Context, EventFootprint, NameFootprint, Schedule, ScopeId};

use crate::assembly::{HeaderBytes, header_bytes};
use crate::loader::{EntryStatus, entry_report, start_entries_in_order};
use crate::plan::LoadPlan;

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
    /// [`prove_with`](super::prove_with()) unions it over every order to find interactions
    /// through events.
    pub events: BTreeMap<String, EventFootprint>,
    /// What each element (by id) was seen to do with names during the boot (see
    /// [`NameFootprint`]); not compared: [`prove_with`](super::prove_with()) unions it over
    /// every order to find the pairs a silent entry meets.
    pub names: BTreeMap<String, NameFootprint>,
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
pub(super) type Key = (
    String,
    Option<String>,
    Option<String>,
    Vec<(String, EntryStatus, Option<String>)>,
    Vec<String>,
);

impl OrderOutcome {
    pub(super) fn key(&self) -> Key {
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
    root.observe_names(true);
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
    let names = name_footprints(&root);
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
        names,
    }
}

/// The event footprint of every entry of the runtime under `root`, by entry id: each scope's
/// own, added to its nearest labelled scope (the loader labels an entry's scope with its id),
/// so a child scope an entry applies counts as the entry's. Entries that used no event are left
/// out.
pub fn event_footprints(root: &Context) -> BTreeMap<String, EventFootprint> {
    by_entry(
        root,
        |s| !s.events.is_empty(),
        |to: &mut EventFootprint, s| to.union(&s.events),
    )
}

/// What every entry of the runtime under `root` was seen to do with names (the runtime
/// observes them when [`Context::observe_names`] is on), by entry id, as
/// [`event_footprints`]: a child scope's counts for its entry.
pub fn name_footprints(root: &Context) -> BTreeMap<String, NameFootprint> {
    by_entry(
        root,
        |s| !s.names.is_empty(),
        |to: &mut NameFootprint, s| to.union(&s.names),
    )
}

/// Each scope's `take` added to its nearest labelled scope's value, by label.
fn by_entry<T: Default>(
    root: &Context,
    keep: impl Fn(&cordis_runtime::ScopeInfo) -> bool,
    add: impl Fn(&mut T, &cordis_runtime::ScopeInfo),
) -> BTreeMap<String, T> {
    let scopes = root.scopes();
    let by_id: HashMap<ScopeId, &cordis_runtime::ScopeInfo> =
        scopes.iter().map(|s| (s.id, s)).collect();
    let mut out: BTreeMap<String, T> = BTreeMap::new();
    for scope in scopes.iter().filter(|s| keep(s)) {
        let mut at = Some(scope);
        while let Some(s) = at {
            if let Some(label) = &s.label {
                add(out.entry(label.clone()).or_default(), scope);
                break;
            }
            at = s.parent.and_then(|p| by_id.get(&p).copied());
        }
    }
    out
}
