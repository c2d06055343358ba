//! `cordis stress`: boot once per seed and prove every boot ends the same.
//!
//! Three phases: pick this shard's seeds, boot each one against the first seed's outcome
//! (stopping at the first divergence or leak), then report (text or JSON).

use cordis_host::Builtins;
use cordis_host::LoadPlan;
use cordis_host::digest::canonical_bytes;
use cordis_host::loader::{EntryStatus, boot_blocking};
use cordis_runtime::{Policy, Schedule};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::render::{diff, safe};
use super::{EXIT_FAILURE, EXIT_OK, Io, StressArgs, load, replay_command};

/// The seeds of this shard: indices `k` of `0..seeds` with `k % count == index`, as `start + k`.
fn shard_seeds(args: &StressArgs) -> (u64, u64, Vec<u64>) {
    let (index, count) = args.shard.map_or((0, 1), |s| (s.index, s.count));
    let seeds = (0..args.seeds)
        .filter(|k| k % count == index)
        .map(|k| args.start.wrapping_add(k))
        .collect();
    (index, count, seeds)
}

/// The first seed's outcome, which every later seed must match.
struct Baseline {
    seed: u64,
    outcome: Value,
    bytes: Vec<u8>,
    digest: String,
}

/// What the seeds showed.
struct Verdict {
    baseline: Option<Baseline>,
    failure: Option<Value>,
}

/// Progress on a terminal as a bar, elsewhere as a line every tenth of the run.
struct Progress {
    bar: Option<ProgressBar>,
    step: usize,
    total: usize,
}

impl Progress {
    fn new(io: &Io<'_>, total: usize) -> Progress {
        let bar = io.progress.then(|| {
            let bar = ProgressBar::new(total as u64);
            if let Ok(style) =
                ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} {eta}")
            {
                bar.set_style(style);
            }
            bar
        });
        Progress {
            bar,
            step: (total / 10).max(1),
            total,
        }
    }

    fn done(&self, done: usize, io: &mut Io<'_>) -> std::io::Result<()> {
        match &self.bar {
            Some(bar) => bar.inc(1),
            None if done % self.step == 0 || done == self.total => writeln!(
                io.err,
                "cordis: stress {done}/{} seeds ({}%)",
                self.total,
                done * 100 / self.total
            )?,
            None => {}
        }
        Ok(())
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Boots every seed, comparing each outcome with the first; stops at the first problem.
fn run_seeds(
    plan: &LoadPlan,
    args: &StressArgs,
    seeds: &[u64],
    io: &mut Io<'_>,
) -> anyhow::Result<Verdict> {
    let policy = args.policy();
    let file = &args.config.file;
    let progress = Progress::new(io, seeds.len());
    let mut verdict = Verdict {
        baseline: None,
        failure: None,
    };
    for (done, &seed) in seeds.iter().enumerate() {
        let (report, leaked) = boot_blocking(plan, Schedule::new(policy, seed))?;
        if !leaked.is_zero() {
            progress.finish();
            writeln!(
                io.err,
                "cordis: seed {seed}: disposing the root left live resources {leaked:?}\n  replay: {}",
                replay_command(file, seed, policy)
            )?;
            verdict.failure =
                Some(json!({"kind": "leak", "seed": seed, "live": format!("{leaked:?}")}));
            break;
        }
        let outcome = report.outcome();
        let bytes = canonical_bytes(&outcome);
        match &verdict.baseline {
            None => {
                verdict.baseline = Some(Baseline {
                    seed,
                    outcome,
                    bytes,
                    digest: report.digest.clone(),
                });
            }
            Some(first) if first.bytes != bytes => {
                progress.finish();
                writeln!(
                    io.err,
                    "cordis: seeds {} and {seed} diverge (schedule {policy}):",
                    first.seed
                )?;
                write!(io.err, "{}", diff(&first.outcome, first.seed, &outcome, seed))?;
                let replays = [
                    replay_command(file, first.seed, policy),
                    replay_command(file, seed, policy),
                ];
                writeln!(io.err, "replay:")?;
                for replay in &replays {
                    writeln!(io.err, "  {replay}")?;
                }
                verdict.failure = Some(json!({
                    "kind": "divergence",
                    "seeds": [first.seed, seed],
                    "replay": replays,
                }));
                break;
            }
            Some(_) => {}
        }
        progress.done(done + 1, io)?;
    }
    progress.finish();
    Ok(verdict)
}

/// How many entries are not as configured in an outcome (the same in every agreeing seed).
fn inactive_entries(outcome: &Value) -> usize {
    outcome["entries"].as_object().map_or(0, |m| {
        m.values()
            .filter(|e| {
                !e["status"]
                    .as_str()
                    .and_then(EntryStatus::from_name)
                    .is_some_and(EntryStatus::is_as_configured)
            })
            .count()
    })
}

pub(crate) fn run(args: &StressArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let policy: Policy = args.policy();
    let (index, count, seeds) = shard_seeds(args);
    writeln!(
        io.err,
        "cordis: seeds {}..{} (schedule {policy}, shard {index}/{count}: {} seeds)",
        args.start,
        args.start.wrapping_add(args.seeds),
        seeds.len()
    )?;
    let plan = load(&args.config, io, builtins)?;
    let verdict = run_seeds(&plan, args, &seeds, io)?;
    let digest = verdict.baseline.as_ref().map(|b| b.digest.clone());
    if args.json {
        let summary = json!({
            "schedule": policy.to_string(),
            "start": args.start,
            "seeds": args.seeds,
            "shard": format!("{index}/{count}"),
            "runs": seeds.len(),
            "digest": digest,
            "failure": verdict.failure,
        });
        writeln!(io.out, "{}", serde_json::to_string_pretty(&summary)?)?;
    }
    if verdict.failure.is_some() {
        return Ok(EXIT_FAILURE);
    }
    if !args.json {
        match &verdict.baseline {
            Some(first) => {
                let inactive = inactive_entries(&first.outcome);
                writeln!(
                    io.out,
                    "{} seeds agree: digest {}; {} entr{} not active in every run",
                    seeds.len(),
                    safe(&first.digest),
                    inactive,
                    if inactive == 1 { "y" } else { "ies" }
                )?;
            }
            None => writeln!(io.out, "no seeds in this shard")?,
        }
    }
    Ok(EXIT_OK)
}
