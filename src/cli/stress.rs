//! `cordis stress`: boot once per seed and prove every boot ends the same.
//!
//! Three phases: pick this shard's seeds, boot each one against the first seed's outcome
//! (stopping at the first divergence or leak, or when the time budget is spent), then report:
//! text or JSON on stdout, and for CI a shard report (`--report`, combined by `stress merge`),
//! JUnit XML (`--junit`) and, under GitHub Actions, `::error` annotations at the entries' lines.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use cordis_host::Builtins;
use cordis_host::LoadPlan;
use cordis_host::digest::canonical_bytes;
use cordis_host::loader::{
    BootReport, EntryStatus, GatheredOutcome, OutcomeBase, boot_and_dispose,
    boot_and_dispose_outcome,
};
use cordis_runtime::{Policy, Schedule, shell_word};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use crate::exercise::{ExerciseScript, exercise_plan};

use super::check::EntryFailure;
use super::ci::{self, JunitCase, SHARD_REPORT_VERSION, ShardReport, github_error, junit_xml};
use super::render::{diff, safe, safe_lines};
use super::{
    EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Exit, Io, ShardArg, StressArgs, StressCommand, load,
    replay_command,
};

/// This shard's index and count: `--shard I/N`, `--shard auto` (from the CI engine's
/// variables, said on stderr) or the whole range. `Err`: the problem is printed.
fn resolve_shard(args: &StressArgs, io: &mut Io<'_>) -> anyhow::Result<(u64, u64)> {
    match args.shard {
        None => Ok((0, 1)),
        Some(ShardArg::Fixed(shard)) => match args.shard_count {
            Some(n) if n != shard.count => {
                writeln!(
                    io.err,
                    "cordis: --shard {}/{} but --shard-count {n}; --shard-count goes with --shard auto",
                    shard.index, shard.count
                )?;
                Err(Exit(EXIT_CONFIG).into())
            }
            _ => Ok((shard.index, shard.count)),
        },
        Some(ShardArg::Auto) => match ci::auto_shard(io.env, args.shard_count) {
            Ok(auto) => {
                writeln!(
                    io.err,
                    "cordis: shard {}/{} from {}",
                    auto.index, auto.count, auto.from
                )?;
                Ok((auto.index, auto.count))
            }
            Err(e) => {
                writeln!(io.err, "cordis: {e}")?;
                Err(Exit(EXIT_CONFIG).into())
            }
        },
    }
}

/// How many workers `--jobs` asks for (default: the machine's available parallelism).
fn jobs(args: &StressArgs) -> u64 {
    args.jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64))
}

/// The first seed's outcome, which every later seed must match.
struct Baseline {
    seed: u64,
    outcome: Value,
    bytes: Vec<u8>,
    digest: String,
    /// A plain boot's report, which later boots' gathered outcomes are compared with.
    base: Option<OutcomeBase>,
    /// Entries not as configured (deferred ones included), counted from the boot report.
    inactive: usize,
    /// Why `cordis check` fails this boot (every agreeing seed's too), if it does.
    check: Option<CheckFailure>,
}

/// What `cordis check` fails a boot for: the entries not active (id, status, error) and the
/// assembly's error. Every seed that agrees with the first fails the same way.
struct CheckFailure {
    entries: Vec<EntryFailure>,
    assembly_error: Option<String>,
}

impl CheckFailure {
    /// The failure of `report` (`None` when `check` would pass it).
    fn of(report: &BootReport) -> Option<CheckFailure> {
        let (entries, assembly_error) = super::check::failures(report);
        (!entries.is_empty() || assembly_error.is_some()).then_some(CheckFailure {
            entries,
            assembly_error,
        })
    }

    /// One line per problem, as `check` words them: the entries not active, each conflict
    /// once, the assembly error.
    fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.entries.is_empty() {
            let n = self.entries.len();
            let ids: Vec<String> = self
                .entries
                .iter()
                .map(|(id, status, _)| format!("{} ({status})", safe(id)))
                .collect();
            lines.push(format!(
                "{n} entr{} not active: {}",
                if n == 1 { "y is" } else { "ies are" },
                ids.join(", ")
            ));
        }
        let reasons: Vec<String> = self
            .entries
            .iter()
            .filter_map(|(id, status, error)| {
                let error = safe(error.as_deref()?);
                Some(if status == EntryStatus::Conflict.as_str() {
                    format!("conflict: {error}")
                } else {
                    format!("entry \"{}\" is {status}: {error}", safe(id))
                })
            })
            .collect();
        // Each conflict once (every claimant reports the same text).
        for reason in reasons {
            if !lines.contains(&reason) {
                lines.push(reason);
            }
        }
        if let Some(error) = &self.assembly_error {
            lines.push(format!("assembling the request failed: {}", safe(error)));
        }
        lines
    }
}

/// What one seed produced: the first plain boot's report, a later plain boot's outcome as
/// gathered (the JSON of either is built only when needed), or the outcome of an exercise or a
/// preset boot.
enum Seen {
    Boot(BootReport),
    Gathered(GatheredOutcome),
    Outcome(Value),
}

