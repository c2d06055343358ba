//! The first authorization of a server (`cordis mcp login`): discovery, a client id, the
//! browser step through a loopback redirect with PKCE, and the code exchanged for a grant.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use url::Url;

use super::discovery::{self, AuthServer, Challenge, parse_challenge, safe_url};
use super::{
    AuthError, ClientAuth, Grant, MAX_AUTH_BODY, TokenStore, apply_answer, on_disk, pkce_challenge,
    post_form, random_token, waiting,
};
use crate::McpConfig;

/// The largest request head the redirect listener reads.
const MAX_REDIRECT_HEAD: usize = 8 << 10;

/// How the browser step is run.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// How long to wait for the browser step.
    pub timeout: Duration,
    /// Open the address with `xdg-open` (else it is only printed).
    pub open_browser: bool,
}

/// What a login did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginOutcome {
    /// The server answered without asking for authorization: nothing to do.
    NotNeeded,
    /// A grant was stored.
    Stored {
        /// The authorization server that issued it.
        issuer: String,
        /// The scopes granted.
        scopes: Vec<String>,
        /// The grant's file.
        path: std::path::PathBuf,
    },
}

/// A dynamic registration's answer.
#[derive(Debug, Deserialize)]
struct Registered {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// A client to authorize as: its id, its secret if it has one, and how it authenticates at
/// the token endpoint (`client_secret_basic` or `client_secret_post`).
type Client = (String, Option<String>, Option<String>);

fn http_error(what: String) -> impl FnOnce(reqwest::Error) -> AuthError {
    move |e| AuthError::Http {
        what,
        reason: e.to_string(),
    }
}

/// What a refused request's response says: `Some(challenge)` for a `401` (the challenge, if
/// it has a `Bearer` one) or a `403` with `insufficient_scope`; `None` otherwise.
fn refusal(response: &reqwest::Response) -> Option<Option<Challenge>> {
    let challenge = response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_challenge);
    match response.status().as_u16() {
        401 => Some(challenge),
        403 if challenge
            .as_ref()
            .is_some_and(|c| c.error.as_deref() == Some("insufficient_scope")) =>
        {
            Some(challenge)
        }
        _ => None,
    }
}

/// The first JSON-RPC message of an answer (JSON, or the first `data:` of an event stream
/// that is JSON), read up to [`MAX_AUTH_BODY`] bytes.
async fn first_message(response: reqwest::Response) -> serde_json::Value {
    use futures_util::StreamExt;
    let sse = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_AUTH_BODY {
            break;
        }
        if sse {
            let text = String::from_utf8_lossy(&body);
            let found = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<serde_json::Value>(d.trim()).ok())
                .find(|m| m.get("id").is_some());
            if let Some(message) = found {
                return message;
            }
        }
    }
    serde_json::from_slice(&body).unwrap_or_default()
}

/// Asks the server with no token what a connection asks (`initialize`, then the lists of what
/// it offers, as the entry's first sync does): the challenge of the first request it refuses,
/// or `None` when it lets every one in.
async fn probe(
    client: &reqwest::Client,
    config: &McpConfig,
    url: &Url,
) -> Result<Option<Option<Challenge>>, AuthError> {
    let headers = config
        .header_map()
        .map_err(|e| AuthError::Unsupported(e.to_string()))?;
    let post = |message: serde_json::Value, session: Option<(String, String)>| {
        let mut request = client
            .post(url.clone())
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(message.to_string());
        for (name, value) in &headers {
            request = request.header(name.clone(), value.clone());
        }
        if let Some((session, version)) = session {
            if !session.is_empty() {
                request = request.header("mcp-session-id", session);
            }
            request = request.header("mcp-protocol-version", version);
        }
        request.send()
    };
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "cordis", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = post(initialize, None)
        .await
        .map_err(http_error(format!("POST {url}")))?;
    if let Some(challenge) = refusal(&response) {
        return Ok(Some(challenge));
    }
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(AuthError::Http {
            what: format!("POST {url}"),
            reason: format!("HTTP {status} (expected 401 asking for authorization)"),
        });
    }
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let answer = first_message(response).await;
    let version = answer["result"]["protocolVersion"]
        .as_str()
        .unwrap_or("2025-06-18")
        .to_owned();
    let with = || Some((session.clone(), version.clone()));
    let capabilities = &answer["result"]["capabilities"];
    let mut requests = vec![json!({"jsonrpc": "2.0", "method": "notifications/initialized"})];
    for (id, (capability, method)) in [
        ("tools", "tools/list"),
        ("prompts", "prompts/list"),
        ("resources", "resources/list"),
    ]
    .into_iter()
    .enumerate()
    {
        if capabilities.get(capability).is_some() {
            requests.push(json!({"jsonrpc": "2.0", "id": id + 1, "method": method}));
        }
    }
    let mut refused = None;
    for request in requests {
        let response = post(request, with())
            .await
            .map_err(http_error(format!("POST {url}")))?;
        if let Some(challenge) = refusal(&response) {
            refused = Some(challenge);
            break;
        }
    }
    if !session.is_empty() {
        // The probe's session ends here (a server that keeps none answers 405: fine).
        let mut request = client
            .delete(url.clone())
            .header("mcp-session-id", session.as_str());
        for (name, value) in &headers {
            request = request.header(name.clone(), value.clone());
        }
        let _ = request.send().await;
    }
    Ok(refused)
}

