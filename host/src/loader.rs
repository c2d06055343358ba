//! Boot: apply every enabled entry of a plan concurrently, wait until the runtime is idle, report.
//!
//! Every plugin entry is applied with [`Context::plugin_with`], labelled with its entry id, so the
//! runtime runs each apply in a task of its own: entries load concurrently, an entry that injects
//! a service stays pending until a provider is active, and a failing, panicking or hanging entry
//! (the per-entry timeout turns a hang into `failed`) fails alone. A group entry is a child scope
//! in which its children are applied. Boot returns when no scope is loading any more
//! ([`Context::idle`]); pending entries name the services they still wait for.
//!
//! # Determinism
//! Entries are applied in plan (file) order; under a seeded [`Schedule`] on a current-thread
//! runtime ([`boot_blocking`]) the order of every apply and registration is a function of the
//! seed. The report's [`assembly_view`] and digest derive from sorted data only; load times and
//! the trace are order-dependent and never part of the digest.

use cordis_runtime::{
    Context, Inject, LiveCounts, Offered, PluginOptions, Policy, Schedule, ScopeHandle,
    ScopeOutcome, ScopeStatus, TraceEvent,
};
use serde_json::{Value, json};

use crate::assembly::{Gathered, assembly_view, gather};
use crate::diagnostic::Pos;
use crate::plan::{LoadPlan, PlannedEntry, Step};

/// Where an entry ended up after boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryStatus {
    /// Waiting for services.
    Pending,
    /// Still applying (only seen if boot was cut short).
    Loading,
    /// Applied.
    Active,
    /// Apply failed, panicked or timed out.
    Failed,
    /// Disposed.
    Disposed,
    /// Applied, but a name it claims is claimed by another entry too, so neither gets it
    /// (see [`cordis_runtime::Claim`]): the error names every claimant.
    Conflict,
    /// Disabled in the config (itself or its group).
    Disabled,
}

impl EntryStatus {
    /// Lowercase name for tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Pending => "pending",
            EntryStatus::Loading => "loading",
            EntryStatus::Active => "active",
            EntryStatus::Failed => "failed",
            EntryStatus::Disposed => "disposed",
            EntryStatus::Conflict => "conflict",
            EntryStatus::Disabled => "disabled",
        }
    }

    /// Whether the entry is where the config asked it to be: active, or disabled by the config.
    /// Anything else (pending, still loading, failed, disposed) is a problem to report.
    pub fn is_as_configured(self) -> bool {
        matches!(self, EntryStatus::Active | EntryStatus::Disabled)
    }

    /// The status named `name` (as [`EntryStatus::as_str`] spells it).
    pub fn from_name(name: &str) -> Option<EntryStatus> {
        Some(match name {
            "pending" => EntryStatus::Pending,
            "loading" => EntryStatus::Loading,
            "active" => EntryStatus::Active,
            "failed" => EntryStatus::Failed,
            "disposed" => EntryStatus::Disposed,
            "conflict" => EntryStatus::Conflict,
            "disabled" => EntryStatus::Disabled,
            _ => return None,
        })
    }
}

impl From<ScopeStatus> for EntryStatus {
    fn from(s: ScopeStatus) -> Self {
        match s {
            ScopeStatus::Pending => EntryStatus::Pending,
            ScopeStatus::Loading => EntryStatus::Loading,
            ScopeStatus::Active => EntryStatus::Active,
            ScopeStatus::Failed => EntryStatus::Failed,
            ScopeStatus::Disposed => EntryStatus::Disposed,
        }
    }
}

impl std::fmt::Display for EntryStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryReport {
    /// Entry id.
    pub id: String,
    /// Plugin name.
    pub name: String,
    /// Where the entry is in the file.
    pub pos: Pos,
    /// Final status.
    pub status: EntryStatus,
    /// Why it failed, or what a pending entry waits for.
    pub error: Option<String>,
    /// Services a pending entry still waits for, sorted.
    pub waiting_for: Vec<String>,
    /// A pending entry whose apply deferred (a server it needs is down): `error` says why, and
    /// the entry applies itself again; not a failure of the boot.
    pub retrying: bool,
    /// How long its apply took, in milliseconds (`None` until an apply finished).
    pub load_ms: Option<u64>,
}

impl EntryReport {
    /// Whether `cordis check` counts this entry as a failure: not where the config asked it to
    /// be, unless it is retrying by itself (deferred), which its config allowed.
    pub fn fails_check(&self) -> bool {
        !self.status.is_as_configured() && !self.retrying
    }
}