impl Seen {
    /// The outcome JSON of a seed of `plan`.
    fn into_outcome(self, plan: &LoadPlan) -> Value {
        match self {
            Seen::Boot(report) => report.outcome(),
            Seen::Gathered(gathered) => gathered.outcome(plan),
            Seen::Outcome(outcome) => outcome,
        }
    }
}

/// What the seeds showed.
struct Verdict {
    baseline: Option<Baseline>,
    failure: Option<Value>,
    /// The first failing seed's entries, for annotations.
    failing_entries: Vec<String>,
    /// Seeds run.
    runs: u64,
    /// Every shard index below this ran.
    covered_below: u64,
    /// Whether the time budget ended the run.
    budget_spent: bool,
}

/// Progress on a terminal as a bar (seeds, seeds/s, ETA); nothing when not a terminal.
struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new(io: &Io<'_>, total: Option<usize>) -> Progress {
        let bar = io.progress.then(|| {
            let bar = match total {
                Some(total) => ProgressBar::new(total as u64),
                None => ProgressBar::no_length(),
            };
            if let Ok(style) =
                ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} {eta}")
            {
                bar.set_style(style);
            }
            bar
        });
        Progress { bar }
    }

    /// One more seed done: the bar moves on a terminal; piped output stays quiet (CI logs get
    /// the summary line, not a line per tenth).
    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// What one seed's boot (or exercise) showed, before it is compared with the first seed's.
struct SeedRun {
    seen: Seen,
    /// The boot's digest; empty for a plain boot after the first (only the first seed's is
    /// read, and a gathered outcome does not hash its header).
    digest: String,
    leaked: cordis_runtime::LiveCounts,
    /// The first seed's boot judged as `check` judges it: the entries not as configured, and
    /// why `check` fails it (`None` for later seeds, which agree or diverge).
    judged: Option<(usize, Option<CheckFailure>)>,
}

/// What one seed came to, weighed against the first seed's outcome by the worker that ran it.
enum Outcome {
    /// The first seed ran: it becomes the baseline.
    First(Box<SeedRun>),
    /// It ran and agrees with the first seed.
    Agreed,
    /// Disposing its root left live resources.
    Leaked(cordis_runtime::LiveCounts),
    /// It ran and its outcome differs from the first seed's.
    Diverged(Box<Seen>),
    /// It could not run (a preset that does not join, an exercise that fails): the line for
    /// stderr and the failure for the report.
    Failed { message: String, failure: Value },
}

/// One seed's outcome as a worker hands it over, to be settled in seed order.
struct Done {
    /// The seed's position in the shard (0: the first seed).
    position: u64,
    /// `--print-log`'s lines (empty without it), printed when the seed's turn comes.
    log: String,
    outcome: anyhow::Result<Outcome>,
}

/// How far ahead of the seeds settled so far a worker may claim: bounds the outcomes waiting
/// to be settled (a few bytes each) when one seed is much slower than the others.
const WINDOW: u64 = 1 << 16;

/// How many agreeing seeds a worker hands over at once: one wake of the settling thread per
/// batch, not per seed. A problem, a wait for the window and the worker's end hand over at once.
const BATCH: usize = 64;

/// What every seed of a shard runs with.
struct Seeds<'a> {
    plan: &'a LoadPlan,
    args: &'a StressArgs,
    exercise: Option<&'a ExerciseScript>,
    policy: Policy,
    /// This shard's index and count.
    shard: (u64, u64),
    /// How many seed indices the shard holds (`u64::MAX`-bounded without `--seeds`).
    positions: u64,
    started: Instant,
    /// The instruction and skill files as the run's first boot read them: every plain boot
    /// reads them through it (once per run, not once per boot). Exercises read afresh: their
    /// tools may change the files between turns.
    sources: cordis_instructions::Snapshot,
}

/// What the workers share: the next position to claim, the positions worth claiming, the
/// positions settled, and whether the time budget was seen spent.
struct Claims {
    next: AtomicU64,
    /// Positions at or past this are not claimed (lowered at a problem, 0 to stop).
    limit: AtomicU64,
    settled: AtomicU64,
    budget_seen: AtomicBool,
}

/// Stops every worker when one unwinds, so none waits on a seed that will never settle.
struct StopOnPanic<'a>(&'a Claims);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.limit.store(0, Ordering::Relaxed);
        }
    }
}