/// The client id to use with `server`, registering one when nothing else serves.
async fn client_for(
    client: &reqwest::Client,
    config: &McpConfig,
    server: &AuthServer,
    redirect: &str,
    scope: &str,
) -> Result<Client, AuthError> {
    let oauth = &config.oauth;
    if let Some(id) = &oauth.client_id {
        let method = oauth
            .client_secret
            .as_ref()
            .map(|_| server.secret_method().to_owned());
        return Ok((id.clone(), oauth.client_secret.clone(), method));
    }
    if let Some(document) = &oauth.client_metadata_url
        && server.client_id_metadata_document_supported
    {
        let url = Url::parse(document).map_err(|e| {
            AuthError::Unsupported(format!("`oauth.clientMetadataUrl` is not a URL: {e}"))
        })?;
        if url.scheme() != "https" {
            return Err(AuthError::Unsupported(
                "`oauth.clientMetadataUrl` must be an https URL".into(),
            ));
        }
        return Ok((document.clone(), None, None));
    }
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(AuthError::Unsupported(format!(
            "{} offers no dynamic client registration{}: register a client with it and set `oauth.clientId` (redirect URI http://127.0.0.1:PORT/callback with `oauth.redirectPort: PORT`)",
            server.issuer,
            if server.client_id_metadata_document_supported {
                " (it accepts client metadata documents: set `oauth.clientMetadataUrl`)"
            } else {
                ""
            }
        )));
    };
    // A public client where the server takes one (or does not say), else the secret method
    // it lists.
    let methods = &server.token_endpoint_auth_methods_supported;
    let method = if methods.is_empty() || methods.iter().any(|m| m == "none") {
        "none"
    } else {
        server.secret_method()
    };
    let mut metadata = json!({
        "client_name": "cordis",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    });
    if !scope.is_empty() {
        metadata["scope"] = json!(scope);
    }
    let response = client
        .post(endpoint)
        .header(reqwest::header::ACCEPT, "application/json")
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(metadata.to_string())
        .send()
        .await
        .map_err(http_error(format!("POST {endpoint}")))?;
    let status = response.status();
    let body = super::bounded_body(response, MAX_AUTH_BODY, "registration endpoint").await?;
    if !status.is_success() {
        let answer: super::ErrorAnswer = serde_json::from_slice(&body).unwrap_or_default();
        return Err(AuthError::Endpoint {
            endpoint: "registration endpoint",
            status: status.as_u16(),
            error: answer.error.unwrap_or_else(|| "an error".into()),
            description: answer.error_description,
        });
    }
    let registered: Registered =
        serde_json::from_slice(&body).map_err(|e| AuthError::Endpoint {
            endpoint: "registration endpoint",
            status: status.as_u16(),
            error: format!("an answer without a client id ({e})"),
            description: None,
        })?;
    // The registration's answer says how the client authenticates; else what was asked for
    // (RFC 7591 §3.2.1), else what the server lists.
    let method = registered.client_secret.as_ref().map(|_| {
        registered
            .token_endpoint_auth_method
            .clone()
            .filter(|m| m != "none")
            .unwrap_or_else(|| {
                if method == "none" {
                    server.secret_method().to_owned()
                } else {
                    method.to_owned()
                }
            })
    });
    Ok((registered.client_id, registered.client_secret, method))
}

