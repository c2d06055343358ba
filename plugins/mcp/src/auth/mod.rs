//! OAuth 2.1 for HTTP servers, as the MCP authorization spec asks of a client.
//!
//! A server that answers `401` names its protected resource metadata (RFC 9728) in its
//! `WWW-Authenticate` challenge (or at the well-known address); that names the authorization
//! server, whose metadata (RFC 8414 / OIDC) gives the endpoints. `cordis mcp login SERVER`
//! ([`login`]) runs the browser step once: a client id (configured, a client metadata document
//! URL, or dynamic registration), PKCE with `S256`, the `resource` indicator (RFC 8707), scopes
//! from the challenge, and a loopback redirect. The grant is kept in the user's
//! [`TokenStore`], never in the workspace or a session log.
//!
//! At run time the entry's authorizer puts the bearer token on every request, refreshes it
//! before it expires or when the server rejects it, and when neither mends a `401` the entry is
//! *pending with the reason* (run `cordis mcp login`) and waits, without contacting the server
//! again, until the stored grant changes. A `403` with `insufficient_scope` records the scopes
//! asked for, so the next login asks for them too (step-up).

mod discovery;
mod login;
mod store;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use url::Url;

pub use discovery::{AuthServer, Challenge, ProtectedResource, is_safe, parse_challenge};
pub use login::{LoginOptions, LoginOutcome, LogoutOutcome, Revocation, login, logout};
pub use store::{Grant, MAX_GRANT_BYTES, TokenStore, default_dir};

/// The largest metadata, registration or token answer read.
pub const MAX_AUTH_BODY: usize = 64 << 10;

/// How long before its expiry a token is renewed.
const RENEW_MARGIN: Duration = Duration::from_secs(30);

/// The least time between two renewals ahead of expiry (a refused token still renews at once).
const RENEW_PAUSE: Duration = Duration::from_secs(10);

/// How many step-up logins in a row (each after the server answered `insufficient_scope`) a
/// grant may have: past it, the login refuses (the authorization server evidently does not
/// grant what the server asks for) instead of asking the person again and again. Two: with
/// the first login, three authorization requests in all, the bound the MCP conformance suite
/// holds clients to (`auth/scope-retry-limit`).
pub const MAX_STEP_UPS: u32 = 2;

/// How often a pending entry looks whether a login stored a new grant (a local file read; the
/// server is not contacted until the grant changes).
pub const LOGIN_POLL: Duration = Duration::from_secs(2);

/// How an entry obtains its tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GrantKind {
    /// A person authorizes once in a browser (`cordis mcp login`); tokens are then renewed.
    #[default]
    AuthorizationCode,
    /// The entry's own `clientId` and `clientSecret` (OAuth client credentials): tokens are
    /// asked for and renewed without anyone, as CI needs.
    ClientCredentials,
}

/// The `oauth` settings of an HTTP entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OAuthConfig {
    /// Authorize when the server asks (default true); false makes a `401` a plain error.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// How tokens are obtained (default `authorizationCode`: a login).
    #[serde(default)]
    pub grant: GrantKind,
    /// A client id registered with the authorization server beforehand (else a client metadata
    /// document URL or dynamic registration is used).
    #[serde(default)]
    pub client_id: Option<String>,
    /// That client's secret, for a confidential client (use `${{ env.NAME }}`).
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The https URL of a client metadata document to use as the client id where the
    /// authorization server supports them.
    #[serde(default)]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for (default: what the server's challenge or metadata names).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The loopback port of the login's redirect (default: any free port), for clients
    /// registered with a fixed redirect URI.
    #[serde(default)]
    pub redirect_port: u16,
    /// Where grants are kept (default `$XDG_DATA_HOME/cordis/mcp-auth`, else
    /// `~/.local/share/cordis/mcp-auth`).
    #[serde(default)]
    pub token_dir: Option<PathBuf>,
    /// The command a person runs to log in, named by a pending entry (default `cordis mcp
    /// login SERVER [FILE]`); set for entries no file holds, such as an editor's servers.
    #[serde(skip)]
    pub login_command: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig {
            enabled: true,
            grant: GrantKind::AuthorizationCode,
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: Vec::new(),
            redirect_port: 0,
            token_dir: None,
            login_command: None,
        }
    }
}

