//! Capabilities an entry grants its guest, and the check of a component's imports against them.
//!
//! Nothing is granted by default. `capabilities` in a wasm entry's config:
//!
//! | key | grants | WASI 0.2 interfaces it allows |
//! | --- | --- | --- |
//! | `workspace: read` / `write` | a preopen of the workspace root only (`/`), read-only or read-write | `wasi:filesystem/*` |
//! | `env: [NAMES]` | the listed variables (those set), nothing else | `wasi:cli/environment` |
//! | `clock: true` | wall and monotonic clocks | `wasi:clocks/*` |
//! | `random: true` | random bytes (seeded under a seeded schedule) | `wasi:random/*` |
//! | `network: {allow: [HOSTS]}` | requests the host performs, to the listed hosts only ([`Network`]) | `cordis:plugin/http` |
//!
//! Always allowed, because they carry no authority: `cordis:plugin/log@0.1.x`, `wasi:io/*`
//! (streams and polling of what was granted), `wasi:cli/{stdin,stdout,stderr,exit}` and the
//! `terminal-*` interfaces (stdin is empty, stdout and stderr lines go to the host's log, exit traps).
//!
//! A component importing anything else is refused **at load**, naming the import and the grant
//! that would allow it, so a guest never finds out at call time that it has less than it asked.
//!
//! # Effects come from capabilities
//! What a guest's calls can change is decided by what its entry grants, not by the effect its
//! `describe` declares: a guest granted `workspace: write` can write files whatever its tools
//! say, so each of its tools is at least [`Effect::Edit`] for approvals (a grant of network at
//! least [`Effect::Network`]). A declared effect can only make a tool more cautious
//! ([`Capabilities::effect_of`]).
//!
//! # The network is mediated
//! A guest never gets a socket (`wasi:sockets` is refused whatever is granted). An entry
//! granting `network` lets it import `cordis:plugin/http`, whose `fetch` the host performs
//! (`crate::http`) only when the URL's host and port are on `network.allow`, re-checking every
//! redirect hop, within the bounds [`Network`] names.

use cordis_tools::Effect;
use serde::{Deserialize, Serialize};

/// Access to the workspace root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsAccess {
    /// Read files and list directories under the root.
    Read,
    /// Also create, write and remove them.
    Write,
}

/// What an entry grants its guest (none by default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// A preopen of the workspace root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<FsAccess>,
    /// The environment variables the guest may see (an empty list grants the interface with
    /// no variables, for runtimes that always import it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    /// Wall and monotonic clocks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clock: bool,
    /// Random bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub random: bool,
    /// Requests the host performs for the guest, to the listed hosts only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
}

/// Requests per call when `network.max_requests` is not set (each redirect hop is one).
pub const DEFAULT_MAX_REQUESTS: u32 = 8;
/// Bytes of one response body when `network.max_response_bytes` is not set (1 MiB).
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 1 << 20;
/// One request's deadline when `network.timeout_ms` is not set, in milliseconds.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 10_000;

