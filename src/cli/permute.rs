//! `cordis permute`: one boot per order of the tool-registering entries, one digest expected.

use std::path::Path;

use serde_json::json;

use super::render::safe;
use super::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io, load};
use std::collections::{BTreeMap, BTreeSet};

use cordis_host::permute::{
    OrderOutcome, PermuteReport, boot_order, factorial, order_of, permute, tool_entries,
};
use cordis_host::{Builtins, LoadPlan};
use cordis_runtime::{Policy, Schedule};

use super::PermuteArgs;

/// The command that boots one order again.
fn replay(file: &Path, ids: &[String], preset: Option<&str>) -> String {
    let preset = preset.map_or_else(String::new, |p| format!(" --preset {p}"));
    format!(
        "cordis permute {}{preset} --order {}",
        file.display(),
        ids.join(",")
    )
}

/// `plan` with its tool-registering entries (at `positions`) started in `order`: their slots
/// take the entries in that order, so a fifo boot is a boot of the file written that way.
/// Groups do not move, so every child's parent index stays right.
fn reordered(plan: &LoadPlan, positions: &[usize], order: &[usize]) -> LoadPlan {
    let mut out = plan.clone();
    for (slot, &k) in positions.iter().zip(order) {
        out.entries[*slot] = plan.entries[positions[k]].clone();
    }
    out
}

/// One order with `preset` joined: the digest of its standing scope's assembly, the tool
/// registrations in the order they happened, and why it was unhealthy.
fn boot_preset_order(
    plan: &LoadPlan,
    positions: &[usize],
    order: &[usize],
    preset: &str,
) -> std::io::Result<(String, Vec<String>, Option<String>)> {
    let plan = reordered(plan, positions, order);
    let schedule = Schedule::new(Policy::Fifo, 0);
    let (joined, leaked) = super::presets::boot_joined(&plan, schedule, preset)?;
    Ok(match joined {
        Err(why) => (format!("preset failed: {why}"), Vec::new(), Some(why)),
        Ok(report) => {
            let registrations = report
                .trace
                .iter()
                .filter(|t| t.kind == Schedule::TRACE_REGISTER)
                .map(ToString::to_string)
                .collect();
            let mut unhealthy = report
                .entries
                .iter()
                .find(|e| !e.status.is_as_configured())
                .map(|e| format!("entry {} is {}", e.id, e.status))
                .or_else(|| report.assembly_error.clone());
            if unhealthy.is_none() && !leaked.is_zero() {
                unhealthy = Some(format!("disposing left live resources {leaked:?}"));
            }
            (report.digest, registrations, unhealthy)
        }
    })
}