impl OAuthConfig {
    /// What is missing for the chosen grant (client credentials need the client's id and
    /// secret), if anything.
    pub fn problem(&self) -> Option<String> {
        (self.grant == GrantKind::ClientCredentials
            && (self.client_id.is_none() || self.client_secret.is_none()))
        .then(|| {
            "`oauth.grant: clientCredentials` needs `oauth.clientId` and `oauth.clientSecret` (put the secret in the environment: `clientSecret: \"${{ env.NAME }}\"`)".to_owned()
        })
    }

    /// The grants store for this entry, in this environment.
    ///
    /// # Errors
    /// No `tokenDir`, `XDG_DATA_HOME` or `HOME` to put it in.
    pub fn store(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<TokenStore, AuthError> {
        self.token_dir
            .clone()
            .or_else(|| default_dir(env))
            .map(TokenStore::new)
            .ok_or(AuthError::NoStore)
    }
}

/// Why authorization failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No directory to keep grants in.
    #[error(
        "no directory for OAuth grants: set XDG_DATA_HOME or HOME, or give the entry `oauth.tokenDir`"
    )]
    NoStore,
    /// The grants directory or a grant file is unsafe or unreadable.
    #[error("OAuth grants at {path}: {reason}")]
    Store {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// Finding the authorization server failed.
    #[error("authorization discovery: {reason}")]
    Discovery {
        /// What failed.
        reason: String,
    },
    /// The protected resource metadata names a resource that is not this server.
    #[error(
        "{metadata} describes resource {resource}, which does not cover the server {server}: refused (a token for it would not be this server's)"
    )]
    WrongResource {
        /// Where the metadata came from.
        metadata: String,
        /// The resource it names.
        resource: String,
        /// The server's URL.
        server: String,
    },
    /// An endpoint answered with an OAuth error or something unreadable.
    #[error("{endpoint} answered {status}: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Endpoint {
        /// Which endpoint (`token endpoint`, `registration endpoint`).
        endpoint: &'static str,
        /// The HTTP status.
        status: u16,
        /// The OAuth error code, or what was wrong.
        error: String,
        /// The server's `error_description`.
        description: Option<String>,
    },
    /// The HTTP request itself failed.
    #[error("{what}: {reason}")]
    Http {
        /// What was being fetched.
        what: String,
        /// The transport's error.
        reason: String,
    },
    /// The user's browser step failed or was refused.
    #[error("authorization was not granted: {reason}")]
    Denied {
        /// The authorization server's error, or what went wrong with the redirect.
        reason: String,
    },
    /// Nobody completed the browser step in time.
    #[error(
        "no authorization within {secs} s (open the address printed above; --timeout-secs waits longer)"
    )]
    TimedOut {
        /// The wait.
        secs: u64,
    },
    /// The server cannot be authorized as configured.
    #[error("{0}")]
    Unsupported(String),
}