/// `capabilities.network`: the hosts a guest's requests may reach, and the bounds of its
/// requests. The host performs each request (`cordis:plugin/http`); the guest never holds a
/// socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// The hosts requests may reach (see [`Allowed`]); an empty list grants the import and
    /// refuses every request.
    pub allow: Vec<Allowed>,
    /// Requests per call, redirect hops included (default [`DEFAULT_MAX_REQUESTS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
    /// Bytes of one response body (default [`DEFAULT_MAX_RESPONSE_BYTES`]); a longer one fails
    /// the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<u64>,
    /// Each request's deadline in milliseconds (each redirect hop is a request; default
    /// [`DEFAULT_REQUEST_TIMEOUT_MS`]); never later than the call's own deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl Network {
    /// Requests per call.
    pub fn max_requests(&self) -> u32 {
        self.max_requests.unwrap_or(DEFAULT_MAX_REQUESTS)
    }

    /// Bytes of one response body.
    pub fn max_response_bytes(&self) -> u64 {
        self.max_response_bytes
            .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES)
    }

    /// One request's deadline.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms.unwrap_or(DEFAULT_REQUEST_TIMEOUT_MS))
    }

    /// Whether a request to `host` (lower case, as a URL holds it; IPv6 in brackets) on `port`
    /// (the URL's, or its scheme's default) is allowed.
    pub fn allows(&self, host: &str, port: u16, default_port: u16) -> bool {
        self.allow
            .iter()
            .any(|a| a.matches(host, port, default_port))
    }

    /// The allowlist as written, for messages: `127.0.0.1:8080, api.example.com`.
    pub fn listed(&self) -> String {
        if self.allow.is_empty() {
            return "nothing".to_owned();
        }
        self.allow
            .iter()
            .map(Allowed::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One entry of `network.allow`: `HOST` (that host on its scheme's default port: 80 for
/// `http`, 443 for `https`), `HOST:PORT` (that port only, either scheme), or `*.DOMAIN` (any
/// name under the domain, not the domain itself; with or without `:PORT`). A host is a name or
/// an IP address (IPv6 in brackets: `[::1]:8080`), compared with the URL's host as written
/// (never by what a name resolves to). No scheme, path or user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The host, lower case; for a wildcard, the domain without `*.`.
    host: String,
    /// Any subdomain of `host`.
    wildcard: bool,
    /// The port; `None`: the scheme's default.
    port: Option<u16>,
}

impl Allowed {
    /// Parses an allowlist entry.
    ///
    /// # Errors
    /// Why `text` is not an entry (naming the form expected).
    pub fn parse(text: &str) -> Result<Allowed, String> {
        let bad = |why: &str| {
            format!(
                "network.allow entry {text:?} {why} (expected HOST, HOST:PORT or *.DOMAIN[:PORT], without scheme or path)"
            )
        };
        if text.contains("://") || text.contains(['/', '@', '?', '#']) {
            return Err(bad("is not a host"));
        }
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (addr, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("has no closing `]`"))?;
            let addr = addr
                .parse::<std::net::Ipv6Addr>()
                .map_err(|_| bad("is not an IPv6 address"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("is not a host"))?),
            };
            // The form a URL's host takes (RFC 5952), so the comparison is of equals.
            (format!("[{addr}]"), port)
        } else {
            match text.rsplit_once(':') {
                Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
                None => (text.to_ascii_lowercase(), None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("has no port 1 to 65535 after `:`"))?,
            ),
        };
        let (wildcard, name) = match host.strip_prefix("*.") {
            Some(domain) => (true, domain.to_owned()),
            None => (false, host),
        };
        let label = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        if !name.starts_with('[') && (name.len() > 253 || !name.split('.').all(label)) {
            return Err(bad("is not a host name or address"));
        }
        Ok(Allowed {
            host: name,
            wildcard,
            port,
        })
    }

    fn matches(&self, host: &str, port: u16, default_port: u16) -> bool {
        let host_ok = if self.wildcard {
            host.strip_suffix(self.host.as_str())
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.'))
        } else {
            host == self.host
        };
        host_ok && port == self.port.unwrap_or(default_port)
    }
}

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        f.write_str(&self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

impl Serialize for Allowed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Allowed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Allowed, D::Error> {
        let text = String::deserialize(d)?;
        Allowed::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Capabilities {
    /// True when the guest needs WASI at all (the host links it only then).
    pub fn any(&self) -> bool {
        self.workspace.is_some() || self.env.is_some() || self.clock || self.random
    }

    /// The least effect a tool of a guest granted these capabilities has: what the grants let
    /// it change (`workspace: write` edits files; network reaches it), whatever it declares.
    /// Reading the workspace, variables, clocks or randomness changes nothing.
    pub fn least_effect(&self) -> Effect {
        if self.network.is_some() {
            Effect::Network
        } else if self.workspace == Some(FsAccess::Write) {
            Effect::Edit
        } else {
            Effect::Read
        }
    }

    /// The effect a tool declaring `declared` has under these grants: the more cautious of the
    /// two ([`Effect`]'s order runs from `read` to `unknown`), so a declaration can raise the
    /// effect the grants imply but never lower it.
    pub fn effect_of(&self, declared: Effect) -> Effect {
        declared.max(self.least_effect())
    }
}

/// A component import name split up: `wasi:filesystem/types@0.2.3` →
/// (`wasi`, `filesystem`, `types`, `0.2.3`).
fn split(import: &str) -> Option<(&str, &str, &str, &str)> {
    let (namespace, rest) = import.split_once(':')?;
    let (package, rest) = rest.split_once('/')?;
    let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
    Some((namespace, package, interface, version))
}

/// Whether `version` is 0.2.x (what the linked WASI implements).
fn wasi_p2(version: &str) -> bool {
    version.strip_prefix("0.2.").is_some_and(|patch| {
        patch
            .split(['-', '+'])
            .next()
            .is_some_and(|p| p.parse::<u32>().is_ok())
    })
}

/// Checks one import of a component against `grants`.
///
/// # Errors
/// Why the import is refused, and how to grant it if it can be granted.
pub fn check_import(import: &str, grants: &Capabilities) -> Result<(), String> {
    let Some((namespace, package, interface, version)) = split(import) else {
        return Err(
            "which is not an interface of cordis:plugin nor of WASI 0.2; nothing can grant it"
                .to_owned(),
        );
    };
    if namespace == "cordis" && package == "plugin" {
        return if interface == "log" && crate::guest::accepts(version) {
            Ok(())
        } else if interface == "http" && crate::guest::accepts(version) {
            if grants.network.is_some() {
                Ok(())
            } else {
                Err("which its entry does not grant (grant it with `capabilities: {network: {allow: [HOST:PORT]}}` in the entry's config)".to_owned())
            }
        } else {
            Err(format!(
                "which this host does not provide (it provides cordis:plugin/log@{0} and cordis:plugin/http@{0})",
                crate::guest::WORLD_VERSION
            ))
        };
    }
    if namespace != "wasi" {
        return Err(
            "which is not an interface of cordis:plugin nor of WASI 0.2; nothing can grant it"
                .to_owned(),
        );
    }
    if !wasi_p2(version) {
        return Err(format!(
            "but only WASI 0.2.x is provided (found version \"{version}\")"
        ));
    }
    let (granted, grant) = match (package, interface) {
        ("io", _) => (true, ""),
        ("cli", "stdin" | "stdout" | "stderr" | "exit") => (true, ""),
        ("cli", i) if i.starts_with("terminal-") => (true, ""),
        ("cli", "environment") => (grants.env.is_some(), "capabilities: {env: [NAMES]}"),
        ("filesystem", _) => (
            grants.workspace.is_some(),
            "capabilities: {workspace: read} (or write)",
        ),
        ("clocks", _) => (grants.clock, "capabilities: {clock: true}"),
        ("random", _) => (grants.random, "capabilities: {random: true}"),
        ("sockets", _) => {
            return Err(
                "but wasm guests get no sockets (nothing can grant it); the network is reached through cordis:plugin/http, granted by `capabilities: {network: {allow: [HOST:PORT]}}`".to_owned(),
            );
        }
        _ => {
            return Err("which this host does not provide to guests".to_owned());
        }
    };
    if granted {
        Ok(())
    } else {
        Err(format!(
            "which its entry does not grant (grant it with `{grant}` in the entry's config)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_granted_by_default_and_each_grant_opens_only_its_interfaces() {
        let none = Capabilities::default();
        assert!(check_import("cordis:plugin/log@0.1.0", &none).is_ok());
        assert!(check_import("cordis:plugin/log@0.1.7", &none).is_ok());
        assert!(check_import("wasi:io/streams@0.2.3", &none).is_ok());
        assert!(check_import("wasi:cli/stderr@0.2.0", &none).is_ok());
        for refused in [
            "wasi:filesystem/preopens@0.2.0",
            "wasi:cli/environment@0.2.0",
            "wasi:clocks/wall-clock@0.2.0",
            "wasi:random/random@0.2.0",
        ] {
            let why = check_import(refused, &none).unwrap_err();
            assert!(why.contains("does not grant"), "{refused}: {why}");
        }
        let clock = Capabilities {
            clock: true,
            ..Capabilities::default()
        };
        assert!(check_import("wasi:clocks/monotonic-clock@0.2.0", &clock).is_ok());
        assert!(check_import("wasi:random/random@0.2.0", &clock).is_err());
    }

    #[test]
    fn a_declared_effect_can_raise_but_never_lower_what_the_grants_imply() {
        let write = Capabilities {
            workspace: Some(FsAccess::Write),
            ..Capabilities::default()
        };
        assert_eq!(write.effect_of(Effect::Read), Effect::Edit);
        assert_eq!(write.effect_of(Effect::State), Effect::Edit);
        assert_eq!(write.effect_of(Effect::Dispatch), Effect::Edit);
        assert_eq!(write.effect_of(Effect::Execute), Effect::Execute);
        assert_eq!(write.effect_of(Effect::Unknown), Effect::Unknown);
        let network = Capabilities {
            network: Some(serde_json::from_value(serde_json::json!({"allow": []})).unwrap()),
            ..write.clone()
        };
        assert_eq!(network.effect_of(Effect::Read), Effect::Network);
        assert_eq!(network.effect_of(Effect::Edit), Effect::Network);
        let read_only = Capabilities {
            workspace: Some(FsAccess::Read),
            env: Some(vec!["HOME".to_owned()]),
            clock: true,
            random: true,
            network: None,
        };
        assert_eq!(read_only.effect_of(Effect::Read), Effect::Read);
        assert_eq!(read_only.effect_of(Effect::Edit), Effect::Edit);
    }

    #[test]
    fn network_foreign_and_wrong_versions_are_refused_whatever_is_granted() {
        let all = Capabilities {
            workspace: Some(FsAccess::Write),
            env: Some(vec![]),
            clock: true,
            random: true,
            network: None,
        };
        assert!(
            check_import("wasi:sockets/tcp@0.2.0", &all)
                .unwrap_err()
                .contains("no sockets")
        );
        let why = check_import("cordis:plugin/http@0.1.1", &all).unwrap_err();
        assert!(why.contains("does not grant"), "{why}");
        assert!(why.contains("network: {allow:"), "{why}");
        assert!(
            check_import("wasi:random/random@0.3.0", &all)
                .unwrap_err()
                .contains("0.2.x")
        );
        assert!(
            check_import("acme:evil/steal@1.0.0", &all)
                .unwrap_err()
                .contains("nothing can grant")
        );
        assert!(check_import("cordis:plugin/log@0.2.0", &all).is_err());
        let granted = Capabilities {
            network: Some(Network {
                allow: Vec::new(),
                max_requests: None,
                max_response_bytes: None,
                timeout_ms: None,
            }),
            ..Capabilities::default()
        };
        assert!(check_import("cordis:plugin/http@0.1.1", &granted).is_ok());
        assert!(check_import("cordis:plugin/http@0.1.0", &granted).is_ok());
        assert!(check_import("cordis:plugin/http@0.2.0", &granted).is_err());
        assert!(check_import("wasi:sockets/tcp@0.2.0", &granted).is_err());
        let typo = serde_json::from_value::<Capabilities>(serde_json::json!({"radnom": true}));
        assert!(
            typo.unwrap_err()
                .to_string()
                .contains("unknown field `radnom`")
        );
    }

    #[test]
    fn an_allowlist_entry_is_a_host_with_an_optional_port_or_a_wildcard_domain() {
        let network: Network = serde_json::from_value(serde_json::json!({
            "allow": ["127.0.0.1:8080", "API.example.com", "*.cdn.example.org:8443", "[0:0::1]:9"]
        }))
        .unwrap();
        assert_eq!(
            network.listed(),
            "127.0.0.1:8080, api.example.com, *.cdn.example.org:8443, [::1]:9"
        );
        assert!(network.allows("127.0.0.1", 8080, 80));
        assert!(!network.allows("127.0.0.1", 8081, 80), "another port");
        assert!(!network.allows("127.0.0.2", 8080, 80), "another host");
        assert!(network.allows("api.example.com", 443, 443), "https default");
        assert!(network.allows("api.example.com", 80, 80), "http default");
        assert!(
            !network.allows("api.example.com", 8080, 80),
            "a host alone is its default port"
        );
        assert!(!network.allows("evil-api.example.com", 443, 443));
        assert!(network.allows("a.cdn.example.org", 8443, 443));
        assert!(network.allows("a.b.cdn.example.org", 8443, 443));
        assert!(
            !network.allows("cdn.example.org", 8443, 443),
            "not the domain itself"
        );
        assert!(!network.allows("xcdn.example.org", 8443, 443));
        assert!(network.allows("[::1]", 9, 80));
        assert_eq!(network.max_requests(), DEFAULT_MAX_REQUESTS);
        assert_eq!(network.max_response_bytes(), DEFAULT_MAX_RESPONSE_BYTES);
        for bad in [
            "http://example.org",
            "example.org/path",
            "user@example.org",
            "example.org:0",
            "example.org:99999",
            "example.org:",
            "exa mple.org",
            "[::1",
            "[nope]:80",
            "",
        ] {
            let why = Allowed::parse(bad).unwrap_err();
            assert!(why.contains("expected HOST, HOST:PORT"), "{bad}: {why}");
        }
        let list =
            serde_json::from_value::<Capabilities>(serde_json::json!({"network": ["a.org"]}));
        assert!(list.is_err(), "the grant is `{{allow: [...]}}`");
        let typo = serde_json::from_value::<Capabilities>(
            serde_json::json!({"network": {"allow": [], "alow": []}}),
        );
        assert!(
            typo.unwrap_err()
                .to_string()
                .contains("unknown field `alow`")
        );
    }
}
