//! `cordis check`: boot once, print the entries, the assembly and its digest.

use cordis_host::LoadPlan;
use cordis_runtime::{Policy, Schedule};

use super::render::{SeedHint, print_report};
use super::{CheckArgs, EXIT_FAILURE, Io, choose_seed, load, replay_command};
use cordis_host::Builtins;
use cordis_host::loader::{BootReport, EntryStatus, boot_blocking};

pub(crate) fn run(args: &CheckArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let policy = args.policy();
    let seed = choose_seed(args.seed, io)?;
    writeln!(io.err, "cordis: seed {seed} (schedule {policy})")?;
    if args.watch {
        return super::watch::run(args, io, builtins, seed);
    }
    let plan = load(&args.config, io, builtins)?;
    if let Some(preset) = &args.preset {
        return check_preset(&plan, args, seed, preset, io);
    }
    let (report, leaked) = boot_blocking(&plan, Schedule::new(policy, seed))?;
    let hint = seed_hint(&plan, &report, policy, seed)?;
    let mut code = print_report(&report, args, seed, hint, io)?;
    if !args.json {
        print_included(&plan, &report, io)?;
    }
    if strict_pending(&plan, &report, io)? {
        code = EXIT_FAILURE;
    }
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

/// Whether an `mcp` entry with `failOnStartupError: true` is pending (saying which): such an
/// entry fails on any startup error except one only a person can mend, a login, where it
/// waits for the grant (so `cordis run --watch` picks it up) but does not pass the check.
fn strict_pending(plan: &LoadPlan, report: &BootReport, io: &mut Io<'_>) -> std::io::Result<bool> {
    let mut any = false;
    for entry in report
        .entries
        .iter()
        .filter(|e| e.status == EntryStatus::Pending && e.retrying)
    {
        let strict = plan.entries.iter().any(|p| {
            p.id == entry.id
                && matches!(&p.step, cordis_host::plan::Step::Plugin { prepared, .. }
                    if prepared
                        .config
                        .downcast_ref::<cordis_mcp::McpConfig>()
                        .is_some_and(|c| c.fail_on_startup_error))
        });
        if strict {
            any = true;
            writeln!(
                io.err,
                "cordis: entry \"{}\" sets `failOnStartupError: true` and is not active: {}",
                super::render::safe(&entry.id),
                super::render::safe(entry.error.as_deref().unwrap_or("pending"))
            )?;
        }
    }
    Ok(any)
}

/// Names the files entries were included from (`cordis/include`): one `included:` line per
/// file on stdout, and where each entry that is not active is written, on stderr.
fn print_included(plan: &LoadPlan, report: &BootReport, io: &mut Io<'_>) -> std::io::Result<()> {
    let mut files: Vec<(&str, Vec<&str>)> = Vec::new();
    for entry in plan.entries.iter().filter(|e| e.file != plan.file) {
        match files.iter_mut().find(|(f, _)| *f == entry.file) {
            Some((_, ids)) => ids.push(&entry.id),
            None => files.push((&entry.file, vec![&entry.id])),
        }
    }
    for (file, ids) in &files {
        writeln!(
            io.out,
            "included: {} ({})",
            super::render::safe(file),
            super::render::safe(&ids.join(", "))
        )?;
    }
    for failed in report
        .entries
        .iter()
        .filter(|e| !e.status.is_as_configured())
    {
        if let Some(entry) = plan
            .entries
            .iter()
            .find(|e| e.id == failed.id && e.file != plan.file)
        {
            writeln!(
                io.err,
                "cordis: entry \"{}\" is written in {}:{}",
                super::render::safe(&entry.id),
                super::render::safe(&entry.file),
                entry.pos
            )?;
        }
    }
    Ok(())
}

/// `check --preset ID`: the boot, then the preset mounted (every row must be active) and the
/// assembly of its standing scope, which is what an agent joined to it receives.
fn check_preset(
    plan: &LoadPlan,
    args: &CheckArgs,
    seed: u64,
    preset: &str,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let policy = args.policy();
    let (joined, leaked) = super::presets::boot_joined(plan, Schedule::new(policy, seed), preset)?;
    let report = match joined {
        Ok(report) => report,
        Err(message) => {
            writeln!(io.err, "cordis: {}", super::render::safe_lines(&message))?;
            // A script reading `--json` gets an answer whatever happened: the error, as JSON.
            if args.json {
                let failed = serde_json::json!({
                    "seed": seed,
                    "schedule": policy.to_string(),
                    "preset": preset,
                    "error": message,
                });
                writeln!(io.out, "{}", serde_json::to_string_pretty(&failed)?)?;
            }
            return Ok(EXIT_FAILURE);
        }
    };
    let mut code = print_report(&report, args, seed, SeedHint::None, io)?;
    if !leaked.is_zero() {
        let replay = replay_command(&args.config.file, seed, policy);
        writeln!(
            io.err,
            "cordis: disposing the root left live resources {leaked:?} (seed {seed}, schedule {policy}); replay: {replay} --preset {preset}"
        )?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}

/// An entry not as configured: id, status, error.
pub(crate) type EntryFailure = (String, String, Option<String>);

/// What went wrong in a boot, comparable across seeds: the entries not as configured and the
/// assembly error. Empty and `None` exactly when `cordis check` passes the boot (`stress`
/// fails a run on the same).
pub(crate) fn failures(report: &BootReport) -> (Vec<EntryFailure>, Option<String>) {
    let entries = report
        .entries
        .iter()
        .filter(|e| e.fails_check())
        .map(|e| (e.id.clone(), e.status.to_string(), e.error.clone()))
        .collect();
    (entries, report.assembly_error.clone())
}

/// What to say about a failure's seed: a conflict is named as one; otherwise one more boot
/// under another seed, and only a different outcome is reported as schedule-dependent. A
/// timeout is not re-run (that would wait for the timeout again).
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
    if report
        .entries
        .iter()
        .filter(|e| e.fails_check())
        .all(|e| e.status == EntryStatus::Conflict)
        && failed.1.is_none()
    {
        return Ok(SeedHint::Conflict);
    }
    let timed_out = failed
        .0
        .iter()
        .any(|(_, _, error)| error.as_deref().is_some_and(|e| e.ends_with("(timeout)")));
    if timed_out {
        return Ok(SeedHint::Replay);
    }
    // Only a second outcome proves the schedule matters; the same outcome proves nothing.
    let other = seed.wrapping_add(1);
    let (again, _) = boot_blocking(plan, Schedule::new(policy, other))?;
    Ok(if failures(&again) == failed {
        SeedHint::Replay
    } else {
        SeedHint::Differs(other)
    })
}
