//! An OAuth 2.1 authorization server and the MCP server it protects, in one loopback HTTP
//! server: protected resource metadata (RFC 9728) at the path-aware well-known address,
//! authorization server metadata (RFC 8414) for an issuer with a path, dynamic registration,
//! an authorization endpoint that approves at once (redirecting to the client's loopback
//! address), a token endpoint checking PKCE, redirect URI, client and resource, rotating
//! refresh tokens, and an MCP endpoint that answers `401` with a challenge without a valid
//! token and `403 insufficient_scope` for its `admin` tool without scope `mcp:admin`.
//!
//! Shared by the plugin's tests and the CLI's (`tests/mcp_auth.rs` includes this file).
#![allow(
    dead_code,
    reason = "shared by the plugin's and the CLI's tests; each uses only some of it"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// What the fixture knows and how it behaves; tests change it between steps.
#[derive(Debug, Default)]
pub struct Knobs {
    /// Lifetime of issued access tokens, in seconds (0: already expired when issued).
    pub lifetime: u64,
    /// The protected resource metadata names another resource.
    pub wrong_resource: bool,
    /// The authorization endpoint redirects with `error=access_denied`.
    pub deny: bool,
    /// Omit `S256` from the methods the server supports.
    pub no_pkce: bool,
    /// Accept client ids that are https URLs of client metadata documents (for any loopback
    /// redirect URI; a real server would fetch the document and check it lists the URI).
    pub metadata_documents: bool,
    /// The MCP endpoint lets `initialize` (and notifications) in without a token and answers
    /// `401` only from `tools/list` on, its challenge naming scope `mcp:read mcp:list`.
    pub list_only: bool,
    /// The authorization server takes only `client_secret_post`: registration issues a secret
    /// and says so, and the token endpoint refuses HTTP Basic for such a client.
    pub secret_post: bool,
    /// The 2025-03-26 layout: no protected resource metadata and no `resource_metadata` in
    /// the challenge; the authorization server is the server's origin, its metadata at
    /// `/.well-known/oauth-authorization-server` (with `legacy_metadata`) or none (the
    /// default endpoints `/authorize`, `/token`, `/register`).
    pub legacy: bool,
    /// With `legacy`: publish the origin's authorization server metadata.
    pub legacy_metadata: bool,
    /// With `legacy_metadata`: the origin's metadata names its issuer under a path (`/as`,
    /// its endpoints there), as the conformance suite's 2025-03-26 server does.
    pub legacy_issuer_path: bool,
    /// The `admin` tool answers `insufficient_scope` even to a token granted `mcp:admin`.
    pub refuse_admin: bool,
    /// Scopes the authorization endpoint never grants, whatever is asked.
    pub withhold: Vec<String>,
    /// What happened, one line per request (`register`, `authorize`, `token code`, `token
    /// refresh`, `mcp 401`, `mcp initialize`…).
    pub log: Vec<String>,
    /// Access tokens: token -> (expires at, unix s; scopes; resource).
    pub access: BTreeMap<String, (u64, Vec<String>, String)>,
    /// Refresh tokens: token -> (client id, scopes, resource).
    pub refresh: BTreeMap<String, (String, Vec<String>, String)>,
    /// Confidential clients that may use the client-credentials grant: id -> secret.
    pub confidential: BTreeMap<String, String>,
    /// Codes: code -> (client id, redirect URI, challenge, scopes, resource).
    codes: BTreeMap<String, (String, String, String, Vec<String>, String)>,
    /// Registered clients and their redirect URIs.
    clients: BTreeMap<String, Vec<String>>,
    /// Registered confidential clients' secrets (`secret_post`).
    secrets: BTreeMap<String, String>,
    counter: u32,
    /// The base URL (`http://127.0.0.1:PORT`).
    base: String,
}

impl Knobs {
    fn next(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}-{}", self.counter)
    }

    /// Expires every access token issued so far (refresh tokens stay good).
    pub fn expire_access(&mut self) {
        for (at, _, _) in self.access.values_mut() {
            *at = 0;
        }
    }

    /// Revokes every token (a new login is needed).
    pub fn revoke_all(&mut self) {
        self.access.clear();
        self.refresh.clear();
    }

    /// Lines of the log that start with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.log.iter().filter(|l| l.starts_with(prefix)).count()
    }
}

