//! `cordis permute`: one boot per class of load orders of a config's entries, one outcome
//! expected (the request digest, every entry's status and reason, the incidents).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use super::render::safe;
use super::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io, load};

use cordis_host::loader::MountOrder;
use cordis_host::permute::{
    OrderOutcome, PermuteReport, ProofOptions, ProofOrders, Space, permute_with, prove_with,
    start_order,
};
use cordis_host::{Builtins, LoadPlan};
use cordis_runtime::{EventFootprint, Policy, Schedule};

use super::PermuteArgs;

/// Exit code: no order showed a difference, but the orders booted were a seeded sample, not
/// every class (more classes than `--max`), so nothing was proven.
pub(crate) const EXIT_SAMPLED: u8 = 6;

/// The command that boots one order again (`--order ''` for a proof with no entry to move).
fn replay(file: &Path, ids: &[String], preset: Option<&str>) -> String {
    let preset = preset.map_or_else(String::new, |p| format!(" --preset {p}"));
    let order = if ids.is_empty() {
        "''".to_owned()
    } else {
        ids.join(",")
    };
    format!(
        "{} permute {}{preset} --order {order}",
        super::program::name(),
        file.display()
    )
}

/// What a run permutes: the host plan's entries and, with `--preset`, the preset's rows.
struct Proof<'a> {
    plan: &'a LoadPlan,
    space: Space,
    /// The preset's id, its composition's plan, and that plan's permuted positions.
    preset: Option<(String, LoadPlan, Vec<usize>)>,
}

impl<'a> Proof<'a> {
    fn new(
        plan: &'a LoadPlan,
        args: &PermuteArgs,
        io: &Io<'_>,
        builtins: &Builtins,
    ) -> Result<Proof<'a>, String> {
        let space = Space::of(plan);
        let Some(id) = &args.preset else {
            return Ok(Proof {
                plan,
                space,
                preset: None,
            });
        };
        match super::presets::preset_plan(plan, &args.config, io, builtins, id)? {
            Some(rows) => {
                let row_space = Space::of(&rows);
                let positions = row_space.positions.clone();
                Ok(Proof {
                    plan,
                    space: space.then(row_space, id),
                    preset: Some((id.clone(), rows, positions)),
                })
            }
            // The join reports a missing preset (or roster) itself; its rows are not permuted.
            None => Ok(Proof {
                plan,
                space,
                preset: args.preset.clone().map(|p| {
                    (
                        p,
                        LoadPlan {
                            file: String::new(),
                            entries: Vec::new(),
                        },
                        Vec::new(),
                    )
                }),
            }),
        }
    }

    /// Boots `order` (indices into the space): the host's entries in their part of it, then,
    /// with a preset, its rows mounted in theirs.
    fn boot(&self, rt: &tokio::runtime::Runtime, order: &[usize]) -> std::io::Result<OrderOutcome> {
        let starts = self.space.starts(self.plan, order);
        let Some((preset, rows, positions)) = &self.preset else {
            return Ok(rt.block_on(cordis_host::permute::boot(self.plan, &starts)));
        };
        let mount = MountOrder {
            file: rows.file.clone(),
            starts: start_order(rows.entries.len(), positions, &self.space.row_order(order)),
        };
        let schedule = Schedule::new(Policy::Fifo, 0);
        let (joined, leaked, events) = rt.block_on(super::presets::boot_joined_with_events(
            self.plan,
            schedule,
            preset,
            &starts,
            Some(mount),
        ));
        let mut outcome = joined_outcome(joined, leaked);
        outcome.events = self.element_events(preset, &events);
        Ok(outcome)
    }

    /// `events` (by scope label: a host entry's id or a row's) by element id (`preset/row` for
    /// a row). A label that names both a host entry and a row counts for both: more pairs to
    /// explore, never fewer.
    fn element_events(
        &self,
        preset: &str,
        events: &BTreeMap<String, EventFootprint>,
    ) -> BTreeMap<String, EventFootprint> {
        let mut out = BTreeMap::new();
        for (label, footprint) in events {
            for id in [label.clone(), format!("{preset}/{label}")] {
                if self.space.ids.contains(&id) {
                    out.insert(id, footprint.clone());
                }
            }
        }
        out
    }
}

/// One order with a preset joined: the digest of its standing scope's assembly, every entry's
/// and row's status, and the incidents.
fn joined_outcome(
    joined: Result<cordis_host::BootReport, String>,
    leaked: cordis_runtime::LiveCounts,
) -> OrderOutcome {
    match joined {
        Err(why) => OrderOutcome {
            digest: format!("preset failed: {why}"),
            assembly_error: Some(why),
            catalog: None,
            entries: Vec::new(),
            incidents: Vec::new(),
            registrations: Vec::new(),
            events: Default::default(),
            names: Default::default(),
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
                catalog: report.catalog.clone(),
                entries: report
                    .entries
                    .iter()
                    .map(|e| (e.id.clone(), e.status, e.error.clone()))
                    .collect(),
                incidents,
                registrations,
                events: Default::default(),
                names: Default::default(),
            }
        }
    }
}

