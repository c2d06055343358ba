//! The dylib cache under attack, as far as one user can reproduce the attacks: symlinks planted
//! at every predictable name, a cached copy swapped between its check and its load, a cache
//! directory that is a symlink, shared or someone else's, a FIFO where a copy should be, and a
//! second user on the same machine. Every case runs the real `cordis` binary.
#![cfg(unix)]

use crate::common;

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::plugins::{self, BinRun, cordis_bin, lib};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A guard against hangs only (see `cordis_bin`).
const LIMIT: Duration = Duration::from_secs(60);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh directory for one test, with `cache/` (mode 0700) inside.
fn scratch(name: &str) -> PathBuf {
    let dir = plugins::dir().join(format!("cache-attack-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn private_dir(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path.to_owned()
}

/// Writes a config with the base entries and one dylib entry `p` for `./<library>` (prefix
/// `p_`), optionally pinned, and an apply timeout.
fn config(dir: &Path, library: &str, pin: Option<&str>) -> String {
    let mut yml = format!(
        "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n- id: p\n  name: ./{library}\n  config: p_\n  timeout: 5000\n"
    );
    if let Some(pin) = pin {
        yml.push_str(&format!("  sha256: {pin}\n"));
    }
    let file = dir.join("cordis.yml");
    std::fs::write(&file, yml).unwrap();
    file.display().to_string()
}

fn check(file: &str, env: &[(&str, &OsStr)]) -> (BinRun, Value) {
    let run = cordis_bin(&["check", file, "--json", "--seed", "1"], env, LIMIT);
    let json = serde_json::from_str(&run.out).unwrap_or(Value::Null);
    (run, json)
}

fn entry(report: &Value) -> &Value {
    report["entries"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["id"] == "p"))
        .unwrap_or(&Value::Null)
}

fn tools(report: &Value) -> Vec<String> {
    report["assembly"]["tools"]
        .as_array()
        .map(|a| a.iter().map(|t| t.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// Asserts the entry is active with the good library's tools, and that no other library ran.
fn assert_good(run: &BinRun, report: &Value) {
    let e = entry(report);
    assert_eq!(e["status"], "active", "{e}\n{}", run.err);
    let tools = tools(report);
    assert!(tools.contains(&"p_echo".to_owned()), "{tools:?}");
    assert!(
        !tools.contains(&"p_evil".to_owned()),
        "another library ran: {tools:?}"
    );
}

fn cache_env(cache: &Path) -> [(&'static str, &OsStr); 1] {
    [("CORDIS_DYLIB_CACHE", cache.as_os_str())]
}

/// True when this process runs as root (the owner of a directory it just created).
fn is_root() -> bool {
    std::fs::metadata(plugins::dir()).unwrap().uid() == 0
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[test]
fn the_cache_is_a_private_directory_under_the_users_cache_home_by_default() {
    let dir = scratch("default");
    std::fs::copy(lib("c_good"), dir.join("libplug.so")).unwrap();
    let file = config(&dir, "libplug.so", None);
    let home = private_dir(&dir.join("home"));
    let (run, report) = check(&file, &[("HOME", home.as_os_str())]);
    assert_good(&run, &report);
    let cache = home.join(".cache/cordis/dylib");
    let meta = std::fs::symlink_metadata(&cache)
        .unwrap_or_else(|e| panic!("no cache at {}: {e}", cache.display()));
    assert!(meta.is_dir());
    assert_eq!(meta.mode() & 0o777, 0o700);
    let hash = hex(&sha256(&std::fs::read(lib("c_good")).unwrap()));
    assert!(cache.join(format!("{hash}-libplug.so")).is_file());

    let xdg = dir.join("xdg");
    let env = [
        ("HOME", home.as_os_str()),
        ("XDG_CACHE_HOME", xdg.as_os_str()),
    ];
    let (run, report) = check(&file, &env);
    assert_good(&run, &report);
    let meta = std::fs::symlink_metadata(xdg.join("cordis/dylib")).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o700);
}

#[test]
fn a_symlink_planted_at_the_cached_name_is_replaced_never_followed() {
    let dir = scratch("final-name");
    let good = std::fs::read(lib("c_good")).unwrap();
    std::fs::write(dir.join("libplug.so"), &good).unwrap();
    let evil = dir.join("evil.so");
    std::fs::copy(lib("c_evil"), &evil).unwrap();
    let evil_bytes = std::fs::read(&evil).unwrap();
    let hash = hex(&sha256(&good));
    for pin in [None, Some(hash.as_str())] {
        let cache = private_dir(&dir.join(format!("cache-{}", pin.is_some())));
        let planted = cache.join(format!("{hash}-libplug.so"));
        std::os::unix::fs::symlink(&evil, &planted).unwrap();
        let file = config(&dir, "libplug.so", pin);
        let (run, report) = check(&file, &cache_env(&cache));
        // Pinned or not, the good library loads: no mismatch blamed on a pin, no evil code.
        assert_good(&run, &report);
        let meta = std::fs::symlink_metadata(&planted).unwrap();
        assert!(meta.is_file(), "the planted link was replaced by a copy");
        assert_eq!(std::fs::read(&planted).unwrap(), good);
        assert_eq!(
            std::fs::read(&evil).unwrap(),
            evil_bytes,
            "the target is untouched"
        );
    }
}

/// The old staging name was `.<sha256>-<pid>-<n>.partial`: with the next process ids predicted
/// (`ns_last_pid`), a symlink planted at each of those names pointed the host's write at a
/// victim file. Staging names are random now and created exclusively: the victim is untouched
/// and nothing but the copy is left behind.
#[test]
fn symlinks_planted_at_predictable_staging_names_are_never_written_through() {
    let dir = scratch("staging");
    let good = std::fs::read(lib("c_good")).unwrap();
    std::fs::write(dir.join("libplug.so"), &good).unwrap();
    let hash = hex(&sha256(&good));
    let cache = private_dir(&dir.join("cache"));
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(std::process::id());
    let mut planted = Vec::new();
    for pid in last + 1..last + 64 {
        for n in 0..3 {
            let name = format!(".{hash}-{pid}-{n}.partial");
            std::os::unix::fs::symlink(&victim, cache.join(&name)).unwrap();
            planted.push(name);
        }
    }
    let file = config(&dir, "libplug.so", None);
    let (run, report) = check(&file, &cache_env(&cache));
    assert_good(&run, &report);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let mut left: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !planted.contains(n))
        .collect();
    left.sort();
    assert_eq!(left, [format!("{hash}-libplug.so")]);
}

/// A racing thread swaps the cached copy between the good bytes and another library while the
/// host checks and loads it (the issue saw 9 of 300 pinned runs load the other library). Each
/// run uses bytes of its own (a trailer after the ELF image), so every run loads afresh.
#[test]
fn a_cached_copy_swapped_between_check_and_load_never_runs() {
    let dir = scratch("swap");
    let cache = private_dir(&dir.join("cache"));
    let good = std::fs::read(lib("c_good")).unwrap();
    let evil = std::fs::read(lib("c_evil")).unwrap();
    let runs = 300;
    let mut loaded = 0;
    for i in 0..runs {
        let trailer = format!("\ncordis swap run {i}\n");
        let good_i = [good.as_slice(), trailer.as_bytes()].concat();
        let evil_i = [evil.as_slice(), trailer.as_bytes()].concat();
        let library = format!("libswap{i}.so");
        std::fs::write(dir.join(&library), &good_i).unwrap();
        let hash = hex(&sha256(&good_i));
        let target = cache.join(format!("{hash}-{library}"));
        let sources = [dir.join("good.bin"), dir.join("evil.bin")];
        std::fs::write(&sources[0], &good_i).unwrap();
        std::fs::write(&sources[1], &evil_i).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let racer = {
            let (stop, target, sources, tmp) = (
                stop.clone(),
                target.clone(),
                sources.clone(),
                dir.join("racer.tmp"),
            );
            std::thread::spawn(move || {
                let mut k = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::fs::remove_file(&tmp);
                    if std::fs::hard_link(&sources[k % 2], &tmp).is_ok() {
                        let _ = std::fs::rename(&tmp, &target);
                    }
                    k += 1;
                }
            })
        };
        let file = config(&dir, &library, Some(&hash));
        let (run, report) = check(&file, &cache_env(&cache));
        stop.store(true, Ordering::Relaxed);
        racer.join().unwrap();
        let tools = tools(&report);
        assert!(
            !tools.contains(&"p_evil".to_owned()),
            "run {i}: another library ran: {tools:?}"
        );
        assert_eq!(
            entry(&report)["status"],
            "active",
            "run {i}: {}\n{}",
            entry(&report),
            run.err
        );
        loaded += 1;
    }
    assert_eq!(loaded, runs);
}

#[test]
fn a_cache_directory_that_is_a_symlink_shared_or_someone_elses_is_refused() {
    let dir = scratch("refused");
    std::fs::copy(lib("c_good"), dir.join("libplug.so")).unwrap();
    let file = config(&dir, "libplug.so", None);
    let real = private_dir(&dir.join("real"));
    let link = dir.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let shared = dir.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let group = dir.join("group");
    std::fs::create_dir_all(&group).unwrap();
    std::fs::set_permissions(&group, std::fs::Permissions::from_mode(0o770)).unwrap();
    let mut cases = vec![
        (link, "is a symlink; refusing it".to_owned()),
        (
            shared,
            "is writable by its group or by others (mode 777); refusing it".to_owned(),
        ),
        (
            group,
            "is writable by its group or by others (mode 770); refusing it".to_owned(),
        ),
    ];
    if is_root() {
        let foreign = private_dir(&dir.join("foreign"));
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        cases.push((
            foreign,
            "is owned by uid 65534, not by this user".to_owned(),
        ));
    } else {
        eprintln!("skipped: the other-owner case needs root to chown a directory to nobody");
    }
    for (cache, message) in cases {
        let (run, report) = check(&file, &cache_env(&cache));
        let e = entry(&report);
        assert_eq!(
            e["status"],
            "failed",
            "{}: {e}\n{}",
            cache.display(),
            run.err
        );
        let error = e["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&format!("the library cache {}", cache.display()))
                && error.contains(&message),
            "{error}"
        );
        assert!(error.starts_with("./libplug.so: "), "{error}");
    }
}

#[test]
fn a_fifo_at_the_cached_name_or_the_library_path_does_not_hang() {
    let dir = scratch("fifo");
    let cache = private_dir(&dir.join("cache"));
    let good = std::fs::read(lib("c_good")).unwrap();
    std::fs::write(dir.join("libplug.so"), &good).unwrap();
    let fifo = |path: &Path| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap()
    };
    let planted = cache.join(format!("{}-libplug.so", hex(&sha256(&good))));
    fifo(&planted);
    for pin in [None, Some(hex(&sha256(&good)))] {
        let file = config(&dir, "libplug.so", pin.as_deref());
        let (run, report) = check(&file, &cache_env(&cache));
        assert_good(&run, &report);
        assert!(std::fs::symlink_metadata(&planted).unwrap().is_file());
        std::fs::remove_file(&planted).unwrap();
        fifo(&planted);
    }
    // A FIFO as the library itself: refused (by the plan or by the load), never waited on.
    fifo(&dir.join("libfifo.so"));
    let file = config(&dir, "libfifo.so", None);
    let (run, report) = check(&file, &cache_env(&cache));
    assert_ne!(run.code, Some(0), "{}", run.err);
    assert_ne!(entry(&report)["status"], "active", "{}", run.err);
}

/// The first user's cache used to be a shared directory under the system temp dir, which locked
/// every other user out. Each user has a cache of their own now.
#[test]
fn another_user_can_load_plugins_on_the_same_machine() {
    if !is_root() {
        eprintln!("skipped: switching to another user needs root");
        return;
    }
    let dir = scratch("users");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(lib("c_good"), dir.join("libplug.so")).unwrap();
    let file = config(&dir, "libplug.so", None);
    for p in [dir.join("libplug.so"), dir.join("cordis.yml")] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // Every directory above the fixtures must be searchable by another user.
    let mut searchable = true;
    for a in dir.ancestors() {
        if let Ok(m) = std::fs::metadata(a) {
            searchable &= m.mode() & 0o001 != 0;
        }
    }
    if !searchable {
        eprintln!("skipped: the fixture directory is not reachable by another user");
        return;
    }
    let root_home = private_dir(&dir.join("root-home"));
    let (run, report) = check(&file, &[("HOME", root_home.as_os_str())]);
    assert_good(&run, &report);
    // The other user loads bytes the first user never loaded (the old shared cache in the temp
    // dir, created by the first user, refused every new copy from anyone else).
    let unique = format!(
        "\nother user {} {:?}\n",
        std::process::id(),
        std::time::SystemTime::now()
    );
    let other_lib = [std::fs::read(lib("c_good")).unwrap(), unique.into_bytes()].concat();
    std::fs::write(dir.join("libplug.so"), other_lib).unwrap();
    let other_home = private_dir(&dir.join("other-home"));
    std::os::unix::fs::chown(&other_home, Some(65534), Some(65534)).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("cordis-test-state"),
    );
    let args = ["check", file.as_str(), "--json", "--seed", "1"];
    use std::os::unix::process::CommandExt;
    cmd.args(args)
        .env_remove("CORDIS_DYLIB_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", &other_home)
        .uid(65534)
        .gid(65534)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let run = plugins::cordis_wait(cmd, &args, LIMIT);
    let report = serde_json::from_str(&run.out).unwrap_or(Value::Null);
    assert_good(&run, &report);
    let cache = other_home.join(".cache/cordis/dylib");
    assert_eq!(std::fs::metadata(&cache).unwrap().uid(), 65534);
}
