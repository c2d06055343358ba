//! Finding who authorizes a server: its `WWW-Authenticate` challenge, its protected resource
//! metadata (RFC 9728) and its authorization server's metadata (RFC 8414, or OpenID Connect
//! discovery), each checked before anything is sent to it.

use serde::Deserialize;
use url::Url;

use super::{AuthError, MAX_AUTH_BODY, read_json};

/// The parameters of a `Bearer` challenge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the server's protected resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs, space-separated.
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`…
    pub error: Option<String>,
}

impl Challenge {
    /// The scopes the challenge names.
    pub fn scopes(&self) -> Vec<String> {
        self.scope
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }
}

/// The `Bearer` challenge among a `WWW-Authenticate` header's, if there is one.
///
/// A header holds one or more challenges (`Scheme param=value, param="quoted", Other …`); a
/// token that is not followed by `=` starts the next one.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let mut rest = header.trim();
    let mut challenge: Option<Challenge> = None;
    let mut in_bearer = false;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([' ', ',', '\t']);
        let token_end = rest
            .find(|c: char| c == '=' || c == ',' || c.is_whitespace())
            .unwrap_or(rest.len());
        let token = &rest[..token_end];
        let after = rest[token_end..].trim_start();
        if let Some(value_part) = after.strip_prefix('=') {
            let value_part = value_part.trim_start();
            let (value, next) = if let Some(quoted) = value_part.strip_prefix('"') {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, escaped)) = chars.next() {
                                value.push(escaped);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                (value, &quoted[end.min(quoted.len())..])
            } else {
                let end = value_part.find(',').unwrap_or(value_part.len());
                (value_part[..end].trim().to_owned(), &value_part[end..])
            };
            if in_bearer && let Some(c) = challenge.as_mut() {
                match token.to_ascii_lowercase().as_str() {
                    "resource_metadata" => c.resource_metadata = Some(value),
                    "scope" => c.scope = Some(value),
                    "error" => c.error = Some(value),
                    _ => {}
                }
            }
            rest = next;
        } else {
            if token.is_empty() {
                break;
            }
            // A new scheme.
            in_bearer = token.eq_ignore_ascii_case("bearer");
            if in_bearer && challenge.is_none() {
                challenge = Some(Challenge::default());
            }
            rest = after;
        }
    }
    challenge
}

/// Whether `url` may carry credentials: `https`, or `http` to this machine only.
pub fn is_safe(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// Parses `text` as a URL that may carry credentials (see [`is_safe`]); `what` names it.
pub fn safe_url(text: &str, what: &str) -> Result<Url, AuthError> {
    let url = Url::parse(text).map_err(|e| AuthError::Discovery {
        reason: format!("{what} {text:?} is not a URL: {e}"),
    })?;
    if !is_safe(&url) {
        return Err(AuthError::Discovery {
            reason: format!(
                "{what} {text} is not https (plain http is accepted only to this machine)"
            ),
        });
    }
    Ok(url)
}

/// A server's protected resource metadata (RFC 9728), the fields used.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProtectedResource {
    /// The resource the metadata is for.
    pub resource: String,
    /// Who issues tokens for it.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes it knows.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
}

/// An authorization server's metadata (RFC 8414 / OpenID Connect), the fields used.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AuthServer {
    /// Its issuer identifier (the one its metadata was asked for; under the 2025-03-26
    /// discovery, any on the server's origin).
    pub issuer: String,
    /// Where the user authorizes.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens become tokens.
    pub token_endpoint: String,
    /// Dynamic client registration (RFC 7591), when offered.
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// Token revocation (RFC 7009), when offered.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// PKCE methods; `S256` is required.
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
    /// Whether a client id may be the URL of its metadata document.
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    /// Scopes it knows.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// How clients may authenticate at its token endpoint (RFC 8414; absent means
    /// `client_secret_basic`).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Vec<String>,
}

impl AuthServer {
    /// The token endpoint authentication a client with a secret uses: `client_secret_basic`
    /// unless the server lists only `client_secret_post` of the two.
    pub fn secret_method(&self) -> &'static str {
        let listed = |m: &str| {
            self.token_endpoint_auth_methods_supported
                .iter()
                .any(|x| x == m)
        };
        if listed("client_secret_post") && !listed("client_secret_basic") {
            "client_secret_post"
        } else {
            "client_secret_basic"
        }
    }
}

/// `url` without its query and fragment, and without a trailing `/` unless it is the root.
fn canonical(url: &Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.set_fragment(None);
    let text = url.to_string();
    match text.strip_suffix('/') {
        Some(stripped) if url.path() != "/" => stripped.to_owned(),
        _ => text,
    }
}

/// Whether the metadata's `resource` covers the server at `server`: same origin, and the
/// server's path is the resource's or under it.
pub fn covers(resource: &Url, server: &Url) -> bool {
    if resource.origin() != server.origin() {
        return false;
    }
    let base = resource.path().trim_end_matches('/');
    let path = server.path();
    path == base || path.starts_with(&format!("{base}/")) || base.is_empty()
}

/// Who authorizes the server at `server`: its protected resource metadata and that names'
/// authorization server; for a server that publishes none (and whose challenge names none),
/// the 2025-03-26 way: the authorization server is the server's origin, its metadata at
/// `/.well-known/oauth-authorization-server` there, else the default endpoints `/authorize`,
/// `/token` and `/register`.
///
/// # Errors
/// Metadata that is wrong (another resource, no PKCE, unsafe endpoints) or unreadable.
pub async fn discover(
    client: &reqwest::Client,
    server: &Url,
    challenge: Option<&Challenge>,
) -> Result<(ProtectedResource, AuthServer), AuthError> {
    match find_protected_resource(client, server, challenge).await? {
        Ok(resource) => {
            let issuer = resource.authorization_servers[0].clone();
            let metadata = authorization_server(client, &issuer).await?;
            Ok((resource, metadata))
        }
        Err(_) => legacy(client, server).await,
    }
}

/// The 2025-03-26 discovery: the server's origin is its authorization server.
async fn legacy(
    client: &reqwest::Client,
    server: &Url,
) -> Result<(ProtectedResource, AuthServer), AuthError> {
    let origin = server.origin().ascii_serialization();
    let resource = ProtectedResource {
        resource: canonical(server),
        authorization_servers: vec![origin.clone()],
        scopes_supported: Vec::new(),
    };
    let metadata = match metadata_of(client, &origin, Issuer::SameOrigin).await {
        Ok(metadata) => metadata,
        Err(AuthError::Discovery { reason }) if reason.starts_with("no authorization server") => {
            AuthServer {
                issuer: origin.clone(),
                authorization_endpoint: format!("{origin}/authorize"),
                token_endpoint: format!("{origin}/token"),
                registration_endpoint: Some(format!("{origin}/register")),
                revocation_endpoint: None,
                // The 2025-03-26 revision requires PKCE of every client and server.
                code_challenge_methods_supported: vec!["S256".into()],
                client_id_metadata_document_supported: false,
                scopes_supported: Vec::new(),
                token_endpoint_auth_methods_supported: Vec::new(),
            }
        }
        Err(e) => return Err(e),
    };
    Ok((resource, metadata))
}

/// The protected resource metadata of the server at `server` (from the challenge's
/// `resource_metadata`, else the well-known addresses, path-aware first, then the root), or
/// the addresses tried when there is none and the challenge named none.
///
/// # Errors
/// Metadata naming another resource or no authorization server, or none where the challenge
/// said it is.
async fn find_protected_resource(
    client: &reqwest::Client,
    server: &Url,
    challenge: Option<&Challenge>,
) -> Result<Result<ProtectedResource, Vec<String>>, AuthError> {
    let named = challenge.and_then(|c| c.resource_metadata.as_deref());
    let mut candidates = Vec::new();
    if let Some(url) = named {
        candidates.push(safe_url(url, "the resource metadata address")?);
    } else {
        let path = server.path().trim_end_matches('/');
        let mut at = |suffix: &str| {
            let mut url = server.clone();
            url.set_query(None);
            url.set_fragment(None);
            url.set_path(&format!("/.well-known/oauth-protected-resource{suffix}"));
            candidates.push(url);
        };
        if !path.is_empty() {
            at(path);
        }
        at("");
    }
    let mut tried = Vec::new();
    for url in candidates {
        match read_json::<ProtectedResource>(client, &url, MAX_AUTH_BODY).await? {
            Some(metadata) => {
                let resource =
                    Url::parse(&metadata.resource).map_err(|e| AuthError::Discovery {
                        reason: format!("{url} names resource {:?}: {e}", metadata.resource),
                    })?;
                if !covers(&resource, server) {
                    return Err(AuthError::WrongResource {
                        metadata: url.to_string(),
                        resource: metadata.resource,
                        server: canonical(server),
                    });
                }
                if metadata.authorization_servers.is_empty() {
                    return Err(AuthError::Discovery {
                        reason: format!("{url} names no authorization server"),
                    });
                }
                return Ok(Ok(metadata));
            }
            None => tried.push(url.to_string()),
        }
    }
    if named.is_some() {
        // The challenge named its metadata: no guessing past what the server said.
        return Err(AuthError::Discovery {
            reason: format!(
                "the server's challenge names resource metadata at {} but there is none",
                tried.join(", ")
            ),
        });
    }
    Ok(Err(tried))
}

/// The metadata of the authorization server `issuer`: RFC 8414 and OpenID Connect addresses,
/// path-aware (`/.well-known/oauth-authorization-server/tenant`, then
/// `/.well-known/openid-configuration/tenant`, then `/tenant/.well-known/openid-configuration`).
///
/// # Errors
/// None found, an issuer that is not the one asked for, plain-http endpoints to another
/// machine, or no PKCE with `S256`.
pub async fn authorization_server(
    client: &reqwest::Client,
    issuer: &str,
) -> Result<AuthServer, AuthError> {
    metadata_of(client, issuer, Issuer::Named).await
}

/// Which `issuer` the metadata found at an address may say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Issuer {
    /// The one asked for (RFC 8414 §3.3): an issuer named by the resource metadata.
    Named,
    /// Any on the same origin: the 2025-03-26 discovery, where nobody named the issuer and
    /// the server's origin serves the metadata (which may name its issuer under a path).
    SameOrigin,
}

/// [`authorization_server`] with the issuer rule `rule`.
async fn metadata_of(
    client: &reqwest::Client,
    issuer: &str,
    rule: Issuer,
) -> Result<AuthServer, AuthError> {
    let issuer_url = safe_url(issuer, "the authorization server")?;
    let path = issuer_url.path().trim_end_matches('/').to_owned();
    let with_path = |p: String| {
        let mut url = issuer_url.clone();
        url.set_query(None);
        url.set_fragment(None);
        url.set_path(&p);
        url
    };
    let candidates = if path.is_empty() {
        vec![
            with_path("/.well-known/oauth-authorization-server".into()),
            with_path("/.well-known/openid-configuration".into()),
        ]
    } else {
        vec![
            with_path(format!("/.well-known/oauth-authorization-server{path}")),
            with_path(format!("/.well-known/openid-configuration{path}")),
            with_path(format!("{path}/.well-known/openid-configuration")),
        ]
    };
    let mut tried = Vec::new();
    for url in candidates {
        let Some(metadata) = read_json::<AuthServer>(client, &url, MAX_AUTH_BODY).await? else {
            tried.push(url.to_string());
            continue;
        };
        let same_origin =
            Url::parse(&metadata.issuer).is_ok_and(|said| said.origin() == issuer_url.origin());
        let named = metadata.issuer.trim_end_matches('/') == issuer.trim_end_matches('/');
        let taken = named || (rule == Issuer::SameOrigin && same_origin);
        if !taken {
            return Err(AuthError::Discovery {
                reason: format!(
                    "{url} says its issuer is {:?}, not {issuer:?} (refused: metadata of another server)",
                    metadata.issuer
                ),
            });
        }
        safe_url(
            &metadata.authorization_endpoint,
            "the authorization endpoint",
        )?;
        safe_url(&metadata.token_endpoint, "the token endpoint")?;
        if let Some(registration) = &metadata.registration_endpoint {
            safe_url(registration, "the registration endpoint")?;
        }
        if let Some(revocation) = &metadata.revocation_endpoint {
            safe_url(revocation, "the revocation endpoint")?;
        }
        if !metadata
            .code_challenge_methods_supported
            .iter()
            .any(|m| m == "S256")
        {
            return Err(AuthError::Discovery {
                reason: format!(
                    "{issuer} does not support PKCE with S256 (code_challenge_methods_supported: {:?}); cordis will not authorize without it",
                    metadata.code_challenge_methods_supported
                ),
            });
        }
        return Ok(metadata);
    }
    Err(AuthError::Discovery {
        reason: format!(
            "no authorization server metadata for {issuer} (tried {})",
            tried.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_are_read_among_others_quoted_or_not() {
        let c = parse_challenge(
            r#"Basic realm="x", Bearer error="insufficient_scope", scope="a b", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scopes(), ["a", "b"]);
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        let c = parse_challenge(r#"bearer scope=read, error=invalid_token"#).unwrap();
        assert_eq!(c.scopes(), ["read"]);
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(parse_challenge("Bearer"), Some(Challenge::default()));
        assert_eq!(parse_challenge(r#"Basic realm="x""#), None);
        // Escapes in quoted strings; parameters of a later scheme are not the bearer's.
        let c = parse_challenge(r#"Bearer scope="a\"b", DPoP scope="z""#).unwrap();
        assert_eq!(c.scope.as_deref(), Some("a\"b"));
        // Whatever the bytes, no panic.
        for text in [
            "=",
            "Bearer =",
            "Bearer a=\"",
            ",,,",
            "Bearer a=\"\\",
            "\u{e9}=\u{e9}",
        ] {
            let _ = parse_challenge(text);
        }
    }

    #[test]
    fn credentials_go_to_https_or_this_machine_only() {
        let ok = |u: &str| is_safe(&Url::parse(u).unwrap());
        assert!(ok("https://example.com/mcp"));
        assert!(ok("http://127.0.0.1:8080/mcp"));
        assert!(ok("http://localhost/mcp"));
        assert!(ok("http://[::1]:9/x"));
        assert!(!ok("http://example.com/mcp"));
        assert!(!ok("http://10.0.0.1/mcp"));
        assert!(!ok("ftp://127.0.0.1/x"));
    }

    #[test]
    fn a_resource_covers_its_own_path_and_below_on_its_origin_only() {
        let covers = |r: &str, s: &str| covers(&Url::parse(r).unwrap(), &Url::parse(s).unwrap());
        assert!(covers("https://h/mcp", "https://h/mcp"));
        assert!(covers("https://h/", "https://h/mcp"));
        assert!(covers("https://h/api/", "https://h/api/mcp"));
        assert!(!covers("https://h/mcp", "https://h/mcpx"));
        assert!(!covers("https://h/other", "https://h/mcp"));
        assert!(!covers("https://evil/mcp", "https://h/mcp"));
        assert!(!covers("http://h/mcp", "https://h/mcp"));
    }
}
