//! The compiled-artifact cache: a component compiled once per (content, engine) pair.
//!
//! Compiling a component takes 5 ms to seconds (a JavaScript or Python guest: 1 to 9 s);
//! loading its compiled artifact takes microseconds to milliseconds, so a second boot must not
//! compile again. An artifact is machine code the host maps and runs, so it lives in the same
//! per-user directory as library copies ([`cordis_artifact_cache::Cache`]: 0700, owned by this
//! user, files 0600, every operation relative to the opened directory, never through a symlink)
//! and is checked before it is deserialized:
//!
//! - its name is the sha256 of the component's sha256 *and* of
//!   [`wasmtime::Engine::precompile_compatibility_hash`], so another wasmtime version or engine
//!   setting never finds it;
//! - its file starts with [`MAGIC`], the sha256 of the component it was compiled from, and the
//!   sha256 of that source hash and the machine code together, verified before loading (a
//!   truncated or altered file is recompiled and replaced, never loaded);
//! - the recorded source hash must be the component's being loaded: an artifact copied (or
//!   renamed) over another component's file is another program, so it is recompiled and
//!   replaced, never run for the entry whose pin it does not match. The name alone binds
//!   nothing: anyone who can write the directory can put any file under any name.
//!
//! `cordis cache prune` removes artifacts like library copies (same `<sha256>-<name>` names).

use std::hash::{Hash, Hasher};

use sha2::{Digest, Sha256};

/// The first bytes of an artifact file (`v2`: the source hash is recorded inside).
pub const MAGIC: &[u8; 16] = b"cordis-cwasm-v2\n";

/// Why a cached artifact is not loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not an artifact, or its bytes do not match their hash.
    Corrupt,
    /// An artifact of another version of this format (an older cordis wrote it).
    Format,
    /// A sound artifact, compiled from another component (its recorded source hash).
    OtherSource([u8; 32]),
}

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

/// The integrity hash of an artifact: over its source hash and its machine code, so neither
/// can be swapped without the other.
fn seal(source: &[u8; 32], compiled: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(source);
    h.update(compiled);
    h.finalize().into()
}

/// The bytes of an artifact file holding `compiled`, compiled from the component whose sha256
/// is `source`.
pub(crate) fn wrap(source: &[u8; 32], compiled: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 64 + compiled.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(source);
    out.extend_from_slice(&seal(source, compiled));
    out.extend_from_slice(compiled);
    out
}

/// The compiled bytes of an artifact file, if its header and hash check out and it was
/// compiled from the component whose sha256 is `source`.
pub(crate) fn unwrap<'a>(file: &'a [u8], source: &[u8; 32]) -> Result<&'a [u8], Refused> {
    let Some(rest) = file.strip_prefix(MAGIC.as_slice()) else {
        // `cordis-cwasm-v` and another version: an older (or newer) cordis's artifact.
        let other = file.starts_with(&MAGIC[..MAGIC.len() - 3]);
        return Err(if other {
            Refused::Format
        } else {
            Refused::Corrupt
        });
    };
    let (recorded, rest) = rest.split_at_checked(32).ok_or(Refused::Corrupt)?;
    let (hash, compiled) = rest.split_at_checked(32).ok_or(Refused::Corrupt)?;
    let recorded: [u8; 32] = recorded.try_into().map_err(|_| Refused::Corrupt)?;
    if seal(&recorded, compiled).as_slice() != hash {
        return Err(Refused::Corrupt);
    }
    if &recorded != source {
        return Err(Refused::OtherSource(recorded));
    }
    Ok(compiled)
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
        let source = [7; 32];
        let file = wrap(&source, b"machine code");
        assert_eq!(unwrap(&file, &source), Ok(&b"machine code"[..]));
        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(unwrap(&flipped, &source), Err(Refused::Corrupt));
        assert_eq!(
            unwrap(&file[..file.len() - 1], &source),
            Err(Refused::Corrupt)
        );
        assert_eq!(unwrap(&file[..20], &source), Err(Refused::Corrupt));
        assert_eq!(
            unwrap(b"\x7fELF and more bytes than a header is long", &source),
            Err(Refused::Corrupt)
        );
        // The version 1 format (no source hash) is not loaded.
        let mut v1 = b"cordis-cwasm-v1\n".to_vec();
        v1.extend_from_slice(&Sha256::digest(b"machine code"));
        v1.extend_from_slice(b"machine code");
        assert_eq!(unwrap(&v1, &source), Err(Refused::Format));
    }

    #[test]
    fn an_artifact_is_loaded_only_for_the_component_it_was_compiled_from() {
        let file = wrap(&[1; 32], b"machine code of one");
        assert_eq!(unwrap(&file, &[2; 32]), Err(Refused::OtherSource([1; 32])));
        // Rewriting the recorded source breaks the seal.
        let mut relabeled = file.clone();
        relabeled[MAGIC.len()..MAGIC.len() + 32].copy_from_slice(&[2; 32]);
        assert_eq!(unwrap(&relabeled, &[2; 32]), Err(Refused::Corrupt));
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
