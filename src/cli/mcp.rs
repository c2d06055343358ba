//! `cordis mcp login|logout`: authorizing cordis for an HTTP MCP server of a config file (or,
//! with `--url`, one no file holds: an editor's), and forgetting that authorization.

use clap::{Args, Subcommand};
use cordis_host::plan::{LoadPlan, Step};
use cordis_mcp::McpConfig;
use cordis_mcp::auth::{LoginOptions, LoginOutcome};

use super::render::safe;
use super::{ConfigArgs, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io};

/// The subcommands of `cordis mcp`.
#[derive(Debug, Clone, Subcommand)]
pub enum McpCommand {
    /// Authorize cordis for the HTTP MCP server SERVER of FILE, or the one at --url (OAuth 2.1
    /// in your browser).
    ///
    /// `--url URL` is for a server no file holds (one your editor passes to `cordis acp`):
    /// the grant is kept for that URL, and every entry with that URL and the default grants
    /// directory uses it.
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
    /// Forget the stored grant for SERVER of FILE, or for --url, after asking the
    /// authorization server to revoke its tokens where it offers that (RFC 7009).
    ///
    /// The grant is forgotten even when the server cannot be told (the output says so). Exits
    /// 0 (whether or not a grant was stored), 1 when the grants directory cannot be used, 2 on
    /// configuration errors.
    Logout(LogoutArgs),
}

/// Which server: an entry of a file, or a URL.
#[derive(Debug, Clone, Args)]
pub struct Which {
    /// The entry's `server` name.
    #[arg(required_unless_present = "url")]
    pub server: Option<String>,
    /// The server's URL, for a server no file holds (an editor's); FILE is not read.
    #[arg(long, value_name = "URL", conflicts_with = "server")]
    pub url: Option<String>,
    /// The config file holding the entry.
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// Arguments of `cordis mcp login`.
#[derive(Debug, Clone, Args)]
pub struct LoginArgs {
    /// The server.
    #[command(flatten)]
    pub which: Which,
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
    /// The server.
    #[command(flatten)]
    pub which: Which,
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

/// An entry for the server at `url` as an editor's would be (the default grants directory),
/// named after its host.
fn entry_at(url: &str) -> Result<McpConfig, String> {
    // The authority's host (the URL itself is checked with the entry below).
    let authority = url.split_once("://").map_or("", |(_, rest)| {
        rest.split(['/', '?', '#']).next().unwrap_or("")
    });
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    let name: String = host
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(cordis_mcp::MAX_SERVER_NAME)
        .collect();
    let mut config = McpConfig::stdio(
        if name.is_empty() { "server" } else { &name },
        String::new(),
        Vec::new(),
    );
    config.transport = cordis_mcp::TransportKind::Http;
    config.command = None;
    config.url = Some(url.to_owned());
    config
        .check()
        .map_err(|e| format!("--url {}: {e}", safe(url)))?;
    Ok(config)
}

/// The entry, its grants store and how to name it to the user, or exit 2 having said why.
fn resolve(
    which: &Which,
    io: &mut Io<'_>,
    builtins: &cordis_host::Builtins,
) -> anyhow::Result<Result<(McpConfig, cordis_mcp::auth::TokenStore, String), u8>> {
    let found = match (&which.url, &which.server) {
        (Some(url), _) => entry_at(url).map(|c| (c, format!("MCP server at {}", safe(url)))),
        (None, Some(server)) => {
            let plan = super::load(&which.config, io, builtins)?;
            entry_for(&plan, server).map(|c| (c, format!("MCP server \"{}\"", safe(server))))
        }
        (None, None) => Err("name the server (SERVER [FILE]) or give --url URL".to_owned()),
    };
    let (config, shown) = match found {
        Ok(found) => found,
        Err(message) => {
            writeln!(io.err, "cordis: {message}")?;
            return Ok(Err(EXIT_CONFIG));
        }
    };
    match config.oauth.store(io.env) {
        Ok(store) => Ok(Ok((config, store, shown))),
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
            let (config, store, shown) = match resolve(&args.which, io, builtins)? {
                Ok(found) => found,
                Err(code) => return Ok(code),
            };
            let rt = cordis_host::shutdown::current_thread()?;
            match rt.block_on(cordis_mcp::auth::logout(&config, &store)) {
                Ok(outcome) if outcome.forgot => {
                    use cordis_mcp::auth::Revocation;
                    let told = match outcome.revocation {
                        Revocation::Revoked => {
                            "; the authorization server revoked its tokens".to_owned()
                        }
                        Revocation::NotOffered => {
                            "; the authorization server offers no revocation: its tokens stay good until they expire".to_owned()
                        }
                        Revocation::Failed(why) => format!(
                            "; the authorization server could not be told ({}): its tokens stay good until they expire",
                            safe(&why)
                        ),
                        Revocation::NothingStored => String::new(),
                    };
                    writeln!(
                        io.out,
                        "Forgot the grant for {shown} ({}){told}.",
                        store
                            .path_of(config.url.as_deref().unwrap_or_default())
                            .display()
                    )?;
                    Ok(EXIT_OK)
                }
                Ok(_) => {
                    writeln!(io.out, "No grant was stored for {shown}.")?;
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
    let (config, store, shown) = match resolve(&args.which, io, builtins)? {
        Ok(found) => found,
        Err(code) => return Ok(code),
    };
    if config.oauth.grant == cordis_mcp::auth::GrantKind::ClientCredentials {
        writeln!(
            io.err,
            "cordis: the {shown} gets its tokens with the entry's own client credentials (`oauth.grant: clientCredentials`): no login is needed"
        )?;
        return Ok(EXIT_CONFIG);
    }
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
                "Authorized cordis for {shown} (issuer {}{}); the grant is in {}.",
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
                "The {shown} answered without asking for authorization: nothing to do."
            )?;
            Ok(EXIT_OK)
        }
        Err(e) => {
            writeln!(
                io.err,
                "cordis: cannot authorize {shown}: {}",
                safe(&e.to_string())
            )?;
            Ok(EXIT_FAILURE)
        }
    }
}
