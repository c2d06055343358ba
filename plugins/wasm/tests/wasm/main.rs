//! The cordis-wasm test binary: guests built from WAT, attacked through the engine's own API.
//! (Host wiring — entries, `check`, `call`, `permute`, `stress` — is tested from the root's
//! `tests/wasm.rs`.)

mod calls;
mod guests;
mod http;
mod loading;
mod sandbox;

use std::sync::Arc;
use std::time::Duration;

use cordis_wasm::{Capabilities, Guest, Limits, Runner, RunnerOptions, WasmEngine};
use sha2::{Digest, Sha256};

/// Loads `spec` with `grants` (no artifact cache).
pub fn load(spec: &guests::Spec, grants: &Capabilities) -> Result<Guest, cordis_wasm::LoadError> {
    let bytes = guests::component(spec);
    let engine = WasmEngine::shared().unwrap();
    Guest::new(&engine, &bytes, Sha256::digest(&bytes).into(), grants, None)
}

/// A runner of `spec` with `limits`, `grants`, `seed` and a 30 s deadline.
pub fn runner(
    spec: &guests::Spec,
    limits: Limits,
    grants: Capabilities,
    seed: Option<u64>,
) -> Runner {
    let guest = load(spec, &grants).unwrap();
    Runner::new(
        Arc::new(guest),
        RunnerOptions {
            entry: Arc::from("test"),
            limits,
            grants,
            workspace: None,
            config: "{}".to_owned(),
            seed,
            deadline: Duration::from_secs(30),
        },
    )
}

/// A current-thread runtime (the one exact replay uses): a spinning guest must not block it.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}