/// A running fixture.
pub struct OAuthFixture {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The MCP endpoint.
    pub mcp: String,
    /// The behaviour and what happened.
    pub knobs: Arc<Mutex<Knobs>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OAuthFixture {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

type Shared = Arc<Mutex<Knobs>>;

fn json_response(status: StatusCode, value: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn oauth_error(error: &str) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        json!({"error": error, "error_description": format!("the fixture refused: {error}")}),
    )
}

async fn resource_metadata(State(k): State<Shared>) -> Response {
    let k = k.lock().unwrap();
    if k.legacy {
        return StatusCode::NOT_FOUND.into_response();
    }
    let resource = if k.wrong_resource {
        format!("{}/other", k.base)
    } else {
        format!("{}/mcp", k.base)
    };
    json_response(
        StatusCode::OK,
        json!({"resource": resource, "authorization_servers": [format!("{}/as", k.base)],
               "scopes_supported": ["mcp:read", "mcp:admin"]}),
    )
}

async fn server_metadata(State(k): State<Shared>) -> Response {
    let k = k.lock().unwrap();
    if k.legacy {
        return StatusCode::NOT_FOUND.into_response();
    }
    metadata_at(&k, &format!("{}/as", k.base))
}

/// The 2025-03-26 metadata at the server's origin (with `legacy` and `legacy_metadata`).
async fn origin_metadata(State(k): State<Shared>) -> Response {
    let k = k.lock().unwrap();
    if !(k.legacy && k.legacy_metadata) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if k.legacy_issuer_path {
        return metadata_at(&k, &format!("{}/as", k.base));
    }
    metadata_at(&k, &k.base)
}

/// The authorization server metadata of issuer `issuer` (its endpoints under it).
fn metadata_at(k: &Knobs, issuer: &str) -> Response {
    let methods: Vec<&str> = if k.no_pkce {
        vec!["plain"]
    } else {
        vec!["S256"]
    };
    let mut metadata = json!({"issuer": issuer,
           "authorization_endpoint": format!("{issuer}/authorize"),
           "token_endpoint": format!("{issuer}/token"),
           "revocation_endpoint": format!("{issuer}/revoke"),
           "registration_endpoint": format!("{issuer}/register"),
           "code_challenge_methods_supported": methods,
           "client_id_metadata_document_supported": k.metadata_documents,
           "response_types_supported": ["code"]});
    if k.secret_post {
        metadata["token_endpoint_auth_methods_supported"] = json!(["client_secret_post"]);
    }
    json_response(StatusCode::OK, metadata)
}

async fn register(State(k): State<Shared>, body: String) -> Response {
    let metadata: Value = serde_json::from_str(&body).unwrap_or_default();
    let uris: Vec<String> = metadata["redirect_uris"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut k = k.lock().unwrap();
    let method = if k.secret_post {
        "client_secret_post"
    } else {
        "none"
    };
    if uris.is_empty() || metadata["token_endpoint_auth_method"] != method {
        k.log.push(format!(
            "register refused: method {}",
            metadata["token_endpoint_auth_method"]
        ));
        return oauth_error("invalid_client_metadata");
    }
    let id = k.next("client");
    k.clients.insert(id.clone(), uris.clone());
    k.log.push(format!("register {id}"));
    let mut answer = json!({"client_id": id, "redirect_uris": uris});
    if k.secret_post {
        let secret = k.next("secret");
        k.secrets.insert(id.clone(), secret.clone());
        answer["client_secret"] = json!(secret);
        answer["token_endpoint_auth_method"] = json!("client_secret_post");
    }
    json_response(StatusCode::CREATED, answer)
}

async fn authorize(State(k): State<Shared>, Query(q): Query<BTreeMap<String, String>>) -> Response {
    let mut k = k.lock().unwrap();
    let get = |n: &str| q.get(n).cloned().unwrap_or_default();
    let (client, redirect) = (get("client_id"), get("redirect_uri"));
    let registered = k
        .clients
        .get(&client)
        .is_some_and(|u| u.contains(&redirect))
        || (k.metadata_documents
            && client.starts_with("https://")
            && redirect.starts_with("http://127.0.0.1:"));
    if !registered {
        k.log
            .push("authorize refused: unknown client or redirect".into());
        return (StatusCode::BAD_REQUEST, "unknown client or redirect URI").into_response();
    }
    let resource = format!("{}/mcp", k.base);
    let problem = if get("response_type") != "code" {
        Some("unsupported_response_type")
    } else if get("code_challenge_method") != "S256" || get("code_challenge").len() != 43 {
        Some("invalid_request")
    } else if get("resource") != resource {
        Some("invalid_target")
    } else if k.deny {
        Some("access_denied")
    } else {
        None
    };
    let state = get("state");
    let location = if let Some(error) = problem {
        k.log.push(format!("authorize refused: {error}"));
        format!("{redirect}?error={error}&state={state}")
    } else {
        let code = k.next("code");
        let scopes = get("scope")
            .split_whitespace()
            .filter(|s| !k.withhold.iter().any(|w| w == s))
            .map(str::to_owned)
            .collect();
        k.codes.insert(
            code.clone(),
            (
                client,
                redirect.clone(),
                get("code_challenge"),
                scopes,
                resource,
            ),
        );
        k.log.push(format!("authorize scope={}", get("scope")));
        format!("{redirect}?code={code}&state={state}")
    };
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

fn issue(k: &mut Knobs, client: &str, scopes: Vec<String>, resource: String) -> Response {
    let refresh = k.next("rt");
    k.refresh.insert(
        refresh.clone(),
        (client.to_owned(), scopes.clone(), resource.clone()),
    );
    let mut answer = issue_access(k, &scopes, resource);
    answer["refresh_token"] = json!(refresh);
    json_response(StatusCode::OK, answer)
}

/// A new access token (no refresh token), as the token answer's JSON.
fn issue_access(k: &mut Knobs, scopes: &[String], resource: String) -> Value {
    let access = k.next("at");
    let lifetime = k.lifetime;
    k.access.insert(
        access.clone(),
        (now() + lifetime, scopes.to_vec(), resource),
    );
    json!({"access_token": access, "token_type": "Bearer", "expires_in": lifetime,
           "scope": scopes.join(" ")})
}

/// RFC 7009: forgets the token (access or refresh), whatever the hint; 200 either way.
async fn revoke(State(k): State<Shared>, body: String) -> Response {
    let form: BTreeMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let token = form.get("token").cloned().unwrap_or_default();
    let mut k = k.lock().unwrap();
    let known = k.access.remove(&token).is_some() | k.refresh.remove(&token).is_some();
    let hint = form.get("token_type_hint").cloned().unwrap_or_default();
    k.log.push(format!(
        "revoke {hint} {}",
        if known { "known" } else { "unknown" }
    ));
    StatusCode::OK.into_response()
}

async fn token(State(k): State<Shared>, headers: axum::http::HeaderMap, body: String) -> Response {
    let form: BTreeMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let get = |n: &str| form.get(n).cloned().unwrap_or_default();
    let mut k = k.lock().unwrap();
    // A client registered with a secret authenticates with it in the form, never HTTP Basic.
    if let Some(secret) = k.secrets.get(&get("client_id")).cloned() {
        let basic = headers.contains_key(axum::http::header::AUTHORIZATION);
        if basic || get("client_secret") != secret {
            k.log.push("token refused: not client_secret_post".into());
            return oauth_error("invalid_client");
        }
        k.log.push("token client_secret_post".into());
    }
    match get("grant_type").as_str() {
        "authorization_code" => {
            let Some((client, redirect, challenge, scopes, resource)) =
                k.codes.remove(&get("code"))
            else {
                k.log.push("token refused: unknown code".into());
                return oauth_error("invalid_grant");
            };
            let verified = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(get("code_verifier").as_bytes()))
                == challenge;
            if !verified
                || get("client_id") != client
                || get("redirect_uri") != redirect
                || get("resource") != resource
            {
                k.log
                    .push("token refused: pkce, client, redirect or resource".into());
                return oauth_error("invalid_grant");
            }
            k.log.push("token code".into());
            issue(&mut k, &client, scopes, resource)
        }
        "client_credentials" => {
            // HTTP Basic: `id:secret`.
            let basic = headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Basic "))
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .and_then(|b| String::from_utf8(b).ok())
                .unwrap_or_default();
            let (id, secret) = basic.split_once(':').unwrap_or_default();
            if k.confidential.get(id).map(String::as_str) != Some(secret) {
                k.log.push("token refused: client credentials".into());
                return oauth_error("invalid_client");
            }
            let expected = format!("{}/mcp", k.base);
            if get("resource") != expected {
                k.log
                    .push("token refused: client credentials resource".into());
                return oauth_error("invalid_target");
            }
            k.log.push("token client_credentials".into());
            let scopes: Vec<String> = get("scope").split_whitespace().map(str::to_owned).collect();
            // No refresh token for this grant: a new one is asked for instead.
            let answer = issue_access(&mut k, &scopes, get("resource"));
            json_response(StatusCode::OK, answer)
        }
        "refresh_token" => {
            let Some((client, scopes, resource)) = k.refresh.remove(&get("refresh_token")) else {
                k.log.push("token refused: unknown refresh token".into());
                return oauth_error("invalid_grant");
            };
            if get("client_id") != client || get("resource") != resource {
                k.log
                    .push("token refused: refresh client or resource".into());
                return oauth_error("invalid_grant");
            }
            k.log.push("token refresh".into());
            issue(&mut k, &client, scopes, resource)
        }
        _ => oauth_error("unsupported_grant_type"),
    }
}

async fn mcp(State(k): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let mut k = k.lock().unwrap();
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", k.base);
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let resource = format!("{}/mcp", k.base);
    let message: Value = serde_json::from_str(&body).unwrap_or_default();
    let method = message["method"].as_str().unwrap_or("-").to_owned();
    let open = k.list_only && (method == "initialize" || message.get("id").is_none());
    let scopes = match k.access.get(&token) {
        Some((at, scopes, r)) if *at > now() && *r == resource => scopes.clone(),
        _ if open => Vec::new(),
        _ => {
            k.log.push(format!("mcp 401 token={token}"));
            let scope = if k.list_only {
                "mcp:read mcp:list"
            } else {
                "mcp:read"
            };
            let challenge = if k.legacy {
                format!(r#"Bearer scope="{scope}""#)
            } else {
                format!(r#"Bearer resource_metadata="{metadata}", scope="{scope}""#)
            };
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, challenge)],
                "",
            )
                .into_response();
        }
    };
    k.log.push(format!("mcp {method} token={token}"));
    let result = match method.as_str() {
        "initialize" => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "guarded", "version": "1"}}),
        "tools/list" => json!({"tools": [
            {"name": "whoami", "description": "The token it was called with.", "inputSchema": {"type": "object"}},
            {"name": "admin", "description": "Needs scope mcp:admin.", "inputSchema": {"type": "object"}}
        ]}),
        "tools/call" if message["params"]["name"] == "admin" => {
            if k.refuse_admin || !scopes.iter().any(|s| s == "mcp:admin") {
                let challenge = format!(
                    r#"Bearer error="insufficient_scope", scope="mcp:read mcp:admin", resource_metadata="{metadata}""#
                );
                return (
                    StatusCode::FORBIDDEN,
                    [(header::WWW_AUTHENTICATE, challenge)],
                    "",
                )
                    .into_response();
            }
            json!({"content": [{"type": "text", "text": "admin ok"}]})
        }
        "tools/call" => json!({"content": [{"type": "text", "text": format!("token {token}")}]}),
        _ => return StatusCode::ACCEPTED.into_response(),
    };
    json_response(
        StatusCode::OK,
        json!({"jsonrpc": "2.0", "id": message["id"], "result": result}),
    )
}

