//! Loading: world versions, imports against grants, the artifact cache.

use cordis_wasm::{Capabilities, LoadError, WasmEngine};
use sha2::{Digest, Sha256};

use crate::guests::{self, Spec};
use crate::load;

#[test]
fn an_ungranted_import_is_refused_at_load_naming_it() {
    let e = load(&guests::random(), &Capabilities::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the component imports wasi:random/random@0.2.12, which its entry does not grant (grant it with `capabilities: {random: true}` in the entry's config)"
    );
    let e = load(&guests::clock(), &Capabilities::default()).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "the component imports wasi:clocks/wall-clock@0.2.12, which its entry does not grant"
        ),
        "{e}"
    );
    // Granting one thing does not grant another.
    let random = Capabilities {
        random: true,
        ..Capabilities::default()
    };
    assert!(load(&guests::clock(), &random).is_err());
    assert!(load(&guests::random(), &random).is_ok());
}

#[test]
fn every_0_1_guest_loads_and_another_version_is_refused_naming_both() {
    let patch = Spec {
        version: "0.1.5",
        ..guests::echo("e")
    };
    let guest = load(&patch, &Capabilities::default()).unwrap();
    assert_eq!(guest.version(), "0.1.5");
    let next = Spec {
        version: "0.2.0",
        ..guests::echo("e")
    };
    let e = load(&next, &Capabilities::default()).unwrap_err();
    assert!(matches!(e, LoadError::Version { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "the component implements cordis:plugin/guest@0.2.0, but this host implements @0.1.1 (it accepts every 0.1.x guest); rebuild it against world.wit 0.1.1"
    );
}

#[test]
fn bytes_that_are_not_a_guest_are_refused() {
    let engine = WasmEngine::shared().unwrap();
    let none = Capabilities::default();
    let core = wat::parse_str("(module)").unwrap();
    let e = cordis_wasm::Guest::new(&engine, &core, [0; 32], &none, None).unwrap_err();
    assert!(matches!(e, LoadError::Compile(_)), "{e:?}");
    let empty = wat::parse_str("(component)").unwrap();
    let e = cordis_wasm::Guest::new(&engine, &empty, [0; 32], &none, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the component exports no cordis:plugin/guest interface (expected cordis:plugin/guest@0.1.1; it exports: nothing)"
    );
}

#[test]
fn the_artifact_cache_compiles_once_and_never_loads_a_file_that_does_not_check_out() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache");
    let cache = cordis_dylib::Cache::open(&path).unwrap();
    let engine = WasmEngine::shared().unwrap();
    let bytes = guests::component(&guests::echo("e"));
    let sha: [u8; 32] = Sha256::digest(&bytes).into();
    let none = Capabilities::default();
    let first = cordis_wasm::Guest::new(&engine, &bytes, sha, &none, Some(&cache)).unwrap();
    assert!(!first.from_cache());
    let second = cordis_wasm::Guest::new(&engine, &bytes, sha, &none, Some(&cache)).unwrap();
    assert!(second.from_cache());
    let files: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // One flipped byte of machine code: recompiled and replaced, never loaded.
    let mut artifact = std::fs::read(&files[0]).unwrap();
    let last = artifact.len() - 1;
    artifact[last] ^= 0xff;
    std::fs::write(&files[0], &artifact).unwrap();
    let third = cordis_wasm::Guest::new(&engine, &bytes, sha, &none, Some(&cache)).unwrap();
    assert!(!third.from_cache());
    let fourth = cordis_wasm::Guest::new(&engine, &bytes, sha, &none, Some(&cache)).unwrap();
    assert!(fourth.from_cache());
    // A symlink planted at the artifact's name is not followed.
    let name = files[0].file_name().unwrap().to_owned();
    std::fs::remove_file(&files[0]).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), path.join(&name)).unwrap();
    let fifth = cordis_wasm::Guest::new(&engine, &bytes, sha, &none, Some(&cache)).unwrap();
    assert!(!fifth.from_cache());
    assert!(!dir.path().join("elsewhere").exists());
    assert!(
        std::fs::symlink_metadata(path.join(&name))
            .unwrap()
            .is_file()
    );
}

