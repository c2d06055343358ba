//! `cordis check`: boot once, print the entries, the assembly and its digest.

use cordis_runtime::Schedule;

use super::render::{assembly_text, entry_table};
use super::{CheckArgs, EXIT_FAILURE, EXIT_OK, Io, choose_seed, load, replay_command};
use cordis_host::Builtins;
use cordis_host::loader::{BootReport, boot_blocking};

pub(crate) fn run(args: &CheckArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let policy = args.load.schedule;
    let seed = match choose_seed(args.seed, io)? {
        Ok(seed) => seed,
        Err(code) => return Ok(code),
    };
    writeln!(io.err, "cordis: seed {seed} (schedule {policy})")?;
    if args.watch {
        return super::watch::run(args, io, builtins, seed);
    }
    let plan = match load(&args.load, io, builtins)? {
        Ok(plan) => plan,
        Err(code) => return Ok(code),
    };
    let (report, leaked) = boot_blocking(&plan, Schedule::new(policy, seed))?;
    let mut code = print_report(&report, args, seed, io)?;
    if !leaked.is_zero() {
        let replay = replay_command(&args.load.file, seed, policy);
        writeln!(
            io.err,
            "cordis: disposing the root left live resources {leaked:?} (seed {seed}, schedule {policy}); replay: {replay}"
        )?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}

/// Prints a boot report (table or JSON) and what is wrong with it; returns the exit code.
pub(crate) fn print_report(
    report: &BootReport,
    args: &CheckArgs,
    seed: u64,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let policy = args.load.schedule;
    if args.load.json {
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
            writeln!(io.out, "incident: {incident}")?;
        }
        writeln!(io.out, "digest: {}", report.digest)?;
    }
    let mut code = EXIT_OK;
    let replay = replay_command(&args.load.file, seed, policy);
    if !report.all_active() {
        let bad: Vec<&str> = report
            .entries
            .iter()
            .filter(|e| !matches!(e.status.as_str(), "active" | "disabled"))
            .map(|e| e.id.as_str())
            .collect();
        writeln!(
            io.err,
            "cordis: {} entr{} not active: {} (seed {seed}, schedule {policy}); replay: {replay}",
            bad.len(),
            if bad.len() == 1 { "y is" } else { "ies are" },
            bad.join(", ")
        )?;
        code = EXIT_FAILURE;
    }
    if let Some(error) = &report.assembly_error {
        writeln!(
            io.err,
            "cordis: assembling the request failed: {error} (seed {seed}, schedule {policy}); replay: {replay}"
        )?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}