/// `--order`: boots one order (element ids), as the proof boots each, and prints its outcome.
fn replay_order(proof: &Proof<'_>, ids: &[String], io: &mut Io<'_>) -> anyhow::Result<u8> {
    let all = &proof.space.ids;
    let ids: Vec<&String> = ids.iter().filter(|id| !id.is_empty()).collect();
    let known = || all.join(", ");
    let mut order = Vec::with_capacity(ids.len());
    for id in &ids {
        match all.iter().position(|a| a == *id) {
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
    if order.len() != all.len() {
        writeln!(
            io.err,
            "cordis: --order must name all {} plugin entries ({}), each once",
            all.len(),
            safe(&known())
        )?;
        return Ok(EXIT_CONFIG);
    }
    let rt = cordis_host::shutdown::current_thread()?;
    let outcome = proof.boot(&rt, &order)?;
    cordis_host::shutdown::end(rt);
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

pub(crate) fn run(args: &PermuteArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let plan = load(&args.config, io, builtins)?;
    let proof = match Proof::new(&plan, args, io, builtins) {
        Ok(proof) => proof,
        Err(why) => {
            writeln!(
                io.err,
                "cordis: preset \"{}\" cannot be read: {}",
                safe(args.preset.as_deref().unwrap_or_default()),
                safe(&why)
            )?;
            return Ok(EXIT_CONFIG);
        }
    };
    if let Some(ids) = &args.order {
        return replay_order(&proof, ids, io);
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let space = &proof.space;
    let options = ProofOptions {
        max: args.max,
        seed: args.seed,
        threads,
    };
    let n = space.ids.len();
    let orders = if args.all {
        ProofOrders::every(n, &options)
    } else {
        space.orders(&options)
    };
    let total = orders.count;
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
    let boot_one = |rt: &tokio::runtime::Runtime, order: &[usize]| proof.boot(rt, order);
    let report = if args.all {
        let claims = space.claim_counts();
        permute_with(&space.ids, claims, &orders, &options, &tick, &boot_one)?
    } else {
        prove_with(space, &orders, &options, &tick, &boot_one)?
    };
    bar.finish_and_clear();
    print_report(&report, args, io)
}

/// n! as a number, or as `n!` where it does not fit in 64 bits.
fn orders_text(report: &PermuteReport) -> String {
    if report.all_orders == u64::MAX {
        format!("{}!", report.entries.len())
    } else {
        report.all_orders.to_string()
    }
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
                "through_events": report.through_events.iter().map(|(a, b, events)| json!({"pair": [a, b], "events": events})).collect::<Vec<_>>(),
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
            match (report.exhaustive, &report.interacting) {
                (true, Some(_)) => "every class",
                (true, None) => "every order",
                (false, _) => "seeded sample",
            },
            match (report.exhaustive, orders_text(report)) {
                (true, _) if report.all_orders == 1 => "the one order".to_owned(),
                (true, all) => format!("all {all} orders"),
                (false, all) => format!("some of {all} orders"),
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
        // A pair known only from what the boots dispatched names the events.
        let through = |a: &str, b: &str| {
            report
                .through_events
                .iter()
                .find(|(x, y, _)| x == a && y == b)
                .map_or_else(String::new, |(_, _, events)| {
                    format!(
                        " (event{} {})",
                        if events.len() == 1 { "" } else { "s" },
                        events.join(", ")
                    )
                })
        };
        let shown: Vec<String> = match &report.interacting {
            Some(pairs) => pairs
                .iter()
                .map(|(a, b)| format!("{a}~{b}{}", through(a, b)))
                .collect(),
            None => report
                .through_events
                .iter()
                .map(|(a, b, _)| format!("{a}~{b}{}", through(a, b)))
                .collect(),
        };
        if !shown.is_empty() {
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
    if code == EXIT_OK && !report.exhaustive {
        writeln!(
            io.err,
            "cordis: not proven: {} seeded order{} sampled of {} (more {} than --max {}); raise --max to prove it (exit {EXIT_SAMPLED})",
            report.orders,
            if report.orders == 1 { "" } else { "s" },
            orders_text(report),
            if report.interacting.is_some() {
                "classes of orders"
            } else {
                "orders"
            },
            args.max,
        )?;
        code = EXIT_SAMPLED;
    }
    Ok(code)
}