/// Boots every seed of the shard (until the time budget, if any, is spent) on `jobs` worker
/// threads, comparing each outcome with the first seed's; settles the outcomes in seed order,
/// so the verdict, the failure (the lowest failing seed) and every line printed are the same
/// for every number of workers; stops at the first problem.
fn run_seeds(seeds: &Seeds<'_>, jobs: u64, io: &mut Io<'_>) -> anyhow::Result<Verdict> {
    let args = seeds.args;
    let total = args
        .seeds
        .filter(|_| args.time_budget.is_none())
        .map(|_| usize::try_from(seeds.positions).unwrap_or(usize::MAX));
    let progress = Progress::new(io, total);
    let mut verdict = Verdict {
        baseline: None,
        failure: None,
        failing_entries: Vec::new(),
        runs: 0,
        covered_below: args.seeds.unwrap_or(0),
        budget_spent: false,
    };
    if seeds.positions > 0 {
        if seeds.budget_spent() {
            verdict.covered_below = seeds.index_at(0);
            verdict.budget_spent = true;
        } else {
            // The first seed on this thread: every worker compares with it.
            let runtime = cordis_host::shutdown::current_thread()?;
            let done = seeds.run_one(&runtime, 0, None);
            cordis_host::shutdown::end(runtime);
            let (go_on, baseline) = seeds.settle(done, None, &mut verdict, &progress, io)?;
            if go_on && let Some(first) = baseline {
                let workers = jobs.min(seeds.positions - 1);
                if workers > 0 {
                    seeds.run_parallel(&first, workers, &mut verdict, &progress, io)?;
                }
                verdict.baseline = Some(first);
            }
        }
    }
    progress.finish();
    seeds.check_agreed(&mut verdict, io)?;
    Ok(verdict)
}