/// [`permute`] with `preset` joined after each boot: every order of the host's
/// tool-registering entries (the preset's rows mount in file order after them), one digest of
/// the standing scope's assembly expected.
fn permute_preset(
    plan: &LoadPlan,
    max: u64,
    seed: u64,
    threads: usize,
    preset: &str,
    on_progress: &(dyn Fn(u64) + Sync),
) -> std::io::Result<PermuteReport> {
    let positions = tool_entries(plan);
    let n = positions.len();
    let all = factorial(n);
    let exhaustive = all <= max;
    let orders = if exhaustive { all } else { max };
    let threads = threads.clamp(1, 16) as u64;
    let started = std::time::Instant::now();
    let done = std::sync::atomic::AtomicU64::new(0);
    type Part = (
        BTreeMap<String, (u64, Vec<String>)>,
        BTreeSet<Vec<String>>,
        Option<(u64, Vec<String>, String)>,
    );
    let parts: Vec<std::io::Result<Part>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (positions, done) = (&positions, &done);
                s.spawn(move || -> std::io::Result<Part> {
                    let mut part: Part = Default::default();
                    for k in orders * t / threads..orders * (t + 1) / threads {
                        let order = order_of(n, exhaustive, seed, k);
                        let ids: Vec<String> = order
                            .iter()
                            .map(|&i| plan.entries[positions[i]].id.clone())
                            .collect();
                        let (digest, registrations, unhealthy) =
                            boot_preset_order(plan, positions, &order, preset)?;
                        part.1.insert(registrations);
                        if part.2.is_none()
                            && let Some(why) = unhealthy
                        {
                            part.2 = Some((k, ids.clone(), why));
                        }
                        let first = part.0.entry(digest).or_insert((k, ids.clone()));
                        if k < first.0 {
                            *first = (k, ids);
                        }
                        let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        on_progress(d);
                    }
                    Ok(part)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a permutation thread panicked")))
            })
            .collect()
    });
    let mut digests: BTreeMap<String, (u64, Vec<String>)> = BTreeMap::new();
    let mut registrations = BTreeSet::new();
    let mut unhealthy: Option<(u64, Vec<String>, String)> = None;
    for part in parts {
        let (d, r, u) = part?;
        for (digest, first) in d {
            let slot = digests.entry(digest).or_insert_with(|| first.clone());
            if first.0 < slot.0 {
                *slot = first;
            }
        }
        registrations.extend(r);
        if let Some(u) = u
            && unhealthy.as_ref().is_none_or(|old| u.0 < old.0)
        {
            unhealthy = Some(u);
        }
    }
    Ok(PermuteReport {
        entries: positions
            .iter()
            .map(|&p| plan.entries[p].id.clone())
            .collect(),
        orders,
        exhaustive,
        digests: digests.into_iter().map(|(d, (_, ids))| (d, ids)).collect(),
        registration_orders: registrations.len(),
        unhealthy: unhealthy.map(|(_, ids, why)| (ids, why)),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `--order`: boots one order (entry ids), as the proof boots each, and prints its digest.
fn replay_order(
    plan: &LoadPlan,
    ids: &[String],
    preset: Option<&str>,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let positions = tool_entries(plan);
    let mut order = Vec::with_capacity(ids.len());
    for id in ids {
        match positions.iter().position(|&p| &plan.entries[p].id == id) {
            Some(k) if !order.contains(&k) => order.push(k),
            _ => {
                let known: Vec<&str> = positions
                    .iter()
                    .map(|&p| plan.entries[p].id.as_str())
                    .collect();
                writeln!(
                    io.err,
                    "cordis: --order names \"{}\" twice or it is not a tool-registering entry; those are: {}",
                    safe(id),
                    safe(&known.join(", "))
                )?;
                return Ok(EXIT_CONFIG);
            }
        }
    }
    if order.len() != positions.len() {
        writeln!(
            io.err,
            "cordis: --order must name all {} tool-registering entries",
            positions.len()
        )?;
        return Ok(EXIT_CONFIG);
    }
    let outcome = match preset {
        Some(preset) => {
            let (digest, registrations, unhealthy) =
                boot_preset_order(plan, &positions, &order, preset)?;
            OrderOutcome {
                digest,
                unhealthy,
                registrations,
            }
        }
        None => boot_order(plan, &order)?,
    };
    writeln!(io.out, "{}", outcome.digest)?;
    if let Some(why) = &outcome.unhealthy {
        writeln!(
            io.err,
            "cordis: this order did not boot cleanly: {}",
            safe(why)
        )?;
        return Ok(EXIT_FAILURE);
    }
    Ok(EXIT_OK)
}

pub(crate) fn run(args: &PermuteArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let plan = load(&args.config, io, builtins)?;
    if let Some(ids) = &args.order {
        return replay_order(&plan, ids, args.preset.as_deref(), io);
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let n = tool_entries(&plan).len();
    let total = cordis_host::permute::factorial(n).min(args.max);
    writeln!(
        io.err,
        "cordis: permuting {n} tool-registering entries: {total} orders on {threads} threads"
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
    let report = match &args.preset {
        Some(preset) => permute_preset(&plan, args.max, args.seed, threads, preset, &tick)?,
        None => permute(&plan, args.max, args.seed, threads, &tick)?,
    };
    bar.finish_and_clear();
    let distinct = report.digests.len();
    if args.json {
        writeln!(
            io.out,
            "{}",
            serde_json::to_string_pretty(&json!({
                "entries": report.entries,
                "orders": report.orders,
                "exhaustive": report.exhaustive,
                "distinct_digests": distinct,
                "digests": report.digests.keys().collect::<Vec<_>>(),
                "registration_orders": report.registration_orders,
                "unhealthy": report.unhealthy.as_ref().map(|(ids, why)| json!({"order": ids, "why": why})),
                "seconds": report.seconds,
            }))?
        )?;
    } else {
        writeln!(
            io.out,
            "{} orders ({}) of {}: {distinct} distinct digest{}, {} distinct registration orders, {:.2} s",
            report.orders,
            if report.exhaustive {
                "all"
            } else {
                "seeded sample"
            },
            report.entries.join(", "),
            if distinct == 1 { "" } else { "s" },
            report.registration_orders,
            report.seconds,
        )?;
        if let Some(d) = report.digests.keys().next()
            && distinct == 1
        {
            writeln!(io.out, "digest: {d}")?;
        }
    }
    let mut code = EXIT_OK;
    if distinct > 1 {
        writeln!(io.err, "cordis: the request depends on registration order:")?;
        for (digest, ids) in report.digests.iter().take(2) {
            writeln!(io.err, "  order {} -> digest {digest}", ids.join(","))?;
            writeln!(
                io.err,
                "    replay: {}",
                replay(&args.config.file, ids, args.preset.as_deref())
            )?;
        }
        code = EXIT_FAILURE;
    }
    if let Some((ids, why)) = &report.unhealthy {
        writeln!(
            io.err,
            "cordis: order {} did not boot cleanly: {why}",
            ids.join(",")
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