/// `n` random bytes from the kernel, base64url without padding.
pub(crate) fn random_token(n: usize) -> Result<String, AuthError> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| AuthError::Unsupported(format!("no randomness for PKCE: {e}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The PKCE `S256` challenge of `verifier`.
pub(crate) fn pkce_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// At most `limit` bytes of `response`'s body.
pub(crate) async fn bounded_body(
    response: reqwest::Response,
    limit: usize,
    what: &str,
) -> Result<Vec<u8>, AuthError> {
    use futures_util::StreamExt;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| AuthError::Http {
            what: what.to_owned(),
            reason: e.to_string(),
        })?;
        if body.len() + chunk.len() > limit {
            return Err(AuthError::Http {
                what: what.to_owned(),
                reason: format!("the answer is larger than {limit} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `GET url` as JSON: `None` when the server has no such document (any 4xx).
pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &Url,
    limit: usize,
) -> Result<Option<T>, AuthError> {
    let http = |e: reqwest::Error| AuthError::Http {
        what: format!("GET {url}"),
        reason: e.to_string(),
    };
    let response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(http)?;
    let status = response.status();
    if status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(AuthError::Http {
            what: format!("GET {url}"),
            reason: format!("HTTP {status}"),
        });
    }
    let body = bounded_body(response, limit, &format!("GET {url}")).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| AuthError::Discovery {
            reason: format!("{url} is not the metadata expected: {e}"),
        })
}

/// A token endpoint's answer.
#[derive(Debug, Deserialize)]
struct TokenAnswer {
    access_token: String,
    token_type: String,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

/// Runs `work` on the grants store on a blocking thread (it reads and writes files).
async fn on_disk<T: Send + 'static>(
    store: &TokenStore,
    work: impl FnOnce(&TokenStore) -> Result<T, AuthError> + Send + 'static,
) -> Result<T, AuthError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || work(&store))
        .await
        .map_err(|e| AuthError::Unsupported(e.to_string()))?
}

/// The HTTP client of every OAuth request (discovery, tokens, revocation): no redirects
/// followed, each request bounded (they run while an entry's requests wait for a token).
pub(crate) fn http_client() -> Result<reqwest::Client, AuthError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| AuthError::Unsupported(format!("cannot build the HTTP client: {e}")))
}

/// An OAuth error answer.
#[derive(Debug, Default, Deserialize)]
struct ErrorAnswer {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// How a client authenticates at the token (or revocation) endpoint.
#[derive(Clone, Copy)]
pub(crate) enum ClientAuth<'a> {
    /// A public client: its `client_id` in the form.
    Public(&'a str),
    /// HTTP Basic with the id and secret (`client_secret_basic`).
    Basic(&'a str, &'a str),
    /// The id and secret in the form (`client_secret_post`).
    Post(&'a str, &'a str),
}

impl<'a> ClientAuth<'a> {
    /// The authentication of client `id` with `secret`, by `method` (a token endpoint auth
    /// method name; anything but `client_secret_post` is HTTP Basic).
    pub(crate) fn of(id: &'a str, secret: Option<&'a str>, method: Option<&str>) -> Self {
        match (secret, method) {
            (None, _) => ClientAuth::Public(id),
            (Some(secret), Some("client_secret_post")) => ClientAuth::Post(id, secret),
            (Some(secret), _) => ClientAuth::Basic(id, secret),
        }
    }
}

/// `POST` a form to an OAuth endpoint as the client `auth`, reading a JSON answer.
async fn post_form(
    client: &reqwest::Client,
    endpoint: &'static str,
    url: &str,
    form: &[(&str, &str)],
    auth: ClientAuth<'_>,
) -> Result<Vec<u8>, AuthError> {
    let mut form = form.to_vec();
    match auth {
        ClientAuth::Public(id) => form.push(("client_id", id)),
        ClientAuth::Post(id, secret) => {
            form.push(("client_id", id));
            form.push(("client_secret", secret));
        }
        ClientAuth::Basic(..) => {}
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&form)
        .finish();
    let mut request = client
        .post(url)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body);
    if let ClientAuth::Basic(id, secret) = auth {
        request = request.basic_auth(id, Some(secret));
    }
    let response = request.send().await.map_err(|e| AuthError::Http {
        what: format!("POST {url}"),
        reason: e.to_string(),
    })?;
    let status = response.status();
    let body = bounded_body(response, MAX_AUTH_BODY, endpoint).await?;
    if !status.is_success() {
        let answer: ErrorAnswer = serde_json::from_slice(&body).unwrap_or_default();
        return Err(AuthError::Endpoint {
            endpoint,
            status: status.as_u16(),
            error: answer.error.unwrap_or_else(|| "an error".into()),
            description: answer.error_description,
        });
    }
    Ok(body)
}

