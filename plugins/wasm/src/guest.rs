//! A loaded component: compiled (or taken from the artifact cache), its world version and
//! imports vetted, pre-linked for fast instantiation.

use std::path::Path;

use serde_json::Value;
use wasmtime::component::{Component, ComponentExportIndex, InstancePre, types::ComponentItem};

use crate::engine::{Origin, WasmEngine};
use crate::error::LoadError;
use crate::grants::{Capabilities, check_import};
use crate::state::State;

/// The version of `cordis:plugin` this host implements; it accepts every `0.1.x` guest.
pub const WORLD_VERSION: &str = "0.1.1";

/// The exported interface's name without its version.
const GUEST: &str = "cordis:plugin/guest";

/// Whether a guest built against `version` of the world loads here: same 0.1 line, any patch.
pub(crate) fn accepts(version: &str) -> bool {
    version.strip_prefix("0.1.").is_some_and(|patch| {
        patch
            .split(['-', '+'])
            .next()
            .is_some_and(|p| p.parse::<u32>().is_ok())
    })
}

/// One tool a guest describes, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its parameters' JSON Schema.
    pub parameters: Value,
    /// Its effect class.
    pub effect: cordis_tools::Effect,
}

/// A vetted, pre-linked component.
pub struct Guest {
    pub(crate) engine: WasmEngine,
    pub(crate) pre: InstancePre<State>,
    pub(crate) init: ComponentExportIndex,
    pub(crate) describe: ComponentExportIndex,
    pub(crate) call: ComponentExportIndex,
    version: String,
    sha256: [u8; 32],
    origin: Origin,
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest")
            .field("version", &self.version)
            .field("sha256", &crate::cache::hex(&self.sha256))
            .field("origin", &self.origin)
            .finish()
    }
}

impl Guest {
    /// Reads, pins, compiles (through `cache`) and vets the component at `path`.
    ///
    /// # Errors
    /// See [`LoadError`]: unreadable, pin mismatch, invalid, wrong world version, an import not
    /// granted.
    pub fn from_file(
        engine: &WasmEngine,
        path: &Path,
        pin: Option<&[u8; 32]>,
        grants: &Capabilities,
        cache: Option<&cordis_artifact_cache::Cache>,
    ) -> Result<Guest, LoadError> {
        let (bytes, sha256) = WasmEngine::read(path, pin)?;
        Guest::new(engine, &bytes, sha256, grants, cache)
    }

    /// Compiles (through `cache`) and vets `bytes`, whose sha256 is `sha256`.
    ///
    /// # Errors
    /// See [`Guest::from_file`].
    pub fn new(
        engine: &WasmEngine,
        bytes: &[u8],
        sha256: [u8; 32],
        grants: &Capabilities,
        cache: Option<&cordis_artifact_cache::Cache>,
    ) -> Result<Guest, LoadError> {
        let (component, origin) = engine.component(bytes, &sha256, cache)?;
        Guest::vet(engine, component, sha256, origin, grants)
    }

    fn vet(
        engine: &WasmEngine,
        component: Component,
        sha256: [u8; 32],
        origin: Origin,
        grants: &Capabilities,
    ) -> Result<Guest, LoadError> {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(engine.engine())
            .map(|(name, _)| name.to_owned())
            .collect();
        let Some(export) = exports.iter().find(|n| n.split('@').next() == Some(GUEST)) else {
            return Err(LoadError::NoWorld {
                expected: WORLD_VERSION,
                found: if exports.is_empty() {
                    "nothing".to_owned()
                } else {
                    exports.join(", ")
                },
            });
        };
        let version = export.split_once('@').map_or("", |(_, v)| v).to_owned();
        if !accepts(&version) {
            return Err(LoadError::Version {
                expected: WORLD_VERSION,
                found: if version.is_empty() {
                    "(no version)".to_owned()
                } else {
                    version
                },
            });
        }
        // Imports in the component's own order; the first refused one is named.
        let mut wasi = false;
        for (import, item) in ty.imports(engine.engine()) {
            if !matches!(item.ty, ComponentItem::ComponentInstance(_)) {
                return Err(LoadError::Import {
                    import: import.to_owned(),
                    why: "which is not an interface instance; guests may import only interfaces"
                        .to_owned(),
                });
            }
            check_import(import, grants).map_err(|why| LoadError::Import {
                import: import.to_owned(),
                why,
            })?;
            wasi |= import.starts_with("wasi:");
        }
        let pre = engine
            .linker(wasi)
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Shape(format!("{e:#}")))?;
        let iface = component
            .get_export_index(None, export.as_str())
            .ok_or_else(|| LoadError::Shape(format!("{export} is not an instance")))?;
        let func = |name: &str| {
            component
                .get_export_index(Some(&iface), name)
                .ok_or_else(|| LoadError::Shape(format!("{export} has no function `{name}`")))
        };
        Ok(Guest {
            engine: engine.clone(),
            init: func("init")?,
            describe: func("describe")?,
            call: func("call")?,
            pre,
            version,
            sha256,
            origin,
        })
    }

    /// The world version the guest was built against (`0.1.x`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The component's sha256.
    pub fn sha256(&self) -> [u8; 32] {
        self.sha256
    }

    /// Whether it came from the artifact cache.
    pub fn from_cache(&self) -> bool {
        self.origin == Origin::Cached
    }
}

