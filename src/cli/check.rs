//! `cordis check`: boot once, print the entries, the assembly and its digest.

use cordis_host::LoadPlan;
use cordis_runtime::{Policy, Schedule};

use super::render::{assembly_text, entry_table, safe};
use super::{CheckArgs, EXIT_FAILURE, EXIT_OK, Io, choose_seed, load, replay_command};
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

/// Whether a failed boot's seed is worth replaying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeedHint {
    /// The failure may depend on the schedule: print the replay command.
    Replay,
    /// Another seed fails the same way: the seed does not matter, say so instead.
    SameUnder(u64),
    /// Nothing failed, or nothing to say.
    None,
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

/// Prints a boot report (table or JSON) and what is wrong with it; returns the exit code.
pub(crate) fn print_report(
    report: &BootReport,
    args: &CheckArgs,
    seed: u64,
    seed_hint: SeedHint,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let policy = args.policy();
    if args.json {
        writeln!(
            io.out,
            "{}",
            serde_json::to_string_pretty(&report.to_json())?
        )?;
    } else {
        write!(io.out, "{}", entry_table(report))?;
        writeln!(io.out)?;
        write!(io.out, "{}", assembly_text(report))?;
        for incident in &report.incidents {
            writeln!(io.out, "incident: {}", safe(&incident.to_string()))?;
        }
        writeln!(io.out, "digest: {}", report.digest)?;
    }
    let mut code = EXIT_OK;
    let replay = match seed_hint {
        SeedHint::Replay => format!(
            " (seed {seed}, schedule {policy}); replay: {}",
            replay_command(&args.config.file, seed, policy)
        ),
        SeedHint::SameUnder(other) => format!(
            "; it fails the same under seed {other}, so it is not a scheduling race: fix the entry"
        ),
        SeedHint::None => String::new(),
    };
    if !report.all_active() {
        let bad: Vec<String> = report
            .entries
            .iter()
            .filter(|e| !e.status.is_as_configured())
            .map(|e| safe(&e.id).into_owned())
            .collect();
        writeln!(
            io.err,
            "cordis: {} entr{} not active: {}{replay}",
            bad.len(),
            if bad.len() == 1 { "y is" } else { "ies are" },
            bad.join(", ")
        )?;
        code = EXIT_FAILURE;
    }
    if let Some(error) = &report.assembly_error {
        writeln!(
            io.err,
            "cordis: assembling the request failed: {}{replay}",
            safe(error)
        )?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}
