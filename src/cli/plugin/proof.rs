//! The gate every `cordis plugin` change passes before `cordis.yml` is written: the new text
//! loads, one boot has every entry where the config asks (`cordis check`, fifo schedule), and
//! the reduced permutation proof (`cordis permute`'s, host `permute::prove`) finds one outcome
//! over every class of load orders.

use cordis_host::Builtins;
use cordis_host::loader::boot_blocking;
use cordis_host::permute::{PermuteReport, ProofOptions, prove};
use cordis_host::plan::load_plan;
use cordis_runtime::{Policy, Schedule};

use super::super::render::{safe, safe_lines};
use super::super::{ConfigArgs, EXIT_CONFIG, EXIT_FAILURE, Io};

/// What the gate found.
pub(super) enum Gate {
    /// Passed: a line saying what was checked and proven.
    Passed(String),
    /// Refused, with the exit code; why was printed on stderr.
    Refused(u8),
}

/// Runs the gate on `text`, the config as it would be written to `config.file`. `proof_max`
/// bounds the proof's orders (more classes than that is a refusal: a sample proves nothing).
///
/// # Errors
/// Only when stderr cannot be written or a runtime cannot be built.
pub(super) fn gate(
    text: &str,
    config: &ConfigArgs,
    proof_max: u64,
    io: &mut Io<'_>,
    builtins: &Builtins,
) -> anyhow::Result<Gate> {
    let file = config.file.display().to_string();
    let options = super::super::plan_options(config, io);
    let table = crate::builtins::for_config(builtins, &config.file, &options, io.env);
    let plan = match load_plan(text, &file, io.env, &table, &options) {
        Ok(plan) => plan,
        Err(errors) => {
            writeln!(
                io.err,
                "cordis: the new composition does not load (positions are in {file} as it would be written):"
            )?;
            super::super::print_config_errors(&errors, &file, io)?;
            return Ok(Gate::Refused(EXIT_CONFIG));
        }
    };
    let (report, leaked) = boot_blocking(&plan, Schedule::new(Policy::Fifo, 0))?;
    let mut failed = false;
    for entry in report
        .entries
        .iter()
        .filter(|e| !e.status.is_as_configured())
    {
        let name = plan
            .entries
            .iter()
            .find(|p| p.id == entry.id)
            .map_or("", |p| p.name.as_str());
        writeln!(
            io.err,
            "cordis: check: entry \"{}\" ({}) is {}: {}",
            safe(&entry.id),
            safe(name),
            entry.status,
            safe(entry.error.as_deref().unwrap_or("not active"))
        )?;
        failed = true;
    }
    if let Some(why) = &report.assembly_error {
        writeln!(
            io.err,
            "cordis: check: the request cannot be assembled: {}",
            safe(why)
        )?;
        failed = true;
    }
    if !leaked.is_zero() {
        writeln!(
            io.err,
            "cordis: check: disposing the composition left live resources {leaked:?}"
        )?;
        failed = true;
    }
    if failed {
        return Ok(Gate::Refused(EXIT_FAILURE));
    }
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let options = ProofOptions {
        max: proof_max,
        seed: 0,
        threads,
    };
    let proof = prove(&plan, &options, &|_| {})?;
    if let Some(code) = refuse_proof(&proof, proof_max, io)? {
        return Ok(Gate::Refused(code));
    }
    let n = proof.entries.len();
    Ok(Gate::Passed(format!(
        "check: every entry active; proof: {} order{} standing for every order of {n} plugin entr{}, one outcome",
        proof.orders,
        if proof.orders == 1 { "" } else { "s" },
        if n == 1 { "y" } else { "ies" },
    )))
}

/// Prints why `proof` does not pass and returns the exit code; `None` when it passes.
fn refuse_proof(
    proof: &PermuteReport,
    proof_max: u64,
    io: &mut Io<'_>,
) -> std::io::Result<Option<u8>> {
    let mut code = None;
    if let [(first_ids, first), (other_ids, other), ..] = proof.outcomes.as_slice() {
        writeln!(io.err, "cordis: proof: the outcome depends on load order:")?;
        for line in first.differences("A", other, "B") {
            writeln!(io.err, "  {}", safe_lines(&line))?;
        }
        writeln!(io.err, "  order A: {}", safe(&first_ids.join(",")))?;
        writeln!(io.err, "  order B: {}", safe(&other_ids.join(",")))?;
        code = Some(EXIT_FAILURE);
    }
    if let Some((ids, why)) = &proof.unhealthy {
        writeln!(
            io.err,
            "cordis: proof: order {} did not boot cleanly: {}",
            safe(&ids.join(",")),
            safe(why)
        )?;
        code = Some(EXIT_FAILURE);
    }
    if code.is_none() && !proof.exhaustive {
        writeln!(
            io.err,
            "cordis: proof: the new composition has more classes of load orders than --max {proof_max}, so it could only be sampled, not proven; raise --max"
        )?;
        code = Some(EXIT_FAILURE);
    }
    Ok(code)
}