/// The scopes to ask for: the entry's, else what the server's challenge names plus what it
/// asked for since (step-up), else what its metadata lists.
fn scopes_for(
    config: &McpConfig,
    challenge: Option<&Challenge>,
    previous: Option<&Grant>,
    metadata: &discovery::ProtectedResource,
) -> Vec<String> {
    if !config.oauth.scopes.is_empty() {
        return config.oauth.scopes.clone();
    }
    let mut scopes: Vec<String> = challenge.map(Challenge::scopes).unwrap_or_default();
    if let Some(previous) = previous {
        for scope in previous.scopes.iter().chain(&previous.wanted) {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
    }
    if scopes.is_empty() {
        scopes = metadata.scopes_supported.clone();
    }
    scopes
}

/// Waits on `listener` for the browser's redirect carrying `state`; the code. A request with
/// another state (or to another path) is answered and ignored.
async fn redirected(listener: &TcpListener, state: &str) -> Result<String, AuthError> {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            // Out of descriptors, say: not a reason to spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REDIRECT_HEAD {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        let line = String::from_utf8_lossy(&head);
        let target = line
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or_default()
            .to_owned();
        let query = Url::parse(&format!("http://127.0.0.1{target}")).ok();
        let param = |name: &str| {
            query.as_ref().and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.into_owned())
            })
        };
        let on_callback = query.as_ref().is_some_and(|u| u.path() == "/callback");
        let (status, page, outcome) = if !on_callback {
            ("404 Not Found", "Not found.", None)
        } else if param("state").as_deref() != Some(state) {
            // Not this login's redirect (a stale tab, or a forged one): keep waiting.
            (
                "400 Bad Request",
                "This is not the authorization cordis is waiting for.",
                None,
            )
        } else if let Some(error) = param("error") {
            let description = param("error_description")
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            (
                "200 OK",
                "Authorization was refused. You can close this tab.",
                Some(Err(AuthError::Denied {
                    reason: format!("{error}{description}"),
                })),
            )
        } else if let Some(code) = param("code") {
            (
                "200 OK",
                "cordis is authorized. You can close this tab.",
                Some(Ok(code)),
            )
        } else {
            ("400 Bad Request", "No code in this redirect.", None)
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        if let Some(outcome) = outcome {
            return outcome;
        }
    }
}

/// Opens `url` in the user's browser, when there is a display to open it on.
fn open_browser(url: &str) -> Option<tokio::process::Child> {
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
    if !display {
        return None;
    }
    tokio::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()
}

/// Authorizes cordis for the HTTP server of `config`, storing the grant in `store`. `say`
/// hears the address the user must open (and what happens).
///
/// # Errors
/// Discovery, registration, the browser step, the exchange, or the store failed.
pub async fn login(
    config: &McpConfig,
    store: &TokenStore,
    options: &LoginOptions,
    say: &mut dyn FnMut(&str),
) -> Result<LoginOutcome, AuthError> {
    let url_text = config.url.clone().unwrap_or_default();
    let url = safe_url(&url_text, "the server")?;
    let client = super::http_client()?;
    let key = url_text.clone();
    let previous = on_disk(store, move |s| s.load(&key)).await.ok().flatten();
    // A step-up: the server refused the grant's token for want of scope.
    let step_up = previous.as_ref().filter(|p| !p.wanted.is_empty());
    if let Some(previous) = step_up
        && previous.step_ups >= super::MAX_STEP_UPS
    {
        return Err(AuthError::Unsupported(format!(
            "refused after {} step-up logins in a row: the server still asks for scope {} that the authorization server does not grant; ask its administrator, or run `cordis mcp logout` and log in again to start over",
            super::MAX_STEP_UPS,
            previous.wanted.join(" ")
        )));
    }
    let challenge = match probe(&client, config, &url).await? {
        Some(challenge) => challenge,
        None if step_up.is_some() => None,
        None => return Ok(LoginOutcome::NotNeeded),
    };
    let (resource, server) = discovery::discover(&client, &url, challenge.as_ref()).await?;
    let issuer = server.issuer.clone();
    let scopes = scopes_for(config, challenge.as_ref(), previous.as_ref(), &resource);
    let scope = scopes.join(" ");

    let listener = TcpListener::bind(("127.0.0.1", config.oauth.redirect_port))
        .await
        .map_err(|e| {
            AuthError::Unsupported(format!(
                "cannot listen on 127.0.0.1:{} for the redirect: {e}",
                config.oauth.redirect_port
            ))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| AuthError::Unsupported(e.to_string()))?
        .port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let (client_id, client_secret, token_auth) =
        client_for(&client, config, &server, &redirect, &scope).await?;

    let verifier = random_token(32)?;
    let state = random_token(16)?;
    let mut authorize = safe_url(&server.authorization_endpoint, "the authorization endpoint")?;
    {
        let mut query = authorize.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("redirect_uri", &redirect)
            .append_pair("code_challenge", &pkce_challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &resource.resource);
        if !scope.is_empty() {
            query.append_pair("scope", &scope);
        }
    }
    say(&format!(
        "To authorize cordis for MCP server \"{}\" ({issuer}), open:\n{authorize}",
        config.server
    ));
    let mut opener = if options.open_browser {
        open_browser(authorize.as_str())
    } else {
        None
    };
    let code = tokio::time::timeout(options.timeout, redirected(&listener, &state))
        .await
        .map_err(|_| AuthError::TimedOut {
            secs: options.timeout.as_secs(),
        })??;
    if let Some(child) = opener.as_mut() {
        let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
    }

    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("code_verifier", verifier.as_str()),
        ("resource", resource.resource.as_str()),
    ];
    let body = post_form(
        &client,
        "token endpoint",
        &server.token_endpoint,
        &form,
        ClientAuth::of(&client_id, client_secret.as_deref(), token_auth.as_deref()),
    )
    .await?;
    let mut grant = Grant {
        server: url_text.clone(),
        resource: resource.resource.clone(),
        issuer: server.issuer.clone(),
        token_endpoint: server.token_endpoint.clone(),
        revocation_endpoint: server.revocation_endpoint.clone(),
        client_id,
        client_secret,
        access_token: String::new(),
        refresh_token: None,
        expires_at: None,
        scopes: scopes.clone(),
        wanted: Vec::new(),
        token_auth,
        step_ups: step_up.map_or(0, |p| p.step_ups + 1),
    };
    apply_answer(&mut grant, &body)?;
    let scopes = grant.scopes.clone();
    let path = on_disk(store, move |s| s.save(&grant)).await?;
    waiting().remove(&url_text);
    Ok(LoginOutcome::Stored {
        issuer: server.issuer,
        scopes,
        path,
    })
}