/// What a boot produced.
#[derive(Debug, Clone)]
pub struct BootReport {
    /// The seed of the schedule.
    pub seed: u64,
    /// The schedule policy.
    pub policy: Policy,
    /// Every entry of the plan, in file order.
    pub entries: Vec<EntryReport>,
    /// The assembly view (see [`assembly_view`]); `null` without a system prompt.
    pub assembly: Value,
    /// Hex sha256 of the request header bytes (see [`crate::assembly`]).
    pub digest: String,
    /// Why `assemble()` failed, if it did.
    pub assembly_error: Option<String>,
    /// Hex sha256 of what the entries offer people beside the request (see
    /// [`cordis_runtime::Offered`]: an MCP server's prompts and resources); `None` when none
    /// offers anything.
    pub catalog: Option<String>,
    /// Contained failures (panicking listeners, undos, tasks), sorted.
    pub incidents: Vec<String>,
    /// The runtime's apply/registration trace, in the order it happened.
    pub trace: Vec<TraceEvent>,
    /// Wall-clock time from the first apply until the runtime was idle (never in a digest).
    pub boot_time: std::time::Duration,
}

impl BootReport {
    /// True when every enabled entry is active and the assembly (if any) succeeded.
    pub fn healthy(&self) -> bool {
        self.all_active() && self.assembly_error.is_none()
    }

    /// True when every enabled entry is active.
    pub fn all_active(&self) -> bool {
        self.entries.iter().all(|e| e.status.is_as_configured())
    }

    /// The report as one JSON object: seed, schedule, entries, assembly, digest, incidents.
    pub fn to_json(&self) -> Value {
        json!({
            "seed": self.seed,
            "schedule": self.policy.to_string(),
            "entries": self.entries.iter().map(|e| json!({
                "id": e.id,
                "name": e.name,
                "status": e.status.as_str(),
                "error": e.error,
                "waiting_for": e.waiting_for,
                "retrying": e.retrying,
                "load_ms": e.load_ms,
            })).collect::<Vec<_>>(),
            "assembly": self.assembly,
            "assembly_error": self.assembly_error,
            "digest": self.digest,
            "catalog": self.catalog,
            "incidents": self.incidents,
            "boot_ms": self.boot_time.as_secs_f64() * 1e3,
        })
    }

    /// The part of the report that must not depend on the seed: the digest's input, every
    /// entry's status and error by entry id, and the incidents
    /// (`{"assembly": …, "entries": {id: {status, error}}, "incidents": […]}`).
    ///
    /// Built with every object's keys in sorted order, so the value is canonical as it stands and
    /// its canonical bytes (what `stress` compares) need no sorted copy.
    pub fn outcome(&self) -> Value {
        outcome_json(
            self.entries
                .iter()
                .map(|e| (e.id.as_str(), e.status, e.error.as_deref())),
            self.assembly.clone(),
            self.assembly_error.as_deref(),
            &self.digest,
            self.catalog.as_deref(),
            &self.incidents,
        )
    }

    /// Whether `other` has the same [`Self::outcome`], without building either: what a stress
    /// run asks of every seed after the first, so the JSON is built only to explain a
    /// difference.
    pub fn same_outcome(&self, other: &BootReport) -> bool {
        self.digest == other.digest
            && self.catalog == other.catalog
            && self.assembly_error == other.assembly_error
            && self.assembly == other.assembly
            && self.incidents == other.incidents
            && self.outcome_entries() == other.outcome_entries()
    }

    /// `(id, status, error)` per entry id as [`Self::outcome`] keys them: sorted by id, the
    /// later of two entries with one id winning.
    fn outcome_entries(&self) -> Vec<(&str, EntryStatus, Option<&str>)> {
        let mut by_id: Vec<&EntryReport> = self.entries.iter().collect();
        by_id.sort_by(|a, b| a.id.cmp(&b.id));
        let mut out: Vec<(&str, EntryStatus, Option<&str>)> = Vec::with_capacity(by_id.len());
        for e in by_id {
            let row = (e.id.as_str(), e.status, e.error.as_deref());
            match out.last_mut() {
                Some(last) if last.0 == row.0 => *last = row,
                _ => out.push(row),
            }
        }
        out
    }

    /// The apply order: entry labels of the trace's `apply` events, in order.
    pub fn apply_order(&self) -> Vec<String> {
        self.trace
            .iter()
            .filter(|t| t.kind == Schedule::TRACE_APPLY)
            .map(|t| t.label.to_string())
            .collect()
    }
}