/// What a token answer makes of `grant` (a refresh keeps the refresh token unless rotated).
fn apply_answer(grant: &mut Grant, body: &[u8]) -> Result<(), AuthError> {
    let answer: TokenAnswer = serde_json::from_slice(body).map_err(|e| AuthError::Endpoint {
        endpoint: "token endpoint",
        status: 200,
        error: format!("an answer that is not a token ({e})"),
        description: None,
    })?;
    if !answer.token_type.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::Endpoint {
            endpoint: "token endpoint",
            status: 200,
            error: format!(
                "a token of type {:?} (only bearer tokens are supported)",
                answer.token_type
            ),
            description: None,
        });
    }
    grant.access_token = answer.access_token;
    grant.expires_at = answer.expires_in.map(|s| now().saturating_add(s));
    if let Some(refresh) = answer.refresh_token {
        grant.refresh_token = Some(refresh);
    }
    if let Some(scope) = answer.scope {
        grant.scopes = scope.split_whitespace().map(str::to_owned).collect();
    }
    Ok(())
}

/// A new access token for `grant` by the client-credentials grant: the entry's own client
/// (`creds`, never the stored one: a rotated secret applies at once), the grant's resource and
/// scopes.
async fn by_credentials(
    client: &reqwest::Client,
    grant: &mut Grant,
    creds: &Credentials,
) -> Result<(), AuthError> {
    grant.client_id = creds.id.clone();
    let secret = creds.secret.clone();
    let scope = grant.scopes.join(" ");
    let mut form = vec![
        ("grant_type", "client_credentials"),
        ("resource", grant.resource.as_str()),
    ];
    if !scope.is_empty() {
        form.push(("scope", scope.as_str()));
    }
    let body = post_form(
        client,
        "token endpoint",
        &grant.token_endpoint.clone(),
        &form,
        ClientAuth::of(
            &grant.client_id,
            Some(secret.as_str()),
            grant.token_auth.as_deref(),
        ),
    )
    .await?;
    apply_answer(grant, &body)
}

/// Whether the authorization server refused (as opposed to an outage: no answer, a 5xx).
fn refused(error: &AuthError) -> bool {
    matches!(error, AuthError::Endpoint { status, .. } if (400..500).contains(status))
}

/// Renews `grant` with its refresh token.
async fn refresh(client: &reqwest::Client, grant: &mut Grant) -> Result<(), AuthError> {
    let Some(token) = grant.refresh_token.clone() else {
        return Err(AuthError::Unsupported("no refresh token".into()));
    };
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", token.as_str()),
        ("resource", grant.resource.as_str()),
    ];
    let body = post_form(
        client,
        "token endpoint",
        &grant.token_endpoint.clone(),
        &form,
        ClientAuth::of(
            &grant.client_id,
            grant.client_secret.as_deref(),
            grant.token_auth.as_deref(),
        ),
    )
    .await?;
    apply_answer(grant, &body)
}

/// The grant and why the entry needs a login, kept per server URL across re-applies of a
/// pending entry: while the stored grant is the one that failed, a re-apply waits without
/// contacting the server.
static WAITING: Mutex<BTreeMap<String, Waiting>> = Mutex::new(BTreeMap::new());

/// The stored grant's bytes when a login became necessary, and the reason given.
type Waiting = (Option<Vec<u8>>, String);

fn waiting() -> std::sync::MutexGuard<'static, BTreeMap<String, Waiting>> {
    WAITING.lock().unwrap_or_else(|e| e.into_inner())
}

