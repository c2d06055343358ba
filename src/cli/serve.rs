//! `cordis serve [FILE]`: boot FILE and serve the web view of it (see [`crate::serve`]) on
//! 127.0.0.1 until Ctrl-C.

use std::future::IntoFuture;
use std::sync::Arc;

use clap::Args;
use cordis_host::Builtins;
use cordis_host::watch::{ConfigWatcher, WatchNote};

use super::{ConfigArgs, EXIT_FAILURE, EXIT_OK, Io};
use crate::serve::{Guard, Served};

/// Arguments of `cordis serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// What to boot.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The port on 127.0.0.1 (0: one the system picks).
    #[arg(long, default_value_t = 3080)]
    pub port: u16,
    /// Reload FILE (and what it includes) when it changes; the page shows each reload, and an
    /// edit that does not load is shown while the last good composition keeps running.
    #[arg(long)]
    pub watch: bool,
    /// Trust the workspace: hooks from its own config file run (remembered for the directory;
    /// without it, such hooks are not run and the log says so), as `cordis run --trust`.
    #[arg(long)]
    pub trust: bool,
}

pub(crate) fn run(args: &ServeArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    cordis_hooks::trust_workspace_for_run(args.trust);
    let rt = cordis_host::shutdown::current_thread()?;
    let result = rt.block_on(async {
        let schedule = cordis_runtime::Schedule::new(cordis_runtime::Policy::Fifo, 0);
        // The page fills in MCP servers' forms and shows their pages to open.
        let modes = cordis_mcp::ElicitationModes {
            forms: true,
            pages: true,
        };
        let (live, _report) =
            super::boot_live_with(&args.config, schedule, io, builtins, Some(modes)).await?;
        let root = live.root().clone();
        let file = args.config.file.display().to_string();
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await {
            Ok(l) => l,
            Err(e) => {
                writeln!(
                    io.err,
                    "cordis: cannot listen on 127.0.0.1:{}: {e} (choose another with --port, or --port 0)",
                    args.port
                )?;
                root.dispose();
                return Ok(EXIT_FAILURE);
            }
        };
        let port = listener.local_addr()?.port();
        let token = crate::serve::new_token()?;
        let served = Arc::new(Served::new(live, file.clone()));
        let app = crate::serve::router(
            served.clone(),
            Guard {
                token: token.clone(),
                port,
            },
        );
        let mut watcher = if args.watch {
            Some(ConfigWatcher::new(&args.config.file)?)
        } else {
            None
        };
        // The URL alone on stdout (scripts read it); the rest on stderr.
        writeln!(io.out, "http://127.0.0.1:{port}/?token={token}")?;
        writeln!(
            io.err,
            "cordis: serving {file} on http://127.0.0.1:{port}/ (open the URL above: it carries the token){}; Ctrl-C stops",
            if args.watch { ", reloading it when it changes" } else { "" }
        )?;
        io.out.flush()?;
        io.err.flush()?;
        let server = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .into_future();
        tokio::pin!(server);
        loop {
            tokio::select! {
                ended = &mut server => {
                    ended?;
                    break;
                }
                Some(note) = async {
                    match watcher.as_mut() {
                        Some(w) => w.changed().await,
                        None => std::future::pending().await,
                    }
                } => match note {
                    WatchNote::Changed => match super::read_config(&args.config.file).await {
                        Ok(source) => {
                            let line = served.reload(&source, io.env).await;
                            writeln!(io.err, "cordis: {line}")?;
                        }
                        Err(e) => writeln!(
                            io.err,
                            "cordis: cannot read {file}: {e}; still serving the last good composition"
                        )?,
                    },
                    other => super::print_watch_note(&other, io)?,
                },
            }
        }
        // Turns started in the page end (cancelled) before the composition goes.
        served.agents.shutdown().await;
        root.dispose();
        Ok::<u8, anyhow::Error>(EXIT_OK)
    });
    cordis_host::shutdown::end(rt);
    result
}