/// [`BootReport::outcome`] of a boot whose entries (in plan order) ended as `entries` and whose
/// assembly, digest, catalog and incidents are the others: one builder for the report and the
/// outcome a stress seed gathered, so the two cannot word an outcome differently.
fn outcome_json<'a>(
    entries: impl Iterator<Item = (&'a str, EntryStatus, Option<&'a str>)>,
    assembly: Value,
    assembly_error: Option<&str>,
    digest: &str,
    catalog: Option<&str>,
    incidents: &[String],
) -> Value {
    let mut by_id: Vec<(&str, EntryStatus, Option<&str>)> = entries.collect();
    // Stable: with a repeated id the later entry wins, as inserting in file order did.
    by_id.sort_by(|a, b| a.0.cmp(b.0));
    let mut map = serde_json::Map::new();
    for (id, status, error) in by_id {
        let mut outcome = serde_json::Map::new();
        let error = error.map_or(Value::Null, |e| Value::String(e.to_owned()));
        outcome.insert("error".to_owned(), error);
        outcome.insert("status".to_owned(), status.as_str().into());
        map.insert(id.to_owned(), Value::Object(outcome));
    }
    let mut out = serde_json::Map::new();
    out.insert("assembly".to_owned(), assembly);
    let assembly_error = assembly_error.map_or(Value::Null, |e| Value::String(e.to_owned()));
    out.insert("assembly_error".to_owned(), assembly_error);
    out.insert("digest".to_owned(), digest.into());
    if let Some(catalog) = catalog {
        out.insert("catalog".to_owned(), catalog.into());
    }
    out.insert("entries".to_owned(), Value::Object(map));
    out.insert(
        "incidents".to_owned(),
        Value::Array(incidents.iter().cloned().map(Value::String).collect()),
    );
    Value::Object(out)
}

/// A boot's outcome as [`boot_and_dispose_outcome`] gathers it, before [`BootReport::outcome`]'s
/// JSON is built: what a stress run compares every seed after the first with
/// ([`OutcomeBase::agrees`]), without the entries' ids, positions and load times, the trace, or
/// the assembly's view and digest.
#[derive(Debug)]
pub struct GatheredOutcome {
    /// Each plan entry's status and error, in plan order.
    entries: Vec<(EntryStatus, Option<String>)>,
    assembly: Gathered,
    catalog: Option<String>,
    incidents: Vec<String>,
}

impl GatheredOutcome {
    /// [`BootReport::outcome`] of the boot of `plan` this was gathered from.
    pub fn outcome(&self, plan: &LoadPlan) -> Value {
        let view = self.assembly.view();
        outcome_json(
            plan.entries
                .iter()
                .zip(&self.entries)
                .map(|(entry, (status, error))| (entry.id.as_str(), *status, error.as_deref())),
            view.json,
            view.error.as_deref(),
            &view.digest,
            self.catalog.as_deref(),
            &self.incidents,
        )
    }
}

/// A first boot's report, as every later boot of the same plan is compared with it.
#[derive(Debug, Clone)]
pub struct OutcomeBase {
    report: BootReport,
    /// The positions of the entries [`BootReport::outcome`] keys: those whose id no later entry
    /// repeats (the later of two entries with one id wins). Found once, not sorted per seed.
    keyed: Vec<usize>,
}

impl OutcomeBase {
    /// The base of `report`, a boot's report.
    pub fn new(report: BootReport) -> OutcomeBase {
        let mut seen = std::collections::BTreeSet::new();
        let mut keyed: Vec<usize> = (0..report.entries.len())
            .rev()
            .filter(|&i| seen.insert(report.entries[i].id.as_str()))
            .collect();
        keyed.reverse();
        OutcomeBase { report, keyed }
    }

    /// The first boot's report.
    pub fn report(&self) -> &BootReport {
        &self.report
    }

    /// Whether `seen`, gathered from a boot of the plan this base's report is of, has this
    /// report's outcome: what `self.report().same_outcome(&report)` says of that boot's report,
    /// without building the report or its assembly view.
    pub fn agrees(&self, seen: &GatheredOutcome) -> bool {
        let base = &self.report;
        seen.entries.len() == base.entries.len()
            && self.keyed.iter().all(|&i| {
                let (e, (status, error)) = (&base.entries[i], &seen.entries[i]);
                e.status == *status && e.error.as_deref() == error.as_deref()
            })
            && base.catalog == seen.catalog
            && base.incidents == seen.incidents
            && seen
                .assembly
                .has_view(&base.assembly, &base.digest, base.assembly_error.as_deref())
    }
}

