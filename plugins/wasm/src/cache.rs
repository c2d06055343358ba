//! The compiled-artifact cache: a component compiled once per (content, engine) pair.
//!
//! Compiling a component takes 5 ms to seconds (a JavaScript or Python guest: 1 to 9 s);
//! loading its compiled artifact takes microseconds to milliseconds, so a second boot must not
//! compile again. An artifact is machine code the host maps and runs, so it lives in the same
//! per-user directory as the dylib cache ([`cordis_dylib::Cache`]: 0700, owned by this user,
//! files 0600, every operation relative to the opened directory, never through a symlink) and
//! is checked before it is deserialized:
//!
//! - its name is the sha256 of the component's sha256 *and* of
//!   [`wasmtime::Engine::precompile_compatibility_hash`], so another wasmtime version or engine
//!   setting never finds it;
//! - its file starts with [`MAGIC`] and the sha256 of the rest, verified before loading (a
//!   truncated or altered file is recompiled and replaced, never loaded).
//!
//! `cordis cache prune` removes artifacts like library copies (same `<sha256>-<name>` names).

use std::hash::{Hash, Hasher};

use sha2::{Digest, Sha256};

/// The first bytes of an artifact file.
pub const MAGIC: &[u8; 16] = b"cordis-cwasm-v1\n";

/// The name of an artifact file in the cache.
pub(crate) fn artifact_name(component_sha256: &[u8; 32], engine: &wasmtime::Engine) -> String {
    let mut key = ShaHasher(Sha256::new());
    key.write(component_sha256);
    engine.precompile_compatibility_hash().hash(&mut key);
    let digest: [u8; 32] = key.0.finalize().into();
    format!("{}-component.cwasm", hex(&digest))
}

/// A [`Hasher`] that feeds SHA-256, so the engine's compatibility hash turns into a stable key
/// (std's hashers may change between Rust releases).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        // Never used: the key is the full digest.
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The bytes of an artifact file holding `compiled`.
pub(crate) fn wrap(compiled: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 32 + compiled.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&Sha256::digest(compiled));
    out.extend_from_slice(compiled);
    out
}

/// The compiled bytes of an artifact file, if its header and hash check out.
pub(crate) fn unwrap(file: &[u8]) -> Option<&[u8]> {
    let rest = file.strip_prefix(MAGIC.as_slice())?;
    let (hash, compiled) = rest.split_at_checked(32)?;
    (Sha256::digest(compiled).as_slice() == hash).then_some(compiled)
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_artifact_is_loaded_only_when_its_header_and_hash_check_out() {
        let file = wrap(b"machine code");
        assert_eq!(unwrap(&file), Some(&b"machine code"[..]));
        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(unwrap(&flipped), None);
        assert_eq!(unwrap(&file[..file.len() - 1]), None);
        assert_eq!(unwrap(&file[..20]), None);
        assert_eq!(
            unwrap(b"\x7fELF and more bytes than a header is long"),
            None
        );
    }

    #[test]
    fn the_name_depends_on_the_component_and_on_the_engine() {
        let engine = wasmtime::Engine::default();
        let a = artifact_name(&[1; 32], &engine);
        assert_eq!(a, artifact_name(&[1; 32], &engine));
        assert_ne!(a, artifact_name(&[2; 32], &engine));
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        let fuel = wasmtime::Engine::new(&config).unwrap();
        assert_ne!(a, artifact_name(&[1; 32], &fuel));
        assert_eq!(a.len(), 64 + "-component.cwasm".len());
    }
}
