//! `cordis cache`: where third-party plugin libraries are copied before they load, and how to
//! clear it. The cache is per user (see docs/plugin-abi.md, "The library cache").

use std::ffi::OsString;

use cordis_dylib::Cache;

use super::render::safe;
use super::{CacheCommand, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Exit, Io};

pub(crate) fn run(command: &CacheCommand, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let env = io.env;
    let dir = match cordis_dylib::cache::default_dir(|name| env(name).map(OsString::from)) {
        Ok(dir) => dir,
        Err(e) => {
            writeln!(io.err, "cordis: {e}")?;
            return Err(Exit(EXIT_CONFIG).into());
        }
    };
    match command {
        CacheCommand::Dir => {
            writeln!(io.out, "{}", dir.display())?;
            Ok(EXIT_OK)
        }
        CacheCommand::Prune { older_than } => {
            let cache = match Cache::open(&dir) {
                Ok(cache) => cache,
                Err(e) => {
                    writeln!(io.err, "cordis: {e}")?;
                    return Err(Exit(EXIT_CONFIG).into());
                }
            };
            let keep = older_than.unwrap_or_default();
            let outcome = cache.prune(keep)?;
            writeln!(
                io.out,
                "removed {} file{} ({} bytes) from {}{}",
                outcome.removed,
                if outcome.removed == 1 { "" } else { "s" },
                outcome.bytes,
                dir.display(),
                if outcome.kept > 0 {
                    format!("; kept {} newer than the limit", outcome.kept)
                } else {
                    String::new()
                }
            )?;
            for failure in &outcome.failed {
                writeln!(io.err, "cordis: could not remove {}", safe(failure))?;
            }
            Ok(if outcome.failed.is_empty() {
                EXIT_OK
            } else {
                EXIT_FAILURE
            })
        }
    }
}