/// Regression (issue 40, finding 7): the artifact of one component copied over another's cache
/// file was loaded and run for the second entry (its header and hash checked out, and the pin
/// checks only the `.wasm`). The artifact records the component it was compiled from, so the
/// entry recompiles and runs its own code.
#[test]
fn an_artifact_copied_over_another_components_cache_file_is_recompiled_and_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache");
    let cache = cordis_dylib::Cache::open(&path).unwrap();
    let engine = WasmEngine::shared().unwrap();
    let none = Capabilities::default();
    let artifacts = || -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
    };
    let compile = |spec: &Spec| {
        let bytes = guests::component(spec);
        let sha: [u8; 32] = Sha256::digest(&bytes).into();
        let guest = cordis_wasm::Guest::new(&engine, &bytes, sha, &none, Some(&cache)).unwrap();
        (bytes, sha, guest)
    };
    let (_, _, echo) = compile(&guests::echo("echo"));
    assert!(!echo.from_cache());
    let echo_file = artifacts().pop().unwrap();
    let (other_bytes, other_sha, other) = compile(&guests::other());
    assert!(!other.from_cache());
    let other_file = artifacts().into_iter().find(|f| *f != echo_file).unwrap();
    // The echo guest's sound artifact under the other guest's name.
    std::fs::copy(&echo_file, &other_file).unwrap();
    let again =
        cordis_wasm::Guest::new(&engine, &other_bytes, other_sha, &none, Some(&cache)).unwrap();
    assert!(!again.from_cache(), "the foreign artifact was loaded");
    let runner = cordis_wasm::Runner::new(
        std::sync::Arc::new(again),
        cordis_wasm::RunnerOptions {
            entry: "other".into(),
            limits: cordis_wasm::Limits::default(),
            grants: none.clone(),
            workspace: None,
            config: "{}".to_owned(),
            seed: None,
            deadline: std::time::Duration::from_secs(30),
        },
    );
    let tools = crate::block_on(runner.describe()).unwrap();
    assert_eq!(tools[0].name, "other");
    assert_eq!(
        crate::block_on(runner.call("other", r#"{"k":1}"#)).unwrap(),
        r#"{"me":"other"}"#
    );
    // Replaced by its own artifact, which loads from now on.
    let cached =
        cordis_wasm::Guest::new(&engine, &other_bytes, other_sha, &none, Some(&cache)).unwrap();
    assert!(cached.from_cache());
    assert_ne!(
        std::fs::read(&other_file).unwrap(),
        std::fs::read(&echo_file).unwrap()
    );
}

/// A runner of `spec` (no grants, default limits).
fn runner_of(spec: &Spec) -> cordis_wasm::Runner {
    crate::runner(
        spec,
        cordis_wasm::Limits::default(),
        Capabilities::default(),
        None,
    )
}

#[test]
fn an_init_that_fails_or_traps_fails_the_load_with_its_reason() {
    let failing = Spec {
        init: Some("(call $err {why})".to_owned()),
        strings: vec![("why", "no API key in config".to_owned())],
        ..guests::echo("e")
    };
    let e = crate::block_on(runner_of(&failing).describe()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "instantiate failed: init failed: no API key in config"
    );
    let trapping = Spec {
        init: Some("(unreachable)".to_owned()),
        ..guests::echo("e")
    };
    let e = crate::block_on(runner_of(&trapping).describe()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "instantiate failed: init trapped: wasm trap: wasm `unreachable` instruction executed"
    );
    let spinning = Spec {
        init: Some("(loop $l (br $l)) (unreachable)".to_owned()),
        ..guests::echo("e")
    };
    let r = crate::runner(
        &spinning,
        cordis_wasm::Limits {
            fuel: 1_000_000,
            ..cordis_wasm::Limits::default()
        },
        Capabilities::default(),
        None,
    );
    let e = crate::block_on(r.describe()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("instantiate failed: stopped: out of fuel (1000000 units per call"),
        "{e}"
    );
}

#[test]
fn described_tools_the_registry_would_refuse_fail_the_load() {
    // Regression (issue 40, finding 15): names outside `[A-Za-z0-9_-]{1,64}` were accepted.
    let long: &'static str = Box::leak("x".repeat(65).into_boxed_str());
    for (name, why) in [
        ("run_code", "is reserved"),
        ("has space", "invalid tool name \"has space\""),
        (
            "a.b",
            "invalid tool name \"a.b\": a WebAssembly tool's name is 1 to 64 of [A-Za-z0-9_-]",
        ),
        ("a/b", "invalid tool name \"a/b\""),
        ("caf\u{e9}", "1 to 64 of [A-Za-z0-9_-]"),
        ("", "invalid tool name \"\""),
        (long, "1 to 64 of [A-Za-z0-9_-]"),
    ] {
        let spec = Spec {
            tools: guests::one(name, "x", guests::OBJECT),
            ..guests::echo("unused")
        };
        let e = crate::block_on(runner_of(&spec).describe()).unwrap_err();
        assert!(e.to_string().starts_with("describe failed: "), "{e}");
        assert!(e.to_string().contains(why), "{e}");
    }
    let twice = Spec {
        tools: vec![
            guests::Tool {
                name: "a",
                description: "",
                parameters: guests::OBJECT,
                effect: 0,
            },
            guests::Tool {
                name: "a",
                description: "",
                parameters: guests::OBJECT,
                effect: 0,
            },
        ],
        ..guests::echo("unused")
    };
    let e = crate::block_on(runner_of(&twice).describe()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "describe failed: describe returned tool \"a\" twice"
    );
    let not_json = Spec {
        tools: guests::one("a", "", "{not json"),
        ..guests::echo("unused")
    };
    let e = crate::block_on(runner_of(&not_json).describe()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("describe failed: tool \"a\": parameters are not JSON"),
        "{e}"
    );
}

#[test]
fn effects_are_described_as_declared() {
    let spec = Spec {
        tools: vec![
            guests::Tool {
                name: "r",
                description: "",
                parameters: guests::OBJECT,
                effect: 0,
            },
            guests::Tool {
                name: "x",
                description: "",
                parameters: guests::OBJECT,
                effect: 4,
            },
            guests::Tool {
                name: "u",
                description: "",
                parameters: guests::OBJECT,
                effect: 6,
            },
        ],
        ..guests::echo("unused")
    };
    let tools = crate::block_on(runner_of(&spec).describe()).unwrap();
    let effects: Vec<_> = tools.iter().map(|t| (t.name.as_str(), t.effect)).collect();
    use cordis_tools::Effect;
    assert_eq!(
        effects,
        [
            ("r", Effect::Read),
            ("x", Effect::Execute),
            ("u", Effect::Unknown)
        ]
    );
}
