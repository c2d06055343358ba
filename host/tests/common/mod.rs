//! Helpers shared by the host's integration tests.
#![allow(dead_code)]

pub mod plugins;

use std::path::PathBuf;

use cordis_host::Builtins;
use cordis_host::cli::{Io, run};

/// Path of a fixture in `tests/fixtures/` at the workspace root.
pub fn fixture(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "tests", "fixtures", name]
        .iter()
        .collect();
    p.display().to_string()
}

/// Output of one CLI run.
pub struct Run {
    pub code: u8,
    pub out: String,
    pub err: String,
}

/// Runs `cordis <args>` in-process with an environment holding only `env`.
pub fn cordis(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let vars: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let lookup = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let mut io = Io {
        out: &mut out,
        err: &mut err,
        env: &lookup,
        progress: false,
    };
    let mut argv = vec!["cordis"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut io, &Builtins::standard());
    Run {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}
