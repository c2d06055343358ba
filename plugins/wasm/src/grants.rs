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
//! | `network: …` | refused: guests get no network in this version | — |
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
//! say, so each of its tools is at least [`Effect::Edit`] for approvals (a grant of network, were
//! one possible, at least [`Effect::Network`]). A declared effect can only make a tool more
//! cautious ([`Capabilities::effect_of`]).

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
    /// Refused when written (a configuration error naming why): guests get no network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NoNetwork>,
}

/// The value of `capabilities.network`, which no configuration can hold: parsing it fails with
/// the reason, so `cordis check` points at the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NoNetwork;

/// Why `capabilities.network` is refused.
pub const NO_NETWORK: &str = "network is not supported: wasm guests get no network in this version (use an MCP server or a dylib for a tool that needs one)";

impl<'de> Deserialize<'de> for NoNetwork {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<NoNetwork, D::Error> {
        Err(serde::de::Error::custom(NO_NETWORK))
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
        } else {
            Err(format!(
                "which this host does not provide (it provides cordis:plugin/log@{})",
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
                "but wasm guests get no network in this version (nothing can grant it)".to_owned(),
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
            network: Some(NoNetwork),
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
                .contains("no network")
        );
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
        let net =
            serde_json::from_value::<Capabilities>(serde_json::json!({"network": ["example.org"]}));
        assert!(net.unwrap_err().to_string().starts_with(NO_NETWORK));
        let typo = serde_json::from_value::<Capabilities>(serde_json::json!({"radnom": true}));
        assert!(
            typo.unwrap_err()
                .to_string()
                .contains("unknown field `radnom`")
        );
    }
}
