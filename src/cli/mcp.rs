//! `cordis mcp login|logout`: authorizing cordis for an HTTP MCP server of a config file, and
//! forgetting that authorization.

use clap::{Args, Subcommand};
use cordis_host::plan::{LoadPlan, Step};
use cordis_mcp::McpConfig;
use cordis_mcp::auth::{LoginOptions, LoginOutcome};

use super::render::safe;
use super::{ConfigArgs, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io};

/// The subcommands of `cordis mcp`.
#[derive(Debug, Clone, Subcommand)]
pub enum McpCommand {
    /// Authorize cordis for the HTTP MCP server SERVER of FILE (OAuth 2.1 in your browser).
    ///
    /// Finds the server's authorization server (its protected resource metadata, then the
    /// authorization server's metadata), registers cordis with it unless the entry sets
    /// `oauth.clientId` (or `oauth.clientMetadataUrl`), and prints the address to open; after
    /// you approve, your browser comes back to a one-time address on 127.0.0.1 and the grant
    /// is stored for you alone ($XDG_DATA_HOME/cordis/mcp-auth, else
    /// ~/.local/share/cordis/mcp-auth, mode 0600; the entry's `oauth.tokenDir` if set). Entries
    /// waiting for it (`cordis run --watch`, `cordis acp`) pick it up within seconds. Exits 0
    /// when a grant was stored (or the server needs none), 1 when the authorization failed, 2
    /// on configuration errors.
    Login(LoginArgs),
    /// Forget the stored grant for SERVER of FILE (the authorization server is not told).
    ///
    /// Exits 0 (whether or not a grant was stored), 1 when the grants directory cannot be
    /// used, 2 on configuration errors.
    Logout(LogoutArgs),
}

/// Arguments of `cordis mcp login`.
#[derive(Debug, Clone, Args)]
pub struct LoginArgs {
    /// The entry's `server` name.
    pub server: String,
    /// The config file holding the entry.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Only print the address (else it is also opened with xdg-open when there is a display).
    #[arg(long)]
    pub no_browser: bool,
    /// How long to wait for the browser step, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout_secs: u64,
}

/// Arguments of `cordis mcp logout`.
#[derive(Debug, Clone, Args)]
pub struct LogoutArgs {
    /// The entry's `server` name.
    pub server: String,
    /// The config file holding the entry.
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// The `mcp` entry of `plan` whose server is `server`, or what to say instead.
fn entry_for(plan: &LoadPlan, server: &str) -> Result<McpConfig, String> {
    let configs: Vec<&McpConfig> = plan
        .entries
        .iter()
        .filter_map(|e| match &e.step {
            Step::Plugin { prepared, .. } => prepared.config.downcast_ref::<McpConfig>(),
            _ => None,
        })
        .collect();
    let Some(config) = configs.iter().find(|c| c.server == server) else {
        let mut names: Vec<&str> = configs.iter().map(|c| c.server.as_str()).collect();
        names.sort_unstable();
        return Err(if names.is_empty() {
            format!("{} has no enabled `mcp` entry", plan.file)
        } else {
            format!(
                "{} has no enabled `mcp` entry with server \"{}\"; its servers: {}",
                plan.file,
                safe(server),
                names.join(", ")
            )
        });
    };
    if config.transport != cordis_mcp::TransportKind::Http {
        return Err(format!(
            "server \"{server}\" runs over stdio: only HTTP servers are authorized with OAuth (pass a stdio server its credentials in `env`)"
        ));
    }
    if !config.uses_oauth() {
        return Err(format!(
            "server \"{server}\" does not use OAuth: its entry sets an `Authorization` header or `oauth: {{enabled: false}}`"
        ));
    }
    Ok((*config).clone())
}

/// The entry and its grants store, or exit 2 having said why.
fn resolve(
    config_args: &ConfigArgs,
    server: &str,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<Result<(McpConfig, cordis_mcp::auth::TokenStore), u8>> {
    let plan = super::load(config_args, io, builtins)?;
    let config = match entry_for(&plan, server) {
        Ok(config) => config,
        Err(message) => {
            writeln!(io.err, "cordis: {message}")?;
            return Ok(Err(EXIT_CONFIG));
        }
    };
    match config.oauth.store(io.env) {
        Ok(store) => Ok(Ok((config, store))),
        Err(e) => {
            writeln!(io.err, "cordis: {e}")?;
            Ok(Err(EXIT_CONFIG))
        }
    }
}

pub(crate) fn run(
    command: &McpCommand,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<u8> {
    match command {
        McpCommand::Login(args) => login(args, io, builtins),
        McpCommand::Logout(args) => {
            let (config, store) = match resolve(&args.config, &args.server, io, builtins)? {
                Ok(found) => found,
                Err(code) => return Ok(code),
            };
            match cordis_mcp::auth::logout(&config, &store) {
                Ok(true) => {
                    writeln!(
                        io.out,
                        "Forgot the grant for MCP server \"{}\" ({}).",
                        args.server,
                        store
                            .path_of(config.url.as_deref().unwrap_or_default())
                            .display()
                    )?;
                    Ok(EXIT_OK)
                }
                Ok(false) => {
                    writeln!(
                        io.out,
                        "No grant was stored for MCP server \"{}\".",
                        args.server
                    )?;
                    Ok(EXIT_OK)
                }
                Err(e) => {
                    writeln!(io.err, "cordis: {e}")?;
                    Ok(EXIT_FAILURE)
                }
            }
        }
    }
}

fn login(
    args: &LoginArgs,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<u8> {
    let (config, store) = match resolve(&args.config, &args.server, io, builtins)? {
        Ok(found) => found,
        Err(code) => return Ok(code),
    };
    let options = LoginOptions {
        timeout: std::time::Duration::from_secs(args.timeout_secs),
        open_browser: !args.no_browser,
    };
    let rt = cordis_host::shutdown::current_thread()?;
    let err = &mut *io.err;
    let mut say = |line: &str| {
        let _ = writeln!(err, "{}", super::render::safe_lines(line));
        let _ = err.flush();
    };
    let outcome = rt.block_on(cordis_mcp::auth::login(&config, &store, &options, &mut say));
    match outcome {
        Ok(LoginOutcome::Stored {
            issuer,
            scopes,
            path,
        }) => {
            writeln!(
                io.out,
                "Authorized cordis for MCP server \"{}\" (issuer {}{}); the grant is in {}.",
                args.server,
                safe(&issuer),
                if scopes.is_empty() {
                    String::new()
                } else {
                    format!(", scopes {}", safe(&scopes.join(" ")))
                },
                path.display()
            )?;
            Ok(EXIT_OK)
        }
        Ok(LoginOutcome::NotNeeded) => {
            writeln!(
                io.out,
                "MCP server \"{}\" answered without asking for authorization: nothing to do.",
                args.server
            )?;
            Ok(EXIT_OK)
        }
        Err(e) => {
            writeln!(
                io.err,
                "cordis: cannot authorize MCP server \"{}\": {}",
                args.server,
                safe(&e.to_string())
            )?;
            Ok(EXIT_FAILURE)
        }
    }
}
