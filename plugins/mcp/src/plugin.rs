//! The plugin itself: what an entry claims, says it starts, and does when applied (connect
//! and register, or stay pending with the reason and retry after the reconnect backoff).

use std::sync::Arc;

use cordis_runtime::{BoxError, Claim, Context, Deferred, Inject, Plugin};
use cordis_tools::ToolRegistry;

use crate::bridge::Bridge;
use crate::claims::server_claim;
use crate::config::{McpConfig, TransportKind};
use crate::error::McpError;
use crate::link::Link;
use crate::{auth, directory, lock};

/// The tool registry it registers in, and the system prompt its server's instructions go to
/// when there is one.
const INJECT: &[Inject] = &[
    Inject::required(<ToolRegistry as cordis_runtime::Service>::NAME),
    Inject::optional(<cordis_system_prompt::SystemPrompt as cordis_runtime::Service>::NAME),
];

/// The `mcp` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpPlugin;

impl Plugin for McpPlugin {
    type Config = McpConfig;

    fn name(&self) -> &str {
        "mcp"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn claims(&self, config: &McpConfig) -> Vec<Claim> {
        vec![server_claim(&config.server, None)]
    }

    /// A sandboxed server (but in `full-access`) writes in the composition's workspace: the
    /// entry waits for it.
    fn needs(&self, config: &McpConfig) -> Vec<String> {
        match config.sandbox {
            Some(mode) if mode != cordis_sandbox::SandboxMode::FullAccess => {
                vec![<cordis_workspace::Workspace as cordis_runtime::Service>::NAME.to_owned()]
            }
            _ => Vec::new(),
        }
    }

    /// Its tools are whatever the server lists; its instructions' section and variable are
    /// named after the entry id.
    fn open_claims(&self, _config: &McpConfig) -> Option<Vec<&'static str>> {
        Some(vec!["tool", "section", "variable"])
    }

    /// What it would start anew ([`Plugin::starts`]), and what a changed entry would let the
    /// server do or be told ([`McpConfig::widened_by`]).
    fn widens(&self, old: Option<&McpConfig>, new: Option<&McpConfig>) -> Vec<String> {
        let Some(new) = new else {
            return Vec::new();
        };
        let mut out = cordis_runtime::started_anew(old.map(|o| self.starts(o)), self.starts(new));
        if let Some(old) = old {
            out.extend(old.widened_by(new));
        }
        out
    }

    /// The server process it runs (with its directory and the variables it sets), or the
    /// endpoint it connects to.
    fn starts(&self, config: &McpConfig) -> Vec<String> {
        match config.transport {
            TransportKind::Stdio => {
                let command = config.command.as_deref().unwrap_or_default();
                let mut line = format!(
                    "runs the command {}",
                    cordis_runtime::shell_line(
                        std::iter::once(command).chain(config.args.iter().map(String::as_str))
                    )
                );
                if let Some(cwd) = &config.cwd {
                    line.push_str(&format!(" in {}", cwd.display()));
                }
                if !config.env.is_empty() {
                    let names: Vec<&str> = config.env.keys().map(String::as_str).collect();
                    line.push_str(&format!(" (setting {})", names.join(", ")));
                }
                if let Some(mode) = config.sandbox {
                    line.push_str(&format!(
                        " in the {mode} sandbox{}",
                        if config.network == Some(true) {
                            ", with network"
                        } else {
                            ", without network"
                        }
                    ));
                }
                vec![line]
            }
            TransportKind::Http => vec![format!(
                "connects to {}",
                config.url.as_deref().unwrap_or_default()
            )],
        }
    }

