//! `cordis stress`: boot once per seed and prove every boot ends the same.
//!
//! Three phases: pick this shard's seeds, boot each one against the first seed's outcome
//! (stopping at the first divergence or leak, or when the time budget is spent), then report:
//! text or JSON on stdout, and for CI a shard report (`--report`, combined by `stress merge`),
//! JUnit XML (`--junit`) and, under GitHub Actions, `::error` annotations at the entries' lines.

use std::time::Instant;

use anyhow::Context as _;
use cordis_host::Builtins;
use cordis_host::LoadPlan;
use cordis_host::digest::canonical_bytes;
use cordis_host::loader::{BootReport, EntryStatus, boot_and_dispose};
use cordis_runtime::{Policy, Schedule, shell_word};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use crate::exercise::{ExerciseScript, exercise_plan};

use super::check::EntryFailure;
use super::ci::{self, JunitCase, SHARD_REPORT_VERSION, ShardReport, github_error, junit_xml};
use super::render::{diff, safe, safe_lines};
use super::{
    EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Exit, Io, StressArgs, StressCommand, load, replay_command,
};

/// The seed indices of this shard: `k` in `0..seeds` (unbounded with only a time budget) with
/// `k % count == index`; seed `k` is `start + k`.
fn shard_indices(args: &StressArgs) -> (u64, u64, Box<dyn Iterator<Item = u64>>) {
    let (index, count) = args.shard.map_or((0, 1), |s| (s.index, s.count));
    let limit = args.seeds.unwrap_or(u64::MAX);
    let indices = (index..limit).step_by(usize::try_from(count).unwrap_or(usize::MAX));
    (index, count, Box::new(indices))
}

