//! `cordis permute`: one boot per order of the tool-registering entries, one digest expected.

use std::path::Path;

use cordis_runtime::Schedule;
use serde_json::json;

use super::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io, LoadArgs, load};
use cordis_host::Builtins;
use cordis_host::loader::boot_blocking;
use cordis_host::permute::{permute, reorder, tool_entries};

use super::PermuteArgs;

/// The command that boots one order again.
fn replay(file: &Path, ids: &[String]) -> String {
    format!(
        "cordis permute {} --order {}",
        file.display(),
        ids.join(",")
    )
}

pub(crate) fn run(args: &PermuteArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let load_args = LoadArgs {
        file: args.file.clone(),
        schedule: cordis_runtime::Policy::Fifo,
        timeout_ms: args.timeout_ms,
        json: args.json,
        plugin_dirs: args.plugin_dirs.clone(),
    };
    let plan = match load(&load_args, io, builtins)? {
        Ok(plan) => plan,
        Err(code) => return Ok(code),
    };
    let positions = tool_entries(&plan);
    if let Some(ids) = &args.order {
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
                        "cordis: --order names \"{id}\" twice or it is not a tool-registering entry; those are: {}",
                        known.join(", ")
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
        let (report, _) = boot_blocking(&reorder(&plan, &positions, &order), Schedule::fifo())?;
        writeln!(io.out, "{}", report.digest)?;
        return Ok(if report.healthy() {
            EXIT_OK
        } else {
            EXIT_FAILURE
        });
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let n = positions.len();
    let total = cordis_host::permute::factorial(n).min(args.max);
    writeln!(
        io.err,
        "cordis: permuting {n} tool-registering entries: {total} orders on {threads} threads"
    )?;
    let report = permute(&plan, args.max, args.seed, threads, &|_| {})?;
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
            writeln!(io.err, "    replay: {}", replay(&args.file, ids))?;
        }
        code = EXIT_FAILURE;
    }
    if let Some((ids, why)) = &report.unhealthy {
        writeln!(
            io.err,
            "cordis: order {} did not boot cleanly: {why}",
            ids.join(",")
        )?;
        writeln!(io.err, "    replay: {}", replay(&args.file, ids))?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}