/// Turns `describe`'s list into checked tools (registry name rules, unique names, JSON
/// schemas), in the order given.
pub(crate) fn described(list: &[wasmtime::component::Val]) -> Result<Vec<Described>, String> {
    use wasmtime::component::Val;
    let mut out: Vec<Described> = Vec::new();
    for item in list {
        let Val::Record(fields) = item else {
            return Err("describe returned something else than a tool record".to_owned());
        };
        let field = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v);
        let text = |name: &str| match field(name) {
            Some(Val::String(s)) => Ok(s.clone()),
            _ => Err(format!("describe returned a tool without `{name}`")),
        };
        let name = text("name")?;
        check_name(&name)
            .map_err(|e| format!("describe returned an invalid tool name {name:?}: {e}"))?;
        if out.iter().any(|d| d.name == name) {
            return Err(format!("describe returned tool \"{name}\" twice"));
        }
        let parameters: Value = serde_json::from_str(&text("parameters")?)
            .map_err(|e| format!("tool \"{name}\": parameters are not JSON: {e}"))?;
        let effect = match field("effect") {
            Some(Val::Enum(e)) => effect(e)?,
            _ => return Err(format!("tool \"{name}\" has no effect")),
        };
        out.push(Described {
            name,
            description: text("description")?,
            parameters,
            effect,
        });
    }
    Ok(out)
}

/// The longest name a guest's tool may have, in bytes (the world's rule: `[A-Za-z0-9_-]{1,64}`).
pub(crate) const MAX_TOOL_NAME: usize = 64;

/// Checks a described tool's name against the world's rule, `[A-Za-z0-9_-]{1,64}`, stricter
/// than the registry's (which takes any 128 bytes without whitespace): a guest's names reach
/// the model, the terminal and the log, so they are plain identifiers. The registry's reserved
/// names are refused too.
///
/// # Errors
/// Why the name is refused.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if name.is_empty() || name.len() > MAX_TOOL_NAME || !name.bytes().all(plain) {
        return Err(format!(
            "a WebAssembly tool's name is 1 to {MAX_TOOL_NAME} of [A-Za-z0-9_-]"
        ));
    }
    cordis_tools::check_tool_name(name).map_err(|e| e.to_string())
}

fn effect(name: &str) -> Result<cordis_tools::Effect, String> {
    use cordis_tools::Effect;
    Ok(match name {
        "read" => Effect::Read,
        "state" => Effect::State,
        "dispatch" => Effect::Dispatch,
        "edit" => Effect::Edit,
        "execute" => Effect::Execute,
        "network" => Effect::Network,
        "unknown" => Effect::Unknown,
        other => return Err(format!("unknown effect \"{other}\"")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_is_1_to_64_of_letters_digits_underscore_and_dash_and_not_reserved() {
        for ok in ["a", "wasm_hello", "A-b_9", &"x".repeat(64)] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for refused in [
            "",
            "a.b",
            "a/b",
            "has space",
            "caf\u{e9}",
            "a\u{1b}[31m",
            "mcp:x",
            &"x".repeat(65),
        ] {
            let why = check_name(refused).unwrap_err();
            assert!(
                why.contains("1 to 64 of [A-Za-z0-9_-]"),
                "{refused:?}: {why}"
            );
        }
        assert!(check_name("run_code").unwrap_err().contains("reserved"));
    }

    #[test]
    fn every_0_1_patch_is_accepted_and_nothing_else() {
        for ok in ["0.1.0", "0.1.9", "0.1.12-rc1"] {
            assert!(accepts(ok), "{ok}");
        }
        for refused in ["0.2.0", "1.1.0", "0.1", "0.1.x", "", "0.10.0"] {
            assert!(!accepts(refused), "{refused}");
        }
    }
}