/// The first seed's outcome, which every later seed must match.
struct Baseline {
    seed: u64,
    outcome: Value,
    bytes: Vec<u8>,
    digest: String,
    /// A plain boot's report, compared field by field with later boots' reports.
    report: Option<BootReport>,
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

/// What one seed produced: a plain boot's report (its outcome JSON is built only when needed),
/// or the outcome of an exercise or a preset boot.
enum Seen {
    Boot(BootReport),
    Outcome(Value),
}

impl Seen {
    fn into_outcome(self) -> Value {
        match self {
            Seen::Boot(report) => report.outcome(),
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
    digest: String,
    leaked: cordis_runtime::LiveCounts,
    /// The first seed's boot judged as `check` judges it: the entries not as configured, and
    /// why `check` fails it (`None` for later seeds, which agree or diverge).
    judged: Option<(usize, Option<CheckFailure>)>,
}

/// What every seed of a shard runs with.
struct Seeds<'a> {
    plan: &'a LoadPlan,
    args: &'a StressArgs,
    exercise: Option<&'a ExerciseScript>,
    policy: Policy,
}

/// Boots every seed of the shard (until the time budget, if any, is spent), comparing each
/// outcome with the first; stops at the first problem.
fn run_seeds(
    plan: &LoadPlan,
    args: &StressArgs,
    exercise: Option<&ExerciseScript>,
    io: &mut Io<'_>,
) -> anyhow::Result<Verdict> {
    let policy = args.policy();
    let seeds = Seeds {
        plan,
        args,
        exercise,
        policy,
    };
    let (_, count, indices) = shard_indices(args);
    let total = args
        .seeds
        .filter(|_| args.time_budget.is_none())
        .map(|n| usize::try_from(n.div_ceil(count)).unwrap_or(usize::MAX));
    let progress = Progress::new(io, total);
    let started = Instant::now();
    let mut verdict = Verdict {
        baseline: None,
        failure: None,
        failing_entries: Vec::new(),
        runs: 0,
        covered_below: args.seeds.unwrap_or(0),
        budget_spent: false,
    };
    let runtime = cordis_host::shutdown::current_thread()?;
    for k in indices {
        // Every index of this shard below `k` ran; a failure at `k` leaves it uncovered.
        verdict.covered_below = k;
        if args
            .time_budget
            .is_some_and(|budget| started.elapsed() >= budget)
        {
            verdict.budget_spent = true;
            break;
        }
        let seed = args.start.wrapping_add(k);
        let Some(run) = seeds.run_seed(&runtime, seed, &progress, &mut verdict, io)? else {
            break;
        };
        verdict.runs += 1;
        verdict.covered_below = k.saturating_add(1);
        let leaked = run.leaked;
        if !leaked.is_zero() {
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
            break;
        }
        if seeds.diverges(seed, run, &progress, &mut verdict, io)? {
            break;
        }
        progress.done();
    }
    progress.finish();
    cordis_host::shutdown::end(runtime);
    seeds.check_agreed(&mut verdict, io)?;
    Ok(verdict)
}

impl Seeds<'_> {
    /// Boots (or exercises) `seed`. `None`: the seed could not run (a preset that does not
    /// join, an exercise that fails); the problem is printed and recorded in `verdict`.
    fn run_seed(
        &self,
        runtime: &tokio::runtime::Runtime,
        seed: u64,
        progress: &Progress,
        verdict: &mut Verdict,
        io: &mut Io<'_>,
    ) -> anyhow::Result<Option<SeedRun>> {
        let Seeds {
            plan,
            args,
            exercise,
            policy,
        } = *self;
        // The first seed's boot is judged as `check` judges it (later seeds agree or diverge).
        let first = verdict.baseline.is_none();
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
                None => {
                    let (report, leaked) =
                        runtime.block_on(boot_and_dispose(plan, Schedule::new(policy, seed)));
                    let digest = report.digest.clone();
                    let judged = judge(&report);
                    (Seen::Boot(report), digest, leaked, judged)
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
                            progress.finish();
                            writeln!(io.err, "cordis: seed {seed}: {}", safe_lines(&why))?;
                            verdict.failure = Some(json!({
                                "kind": "preset",
                                "seed": seed,
                                "message": why,
                                "replay": [replay(args, seed, policy)],
                            }));
                            return Ok(None);
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
                                writeln!(io.out, "{}", serde_json::to_string(event)?)?;
                            }
                        }
                        (
                            Seen::Outcome(run.comparable()),
                            run.report.digest.clone(),
                            run.live_after,
                            judge(&run.report),
                        )
                    }
                    Err(e) => {
                        progress.finish();
                        writeln!(io.err, "cordis: seed {seed}: {e}")?;
                        verdict.failure = Some(json!({
                            "kind": "exercise",
                            "seed": seed,
                            "message": e.to_string(),
                            "replay": [replay(args, seed, policy)],
                        }));
                        return Ok(None);
                    }
                }
            }
        };
        Ok(Some(SeedRun {
            seen,
            digest,
            leaked,
            judged,
        }))
    }

    /// Compares `seed`'s run with the first seed's (the first one becomes the baseline).
    /// `true`: they diverge; the divergence is printed and recorded in `verdict`.
    fn diverges(
        &self,
        seed: u64,
        run: SeedRun,
        progress: &Progress,
        verdict: &mut Verdict,
        io: &mut Io<'_>,
    ) -> anyhow::Result<bool> {
        let Seeds {
            args,
            exercise,
            policy,
            ..
        } = *self;
        let SeedRun {
            seen,
            digest,
            judged,
            ..
        } = run;
        // A run's seeds are all plain boots or all not, so a boot meets a boot baseline.
        let agrees = match (&verdict.baseline, &seen) {
            (None, _) => true,
            (Some(first), Seen::Boot(report)) => match &first.report {
                Some(base) => base.same_outcome(report),
                None => first.bytes == canonical_bytes(&report.outcome()),
            },
            (Some(first), Seen::Outcome(outcome)) => first.bytes == canonical_bytes(outcome),
        };
        match &verdict.baseline {
            None => {
                let report = match &seen {
                    Seen::Boot(report) => Some(report.clone()),
                    Seen::Outcome(_) => None,
                };
                let outcome = seen.into_outcome();
                let (inactive, check) = judged.unwrap_or_default();
                verdict.baseline = Some(Baseline {
                    seed,
                    bytes: canonical_bytes(&outcome),
                    outcome,
                    digest,
                    report,
                    inactive,
                    check,
                });
            }
            Some(first) if !agrees => {
                let outcome = seen.into_outcome();
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
                return Ok(true);
            }
            Some(_) => {}
        }
        Ok(false)
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
                "cordis: {} seed{} agree, but on a boot `cordis check` fails (schedule {policy}):",
                verdict.runs,
                if verdict.runs == 1 { "" } else { "s" }
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
            "cordis stress {} --exercise {}{preset} --schedule {policy} --start {seed} --seeds 1 --print-log",
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
    if let Some(StressCommand::Merge { reports }) = &args.merge {
        return merge(reports, io);
    }
    if args.seeds.is_none() && args.time_budget.is_none() {
        writeln!(
            io.err,
            "cordis: stress needs --seeds N, --time-budget DURATION, or both (see cordis stress --help)"
        )?;
        return Err(Exit(EXIT_CONFIG).into());
    }
    let policy: Policy = args.policy();
    let (index, count, _) = shard_indices(args);
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
    let verdict = run_seeds(&plan, args, script.as_ref(), io)?;
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
fn merge(paths: &[std::path::PathBuf], io: &mut Io<'_>) -> anyhow::Result<u8> {
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
                    "cordis: {} is not a shard report (write one with cordis stress --report FILE): {e}",
                    path.display()
                )?;
                return Err(Exit(EXIT_CONFIG).into());
            }
        }
    }
    let merged = match ci::merge(&reports) {
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
    if merged.passed() {
        writeln!(io.out, "verdict: the shards agree over the whole range")?;
        Ok(EXIT_OK)
    } else {
        writeln!(
            io.out,
            "verdict: FAILED (gaps, divergences or disagreeing shards above)"
        )?;
        Ok(EXIT_FAILURE)
    }
}
