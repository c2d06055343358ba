//! `cordis permute`: one boot per order of the tool-registering entries, one digest expected.

use std::path::Path;

use serde_json::json;

use super::render::safe;
use super::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io, load};
use cordis_host::permute::{boot_order, permute, tool_entries};
use cordis_host::{Builtins, LoadPlan};

use super::PermuteArgs;

/// The command that boots one order again.
fn replay(file: &Path, ids: &[String]) -> String {
    format!(
        "cordis permute {} --order {}",
        file.display(),
        ids.join(",")
    )
}

/// `--order`: boots one order (entry ids), as the proof boots each, and prints its digest.
fn replay_order(plan: &LoadPlan, ids: &[String], io: &mut Io<'_>) -> anyhow::Result<u8> {
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
    let outcome = boot_order(plan, &order)?;
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
        return replay_order(&plan, ids, io);
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
    let report = permute(&plan, args.max, args.seed, threads, &|done| {
        bar.set_position(done)
    })?;
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
            writeln!(io.err, "    replay: {}", replay(&args.config.file, ids))?;
        }
        code = EXIT_FAILURE;
    }
    if let Some((ids, why)) = &report.unhealthy {
        writeln!(
            io.err,
            "cordis: order {} did not boot cleanly: {why}",
            ids.join(",")
        )?;
        writeln!(io.err, "    replay: {}", replay(&args.config.file, ids))?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}
