//! `cordis stress`: boot once per seed and prove every boot ends the same.

use cordis_runtime::Schedule;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::render::diff;
use super::{EXIT_FAILURE, EXIT_OK, Io, StressArgs, load, replay_command};
use cordis_host::Builtins;
use cordis_host::digest::canonical_bytes;
use cordis_host::loader::{EntryStatus, boot_blocking};

pub(crate) fn run(args: &StressArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let policy = args.load.schedule;
    let (index, count) = args.shard.map_or((0, 1), |s| (s.index, s.count));
    let seeds: Vec<u64> = (0..args.seeds)
        .filter(|k| k % count == index)
        .map(|k| args.start.wrapping_add(k))
        .collect();
    writeln!(
        io.err,
        "cordis: seeds {}..{} (schedule {policy}, shard {index}/{count}: {} seeds)",
        args.start,
        args.start.wrapping_add(args.seeds),
        seeds.len()
    )?;
    let plan = match load(&args.load, io, builtins)? {
        Ok(plan) => plan,
        Err(code) => return Ok(code),
    };
    let file = &args.load.file;
    let bar = io.progress.then(|| {
        let bar = ProgressBar::new(seeds.len() as u64);
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {eta}") {
            bar.set_style(style);
        }
        bar
    });
    let step = (seeds.len() / 10).max(1);
    let mut baseline: Option<(u64, serde_json::Value, Vec<u8>, String)> = None;
    let mut failure: Option<serde_json::Value> = None;
    for (done, &seed) in seeds.iter().enumerate() {
        let (report, leaked) = boot_blocking(&plan, Schedule::new(policy, seed))?;
        if !leaked.is_zero() {
            writeln!(
                io.err,
                "cordis: seed {seed}: disposing the root left live resources {leaked:?}\n  replay: {}",
                replay_command(file, seed, policy)
            )?;
            failure = Some(json!({"kind": "leak", "seed": seed, "live": format!("{leaked:?}")}));
            break;
        }
        let outcome = report.outcome();
        let bytes = canonical_bytes(&outcome);
        match &baseline {
            None => baseline = Some((seed, outcome, bytes, report.digest.clone())),
            Some((first, first_outcome, first_bytes, _)) if *first_bytes != bytes => {
                if let Some(bar) = &bar {
                    bar.abandon();
                }
                writeln!(
                    io.err,
                    "cordis: seeds {first} and {seed} diverge (schedule {policy}):"
                )?;
                write!(io.err, "{}", diff(first_outcome, *first, &outcome, seed))?;
                writeln!(io.err, "replay:")?;
                writeln!(io.err, "  {}", replay_command(file, *first, policy))?;
                writeln!(io.err, "  {}", replay_command(file, seed, policy))?;
                failure = Some(json!({
                    "kind": "divergence",
                    "seeds": [first, seed],
                    "replay": [replay_command(file, *first, policy), replay_command(file, seed, policy)],
                }));
                break;
            }
            Some(_) => {}
        }
        match &bar {
            Some(bar) => bar.inc(1),
            None if (done + 1) % step == 0 || done + 1 == seeds.len() => writeln!(
                io.err,
                "cordis: stress {}/{} seeds ({}%)",
                done + 1,
                seeds.len(),
                (done + 1) * 100 / seeds.len()
            )?,
            None => {}
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let digest = baseline.as_ref().map(|b| b.3.clone());
    if args.load.json {
        let summary = json!({
            "schedule": policy.to_string(),
            "start": args.start,
            "seeds": args.seeds,
            "shard": format!("{index}/{count}"),
            "runs": seeds.len(),
            "digest": digest,
            "failure": failure,
        });
        writeln!(io.out, "{}", serde_json::to_string_pretty(&summary)?)?;
    }
    if failure.is_some() {
        return Ok(EXIT_FAILURE);
    }
    if !args.load.json {
        match (&baseline, &digest) {
            (Some((_, outcome, _, _)), Some(digest)) => {
                let inactive = outcome["entries"].as_object().map_or(0, |m| {
                    m.values()
                        .filter(|e| {
                            !e["status"]
                                .as_str()
                                .and_then(EntryStatus::from_name)
                                .is_some_and(EntryStatus::is_as_configured)
                        })
                        .count()
                });
                writeln!(
                    io.out,
                    "{} seeds agree: digest {digest}; {} entr{} not active in every run",
                    seeds.len(),
                    inactive,
                    if inactive == 1 { "y" } else { "ies" }
                )?;
            }
            _ => writeln!(io.out, "no seeds in this shard")?,
        }
    }
    Ok(EXIT_OK)
}