/// Applies every enabled entry of `plan` under `root`, waits until idle, and reports.
///
/// # Cancel safety
/// Not cancel safe: entries applied before cancellation stay in the runtime; dispose `root`.
pub async fn boot(root: &Context, plan: &LoadPlan) -> BootReport {
    boot_in_order(root, plan, &mut (0..plan.entries.len())).await
}

/// [`boot`], starting plugin entries in the order `order` yields (plan indices): a proof's
/// boot of one load order. Every entry keeps its place in the plan (listener order).
///
/// # Cancel safety
/// As [`boot`].
pub async fn boot_in_order(
    root: &Context,
    plan: &LoadPlan,
    order: &mut dyn Iterator<Item = usize>,
) -> BootReport {
    let started = std::time::Instant::now();
    let handles = start_and_idle(root, plan, order).await;
    report(root, plan, &handles, started.elapsed()).await
}

/// Runs every preload, starts `plan`'s entries in the order `order` yields and waits until the
/// runtime is idle: a boot up to its report. Returns the entries' scopes.
async fn start_and_idle(
    root: &Context,
    plan: &LoadPlan,
    order: &mut dyn Iterator<Item = usize>,
) -> Vec<Option<ScopeHandle>> {
    preload(root, plan).await;
    let mut handles: Vec<Option<ScopeHandle>> = vec![None; plan.entries.len()];
    start_entries_in_order(root, plan, &mut handles, order);
    root.idle().await;
    handles
}

/// Applies `plan`'s entries under `under`, a scope of a running runtime (a preset's standing
/// scope), the way [`boot`] applies a file under the root: every preload first, then groups and
/// plugin entries in file order. Returns the entries' scopes (`None` for disabled ones) without
/// waiting for them.
///
/// A [`MountOrder`] provided in the runtime for `plan`'s file changes the order its plugin
/// entries start in (a permutation proof's order of a preset's rows); each keeps its place.
///
/// # Cancel safety
/// Cancel safe as far as `under` goes: its only await is the preloads, and the entries start
/// after it without awaiting, so a dropped call starts none. A preload cut short may leave its
/// plugin's note for this runtime (a dylib entry notes that its preload did not finish, so its
/// apply would fail at once); calling again runs every preload again.
pub async fn start_under(under: &Context, plan: &LoadPlan) -> Vec<Option<ScopeHandle>> {
    let root = under.root_context();
    preload(&root, plan).await;
    let mut handles: Vec<Option<ScopeHandle>> = vec![None; plan.entries.len()];
    match root.get::<MountOrder>().filter(|m| m.file == plan.file) {
        Some(order) => {
            start_entries_in_order(under, plan, &mut handles, &mut order.starts.iter().copied());
        }
        None => start_entries(under, plan, &mut handles),
    }
    handles
}

/// The order in which [`start_under`] starts the plugin entries of the plan read from `file`
/// (plan indices): how a permutation proof reorders a composition mounted after boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOrder {
    /// The plan's file, as [`LoadPlan::file`] names it.
    pub file: String,
    /// Plan indices, in start order.
    pub starts: Vec<usize>,
}

impl cordis_runtime::Service for MountOrder {
    const NAME: &'static str = "mount-order";
}

/// Runs every enabled plugin entry's [`Plugin::preload`](cordis_runtime::Plugin::preload)
/// (each bounded by its entry's timeout) and waits for all of them, before any apply: the
/// operating-system work of dylib entries then finishes before the seeded schedule starts, so a
/// seed replays the same trace whatever the OS does with those threads.
pub(crate) async fn preload(root: &Context, plan: &LoadPlan) {
    // Most plugins keep the default preload, done at its first poll (as is any preload that
    // does its work at once). Each preload is polled once here, in file order as `join_all`
    // polled them, and only one still running waits under its entry's timeout, counted from
    // here as before: a boot of such preloads sets no timer and joins nothing.
    let start = tokio::time::Instant::now();
    let running = std::future::poll_fn(|cx| {
        let mut running = Vec::new();
        for entry in &plan.entries {
            if let Step::Plugin {
                prepared, timeout, ..
            } = &entry.step
            {
                let mut load = prepared.plugin.preload_erased(root, &*prepared.config);
                if load.as_mut().poll(cx).is_pending() {
                    running.push(match start.checked_add(*timeout) {
                        Some(deadline) => tokio::time::timeout_at(deadline, load),
                        None => tokio::time::timeout(*timeout, load),
                    });
                }
            }
        }
        std::task::Poll::Ready(running)
    })
    .await;
    // A preload that times out leaves nothing behind; the entry's apply loads (and times out)
    // on its own then.
    if !running.is_empty() {
        let _ = futures_util::future::join_all(running).await;
    }
}

