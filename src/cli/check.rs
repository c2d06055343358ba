//! `cordis check`: boot once, print the entries, the assembly and its digest.

use cordis_host::LoadPlan;
use cordis_runtime::{Policy, Schedule};

use super::render::{SeedHint, print_report};
use super::{CheckArgs, EXIT_FAILURE, Io, choose_seed, load, replay_command};
use cordis_host::Builtins;
use cordis_host::loader::{BootReport, boot_blocking};

pub(crate) fn run(args: &CheckArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let policy = args.policy();
    let seed = choose_seed(args.seed, io)?;
    writeln!(io.err, "cordis: seed {seed} (schedule {policy})")?;
    if args.watch {
        return super::watch::run(args, io, builtins, seed);
    }
    let plan = load(&args.config, io, builtins)?;
    let (report, leaked) = boot_blocking(&plan, Schedule::new(policy, seed))?;
    let hint = seed_hint(&plan, &report, policy, seed)?;
    let mut code = print_report(&report, args, seed, hint, io)?;
    if !leaked.is_zero() {
        let replay = replay_command(&args.config.file, seed, policy);
        writeln!(
            io.err,
            "cordis: disposing the root left live resources {leaked:?} (seed {seed}, schedule {policy}); replay: {replay}"
        )?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}

/// An entry not as configured: id, status, error.
type EntryFailure = (String, String, Option<String>);

/// What went wrong in a boot, comparable across seeds: the entries not as configured and the
/// assembly error.
fn failures(report: &BootReport) -> (Vec<EntryFailure>, Option<String>) {
    let entries = report
        .entries
        .iter()
        .filter(|e| !e.status.is_as_configured())
        .map(|e| (e.id.clone(), e.status.to_string(), e.error.clone()))
        .collect();
    (entries, report.assembly_error.clone())
}

/// Decides whether a failure could change with the seed by booting once more under another
/// seed. A timeout is always worth a replay (a hang can be a scheduling race) and is not
/// re-run, since that would wait for the timeout again.
fn seed_hint(
    plan: &LoadPlan,
    report: &BootReport,
    policy: Policy,
    seed: u64,
) -> std::io::Result<SeedHint> {
    let failed = failures(report);
    if failed.0.is_empty() && failed.1.is_none() {
        return Ok(SeedHint::None);
    }
    let timed_out = failed
        .0
        .iter()
        .any(|(_, _, error)| error.as_deref().is_some_and(|e| e.ends_with("(timeout)")));
    if timed_out {
        return Ok(SeedHint::Replay);
    }
    let other = seed.wrapping_add(1);
    let (again, _) = boot_blocking(plan, Schedule::new(policy, other))?;
    Ok(if failures(&again) == failed {
        SeedHint::SameUnder(other)
    } else {
        SeedHint::Replay
    })
}
