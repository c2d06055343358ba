//! The wasmtime engine every wasm entry shares, and its epoch ticker.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};

use crate::error::LoadError;
use crate::state::State;

/// How often the engine's epoch advances: the granularity of call deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// One engine with deterministic settings, its linkers and its epoch ticker. Cheap to clone;
/// the ticker stops when the last clone is dropped.
#[derive(Clone)]
pub struct WasmEngine {
    inner: Arc<Inner>,
}

struct Inner {
    engine: wasmtime::Engine,
    /// Links `cordis:plugin/log` only: for guests granted nothing.
    plain: Linker<State>,
    /// Also links WASI 0.2 (only granted interfaces pass the import check).
    wasi: Linker<State>,
    /// Dropping it stops the ticker thread.
    _ticker: mpsc::Sender<()>,
    /// True while the ticker thread runs (what the tests watch to see it stop).
    #[cfg_attr(not(test), allow(dead_code, reason = "read only by the tests"))]
    ticking: Arc<AtomicBool>,
}

impl std::fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WasmEngine")
    }
}

/// How a component was made ready: from the artifact cache or compiled now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Loaded from a verified cached artifact.
    Cached,
    /// Compiled (and stored in the cache when it could be).
    Compiled,
}

impl WasmEngine {
    /// A new engine: fuel, epochs, NaN canonicalization, no threads or relaxed SIMD; and its
    /// ticker thread.
    ///
    /// # Errors
    /// wasmtime refuses the configuration (not expected on supported platforms).
    pub fn new() -> Result<WasmEngine, LoadError> {
        let mut config = wasmtime::Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            // Determinism: NaN bit patterns are otherwise whatever the CPU produces.
            .cranelift_nan_canonicalization(true)
            // No threads: the `threads` feature of wasmtime is not even compiled in.
            .wasm_relaxed_simd(false)
            .relaxed_simd_deterministic(true);
        let engine =
            wasmtime::Engine::new(&config).map_err(|e| LoadError::Compile(e.to_string()))?;
        let plain = crate::state::linker(&engine, false)?;
        let wasi = crate::state::linker(&engine, true)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let ticking = Arc::new(AtomicBool::new(true));
        let (epochs, running) = (engine.clone(), ticking.clone());
        // A thread, not a tokio task: the engine outlives any one runtime (tests, reloads),
        // and the tick must go on while a current-thread runtime is inside a guest.
        std::thread::Builder::new()
            .name("wasm-epoch".to_owned())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    epochs.increment_epoch();
                }
                running.store(false, Ordering::SeqCst);
            })
            .map_err(|e| LoadError::Compile(format!("cannot start the epoch ticker: {e}")))?;
        Ok(WasmEngine {
            inner: Arc::new(Inner {
                engine,
                plain,
                wasi,
                _ticker: stop,
                ticking,
            }),
        })
    }

    /// The process's shared engine (created on first use; compiled code and the ticker are
    /// shared by every wasm entry of every runtime).
    ///
    /// # Errors
    /// See [`WasmEngine::new`].
    pub fn shared() -> Result<WasmEngine, LoadError> {
        static SHARED: OnceLock<Result<WasmEngine, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| WasmEngine::new().map_err(|e| e.to_string()))
            .clone()
            .map_err(LoadError::Compile)
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &wasmtime::Engine {
        &self.inner.engine
    }

    pub(crate) fn linker(&self, wasi: bool) -> &Linker<State> {
        if wasi {
            &self.inner.wasi
        } else {
            &self.inner.plain
        }
    }

    /// Compiles `bytes` without any cache.
    ///
    /// # Errors
    /// Not a valid component.
    pub fn compile(&self, bytes: &[u8]) -> Result<Component, LoadError> {
        Component::new(self.engine(), bytes).map_err(|e| LoadError::Compile(format!("{e:#}")))
    }

    /// The component of `bytes` (whose sha256 is `sha256`): from a verified artifact in
    /// `cache` if one is there, else compiled and stored there.
    ///
    /// # Errors
    /// Not a valid component.
    pub fn component(
        &self,
        bytes: &[u8],
        sha256: &[u8; 32],
        cache: Option<&cordis_artifact_cache::Cache>,
    ) -> Result<(Component, Origin), LoadError> {
        let Some(cache) = cache else {
            return Ok((self.compile(bytes)?, Origin::Compiled));
        };
        let name = crate::cache::artifact_name(sha256, self.engine());
        if let Some(file) = cache.read(&name) {
            match crate::cache::unwrap(&file, sha256) {
                Ok(compiled) => match self.deserialize(compiled) {
                    Ok(component) => return Ok((component, Origin::Cached)),
                    Err(e) => tracing::warn!(
                        cache = %cache.path().display(),
                        "replacing {name} in the artifact cache: {e}"
                    ),
                },
                // Another component's sound artifact under this one's name: not this
                // component's code, whatever its pin says. Compiled again from the pinned bytes.
                Err(crate::cache::Refused::OtherSource(recorded)) => tracing::debug!(
                    cache = %cache.path().display(),
                    "recompiling {name}: the cached artifact was compiled from component {}, not {}",
                    crate::cache::hex(&recorded),
                    crate::cache::hex(sha256)
                ),
                Err(crate::cache::Refused::Format) => tracing::debug!(
                    cache = %cache.path().display(),
                    "recompiling {name}: the cached artifact is of another format version"
                ),
                Err(crate::cache::Refused::Corrupt) => tracing::warn!(
                    cache = %cache.path().display(),
                    "replacing {name} in the artifact cache: it does not check out"
                ),
            }
        }
        let compiled = self
            .engine()
            .precompile_component(bytes)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        if let Err(e) = cache.store(&name, &crate::cache::wrap(sha256, &compiled)) {
            tracing::warn!("cannot store a compiled artifact: {e}");
        }
        Ok((self.deserialize(&compiled)?, Origin::Compiled))
    }

    #[allow(
        unsafe_code,
        reason = "`Component::deserialize` trusts its bytes as this engine's compiled code"
    )]
    fn deserialize(&self, compiled: &[u8]) -> Result<Component, LoadError> {
        // SAFETY: `compiled` is either what `precompile_component` of this engine just returned,
        // or the payload of a cache file whose header and SHA-256 (over the recorded source hash
        // and the code) were verified just now, recorded as compiled from this component, read
        // through a descriptor of the per-user cache directory (0700, owned by this user, never
        // through a symlink: see `cordis_artifact_cache`), under a name keyed by this engine's
        // compatibility hash. wasmtime also checks the artifact's own header and engine settings.
        unsafe { Component::deserialize(self.engine(), compiled) }
            .map_err(|e| LoadError::Cache(format!("cannot load a compiled artifact: {e:#}")))
    }

    /// Reads a component file like a dylib (no symlink, no FIFO), checking `pin`.
    ///
    /// # Errors
    /// The file cannot be read or does not match the pin.
    pub fn read(path: &Path, pin: Option<&[u8; 32]>) -> Result<(Vec<u8>, [u8; 32]), LoadError> {
        let (bytes, _) =
            cordis_artifact_cache::read_library(path).map_err(|e| LoadError::Read {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        let sha256: [u8; 32] = Sha256::digest(&bytes).into();
        if let Some(pin) = pin
            && pin != &sha256
        {
            return Err(LoadError::Pin {
                path: path.to_owned(),
                expected: crate::cache::hex(pin),
                found: crate::cache::hex(&sha256),
            });
        }
        Ok((bytes, sha256))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_ticker_lives_as_long_as_the_engine_and_stops_with_it() {
        let engine = WasmEngine::new().unwrap();
        let running = engine.inner.ticking.clone();
        let clone = engine.clone();
        drop(engine);
        assert!(running.load(Ordering::SeqCst), "a clone keeps the ticker");
        drop(clone);
        // The thread ends at its next wake-up: wait for it (bounded), never for a duration.
        for _ in 0..1000 {
            if !running.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(EPOCH_TICK);
        }
        panic!("the ticker did not stop");
    }
}
