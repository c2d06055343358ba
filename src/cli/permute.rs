//! `cordis permute`: one boot per class of load orders of a config's entries, one outcome
//! expected (the request digest, every entry's status and reason, the incidents).

use std::path::Path;

use serde_json::json;

use super::render::safe;
use super::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io, load};

use cordis_host::permute::{
    OrderOutcome, PermuteReport, ProofOptions, Space, boot_order, prove_with,
};
use cordis_host::{Builtins, LoadPlan};
use cordis_runtime::{Policy, Schedule};

use super::PermuteArgs;

/// The command that boots one order again (`--order ''` for a proof with no entry to move).
fn replay(file: &Path, ids: &[String], preset: Option<&str>) -> String {
    let preset = preset.map_or_else(String::new, |p| format!(" --preset {p}"));
    let order = if ids.is_empty() {
        "''".to_owned()
    } else {
        ids.join(",")
    };
    format!("cordis permute {}{preset} --order {order}", file.display())
}

/// One order with `preset` joined: the digest of its standing scope's assembly, every entry's
/// and row's status, and the incidents.
fn boot_preset_order(
    rt: &tokio::runtime::Runtime,
    plan: &LoadPlan,
    starts: &[usize],
    preset: &str,
) -> std::io::Result<OrderOutcome> {
    let schedule = Schedule::new(Policy::Fifo, 0);
    let (joined, leaked) = rt.block_on(super::presets::boot_joined_on(
        plan, schedule, preset, starts,
    ));
    Ok(match joined {
        Err(why) => OrderOutcome {
            digest: format!("preset failed: {why}"),
            assembly_error: Some(why),
            entries: Vec::new(),
            incidents: Vec::new(),
            registrations: Vec::new(),
        },
        Ok(report) => {
            let registrations = report
                .trace
                .iter()
                .filter(|t| t.kind == Schedule::TRACE_REGISTER)
                .map(ToString::to_string)
                .collect();
            let mut incidents = report.incidents.clone();
            if !leaked.is_zero() {
                incidents.push(format!("disposing left live resources {leaked:?}"));
            }
            OrderOutcome {
                digest: report.digest.clone(),
                assembly_error: report.assembly_error.clone(),
                entries: report
                    .entries
                    .iter()
                    .map(|e| (e.id.clone(), e.status, e.error.clone()))
                    .collect(),
                incidents,
                registrations,
            }
        }
    })
}

/// `--order`: boots one order (entry ids), as the proof boots each, and prints its outcome.
fn replay_order(
    plan: &LoadPlan,
    ids: &[String],
    preset: Option<&str>,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let positions = Space::of(plan).positions;
    let ids: Vec<&String> = ids.iter().filter(|id| !id.is_empty()).collect();
    let known = || {
        positions
            .iter()
            .map(|&p| plan.entries[p].id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut order = Vec::with_capacity(ids.len());
    for id in &ids {
        match positions.iter().position(|&p| &plan.entries[p].id == *id) {
            Some(k) if !order.contains(&k) => order.push(k),
            _ => {
                writeln!(
                    io.err,
                    "cordis: --order names \"{}\" twice or it is not a plugin entry; those are: {}",
                    safe(id),
                    safe(&known())
                )?;
                return Ok(EXIT_CONFIG);
            }
        }
    }
    if order.len() != positions.len() {
        writeln!(
            io.err,
            "cordis: --order must name all {} plugin entries ({}), each once",
            positions.len(),
            safe(&known())
        )?;
        return Ok(EXIT_CONFIG);
    }
    let outcome = match preset {
        Some(preset) => {
            let rt = cordis_host::shutdown::current_thread()?;
            let starts = start_order(plan.entries.len(), &positions, &order);
            let outcome = boot_preset_order(&rt, plan, &starts, preset)?;
            cordis_host::shutdown::end(rt);
            outcome
        }
        None => boot_order(plan, &positions, &order)?,
    };
    writeln!(io.out, "{}", outcome.digest)?;
    for (id, status, error) in &outcome.entries {
        match error {
            Some(e) => writeln!(io.out, "  {} {status}: {}", safe(id), safe(e))?,
            None => writeln!(io.out, "  {} {status}", safe(id))?,
        }
    }
    if let Some(why) = outcome.unhealthy() {
        writeln!(
            io.err,
            "cordis: this order did not boot cleanly: {}",
            safe(&why)
        )?;
        return Ok(EXIT_FAILURE);
    }
    Ok(EXIT_OK)
}

/// The start order of plan indices that puts the entry at `positions[order[k]]` in the place of
/// `positions[k]` (as the proof boots orders).
fn start_order(n: usize, positions: &[usize], order: &[usize]) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..n).collect();
    for (k, &from) in order.iter().enumerate() {
        indices[positions[k]] = positions[from];
    }
    indices
}

