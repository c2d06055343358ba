//! Trusting a workspace's own hooks (see `cordis_hooks::trust`): `--trust` trusts it; at a
//! terminal, a run whose config file in the workspace has `hooks` entries asks once, before
//! the first turn, and remembers a yes as `--trust` does; a piped run keeps refusing them.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use cordis_hooks::Trust;
use cordis_host::Builtins;

use super::super::{Io, RunArgs};
use super::safe;

/// Settles this run's trust before it boots: `--trust`, else the answer to the question at a
/// terminal (a conversation, not `--prompt`), else none.
pub(super) fn settle(args: &RunArgs, io: &mut Io<'_>, builtins: &Builtins) -> std::io::Result<()> {
    cordis_hooks::trust_workspace_for_run(args.trust);
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if args.trust || args.prompt.is_some() || !terminal {
        return Ok(());
    }
    let Some((dir, entries)) = untrusted_hooks(args, io, builtins) else {
        return Ok(());
    };
    write!(
        io.err,
        "cordis: {} configures hooks ({}): commands cordis runs on agent events, as you.\n\
         cordis: Trust this workspace's hooks? {} is remembered as trusted [y/N] ",
        safe(&args.config.file.display().to_string()),
        safe(&entries.join(", ")),
        safe(&dir.display().to_string()),
    )?;
    io.err.flush()?;
    let mut line = String::new();
    // Before the line editor starts: the terminal is still line by line.
    std::io::stdin().lock().read_line(&mut line)?;
    if !matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        return writeln!(
            io.err,
            "cordis: not trusted: this workspace's hooks do not run (`cordis run --trust` trusts it)"
        );
    }
    cordis_hooks::trust_workspace_for_run(true);
    match cordis_hooks::trust::store_path(io.env) {
        Some(store) => match cordis_hooks::trust::remember(&store, &dir) {
            Ok(()) => writeln!(io.err, "cordis: trusted (remembered)"),
            Err(e) => writeln!(
                io.err,
                "cordis: trusted for this run; cannot remember it in {}: {e}",
                store.display()
            ),
        },
        None => writeln!(
            io.err,
            "cordis: trusted for this run (no state directory to remember it in)"
        ),
    }
}

/// The untrusted workspace and the ids of the `hooks` entries of the run's config file, when
/// that file is inside the workspace (`CORDIS_WORKSPACE`, else the current directory, as the
/// bundled file's `workspace` entry has it) and the workspace is not trusted yet.
fn untrusted_hooks(
    args: &RunArgs,
    io: &Io<'_>,
    builtins: &Builtins,
) -> Option<(PathBuf, Vec<String>)> {
    let file = args.config.file.display().to_string();
    let source = std::fs::read_to_string(&args.config.file).ok()?;
    let options = super::super::plan_options(&args.config, io);
    let table = crate::builtins::for_config(builtins, &args.config.file, &options, io.env);
    // A file that does not load is reported by the boot; nothing to ask about.
    let plan = cordis_host::plan::load_plan(&source, &file, io.env, &table, &options).ok()?;
    let entries: Vec<String> = plan
        .entries
        .iter()
        .filter(|e| e.name == "hooks" && matches!(e.step, cordis_host::plan::Step::Plugin { .. }))
        .map(|e| e.id.clone())
        .collect();
    if entries.is_empty() {
        return None;
    }
    let workspace = (io.env)("CORDIS_WORKSPACE")
        .filter(|w| !w.is_empty())
        .map_or_else(|| std::env::current_dir().ok(), |w| Some(PathBuf::from(w)))?;
    let store = cordis_hooks::trust::store_path(io.env);
    match cordis_hooks::trust::decide(
        Some(&options.config_dir_for(&file)),
        &workspace,
        store.as_deref(),
    ) {
        Trust::Untrusted { dir } => Some((dir, entries)),
        Trust::Trusted => None,
    }
}