/// An entry's own OAuth client, for the client-credentials grant.
#[derive(Clone)]
pub(crate) struct Credentials {
    /// The client id.
    pub id: String,
    /// Its secret.
    pub secret: String,
    /// The scopes to ask for (default: what the server's challenge names).
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// An HTTP entry's bearer tokens: read from the store, renewed, and given up on.
#[derive(Debug)]
pub(crate) struct Authorizer {
    server: String,
    url: String,
    /// The entry's own client, for the client-credentials grant.
    credentials: Option<Credentials>,
    /// What the user runs to log in (see [`OAuthConfig::login_command`]).
    login_command: String,
    store: TokenStore,
    client: reqwest::Client,
    grant: tokio::sync::Mutex<Option<Grant>>,
    blocked: Mutex<Option<String>>,
    /// When a token was last renewed ahead of its expiry.
    last_renewal: Mutex<Option<std::time::Instant>>,
}

impl Authorizer {
    /// The authorizer of entry `server` at `url`; a pending entry tells the user to run
    /// `login_command`.
    pub(crate) fn new(
        server: &str,
        url: &str,
        login_command: String,
        credentials: Option<Credentials>,
        store: TokenStore,
        client: reqwest::Client,
    ) -> Self {
        Authorizer {
            server: server.to_owned(),
            url: url.to_owned(),
            credentials,
            login_command,
            store,
            client,
            grant: tokio::sync::Mutex::new(None),
            blocked: Mutex::new(None),
            last_renewal: Mutex::new(None),
        }
    }