pub(crate) fn run(args: &PermuteArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let plan = load(&args.config, io, builtins)?;
    if let Some(ids) = &args.order {
        return replay_order(&plan, ids, args.preset.as_deref(), io);
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let space = Space::of(&plan);
    let (classes, complete) = space.classes(args.max);
    let total = if complete {
        classes.len() as u64
    } else {
        args.max
    };
    let n = space.positions.len();
    let pairs = (0..n)
        .map(|a| (a + 1..n).filter(|&b| space.dependent[a][b]).count())
        .sum::<usize>();
    writeln!(
        io.err,
        "cordis: permuting {n} plugin entries ({pairs} interacting pair{}): {total} order{} on {threads} thread{}",
        if pairs == 1 { "" } else { "s" },
        if total == 1 { "" } else { "s" },
        if threads == 1 { "" } else { "s" },
    )?;
    // A bar on a terminal (the workers tick it from their threads); nothing when piped.
    let bar = if io.progress {
        let bar = indicatif::ProgressBar::new(total);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} orders {per_sec} {eta}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let tick = |done| bar.set_position(done);
    let options = ProofOptions {
        max: args.max,
        seed: args.seed,
        threads,
    };
    let report = match &args.preset {
        Some(preset) => prove_with(&plan, &space, &options, &tick, &|rt, starts| {
            boot_preset_order(rt, &plan, starts, preset)
        })?,
        None => prove_with(&plan, &space, &options, &tick, &|rt, starts| {
            Ok(rt.block_on(cordis_host::permute::boot(&plan, starts)))
        })?,
    };
    bar.finish_and_clear();
    print_report(&report, args, io)
}

fn print_report(report: &PermuteReport, args: &PermuteArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let distinct = report.outcomes.len();
    let claims: Vec<String> = report
        .claims
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    if args.json {
        writeln!(
            io.out,
            "{}",
            serde_json::to_string_pretty(&json!({
                "entries": report.entries,
                "orders": report.orders,
                "all_orders": report.all_orders,
                "exhaustive": report.exhaustive,
                "interacting": report.interacting.as_ref().map(|p| p.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>()),
                "claims": report.claims,
                "distinct_outcomes": distinct,
                "distinct_digests": report.digests.len(),
                "digests": report.digests.keys().collect::<Vec<_>>(),
                "registration_orders": report.registration_orders,
                "unhealthy": report.unhealthy.as_ref().map(|(ids, why)| json!({"order": ids, "why": why})),
                "seconds": report.seconds,
            }))?
        )?;
    } else {
        writeln!(
            io.out,
            "{} order{} ({}) standing for {} of {} entr{}: {distinct} distinct outcome{}, {} distinct registration orders, {:.2} s",
            report.orders,
            if report.orders == 1 { "" } else { "s" },
            if report.exhaustive {
                "every class"
            } else {
                "seeded sample"
            },
            if report.exhaustive {
                format!("all {} orders", report.all_orders)
            } else {
                format!("some of {} orders", report.all_orders)
            },
            report.entries.len(),
            if report.entries.len() == 1 {
                "y"
            } else {
                "ies"
            },
            if distinct == 1 { "" } else { "s" },
            report.registration_orders,
            report.seconds,
        )?;
        writeln!(
            io.out,
            "claims: {}",
            if claims.is_empty() {
                "none".to_owned()
            } else {
                claims.join(", ")
            }
        )?;
        if let Some(pairs) = &report.interacting
            && !pairs.is_empty()
        {
            let shown: Vec<String> = pairs.iter().map(|(a, b)| format!("{a}~{b}")).collect();
            writeln!(io.out, "interacting: {}", safe(&shown.join(", ")))?;
        }
        if let Some(d) = report.digests.keys().next()
            && distinct == 1
        {
            writeln!(io.out, "digest: {d}")?;
        }
    }
    let mut code = EXIT_OK;
    if let [(first_ids, first), (other_ids, other), ..] = report.outcomes.as_slice() {
        writeln!(io.err, "cordis: the outcome depends on load order:")?;
        let (a, b) = (first_ids.join(","), other_ids.join(","));
        for line in first.differences("A", other, "B") {
            writeln!(io.err, "  {}", safe(&line))?;
        }
        writeln!(io.err, "  order A: {}", safe(&a))?;
        writeln!(
            io.err,
            "    replay: {}",
            replay(&args.config.file, first_ids, args.preset.as_deref())
        )?;
        writeln!(io.err, "  order B: {}", safe(&b))?;
        writeln!(
            io.err,
            "    replay: {}",
            replay(&args.config.file, other_ids, args.preset.as_deref())
        )?;
        code = EXIT_FAILURE;
    }
    if let Some((ids, why)) = &report.unhealthy {
        writeln!(
            io.err,
            "cordis: order {} did not boot cleanly: {}",
            safe(&ids.join(",")),
            safe(why)
        )?;
        writeln!(
            io.err,
            "    replay: {}",
            replay(&args.config.file, ids, args.preset.as_deref())
        )?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}