/// What the authorization server made of a logout's tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revocation {
    /// No grant was stored: nothing to revoke.
    NothingStored,
    /// The server offers no revocation endpoint: its tokens live until they expire.
    NotOffered,
    /// Every token of the grant was revoked (RFC 7009).
    Revoked,
    /// The server could not be told (the grant is forgotten all the same).
    Failed(String),
}

/// What a logout did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogoutOutcome {
    /// A grant was stored and is removed.
    pub forgot: bool,
    /// What became of its tokens at the authorization server.
    pub revocation: Revocation,
}

/// Forgets the grant for the server of `config`, first asking the authorization server to
/// revoke its tokens (RFC 7009: the refresh token, then the access token) where it offers
/// that. A revocation that fails does not keep the grant: it is removed all the same, and the
/// outcome says why the server was not told.
///
/// # Errors
/// The store is unsafe or the file cannot be removed.
pub async fn logout(config: &McpConfig, store: &TokenStore) -> Result<LogoutOutcome, AuthError> {
    let url = config.url.clone().unwrap_or_default();
    // A grant that cannot be read is still removed (there is nothing to revoke with).
    let key = url.clone();
    let grant = on_disk(store, move |s| s.load(&key)).await.ok().flatten();
    let revocation = match &grant {
        None => Revocation::NothingStored,
        Some(grant) => revoke(grant).await,
    };
    let forgot = on_disk(store, move |s| s.remove(&url)).await?;
    Ok(LogoutOutcome { forgot, revocation })
}

/// Revokes `grant`'s tokens at its authorization server, where it offers revocation.
async fn revoke(grant: &Grant) -> Revocation {
    let Some(endpoint) = grant.revocation_endpoint.as_deref() else {
        return Revocation::NotOffered;
    };
    if let Err(e) = safe_url(endpoint, "the revocation endpoint") {
        return Revocation::Failed(e.to_string());
    }
    let client = match super::http_client() {
        Ok(client) => client,
        Err(e) => return Revocation::Failed(e.to_string()),
    };
    let tokens = grant
        .refresh_token
        .iter()
        .map(|t| (t.as_str(), "refresh_token"))
        .chain([(grant.access_token.as_str(), "access_token")]);
    let auth = ClientAuth::of(
        &grant.client_id,
        grant.client_secret.as_deref(),
        grant.token_auth.as_deref(),
    );
    // Each token is revoked even when another could not be: the first failure is said.
    let mut failed = None;
    for (token, hint) in tokens {
        let form = [("token", token), ("token_type_hint", hint)];
        if let Err(e) = post_form(&client, "revocation endpoint", endpoint, &form, auth).await {
            failed.get_or_insert(e.to_string());
        }
    }
    failed.map_or(Revocation::Revoked, Revocation::Failed)
}
