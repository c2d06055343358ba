//! What every request to `cordis serve` must pass: a `Host` naming the loopback address it
//! listens on (a DNS-rebinding page reaches it under another name and is refused), an `Origin`,
//! when a browser sends one, of that same address, the token for anything under `/api/` (the
//! page gets it from the URL `cordis serve` printed), and JSON for every `POST`.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The header the page sends the token in (`EventSource` cannot set headers: it passes
/// `?token=` instead).
pub const TOKEN_HEADER: &str = "x-cordis-token";

/// What the guard checks requests against.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The token the URL carries.
    pub token: String,
    /// The port the server listens on (on 127.0.0.1).
    pub port: u16,
}

impl Guard {
    /// The hosts a request may name: the loopback address and `localhost`, on our port.
    fn host_ok(&self, host: &str) -> bool {
        host == format!("127.0.0.1:{}", self.port) || host == format!("localhost:{}", self.port)
    }

    fn origin_ok(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|host| self.host_ok(host))
    }

    /// The token of a request: its header, else its `token` query parameter.
    fn token_of<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Option<&'a str> {
        headers
            .get(TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .or_else(|| {
                query?
                    .split('&')
                    .find_map(|pair| pair.strip_prefix("token="))
            })
    }

    /// The refusal of a request, if it is refused.
    pub fn check(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Option<(StatusCode, &'static str)> {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        if !host.is_some_and(|h| self.host_ok(h)) {
            return Some((
                StatusCode::FORBIDDEN,
                "this server answers only its own loopback address (the Host header names another)",
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN)
            && !origin.to_str().is_ok_and(|o| self.origin_ok(o))
        {
            return Some((
                StatusCode::FORBIDDEN,
                "requests from other origins are refused",
            ));
        }
        if path.starts_with("/api/")
            && !Self::token_of(headers, query)
                .is_some_and(|t| same(t.as_bytes(), self.token.as_bytes()))
        {
            return Some((
                StatusCode::UNAUTHORIZED,
                "open the URL `cordis serve` printed: it carries the token",
            ));
        }
        if method == Method::POST {
            let json = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
            if !json {
                return Some((
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "POST takes application/json only",
                ));
            }
        }
        None
    }
}

/// Equal in time independent of where they differ (a token compared byte by byte must not tell
/// how much of a guess was right).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The middleware: refuses what [`Guard::check`] refuses, with the reason as text.
pub async fn guard(
    State(guard): State<std::sync::Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let uri = request.uri().clone();
    if let Some((status, why)) =
        guard.check(request.method(), uri.path(), uri.query(), request.headers())
    {
        return (status, why).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn host_origin_token_and_content_type_are_each_required() {
        let g = Guard {
            token: "t0k".into(),
            port: 8080,
        };
        let ok = headers(&[("host", "127.0.0.1:8080"), (TOKEN_HEADER, "t0k")]);
        assert_eq!(g.check(&Method::GET, "/api/composition", None, &ok), None);
        assert_eq!(
            g.check(
                &Method::GET,
                "/api/events",
                Some("token=t0k"),
                &headers(&[("host", "localhost:8080")])
            ),
            None
        );
        let code = |m: &Method, p: &str, q: Option<&str>, h: &HeaderMap| {
            g.check(m, p, q, h).map(|(c, _)| c)
        };
        assert_eq!(
            code(
                &Method::GET,
                "/api/composition",
                None,
                &headers(&[("host", "evil.example:8080"), (TOKEN_HEADER, "t0k")])
            ),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            code(
                &Method::GET,
                "/api/composition",
                None,
                &headers(&[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://evil.example"),
                    (TOKEN_HEADER, "t0k")
                ])
            ),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            code(
                &Method::GET,
                "/api/composition",
                None,
                &headers(&[("host", "127.0.0.1:8080")])
            ),
            Some(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            code(
                &Method::GET,
                "/api/composition",
                None,
                &headers(&[("host", "127.0.0.1:8080"), (TOKEN_HEADER, "t0x")])
            ),
            Some(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            code(
                &Method::POST,
                "/api/diff",
                None,
                &headers(&[
                    ("host", "127.0.0.1:8080"),
                    (TOKEN_HEADER, "t0k"),
                    ("content-type", "application/x-www-form-urlencoded")
                ])
            ),
            Some(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            code(
                &Method::POST,
                "/api/diff",
                None,
                &headers(&[
                    ("host", "127.0.0.1:8080"),
                    (TOKEN_HEADER, "t0k"),
                    ("content-type", "application/json; charset=utf-8")
                ])
            ),
            None
        );
        // The page itself carries no data: no token needed, the host still checked.
        assert_eq!(
            code(
                &Method::GET,
                "/",
                None,
                &headers(&[("host", "127.0.0.1:8080")])
            ),
            None
        );
    }
}