impl OAuthFixture {
    /// Starts the fixture on a free loopback port (tokens live an hour).
    pub async fn start() -> OAuthFixture {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let knobs = Arc::new(Mutex::new(Knobs {
            lifetime: 3600,
            base: base.clone(),
            ..Knobs::default()
        }));
        let app = Router::new()
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-authorization-server/as",
                get(server_metadata),
            )
            .route("/as/register", post(register))
            .route("/as/authorize", get(authorize))
            .route("/as/token", post(token))
            .route("/as/revoke", post(revoke))
            // The 2025-03-26 layout (`legacy`): the origin is the authorization server.
            .route(
                "/.well-known/oauth-authorization-server",
                get(origin_metadata),
            )
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route(
                "/mcp",
                post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .with_state(knobs.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        OAuthFixture {
            mcp: format!("{base}/mcp"),
            base,
            knobs,
            task,
        }
    }

    /// What happened so far (a copy: the state is not held).
    pub fn log(&self) -> Vec<String> {
        self.knobs.lock().unwrap().log.clone()
    }

    /// How many lines of the log start with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.knobs.lock().unwrap().count(prefix)
    }

    /// The fixture's state, to change or read (do not hold it across another call).
    pub fn knobs(&self) -> std::sync::MutexGuard<'_, Knobs> {
        self.knobs.lock().unwrap()
    }
}

/// Plays the user's browser: opens the authorization address found in `said` (the line
/// after "open:"), and follows the authorization server's redirect to the client's loopback
/// address. Returns what the loopback page said.
pub async fn approve(said: &str) -> String {
    let url = said
        .lines()
        .find(|l| l.starts_with("http://") || l.starts_with("https://"))
        .unwrap_or_else(|| panic!("no address in {said:?}"))
        .trim()
        .to_owned();
    let location = http_get(&url).await.1;
    let location = location.unwrap_or_else(|| panic!("{url} did not redirect"));
    http_get(&location).await.0
}

/// A bare HTTP/1.1 GET: the body and the `Location` header.
async fn http_get(url: &str) -> (String, Option<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let parsed = url::Url::parse(url).unwrap();
    let host = format!(
        "{}:{}",
        parsed.host_str().unwrap(),
        parsed.port_or_known_default().unwrap()
    );
    let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    let target = match parsed.query() {
        Some(q) => format!("{}?{q}", parsed.path()),
        None => parsed.path().to_owned(),
    };
    let request = format!("GET {target} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let location = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("location")
            .then(|| value.trim().to_owned())
    });
    (body.to_owned(), location)
}
