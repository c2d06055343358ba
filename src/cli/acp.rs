//! `cordis acp [FILE]`: serve the agent FILE composes to an editor over the Agent Client
//! Protocol on stdin/stdout (see [`crate::acp`]).

use clap::Args;
use cordis_host::Builtins;

use super::{ConfigArgs, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io};
use crate::acp::Composition;

/// Arguments of `cordis acp`.
#[derive(Debug, Clone, Args)]
pub struct AcpArgs {
    /// What each session boots.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The preset (mode) new sessions join [default: the `agent-presets` entry's default];
    /// an editor switches a blank session with `session/set_mode`.
    #[arg(long, value_name = "ID")]
    pub preset: Option<String>,
    /// Reload FILE (and what it includes) when it changes: new sessions boot the edit, open
    /// sessions reload it between prompts (a running prompt finishes on what it started with);
    /// an edit that does not load is reported on stderr and changes nothing.
    #[arg(long)]
    pub watch: bool,
    /// Trust the workspace: hooks from its own config file run (remembered for the directory;
    /// without it, such hooks are not run and the log says so), as `cordis run --trust`.
    #[arg(long)]
    pub trust: bool,
}

pub(crate) fn run(args: &AcpArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    cordis_hooks::trust_workspace_for_run(args.trust);
    let file = args.config.file.display().to_string();
    // Read once: every session of this process runs the same file, even if it changes.
    let source = match std::fs::read_to_string(&args.config.file) {
        Ok(s) => s,
        Err(e) => {
            writeln!(io.err, "cordis: cannot read {file}: {e}")?;
            return Ok(EXIT_CONFIG);
        }
    };
    let options = super::plan_options(&args.config, io);
    let builtins = &crate::builtins::for_config(builtins, &args.config.file, &options, io.env);
    // Check the file once up front, so a broken file fails the command (exit 2, diagnostics on
    // stderr) instead of every session/new.
    if let Err(errors) = cordis_host::plan::load_plan(&source, &file, io.env, builtins, &options) {
        super::print_config_errors(&errors, &file, io)?;
        return Ok(EXIT_CONFIG);
    }
    let composition = Composition {
        source: std::sync::Mutex::new(source),
        file,
        builtins: builtins.clone(),
        options,
        env: io.env,
        preset: args.preset.clone(),
    };
    writeln!(
        io.err,
        "cordis: serving {} over ACP on stdio; EOF ends",
        composition.file
    )?;
    io.err.flush()?;
    let rt = cordis_host::shutdown::current_thread()?;
    let served = crate::acp::serve_stdio(&composition, &rt, args.watch);
    cordis_host::shutdown::end(rt);
    match served {
        Ok(()) => Ok(EXIT_OK),
        Err(e) => {
            writeln!(io.err, "cordis: acp connection failed: {e}")?;
            Ok(EXIT_FAILURE)
        }
    }
}