impl Seeds<'_> {
    /// Seed index of the shard's `position`-th seed.
    fn index_at(&self, position: u64) -> u64 {
        let (index, count) = self.shard;
        index.saturating_add(position.saturating_mul(count))
    }

    fn budget_spent(&self) -> bool {
        self.args
            .time_budget
            .is_some_and(|budget| self.started.elapsed() >= budget)
    }

    /// Runs positions 1.. on `workers` threads (each with its own runtime) and settles their
    /// outcomes in seed order on this thread. Every thread is joined before it returns.
    fn run_parallel(
        &self,
        first: &Baseline,
        workers: u64,
        verdict: &mut Verdict,
        progress: &Progress,
        io: &mut Io<'_>,
    ) -> anyhow::Result<()> {
        let claims = Claims {
            next: AtomicU64::new(1),
            limit: AtomicU64::new(self.positions),
            settled: AtomicU64::new(1),
            budget_seen: AtomicBool::new(false),
        };
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Done>>();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let (tx, claims) = (tx.clone(), &claims);
                    scope.spawn(move || self.work(first, claims, &tx))
                })
                .collect();
            drop(tx);
            let mut pending: BTreeMap<u64, Done> = BTreeMap::new();
            let mut expected = 1u64;
            let mut result = Ok(());
            let mut stopped = false;
            // Ends when every worker has ended (and dropped its sender).
            for done in rx.into_iter().flatten() {
                if stopped {
                    continue;
                }
                pending.insert(done.position, done);
                while let Some(done) = pending.remove(&expected) {
                    match self.settle(done, Some(first), verdict, progress, io) {
                        Ok((true, _)) => {
                            expected += 1;
                            claims.settled.store(expected, Ordering::Relaxed);
                        }
                        Ok((false, _)) => stopped = true,
                        Err(e) => {
                            stopped = true;
                            result = Err(e);
                        }
                    }
                    if stopped {
                        claims.limit.store(0, Ordering::Relaxed);
                        pending.clear();
                        break;
                    }
                }
            }
            let mut lost = None;
            for handle in handles {
                match handle.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => lost = lost.or(Some(e.to_string())),
                    Err(_) => lost = lost.or(Some("a stress worker panicked".to_owned())),
                }
            }
            result?;
            if !stopped && expected < self.positions {
                if claims.budget_seen.load(Ordering::Relaxed) && lost.is_none() {
                    verdict.covered_below = self.index_at(expected);
                    verdict.budget_spent = true;
                } else {
                    anyhow::bail!(
                        "seed {} never ran: {}",
                        self.args.start.wrapping_add(self.index_at(expected)),
                        lost.unwrap_or_else(|| "its worker ended".to_owned())
                    );
                }
            }
            Ok(())
        })
    }

    /// One worker: claims positions in order and sends their outcomes (in batches of
    /// [`BATCH`]), until the shard's positions, the limit or the time budget run out.
    fn work(
        &self,
        first: &Baseline,
        claims: &Claims,
        tx: &std::sync::mpsc::Sender<Vec<Done>>,
    ) -> std::io::Result<()> {
        let _stop = StopOnPanic(claims);
        let runtime = cordis_host::shutdown::current_thread()?;
        let mut batch = Vec::with_capacity(BATCH);
        let hand_over = |batch: &mut Vec<Done>| {
            batch.is_empty()
                || tx
                    .send(std::mem::replace(batch, Vec::with_capacity(BATCH)))
                    .is_ok()
        };
        // Whether this worker is a window ahead of the seeds settled.
        let ahead = || {
            claims.next.load(Ordering::Relaxed)
                >= claims
                    .settled
                    .load(Ordering::Relaxed)
                    .saturating_add(WINDOW)
        };
        loop {
            // The seeds held here may be the ones the window waits for.
            if ahead() && !hand_over(&mut batch) {
                break;
            }
            // Not too far ahead of the seeds settled (a slow seed holds the others back).
            while ahead() && claims.limit.load(Ordering::Relaxed) > 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            if self.budget_spent() {
                claims.budget_seen.store(true, Ordering::Relaxed);
                break;
            }
            let position = claims.next.fetch_add(1, Ordering::Relaxed);
            if position >= claims.limit.load(Ordering::Relaxed) {
                break;
            }
            let done = self.run_one(&runtime, position, Some(first));
            let agreed = matches!(done.outcome, Ok(Outcome::Agreed));
            if !agreed {
                // Seeds past a problem cannot change the verdict (the lowest one is reported).
                claims.limit.fetch_min(position + 1, Ordering::Relaxed);
            }
            batch.push(done);
            if (!agreed || batch.len() >= BATCH) && !hand_over(&mut batch) {
                break;
            }
        }
        hand_over(&mut batch);
        cordis_host::shutdown::end(runtime);
        Ok(())
    }

    /// Runs the seed at `position` and weighs it against `first` (`None`: it is the first).
    fn run_one(
        &self,
        runtime: &tokio::runtime::Runtime,
        position: u64,
        first: Option<&Baseline>,
    ) -> Done {
        let seed = self.args.start.wrapping_add(self.index_at(position));
        let mut log = String::new();
        let outcome = self
            .run_seed(runtime, seed, first.is_none(), &mut log)
            .map(|run| {
                run.map_or_else(
                    |(message, failure)| Outcome::Failed { message, failure },
                    |run| {
                        if !run.leaked.is_zero() {
                            return Outcome::Leaked(run.leaked);
                        }
                        match first {
                            None => Outcome::First(Box::new(run)),
                            Some(first) if agrees(first, &run.seen, self.plan) => Outcome::Agreed,
                            Some(_) => Outcome::Diverged(Box::new(run.seen)),
                        }
                    },
                )
            });
        Done {
            position,
            log,
            outcome,
        }
    }

    /// Boots (or exercises) `seed`. `Err` inside: the seed could not run (a preset that does
    /// not join, an exercise that fails): the line to print and the failure to record.
    fn run_seed(
        &self,
        runtime: &tokio::runtime::Runtime,
        seed: u64,
        first: bool,
        log: &mut String,
    ) -> anyhow::Result<Result<SeedRun, (String, Value)>> {
        let Seeds {
            plan,
            args,
            exercise,
            policy,
            ..
        } = *self;
        let failed = |kind: &str, message: String, line: String| {
            Ok(Err((
                line,
                json!({
                    "kind": kind,
                    "seed": seed,
                    "message": message,
                    "replay": [replay(args, seed, policy)],
                }),
            )))
        };
        // The first seed's boot is judged as `check` judges it (later seeds agree or diverge).
        let judge = |report: &BootReport| {
            first.then(|| {
                let inactive = report
                    .entries
                    .iter()
                    .filter(|e| !e.status.is_as_configured())
                    .count();
                (inactive, CheckFailure::of(report))
            })
        };
        let (seen, digest, leaked, judged) = match exercise {
            None => match &args.preset {
                // A plain boot runs no tools: nothing in it changes the files it reads.
                None if first => {
                    let (report, leaked) = self.sources.enter(|| {
                        runtime.block_on(boot_and_dispose(plan, Schedule::new(policy, seed)))
                    });
                    let digest = report.digest.clone();
                    let judged = judge(&report);
                    (Seen::Boot(report), digest, leaked, judged)
                }
                // Later seeds gather what the comparison with the first seed's report reads.
                None => {
                    let (gathered, leaked) = self.sources.enter(|| {
                        runtime
                            .block_on(boot_and_dispose_outcome(plan, Schedule::new(policy, seed)))
                    });
                    (Seen::Gathered(gathered), String::new(), leaked, None)
                }
                Some(preset) => {
                    let schedule = Schedule::new(policy, seed);
                    match super::presets::boot_joined(plan, schedule, preset)? {
                        (Ok(report), leaked) => {
                            let judged = judge(&report);
                            (
                                Seen::Outcome(report.outcome()),
                                report.digest,
                                leaked,
                                judged,
                            )
                        }
                        (Err(why), _) => {
                            let line = format!("cordis: seed {seed}: {}", safe_lines(&why));
                            return failed("preset", why, line);
                        }
                    }
                }
            },
            Some(script) => {
                match runtime.block_on(crate::exercise::exercise_with_preset(
                    plan,
                    script,
                    Schedule::new(policy, seed),
                    args.preset.as_deref(),
                )) {
                    Ok(run) => {
                        if args.print_log {
                            for event in &run.log {
                                log.push_str(&serde_json::to_string(event)?);
                                log.push('\n');
                            }
                        }
                        if let Err(why) = &run.contract {
                            let line = format!(
                                "cordis: seed {seed}: the session breaks the cache-prefix contract: {}",
                                safe_lines(why)
                            );
                            return failed("contract", why.clone(), line);
                        }
                        (
                            Seen::Outcome(run.comparable()),
                            run.report.digest.clone(),
                            run.live_after,
                            judge(&run.report),
                        )
                    }
                    Err(e) => {
                        let line = format!("cordis: seed {seed}: {e}");
                        return failed("exercise", e.to_string(), line);
                    }
                }
            }
        };
        Ok(Ok(SeedRun {
            seen,
            digest,
            leaked,
            judged,
        }))
    }

    /// Settles one seed's outcome in seed order, as a run on one thread would: prints its log,
    /// counts it, records (and prints) a problem. `(false, _)`: stop here; the first seed's
    /// run comes back as the baseline.
    fn settle(
        &self,
        done: Done,
        first: Option<&Baseline>,
        verdict: &mut Verdict,
        progress: &Progress,
        io: &mut Io<'_>,
    ) -> anyhow::Result<(bool, Option<Baseline>)> {
        let Seeds { args, policy, .. } = *self;
        let k = self.index_at(done.position);
        let seed = args.start.wrapping_add(k);
        // Every index of this shard below `k` ran; a failure at `k` leaves it uncovered.
        verdict.covered_below = k;
        io.out.write_all(done.log.as_bytes())?;
        let outcome = done.outcome?;
        if let Outcome::Failed { message, failure } = outcome {
            progress.finish();
            writeln!(io.err, "{message}")?;
            verdict.failure = Some(failure);
            return Ok((false, None));
        }
        verdict.runs += 1;
        verdict.covered_below = k.saturating_add(1);
        match outcome {
            Outcome::Leaked(leaked) => {
                progress.finish();
                writeln!(
                    io.err,
                    "cordis: seed {seed}: disposing the root left live resources {leaked:?}\n  replay: {}",
                    replay(args, seed, policy)
                )?;
                verdict.failure = Some(json!({
                    "kind": "leak",
                    "seed": seed,
                    "live": format!("{leaked:?}"),
                    "replay": [replay(args, seed, policy)],
                }));
                Ok((false, None))
            }
            Outcome::First(run) => {
                let SeedRun {
                    seen,
                    digest,
                    judged,
                    ..
                } = *run;
                let (outcome, base) = match seen {
                    Seen::Boot(report) => (report.outcome(), Some(OutcomeBase::new(report))),
                    seen => (seen.into_outcome(self.plan), None),
                };
                let (inactive, check) = judged.unwrap_or_default();
                progress.done();
                Ok((
                    true,
                    Some(Baseline {
                        seed,
                        bytes: canonical_bytes(&outcome),
                        outcome,
                        digest,
                        base,
                        inactive,
                        check,
                    }),
                ))
            }
            Outcome::Agreed => {
                progress.done();
                Ok((true, None))
            }
            Outcome::Diverged(seen) => {
                let first = first.context("a seed diverged before the first seed ran")?;
                self.report_divergence(first, seed, *seen, progress, verdict, io)?;
                Ok((false, None))
            }
            Outcome::Failed { .. } => Ok((false, None)),
        }
    }

    /// Prints and records how `seed`'s outcome differs from the first seed's.
    fn report_divergence(
        &self,
        first: &Baseline,
        seed: u64,
        seen: Seen,
        progress: &Progress,
        verdict: &mut Verdict,
        io: &mut Io<'_>,
    ) -> anyhow::Result<()> {
        let Seeds {
            args,
            exercise,
            policy,
            ..
        } = *self;
        let outcome = seen.into_outcome(self.plan);
        progress.finish();
        writeln!(
            io.err,
            "cordis: seeds {} and {seed} diverge (schedule {policy}):",
            first.seed
        )?;
        explain(&first.outcome, first.seed, &outcome, seed, io)?;
        let replays = [replay(args, first.seed, policy), replay(args, seed, policy)];
        writeln!(io.err, "replay:")?;
        for replay in &replays {
            writeln!(io.err, "  {replay}")?;
        }
        verdict.failing_entries = differing_entries(
            exercise.map_or(&first.outcome, |_| &first.outcome["boot"]),
            exercise.map_or(&outcome, |_| &outcome["boot"]),
        );
        verdict.failure = Some(json!({
            "kind": "divergence",
            "seeds": [first.seed, seed],
            "entries": verdict.failing_entries,
            "replay": replays,
        }));
        Ok(())
    }
    /// The seeds agree; the outcome they agree on must also be one `check` passes. Records
    /// (and prints) the failure when it is not.
    fn check_agreed(&self, verdict: &mut Verdict, io: &mut Io<'_>) -> std::io::Result<()> {
        let Seeds { args, policy, .. } = *self;
        let failed_check = match (&verdict.failure, &verdict.baseline) {
            (None, Some(first)) => first.check.as_ref().map(|check| (first.seed, check)),
            _ => None,
        };
        if let Some((seed, check)) = failed_check {
            let replay = check_replay(args, seed, policy);
            let reasons = check.lines();
            writeln!(
                io.err,
                "cordis: {} seed{} agree, but on a boot `{} check` fails (schedule {policy}):",
                verdict.runs,
                if verdict.runs == 1 { "" } else { "s" },
                super::program::name()
            )?;
            for reason in &reasons {
                writeln!(io.err, "  {reason}")?;
            }
            writeln!(io.err, "replay:\n  {replay}")?;
            let entries: Vec<String> = check.entries.iter().map(|(id, ..)| id.clone()).collect();
            verdict.failure = Some(json!({
                "kind": "check",
                "seed": seed,
                "entries": entries,
                "reasons": reasons,
                "replay": [replay],
            }));
            verdict.failing_entries = entries;
        }
        Ok(())
    }
}