/// Starts every enabled entry of `plan` whose slot in `handles` is empty; filled slots are live
/// entries to keep (a reload keeps unchanged entries this way).
///
/// Groups first (file order keeps a nested group after its parent), then plugin entries in file
/// order: a plugin entry's scope id, and so its start order among entries waiting for the same
/// service, follows its position in the file whatever group it sits in.
pub(crate) fn start_entries(root: &Context, plan: &LoadPlan, handles: &mut [Option<ScopeHandle>]) {
    start_entries_in_order(root, plan, handles, &mut (0..plan.entries.len()));
}

/// Like [`start_entries`], starting plugin entries in the order `order` yields (indices into the
/// plan), which `permute` uses to reorder registrations without copying the plan.
pub(crate) fn start_entries_in_order(
    root: &Context,
    plan: &LoadPlan,
    handles: &mut [Option<ScopeHandle>],
    order: &mut dyn Iterator<Item = usize>,
) {
    let parent_of = |handles: &[Option<ScopeHandle>], entry: &PlannedEntry| match entry.parent {
        Some(p) => handles.get(p).cloned().flatten().and_then(|h| h.context()),
        None => Some(root.clone()),
    };
    for (i, entry) in plan.entries.iter().enumerate() {
        if handles[i].is_some() {
            continue;
        }
        if let (Step::Group, Some(parent)) = (&entry.step, parent_of(handles, entry)) {
            handles[i] = Some(parent.child_scope_at(&entry.name, i as u64));
        }
    }
    for i in order {
        let entry = &plan.entries[i];
        if handles[i].is_some() {
            continue;
        }
        if let (
            Step::Plugin {
                prepared,
                inject,
                timeout,
            },
            Some(parent),
        ) = (&entry.step, parent_of(handles, entry))
        {
            let options = PluginOptions {
                label: Some(entry.id.clone()),
                inject: inject.iter().map(Inject::required_named).collect(),
                timeout: Some(*timeout),
                // Listener and guard order follow the plan, not the start order.
                place: Some(i as u64),
            };
            handles[i] = Some(parent.plugin_with(prepared.clone(), options));
        }
    }
}

/// What `entry`, whose live scope is `handle` (`None`: not started, i.e. disabled), reports:
/// its status, the error or the services it waits for, and its load time.
pub fn entry_report(entry: &PlannedEntry, handle: Option<&ScopeHandle>) -> EntryReport {
    let Some(handle) = handle else {
        return EntryReport {
            id: entry.id.clone(),
            name: entry.name.clone(),
            pos: entry.pos,
            status: EntryStatus::Disabled,
            error: None,
            waiting_for: Vec::new(),
            retrying: false,
            load_ms: None,
        };
    };
    let info = handle.outcome();
    let (status, error, retrying) = entry_state(&info);
    EntryReport {
        id: entry.id.clone(),
        name: entry.name.clone(),
        pos: entry.pos,
        status,
        error,
        waiting_for: if status == EntryStatus::Pending {
            info.missing
        } else {
            Vec::new()
        },
        retrying,
        load_ms: info
            .load_time
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    }
}