    fn lock_last_renewal(&self) -> std::sync::MutexGuard<'_, Option<std::time::Instant>> {
        self.last_renewal.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_blocked(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.blocked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the entry tells the user when it cannot go on without a login.
    fn login_reason(&self, why: &str) -> String {
        match &self.credentials {
            Some(_) => format!(
                "mcp({}): {why}: check the entry's `oauth.clientId` and `oauth.clientSecret`",
                self.server
            ),
            None => format!("mcp({}): {why}: run `{}`", self.server, self.login_command),
        }
    }

    /// The key of this entry's wait for a new grant: the URL, and for client credentials the
    /// credentials too (an edit that fixes the secret is not kept waiting).
    fn waiting_key(&self) -> String {
        match &self.credentials {
            Some(c) => {
                let digest = Sha256::digest(format!("{}\n{}", c.id, c.secret).as_bytes());
                format!("{}#{}", self.url, cordis_schema::hex(&digest))
            }
            None => self.url.clone(),
        }
    }

    /// Why a login is needed, when the last request found out.
    pub(crate) fn blocked(&self) -> Option<String> {
        self.lock_blocked().clone()
    }

    async fn stored(&self) -> Result<Option<Vec<u8>>, AuthError> {
        let url = self.url.clone();
        on_disk(&self.store, move |s| s.read(&url)).await
    }

    /// The stored grant this entry may use: with client credentials, only one issued to its
    /// own client (a login's, or another client's, is not this entry's to use).
    async fn load(&self) -> Result<Option<Grant>, AuthError> {
        let url = self.url.clone();
        let grant = on_disk(&self.store, move |s| s.load(&url)).await?;
        Ok(grant.filter(|g| {
            self.credentials
                .as_ref()
                .is_none_or(|c| c.id == g.client_id && g.refresh_token.is_none())
        }))
    }

    async fn save(&self, grant: Grant) {
        if let Err(e) = on_disk(&self.store, move |s| s.save(&grant)).await {
            tracing::warn!(server = %self.server, error = %e, "cannot store the renewed OAuth grant");
        }
    }

    /// The reason a pending entry keeps waiting, when the stored grant is still the one that
    /// needed a login (checked before contacting the server).
    pub(crate) async fn still_waiting(&self) -> Option<String> {
        let key = self.waiting_key();
        let (bytes, reason) = waiting().get(&key).cloned()?;
        let now = self.stored().await.ok()?;
        if now == bytes {
            return Some(reason);
        }
        waiting().remove(&key);
        None
    }

    /// Marks the entry as needing a login because `why` (a renewed token was refused too).
    pub(crate) async fn give_up(&self, why: &str) {
        self.block(why).await;
    }

    /// Marks the entry as needing a login because `why`.
    async fn block(&self, why: &str) -> String {
        let reason = self.login_reason(why);
        *self.lock_blocked() = Some(reason.clone());
        let bytes = self.stored().await.ok().flatten();
        waiting().insert(self.waiting_key(), (bytes, reason.clone()));
        reason
    }

    /// Renews `grant`: with its refresh token, else (or when that fails) with the client
    /// credentials.
    async fn renew(&self, grant: &mut Grant) -> Result<(), AuthError> {
        let refreshed = match grant.refresh_token {
            Some(_) => refresh(&self.client, grant).await,
            None => Err(AuthError::Unsupported("no refresh token".into())),
        };
        match (refreshed, &self.credentials) {
            (Err(_), Some(creds)) => by_credentials(&self.client, grant, creds).await,
            (refreshed, _) => refreshed,
        }
    }

    /// A new grant by client credentials (discovery from the server's `challenge`, then the
    /// token endpoint), stored for the next process too.
    async fn acquire(&self, challenge: Option<&Challenge>) -> Result<Grant, AuthError> {
        let Some(creds) = &self.credentials else {
            return Err(AuthError::Unsupported("no client credentials".into()));
        };
        let url = discovery::safe_url(&self.url, "the server")?;
        let (resource, server) = discovery::discover(&self.client, &url, challenge).await?;
        let scopes = if creds.scopes.is_empty() {
            challenge.map(Challenge::scopes).unwrap_or_default()
        } else {
            creds.scopes.clone()
        };
        let token_auth = Some(server.secret_method().to_owned());
        let mut grant = Grant {
            server: self.url.clone(),
            resource: resource.resource,
            issuer: server.issuer,
            token_endpoint: server.token_endpoint,
            revocation_endpoint: server.revocation_endpoint,
            client_id: creds.id.clone(),
            // The secret stays in the entry's config, never in the grants store.
            client_secret: None,
            access_token: String::new(),
            refresh_token: None,
            expires_at: None,
            scopes,
            wanted: Vec::new(),
            token_auth,
            step_ups: 0,
        };
        by_credentials(&self.client, &mut grant, creds).await?;
        self.save(grant.clone()).await;
        Ok(grant)
    }

    /// The token for the next request, renewed first when it is about to expire; `None`
    /// without a grant.
    pub(crate) async fn bearer(&self) -> Option<String> {
        let mut held = self.grant.lock().await;
        if held.is_none() {
            match self.load().await {
                Ok(grant) => *held = grant,
                Err(e) => {
                    tracing::warn!(server = %self.server, error = %e, "cannot read the OAuth grant");
                    return None;
                }
            }
        }
        let grant = held.as_mut()?;
        let expiring = grant
            .expires_at
            .is_some_and(|at| at <= now() + RENEW_MARGIN.as_secs());
        // At most one renewal ahead of expiry per RENEW_PAUSE: a token that lives shorter than
        // the margin, or a renewal that fails, must not cost a token request per MCP request.
        let due = {
            let mut last = self.lock_last_renewal();
            let due = last.is_none_or(|at| at.elapsed() >= RENEW_PAUSE);
            if expiring && due {
                *last = Some(std::time::Instant::now());
            }
            due
        };
        if expiring && due && (grant.refresh_token.is_some() || self.credentials.is_some()) {
            let mut renewed = grant.clone();
            match self.renew(&mut renewed).await {
                Ok(()) => {
                    *grant = renewed.clone();
                    self.save(renewed).await;
                }
                Err(e) => {
                    tracing::warn!(server = %self.server, error = %e, "the OAuth token could not be renewed");
                }
            }
        }
        Some(grant.access_token.clone())
    }

    /// After the server rejected `used` (`401`): the stored grant if another process renewed
    /// it, else a refreshed token to retry with; `None` when only a login can help (the entry
    /// is then blocked, see [`Authorizer::blocked`]).
    pub(crate) async fn rejected(
        &self,
        used: Option<&str>,
        challenge: Option<&Challenge>,
    ) -> Option<String> {
        let mut held = self.grant.lock().await;
        let stored = self.load().await.ok().flatten();
        let Some(mut grant) = stored.or_else(|| held.clone()) else {
            // Client credentials need no person: a first grant is asked for here.
            if self.credentials.is_some() {
                match self.acquire(challenge).await {
                    Ok(grant) => {
                        let token = grant.access_token.clone();
                        *held = Some(grant);
                        return Some(token);
                    }
                    Err(e) => {
                        drop(held);
                        let why = format!("the client credentials got no token ({e})");
                        if refused(&e) {
                            self.block(&why).await;
                        } else {
                            // An outage, not a refusal: tried again at the next connection.
                            *self.lock_blocked() = Some(self.login_reason(&why));
                        }
                        return None;
                    }
                }
            }
            drop(held);
            self.block("the server needs authorization").await;
            return None;
        };
        if Some(grant.access_token.as_str()) != used {
            let token = grant.access_token.clone();
            *held = Some(grant);
            return Some(token);
        }
        match self.renew(&mut grant).await {
            Ok(()) => {
                let token = grant.access_token.clone();
                *held = Some(grant.clone());
                drop(held);
                self.save(grant).await;
                Some(token)
            }
            Err(e) => {
                *held = None;
                drop(held);
                let why = if self.credentials.is_some() {
                    format!(
                        "the server refused the token and the client credentials got no new one ({e})"
                    )
                } else if grant.refresh_token.is_some() {
                    format!("the server refused the token and renewing it failed ({e})")
                } else {
                    "the server refused the token (it has expired or was revoked)".to_owned()
                };
                self.block(&why).await;
                None
            }
        }
    }

    /// After a `403` with `insufficient_scope`: records the scopes asked for (the next login
    /// asks for them) and says what to do.
    pub(crate) async fn insufficient(&self, challenge: &Challenge) -> String {
        let wanted = challenge.scopes();
        let mut held = self.grant.lock().await;
        // A login since this grant was read (a step-up) is the one to record against.
        if let Ok(Some(stored)) = self.load().await {
            *held = Some(stored);
        }
        let mut exhausted = false;
        if let Some(grant) = held.as_mut() {
            exhausted = grant.step_ups >= MAX_STEP_UPS;
            for scope in &wanted {
                if !grant.wanted.contains(scope) && !grant.scopes.contains(scope) {
                    grant.wanted.push(scope.clone());
                }
            }
            if grant.wanted.is_empty() {
                // A server refusing scopes its token was granted (or naming none): the next
                // login is a step-up all the same, and counts against the bound.
                grant.wanted = if wanted.is_empty() {
                    grant.scopes.clone()
                } else {
                    wanted.clone()
                };
            }
            let grant = grant.clone();
            drop(held);
            self.save(grant).await;
        }
        let named = if wanted.is_empty() {
            "unnamed".to_owned()
        } else {
            wanted.join(" ")
        };
        if exhausted {
            return format!(
                "mcp({}): the server still needs more scope ({named}) after {MAX_STEP_UPS} step-up logins: the authorization server does not grant it (no more step-ups are attempted; ask its administrator, or log out and in again to start over)",
                self.server
            );
        }
        self.login_reason(&format!("the server needs more scope ({named})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pkce_challenge_is_the_rfc_7636_example() {
        // RFC 7636, appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let a = random_token(32).unwrap();
        assert_eq!(a.len(), 43);
        assert_ne!(a, random_token(32).unwrap());
    }
}