/// Whether a later seed's outcome (of a boot of `plan`) is the first seed's. A run's seeds are
/// all plain boots or all not, so a boot meets a boot baseline.
fn agrees(first: &Baseline, seen: &Seen, plan: &LoadPlan) -> bool {
    match (seen, &first.base) {
        (Seen::Boot(report), Some(base)) => base.report().same_outcome(report),
        (Seen::Gathered(gathered), Some(base)) => base.agrees(gathered),
        (Seen::Boot(report), None) => first.bytes == canonical_bytes(&report.outcome()),
        (Seen::Gathered(gathered), None) => first.bytes == canonical_bytes(&gathered.outcome(plan)),
        (Seen::Outcome(outcome), _) => first.bytes == canonical_bytes(outcome),
    }
}

/// The `cordis check` command that shows one seed's boot (with the run's preset).
fn check_replay(args: &StressArgs, seed: u64, policy: Policy) -> String {
    let preset = args
        .preset
        .as_deref()
        .map_or_else(String::new, |p| format!(" --preset {}", shell_word(p)));
    format!(
        "{}{preset}",
        replay_command(&args.config.file, seed, policy)
    )
}

/// A failure as a JUnit failure's text: what failed (the first line, the message), the reasons
/// (for a failed check), and the replay commands.
fn junit_failure(failure: &Value, policy: Policy) -> String {
    let kind = failure["kind"].as_str().unwrap_or("failure");
    let strings = |key: &str| -> Vec<String> {
        failure[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let reasons = strings("reasons");
    let mut text = format!("{kind} under schedule {policy}");
    if let Some(first) = reasons.first() {
        text.push_str(&format!(": {first}"));
    }
    for reason in reasons.iter().skip(1) {
        text.push_str(&format!("\n{reason}"));
    }
    text.push_str(&format!("\nreplay:\n  {}", strings("replay").join("\n  ")));
    text
}

/// The command that replays one seed: `cordis check` for a boot, `cordis stress --exercise
/// … --print-log` for an exercise (diff two seeds' output to see the divergence).
fn replay(args: &StressArgs, seed: u64, policy: Policy) -> String {
    let preset = args
        .preset
        .as_deref()
        .map_or_else(String::new, |p| format!(" --preset {}", shell_word(p)));
    match &args.exercise {
        None => check_replay(args, seed, policy),
        Some(script) => format!(
            "{} stress {} --exercise {}{preset} --schedule {policy} --start {seed} --seeds 1 --print-log",
            super::program::name(),
            shell_word(&args.config.file.display().to_string()),
            shell_word(&script.display().to_string())
        ),
    }
}

/// Prints how two seeds' outcomes differ: for an exercise, the first differing session event
/// (both sides) and any boot difference; for a boot, the diff of the outcomes.
fn explain(a: &Value, seed_a: u64, b: &Value, seed_b: u64, io: &mut Io<'_>) -> std::io::Result<()> {
    let (Some(log_a), Some(log_b)) = (a["log"].as_array(), b["log"].as_array()) else {
        return write!(io.err, "{}", diff(a, seed_a, b, seed_b));
    };
    if a["boot"] != b["boot"] {
        write!(io.err, "{}", diff(&a["boot"], seed_a, &b["boot"], seed_b))?;
    }
    if a["turns"] != b["turns"] {
        writeln!(
            io.err,
            "  turn ends:\n    seed {seed_a}: {}\n    seed {seed_b}: {}",
            safe(&a["turns"].to_string()),
            safe(&b["turns"].to_string())
        )?;
    }
    if let Some((i, x, y)) = crate::exercise::first_difference(log_a, log_b) {
        let show = |v: Option<Value>| {
            v.map_or_else(
                || "(no event)".to_owned(),
                |v| safe(&v.to_string()).into_owned(),
            )
        };
        writeln!(io.err, "  first differing session event: #{i}")?;
        writeln!(io.err, "    seed {seed_a}: {}", show(x))?;
        writeln!(io.err, "    seed {seed_b}: {}", show(y))?;
    }
    Ok(())
}

/// The ids of entries whose outcome differs between two seeds, sorted.
fn differing_entries(a: &Value, b: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let ea = a["entries"].as_object().unwrap_or(&empty);
    let eb = b["entries"].as_object().unwrap_or(&empty);
    let mut ids: Vec<String> = ea
        .keys()
        .chain(eb.keys())
        .filter(|id| ea.get(*id) != eb.get(*id))
        .cloned()
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

pub(crate) fn run(args: &StressArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    if let Some(StressCommand::Merge { reports, expect }) = &args.merge {
        return merge(reports, *expect, io);
    }
    if args.seeds.is_none() && args.time_budget.is_none() {
        writeln!(
            io.err,
            "cordis: stress needs --seeds N, --time-budget DURATION, or both (see {} stress --help)",
            super::program::name()
        )?;
        return Err(Exit(EXIT_CONFIG).into());
    }
    let policy: Policy = args.policy();
    let (index, count) = resolve_shard(args, io)?;
    let range = args.seeds.map_or_else(
        || format!("{}..", args.start),
        |n| format!("{}..{}", args.start, args.start.wrapping_add(n)),
    );
    let budget = args
        .time_budget
        .map_or_else(String::new, |b| format!(", budget {} s", b.as_secs_f64()));
    writeln!(
        io.err,
        "cordis: seeds {range} (schedule {policy}, shard {index}/{count}{budget})"
    )?;
    let plan = load(&args.config, io, builtins)?;
    let (plan, script) = match &args.exercise {
        None => (plan, None),
        Some(path) => {
            let prepared = ExerciseScript::load(path)
                .and_then(|script| Ok((exercise_plan(&plan, &script)?, script)));
            match prepared {
                Ok((plan, script)) => (plan, Some(script)),
                Err(e) => {
                    writeln!(io.err, "cordis: {e}")?;
                    return Err(Exit(EXIT_CONFIG).into());
                }
            }
        }
    };
    let started = Instant::now();
    let seeds = Seeds {
        plan: &plan,
        args,
        exercise: script.as_ref(),
        policy,
        shard: (index, count),
        positions: ci::shard_indices_below(args.seeds.unwrap_or(u64::MAX), index, count),
        started,
        sources: cordis_instructions::Snapshot::new(),
    };
    let verdict = run_seeds(&seeds, jobs(args), io)?;
    let seconds = started.elapsed().as_secs_f64();
    let digest = verdict.baseline.as_ref().map(|b| b.digest.clone());
    let report = ShardReport {
        version: SHARD_REPORT_VERSION,
        file: args.config.file.display().to_string(),
        schedule: policy.to_string(),
        start: args.start,
        seeds: args.seeds,
        shard_index: index,
        shard_count: count,
        covered_below: verdict.covered_below,
        runs: verdict.runs,
        digest: digest.clone(),
        failure: verdict.failure.clone(),
        seconds,
    };
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing the shard report {}", path.display()))?;
    }
    if let Some(path) = &args.junit {
        let failure = verdict.failure.as_ref().map(|f| junit_failure(f, policy));
        let case = JunitCase {
            name: format!("shard {index}/{count}, seeds {range}, {} run", verdict.runs),
            seconds,
            failure,
        };
        std::fs::write(path, junit_xml("cordis stress", &[case]))
            .with_context(|| format!("writing the JUnit report {}", path.display()))?;
    }
    if (io.env)("GITHUB_ACTIONS").as_deref() == Some("true")
        && let Some(failure) = &verdict.failure
    {
        annotate(&plan, &verdict, failure, io)?;
    }
    if args.json {
        writeln!(io.out, "{}", serde_json::to_string_pretty(&report)?)?;
    }
    if verdict.failure.is_some() {
        return Ok(EXIT_FAILURE);
    }
    if !args.json {
        let cut = if verdict.budget_spent {
            format!(
                " (time budget spent; seed indices below {} of this shard ran)",
                verdict.covered_below
            )
        } else {
            String::new()
        };
        match &verdict.baseline {
            Some(first) => {
                let inactive = first.inactive;
                writeln!(
                    io.out,
                    "{} seeds agree: digest {}; {} entr{} not active in every run{cut}",
                    verdict.runs,
                    safe(&first.digest),
                    inactive,
                    if inactive == 1 { "y" } else { "ies" }
                )?;
            }
            None => writeln!(io.out, "no seeds in this shard{cut}")?,
        }
    }
    Ok(EXIT_OK)
}

/// GitHub Actions annotations for a failure: one per differing entry, at its line.
fn annotate(
    plan: &LoadPlan,
    verdict: &Verdict,
    failure: &Value,
    io: &mut Io<'_>,
) -> std::io::Result<()> {
    let kind = failure["kind"].as_str().unwrap_or("failure");
    let replay = failure["replay"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n");
    let lines: Vec<Option<usize>> = if verdict.failing_entries.is_empty() {
        vec![None]
    } else {
        verdict
            .failing_entries
            .iter()
            .map(|id| {
                plan.entries
                    .iter()
                    .find(|e| &e.id == id)
                    .map(|e| e.pos.line)
            })
            .collect()
    };
    for (i, line) in lines.into_iter().enumerate() {
        let what = verdict
            .failing_entries
            .get(i)
            .map_or_else(String::new, |id| format!(" in entry \"{id}\""));
        writeln!(
            io.out,
            "{}",
            github_error(
                &plan.file,
                line,
                "cordis stress",
                &format!("{kind}{what}; replay:\n{replay}")
            )
        )?;
    }
    Ok(())
}

/// One shard's uncovered indices, for a person: the range, its stride and its size.
fn describe_gap(gap: &ci::Gap) -> String {
    let n = gap.count();
    if n == 1 {
        format!("seed index {} (shard {})", gap.first, gap.shard)
    } else if gap.step == 1 {
        format!("seed indices {}..={} ({n} indices)", gap.first, gap.last)
    } else {
        format!(
            "shard {}/{}: seed indices {}, {}, …, {} ({n} indices, one in {})",
            gap.shard,
            gap.step,
            gap.first,
            gap.first + gap.step,
            gap.last,
            gap.step
        )
    }
}

/// The largest shard report `stress merge` reads; one is a few hundred bytes.
const MAX_REPORT_BYTES: u64 = 1 << 20;

/// `cordis stress merge`: one verdict from shard reports.
fn merge(paths: &[std::path::PathBuf], expect: Option<u64>, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let mut reports = Vec::with_capacity(paths.len());
    for path in paths {
        let text = match cordis_host::include::read_regular(path, MAX_REPORT_BYTES) {
            Ok(t) => t,
            Err(e) => {
                writeln!(io.err, "cordis: cannot read {}: {e}", path.display())?;
                return Err(Exit(EXIT_CONFIG).into());
            }
        };
        match serde_json::from_str::<ShardReport>(&text) {
            Ok(r) if r.version == SHARD_REPORT_VERSION => reports.push((path.clone(), r)),
            Ok(r) => {
                writeln!(
                    io.err,
                    "cordis: {} is a version {} shard report; this cordis reads version {SHARD_REPORT_VERSION}",
                    path.display(),
                    r.version
                )?;
                return Err(Exit(EXIT_CONFIG).into());
            }
            Err(e) => {
                writeln!(
                    io.err,
                    "cordis: {} is not a shard report (write one with {} stress --report FILE): {e}",
                    path.display(),
                    super::program::name()
                )?;
                return Err(Exit(EXIT_CONFIG).into());
            }
        }
    }
    let checked = ci::merge(&reports).and_then(|merged| {
        let expected = expect.map(|n| ci::expect_shards(&reports, n)).transpose()?;
        Ok((merged, expected))
    });
    let (merged, expected) = match checked {
        Ok(m) => m,
        Err(e) => {
            writeln!(io.err, "cordis: {e}")?;
            return Err(Exit(EXIT_CONFIG).into());
        }
    };
    writeln!(
        io.out,
        "{} shard report{}: {} of {} seed indices covered",
        reports.len(),
        if reports.len() == 1 { "" } else { "s" },
        merged.covered,
        merged.planned
    )?;
    let missing = expected.as_ref().map_or(0, |e| e.missing_count);
    if let Some(expected) = expected.as_ref().filter(|e| e.missing_count > 0) {
        let mut list: Vec<String> = expected.missing.iter().map(u64::to_string).collect();
        if expected.missing_count > list.len() as u64 {
            list.push(format!(
                "… ({} more)",
                expected.missing_count - list.len() as u64
            ));
        }
        writeln!(
            io.out,
            "missing: {} of {} expected shards sent no report: shard{} {}",
            expected.missing_count,
            merged.shard_count,
            if expected.missing_count == 1 { "" } else { "s" },
            list.join(", ")
        )?;
    }
    for gap in merged.gaps().take(20) {
        writeln!(io.out, "gap: {}", describe_gap(&gap))?;
    }
    let gaps = merged.gap_count();
    if gaps > 20 {
        writeln!(io.out, "gap: … {} more shards with gaps", gaps - 20)?;
    }
    for (digest, shards) in &merged.digests {
        let list: Vec<String> = shards.iter().map(u64::to_string).collect();
        writeln!(
            io.out,
            "digest {} from shard(s) {}",
            safe(digest),
            list.join(", ")
        )?;
    }
    for (shard, failure) in &merged.failures {
        writeln!(
            io.out,
            "failure in shard {shard}: {}",
            safe(&failure.to_string())
        )?;
    }
    if merged.passed() && missing == 0 {
        writeln!(io.out, "verdict: the shards agree over the whole range")?;
        Ok(EXIT_OK)
    } else {
        writeln!(
            io.out,
            "verdict: FAILED (missing shards, gaps, divergences or disagreeing shards above)"
        )?;
        Ok(EXIT_FAILURE)
    }
}
