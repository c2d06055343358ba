//! Builds the fixture plugin libraries once per test binary: the C plugin in every mode (with
//! `cc`) and the Rust example cdylibs (with `cargo build`), all copied into one fresh directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The C plugin's build variants: file stem and `-D` flags.
pub const C_MODES: &[(&str, &[&str])] = &[
    ("c_good", &[]),
    ("c_thread_safe", &["CORDIS_THREAD_SAFE"]),
    ("c_wrong_magic", &["CORDIS_WRONG_MAGIC"]),
    ("c_other_major", &["CORDIS_OTHER_MAJOR"]),
    ("c_small_struct", &["CORDIS_SMALL_STRUCT"]),
    ("c_no_symbol", &["CORDIS_NO_SYMBOL"]),
    ("c_null_create", &["CORDIS_NULL_CREATE"]),
    ("c_create_panics", &["CORDIS_CREATE_PANICS"]),
    ("c_describe_panics", &["CORDIS_DESCRIBE_PANICS"]),
    ("c_bad_json", &["CORDIS_BAD_JSON"]),
    ("c_reserved_name", &["CORDIS_RESERVED_NAME"]),
    ("c_duplicate_name", &["CORDIS_DUPLICATE_NAME"]),
    ("c_bad_name", &["CORDIS_BAD_NAME"]),
    ("c_needs_newer_host", &["CORDIS_NEEDS_HOST_MINOR=7"]),
    ("c_evil", &["CORDIS_EVIL"]),
    ("c_create_hangs", &["CORDIS_CREATE_HANGS"]),
    ("c_describe_hangs", &["CORDIS_DESCRIBE_HANGS"]),
    ("c_invoke_hangs", &["CORDIS_INVOKE_HANGS"]),
    ("c_destroy_hangs", &["CORDIS_DESTROY_HANGS"]),
];

/// The Rust fixture cdylibs (package names).
pub const RUST_PLUGINS: &[&str] = &["cordis-example-text-tools", "cordis-example-panicky"];

/// The workspace root.
pub fn workspace() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    if here.join("host").is_dir() {
        here.to_owned()
    } else {
        here.parent().unwrap().to_owned()
    }
}

/// `lib<stem>.so` (or the platform's spelling).
pub fn lib_name(stem: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        stem.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// The directory holding every fixture library; built on first use.
pub fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(build)
}

/// The path of fixture library `stem` (a C mode or a Rust package name).
pub fn lib(stem: &str) -> PathBuf {
    dir().join(lib_name(stem))
}

fn build() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap().to_owned();
    let name = exe.file_stem().unwrap().to_string_lossy().into_owned();
    let dir = profile_dir
        .parent()
        .unwrap()
        .join("plugin-fixtures")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = workspace();
    let source = root.join("tests/fixtures/c-plugin/plugin.c");
    let include = root.join("plugins/sdk/include");
    std::thread::scope(|s| {
        for (stem, defines) in C_MODES {
            let (dir, source, include) = (&dir, &source, &include);
            s.spawn(move || {
                let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
                cc.args(["-shared", "-fPIC", "-O1", "-I"]).arg(include);
                for d in *defines {
                    cc.arg(format!("-D{d}"));
                }
                let out = cc
                    .arg("-o")
                    .arg(dir.join(lib_name(stem)))
                    .arg(source)
                    .output()
                    .expect("the dylib tests need a C compiler (`cc`)");
                assert!(
                    out.status.success(),
                    "cc {stem}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            });
        }
    });
    // `cargo test` does not build cdylib members, so build them here, in a target directory of
    // their own (no lock shared with the running cargo; incremental after the first run).
    let target = profile_dir.parent().unwrap().join("plugin-fixtures");
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(&root)
        .args(["build", "--quiet", "--target-dir"])
        .arg(&target);
    for p in RUST_PLUGINS {
        cargo.args(["-p", p]);
    }
    let status = cargo.status().expect("running cargo");
    assert!(status.success(), "building the example plugins failed");
    let rust_dir = target.join("debug");
    for p in RUST_PLUGINS {
        std::fs::copy(rust_dir.join(lib_name(p)), dir.join(lib_name(p))).unwrap();
    }
    dir
}

/// What one run of the `cordis` binary did.
#[derive(Debug)]
pub struct BinRun {
    /// The exit code (`None` if a signal ended it).
    pub code: Option<i32>,
    /// Standard output.
    pub out: String,
    /// Standard error.
    pub err: String,
}

/// Runs the `cordis` binary with `args` and `env` (on top of this process's environment, minus
/// the cache variables), killing it and panicking if it has not exited within `limit`: a guard
/// against hangs, not a performance threshold.
pub fn cordis_bin(
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    limit: std::time::Duration,
) -> BinRun {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("cordis-test-state"),
    );
    cmd.args(args)
        .env_remove("CORDIS_DYLIB_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cordis_wait(cmd, args, limit)
}

/// Spawns `cmd` and waits as [`cordis_bin`] does.
pub fn cordis_wait(mut cmd: Command, args: &[&str], limit: std::time::Duration) -> BinRun {
    use std::io::Read;
    let started = std::time::Instant::now();
    let mut child = cmd.spawn().expect("spawning cordis");
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        let mut r = r.unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = pipe(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = pipe(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let err = err.join().unwrap_or_default();
            panic!(
                "`cordis {}` did not exit within {limit:?}; stderr:\n{err}",
                args.join(" ")
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    BinRun {
        code: status.code(),
        out: out.join().unwrap_or_default(),
        err: err.join().unwrap_or_default(),
    }
}