    async fn apply(&self, ctx: Context, config: &McpConfig) -> Result<(), BoxError> {
        config.check()?;
        // Two entries with one server name both report the conflict (their tools, having the
        // same public names, are contested in the registry too), whichever started first.
        let _ = ctx.claim(server_claim(&config.server, ctx.parent_id()));
        let registry = ctx.require::<ToolRegistry>()?;
        let auth = authorizer(config);
        // A server that needed a login waits for the stored grant to change, without being
        // asked again.
        if let Some(auth) = &auth
            && let Some(reason) = auth.still_waiting().await
        {
            return Err(Deferred::new(reason, auth::LOGIN_POLL).into());
        }
        let bridge = Arc::new(Bridge::new(
            config,
            &ctx,
            registry,
            Arc::new(Link::new(config, &ctx)),
            auth,
        ));
        directory::enlist(&ctx, &bridge.link);
        crate::instructions::register(&ctx, &bridge.link)?;
        // The catalog is part of what a report digests (`cordis check`, `stress`, `permute`).
        let offering = bridge.link.clone();
        let _ = ctx.on_waterfall::<cordis_runtime::Offered, _, _>(
            cordis_runtime::Position::Back,
            move |mut offered, next| {
                let catalog = serde_json::to_string(&*lock(&offering.catalog)).unwrap_or_default();
                offered.insert(format!("mcp/{}", offering.server), catalog);
                next.run(offered)
            },
        );
        let link = bridge.link.clone();
        // Synchronous, so the process group is gone when dispose returns, whatever the server
        // does with a closed stdin or SIGTERM.
        let _ = ctx.effect("mcp server process", move || link.dispose());
        match bridge.start().await {
            Ok(connection) => {
                let _ = ctx.spawn(bridge.supervise(connection));
                Ok(())
            }
            Err(error) if bridge.auth.as_ref().is_some_and(|a| a.blocked().is_some()) => {
                let reason = bridge.auth.as_ref().and_then(|a| a.blocked());
                tracing::warn!(server = %config.server, %error, "mcp server needs authorization; the entry is pending");
                Err(Deferred::new(reason.unwrap_or_default(), auth::LOGIN_POLL).into())
            }
            Err(error) if config.fail_on_startup_error => {
                Err(McpError::startup(&config.server, &error).into())
            }
            Err(error) => Err(retry_or_give_up(config, ctx.deferrals(), &error)),
        }
    }
}

/// The OAuth tokens of an entry that uses OAuth (none without a place to keep grants: the
/// server's `401` is then an error like any other).
fn authorizer(config: &McpConfig) -> Option<Arc<auth::Authorizer>> {
    if !config.uses_oauth() {
        return None;
    }
    let store = match config.oauth.store(&|name| std::env::var(name).ok()) {
        Ok(store) => store,
        Err(e) => {
            tracing::warn!(server = %config.server, error = %e, "OAuth is unavailable");
            return None;
        }
    };
    let client = auth::http_client().ok()?;
    let login_command = config
        .oauth
        .login_command
        .clone()
        .unwrap_or_else(|| format!("cordis mcp login {} [FILE]", config.server));
    let credentials = match (
        config.oauth.grant,
        &config.oauth.client_id,
        &config.oauth.client_secret,
    ) {
        (auth::GrantKind::ClientCredentials, Some(id), Some(secret)) => Some(auth::Credentials {
            id: id.clone(),
            secret: secret.clone(),
            scopes: config.oauth.scopes.clone(),
        }),
        _ => None,
    };
    Some(Arc::new(auth::Authorizer::new(
        &config.server,
        config.url.as_deref().unwrap_or_default(),
        login_command,
        credentials,
        store,
        client,
    )))
}

/// What a failed first connection makes of the entry when `failOnStartupError` is false:
/// pending with the reason and a retry after the policy's backoff, or failed once `failed`
/// earlier attempts in a row exhausted the budget (or reconnecting is disabled).
fn retry_or_give_up(config: &McpConfig, failed: u32, error: &McpError) -> BoxError {
    let policy = &config.reconnect;
    if !policy.enabled {
        return McpError::startup_without_retry(&config.server, error).into();
    }
    if failed >= policy.max_attempts {
        let gave_up = McpError::gave_up(&config.server, failed + 1, error);
        // Said at warn level like the retries before it: in `cordis run` the entry fails
        // after the boot, where no report shows it.
        tracing::warn!(server = %config.server, error = %gave_up, "mcp server unavailable; the entry failed");
        return gave_up.into();
    }
    let retry = failed + 1;
    let delay = policy.delay(retry);
    tracing::warn!(server = %config.server, %error, retry, "mcp server unavailable; the entry is pending and retries");
    Deferred::new(
        format!(
            "{error}; retry {retry} of {} in {} ms",
            policy.max_attempts,
            delay.as_millis()
        ),
        delay,
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_says_what_it_starts() {
        let mut stdio = McpConfig::stdio("srv", "npx", vec!["-y".into(), "a b".into()]);
        stdio.cwd = Some("/srv".into());
        stdio.env.insert("TOKEN".into(), "secret".into());
        assert_eq!(
            McpPlugin.starts(&stdio),
            ["runs the command npx -y 'a b' in /srv (setting TOKEN)"]
        );
        let http: McpConfig = serde_json::from_value(serde_json::json!({
            "transport": "http", "server": "web", "url": "https://example.test/mcp"
        }))
        .unwrap();
        assert_eq!(
            McpPlugin.starts(&http),
            ["connects to https://example.test/mcp"]
        );
    }
}
