//! `cordis check --watch`: boot, then reload the file whenever it changes.

use super::render::{SeedHint, print_report};
use super::{CheckArgs, Io};
use cordis_host::Builtins;
use cordis_host::reload::summary_line;
use cordis_host::watch::{ConfigWatcher, WatchNote};

pub(crate) fn run(
    args: &CheckArgs,
    io: &mut Io<'_>,
    builtins: &Builtins,
    seed: u64,
) -> anyhow::Result<u8> {
    let rt = cordis_host::shutdown::current_thread()?;
    let result = rt.block_on(async {
        let path = &args.config.file;
        let file = path.display().to_string();
        let mut watcher = ConfigWatcher::new(path)?;
        let schedule = cordis_runtime::Schedule::new(args.policy(), seed);
        let (mut live, report) = super::boot_live(&args.config, schedule, io, builtins).await?;
        // Nothing runs under `check`: a reload may change any permission.
        live.allow_widening();
        print_report(&report, args, seed, SeedHint::Replay, io)?;
        let included = match live.included_files().len() {
            0 => String::new(),
            1 => " and the file it includes".to_owned(),
            n => format!(" and the {n} files it includes"),
        };
        writeln!(
            io.err,
            "cordis: watching {file}{included} for changes (Ctrl-C to stop)"
        )?;
        io.out.flush()?;
        io.err.flush()?;
        while let Some(note) = watcher.changed().await {
            if note != WatchNote::Changed {
                super::print_watch_note(&note, io)?;
                continue;
            }
            let source = match super::read_config(path).await {
                Ok(s) => s,
                Err(e) => {
                    writeln!(
                        io.err,
                        "cordis: cannot read {file}: {e}; still running the last good configuration"
                    )?;
                    continue;
                }
            };
            match live.reload(&source, io.env).await {
                Ok(summary) => {
                    let report = live.report().await;
                    writeln!(io.out, "cordis: {}", summary_line(&summary))?;
                    writeln!(io.out, "digest: {}", report.digest)?;
                    if let Some(error) = &report.assembly_error {
                        writeln!(io.err, "cordis: assembling the request failed: {error}")?;
                    }
                }
                Err(errors) => super::print_rejected_reload(&errors, io)?,
            }
            io.out.flush()?;
            io.err.flush()?;
        }
        live.root().dispose();
        Ok(super::EXIT_OK)
    });
    cordis_host::shutdown::end(rt);
    result
}