/// An entry's status, its error and whether it is retrying, as [`entry_report`] reports a scope
/// whose outcome is `info`.
fn entry_state(info: &ScopeOutcome) -> (EntryStatus, Option<String>, bool) {
    let mut status = EntryStatus::from(info.status);
    if status == EntryStatus::Active && !info.conflicts.is_empty() {
        status = EntryStatus::Conflict;
    }
    let retrying = status == EntryStatus::Pending && info.waiting.is_some();
    let error = match status {
        EntryStatus::Failed => info.failure.as_ref().map(ToString::to_string),
        EntryStatus::Pending if retrying => info.waiting.clone(),
        EntryStatus::Conflict => Some(info.conflicts.join("; ")),
        EntryStatus::Pending => Some(format!(
            "waiting for service{} {}",
            if info.missing.len() == 1 { "" } else { "s" },
            info.missing
                .iter()
                .map(|m| format!("\"{m}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => None,
    };
    (status, error, retrying)
}

/// The report on `plan`'s entries, whose live scopes are `handles`.
pub(crate) async fn report(
    root: &Context,
    plan: &LoadPlan,
    handles: &[Option<ScopeHandle>],
    boot_time: std::time::Duration,
) -> BootReport {
    let entries = plan
        .entries
        .iter()
        .zip(handles)
        .map(|(entry, handle)| entry_report(entry, handle.as_ref()))
        .collect();

    let view = assembly_view(root).await;
    let catalog = offered_digest(root).await;
    let incidents = incident_lines(root);
    BootReport {
        seed: root.schedule().seed(),
        policy: root.schedule().policy(),
        entries,
        digest: view.digest,
        assembly: view.json,
        assembly_error: view.error,
        catalog,
        incidents,
        trace: root.trace_events(),
        boot_time,
    }
}

/// The digest of what the entries under `root` offer beside the request ([`Offered`]): the
/// sha256 of the keyed map as JSON (keys sorted), `None` when nothing is offered or a listener
/// failed (that failure is an incident of its own).
pub(crate) async fn offered_digest(root: &Context) -> Option<String> {
    if root.waterfall_listener_count::<Offered>() == 0 {
        return None;
    }
    let offered = root.waterfall::<Offered>(Default::default()).await.ok()?;
    if offered.is_empty() {
        return None;
    }
    let text = serde_json::to_string(&offered).unwrap_or_default();
    Some(crate::digest::sha256_hex(text.as_bytes()))
}

/// The runtime's incidents as reports print them (`plugin (site): message`), sorted.
pub(crate) fn incident_lines(root: &Context) -> Vec<String> {
    let mut incidents: Vec<String> = root
        .incidents()
        .into_iter()
        .map(|i| format!("{} ({}): {}", i.plugin, i.site, i.message))
        .collect();
    incidents.sort();
    incidents
}

/// Boots `plan` on a fresh current-thread runtime under `schedule`, then disposes the root.
///
/// Returns the report and the live counts left after disposal (all zero unless something leaks).
///
/// # Errors
/// Only if the tokio runtime cannot be built.
pub fn boot_blocking(
    plan: &LoadPlan,
    schedule: Schedule,
) -> std::io::Result<(BootReport, LiveCounts)> {
    let rt = crate::shutdown::current_thread()?;
    let outcome = rt.block_on(boot_and_dispose(plan, schedule));
    crate::shutdown::end(rt);
    Ok(outcome)
}

/// Boots `plan` on the current runtime under `schedule`, disposes the root and lets aborted
/// tasks drop: one seed of `cordis stress`, which keeps one current-thread runtime across seeds
/// (a seed leaves nothing behind, or its live counts say what).
///
/// Returns the report and the live counts left after disposal (all zero unless something leaks).
///
/// # Cancel safety
/// Not cancel safe: dropped before the root is disposed (during the boot), the runtime it made
/// is never disposed and no handle to it is returned: the entries started so far stay, their
/// tasks run on in the tokio runtime and their effects are never undone. Dropped after, only
/// the report and the counts are lost. Its callers run it to completion (`block_on`).
pub async fn boot_and_dispose(plan: &LoadPlan, schedule: Schedule) -> (BootReport, LiveCounts) {
    let root = Context::root_with(schedule);
    let report = boot(&root, plan).await;
    (report, dispose_and_drain(&root).await)
}

/// [`boot_and_dispose`] for every seed of a stress run after the first: the outcome is gathered
/// as [`report`] gathers it (in the same order), but only what [`OutcomeBase::agrees`] compares,
/// in the form it was read: no entry ids, positions or load times, no trace, no assembly view
/// or digest ([`GatheredOutcome::outcome`] builds the JSON to explain a difference).
///
/// # Cancel safety
/// As [`boot_and_dispose`].
pub async fn boot_and_dispose_outcome(
    plan: &LoadPlan,
    schedule: Schedule,
) -> (GatheredOutcome, LiveCounts) {
    let root = Context::root_with(schedule);
    let handles = start_and_idle(&root, plan, &mut (0..plan.entries.len())).await;
    let entries = handles
        .iter()
        .map(|handle| match handle {
            None => (EntryStatus::Disabled, None),
            Some(handle) => {
                let (status, error, _) = entry_state(&handle.outcome());
                (status, error)
            }
        })
        .collect();
    let assembly = gather(&root).await;
    let catalog = offered_digest(&root).await;
    let incidents = incident_lines(&root);
    let outcome = GatheredOutcome {
        entries,
        assembly,
        catalog,
        incidents,
    };
    (outcome, dispose_and_drain(&root).await)
}

/// Disposes `root` and lets its aborted tasks drop; returns the live counts left.
async fn dispose_and_drain(root: &Context) -> LiveCounts {
    root.dispose();
    // Aborted tasks drop their futures when the scheduler next runs them.
    for _ in 0..16 {
        if root.live().is_zero() {
            break;
        }
        tokio::task::yield_now().await;
    }
    root.live()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, status: EntryStatus, error: Option<&str>) -> EntryReport {
        EntryReport {
            id: id.to_owned(),
            name: "p".to_owned(),
            pos: Pos::default(),
            status,
            error: error.map(str::to_owned),
            waiting_for: Vec::new(),
            retrying: false,
            load_ms: None,
        }
    }

    #[test]
    fn same_outcome_agrees_with_comparing_the_outcome_bytes() {
        let base = BootReport {
            seed: 1,
            policy: Policy::Random,
            entries: vec![
                entry("b", EntryStatus::Active, None),
                entry("a", EntryStatus::Failed, Some("boom")),
            ],
            assembly: serde_json::json!({"tools": ["x"]}),
            digest: "d".to_owned(),
            assembly_error: None,
            catalog: None,
            incidents: Vec::new(),
            trace: Vec::new(),
            boot_time: std::time::Duration::ZERO,
        };
        let variants: &[fn(&mut BootReport)] = &[
            |_| {},
            // Order, seed, time, trace and load times are not part of the outcome.
            |r| r.entries.reverse(),
            |r| {
                r.seed = 9;
                r.boot_time = std::time::Duration::from_secs(1);
                r.entries[0].load_ms = Some(5);
            },
            |r| r.entries[0].status = EntryStatus::Pending,
            |r| r.entries[1].error = Some("other".to_owned()),
            |r| r.entries[1].error = None,
            |r| r.digest = "e".to_owned(),
            |r| r.assembly = serde_json::json!({"tools": ["y"]}),
            |r| r.assembly_error = Some("bad".to_owned()),
            |r| r.entries.push(entry("c", EntryStatus::Active, None)),
            |r| r.incidents.push("p (listener of \"x\"): boom".to_owned()),
            // A repeated id: the later entry wins, in both forms.
            |r| {
                r.entries
                    .push(entry("a", EntryStatus::Failed, Some("boom")))
            },
            |r| r.entries.push(entry("a", EntryStatus::Active, None)),
        ];
        for (i, change) in variants.iter().enumerate() {
            let mut other = base.clone();
            change(&mut other);
            let by_bytes = cordis_schema::canonical_bytes(&base.outcome())
                == cordis_schema::canonical_bytes(&other.outcome());
            assert_eq!(base.same_outcome(&other), by_bytes, "variant {i}");
            assert_eq!(other.same_outcome(&base), by_bytes, "variant {i}, swapped");
        }
    }

    #[test]
    fn the_outcome_is_canonical_as_built_and_keyed_by_entry_id() {
        let report = BootReport {
            seed: 1,
            policy: Policy::Random,
            entries: vec![
                entry("zeta", EntryStatus::Active, None),
                entry("alpha", EntryStatus::Failed, Some("boom")),
                entry(
                    "mid",
                    EntryStatus::Pending,
                    Some("waiting for service \"x\""),
                ),
            ],
            assembly: json!({"sections": [{"name": "a", "order": 0.0}], "tools": ["t"]}),
            digest: "d".to_owned(),
            assembly_error: None,
            catalog: None,
            incidents: Vec::new(),
            trace: Vec::new(),
            boot_time: std::time::Duration::ZERO,
        };
        let outcome = report.outcome();
        // Key order is observable only where serde_json keeps insertion order (the workspace
        // build); with sorted maps this check is trivially true.
        assert!(cordis_schema::is_canonical(&outcome), "{outcome}");
        assert_eq!(
            outcome,
            json!({
                "assembly": {"sections": [{"name": "a", "order": 0.0}], "tools": ["t"]},
                "assembly_error": null,
                "digest": "d",
                "entries": {
                    "alpha": {"status": "failed", "error": "boom"},
                    "mid": {"status": "pending", "error": "waiting for service \"x\""},
                    "zeta": {"status": "active", "error": null},
                },
                "incidents": [],
            })
        );
    }

    /// A composition whose outcome the seed decides (seeded faults: errors, panics, hangs cut
    /// short by the timeout, listener panics as incidents) beside a conflict, a pending entry,
    /// a disabled one and a system prompt with tools.
    fn seeded_plan() -> LoadPlan {
        let yml = "\
- id: system-prompt
  name: system-prompt
- id: tools
  name: tools
- id: c0
  name: debug/claim
  config: {tools: [echo, mine], sections: [guide]}
- id: c1
  name: debug/claim
  config: {tools: [echo]}
- id: c2
  name: debug/claim
  config: {tools: [other], sections: [intro]}
- id: f0
  name: debug/fault
  config: {mode: seeded}
  timeout: 50
- id: f1
  name: debug/fault
  config: {mode: seeded}
  timeout: 50
- id: waits
  name: debug/noop
  inject: [nobody-provides-this]
- id: off
  name: debug/noop
  disabled: true
";
        crate::plan::load_plan(
            yml,
            "seeded.yml",
            &|_| None,
            &crate::builtins::Builtins::host(),
            &crate::plan::PlanOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_gathered_outcome_is_the_reports_and_agrees_exactly_when_the_reports_do() {
        let plan = seeded_plan();
        let policy = Policy::Random;
        let (first, _) = boot_and_dispose(&plan, Schedule::new(policy, 0)).await;
        let base = OutcomeBase::new(first.clone());
        let (mut agreeing, mut differing) = (0, 0);
        for seed in 0..24 {
            let (report, live) = boot_and_dispose(&plan, Schedule::new(policy, seed)).await;
            let (gathered, gathered_live) =
                boot_and_dispose_outcome(&plan, Schedule::new(policy, seed)).await;
            assert_eq!(live, gathered_live, "seed {seed}");
            assert_eq!(gathered.outcome(&plan), report.outcome(), "seed {seed}");
            let same = first.same_outcome(&report);
            assert_eq!(base.agrees(&gathered), same, "seed {seed}");
            if same {
                agreeing += 1;
            } else {
                differing += 1;
            }
        }
        // Both answers were asked for.
        assert!(
            agreeing > 0 && differing > 0,
            "{agreeing} agree, {differing} differ"
        );
    }

    /// The report a gathered outcome stands for, with `ids` for its entries.
    fn report_of(ids: &[&str], gathered: &GatheredOutcome) -> BootReport {
        let view = gathered.assembly.view();
        BootReport {
            seed: 0,
            policy: Policy::Random,
            entries: ids
                .iter()
                .zip(&gathered.entries)
                .map(|(id, (status, error))| entry(id, *status, error.as_deref()))
                .collect(),
            assembly: view.json,
            digest: view.digest,
            assembly_error: view.error,
            catalog: gathered.catalog.clone(),
            incidents: gathered.incidents.clone(),
            trace: Vec::new(),
            boot_time: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn agrees_compares_what_same_outcome_compares_repeated_ids_included() {
        let ids = ["a", "b", "a"];
        let gathered = || GatheredOutcome {
            entries: vec![
                (EntryStatus::Failed, Some("boom".to_owned())),
                (EntryStatus::Active, None),
                (EntryStatus::Active, None),
            ],
            assembly: Gathered::NoPrompt(br#"{"services":["x"]}"#.to_vec()),
            catalog: None,
            incidents: Vec::new(),
        };
        let base = OutcomeBase::new(report_of(&ids, &gathered()));
        let variants: &[fn(&mut GatheredOutcome)] = &[
            |_| {},
            // The first "a" is not keyed: the later one wins.
            |g| g.entries[0] = (EntryStatus::Active, None),
            |g| g.entries[2] = (EntryStatus::Failed, Some("boom".to_owned())),
            |g| g.entries[1].0 = EntryStatus::Pending,
            |g| g.entries[1].1 = Some("why".to_owned()),
            |g| g.catalog = Some("c".to_owned()),
            |g| g.incidents.push("p (listener of \"x\"): boom".to_owned()),
            |g| g.assembly = Gathered::NoPrompt(br#"{"services":["y"]}"#.to_vec()),
            |g| g.assembly = Gathered::Failed("bad".to_owned()),
        ];
        let mut differing = 0;
        for (i, change) in variants.iter().enumerate() {
            let mut other = gathered();
            change(&mut other);
            let same = base.report().same_outcome(&report_of(&ids, &other));
            assert_eq!(base.agrees(&other), same, "variant {i}");
            differing += usize::from(!same);
        }
        assert_eq!(differing, variants.len() - 2);
    }
}
