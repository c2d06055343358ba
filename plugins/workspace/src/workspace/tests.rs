use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use super::*;

fn both(root: &Path) -> [Workspace; 2] {
    let ws = Workspace::open(root).unwrap();
    [ws.clone(), ws.with_resolution(Resolution::Walk)]
}

/// A workspace and a sibling directory outside it.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    (tmp, root, outside)
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn relative_paths_resolve_lexically_and_parent_dirs_above_the_root_are_refused() {
    let (_tmp, root, _) = setup();
    let ws = Workspace::open(&root).unwrap();
    assert_eq!(ws.resolve("a/./b/../c.txt").unwrap().to_string(), "a/c.txt");
    assert_eq!(ws.resolve("").unwrap().to_string(), ".");
    assert_eq!(ws.resolve(".").unwrap().to_string(), ".");
    let abs = ws.root().join("x/y");
    assert_eq!(
        ws.resolve(abs.to_str().unwrap()).unwrap().to_string(),
        "x/y"
    );
    for bad in ["..", "../x", "a/../../x", "/etc/passwd", "/"] {
        let err = ws.resolve(bad).unwrap_err();
        assert!(err.is_escape(), "{bad}: {err}");
        assert!(
            err.to_string().contains("outside the workspace root"),
            "{err}"
        );
    }
    assert!(
        ws.resolve("../x")
            .unwrap_err()
            .to_string()
            .contains("`..` climbs above")
    );
}

#[test]
fn writes_create_parents_keep_the_mode_and_read_back() {
    let (_tmp, root, _) = setup();
    for ws in both(&root) {
        let p = ws.resolve("deep/er/file.txt").unwrap();
        assert!(ws.write_atomic(&p, b"one").unwrap().created);
        assert_eq!(ws.read(&p).unwrap(), b"one");
        std::fs::set_permissions(
            root.join("deep/er/file.txt"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let again = ws.write_atomic(&p, b"two").unwrap();
        assert!(!again.created);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(root.join("deep/er/file.txt"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            listing(&root.join("deep/er")),
            ["file.txt"],
            "no temp file left"
        );
        std::fs::remove_dir_all(root.join("deep")).unwrap();
    }
}

#[test]
fn directories_fifos_and_missing_files_are_not_read() {
    let (_tmp, root, _) = setup();
    std::fs::create_dir(root.join("d")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    for ws in both(&root) {
        let err = ws.read(&ws.resolve("d").unwrap()).unwrap_err();
        assert!(
            matches!(
                err,
                WorkspaceError::NotAFile {
                    kind: "directory",
                    ..
                }
            ),
            "{err}"
        );
        // Opening a FIFO for reading would block forever without O_NONBLOCK.
        let err = ws.read(&ws.resolve("pipe").unwrap()).unwrap_err();
        assert!(
            matches!(
                err,
                WorkspaceError::NotAFile {
                    kind: "named pipe",
                    ..
                }
            ),
            "{err}"
        );
        let err = ws.read(&ws.resolve("nope").unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "\"nope\" does not exist in the workspace");
        let err = ws
            .write_atomic(&ws.resolve("d").unwrap(), b"x")
            .unwrap_err();
        assert!(matches!(err, WorkspaceError::NotAFile { .. }), "{err}");
    }
}

#[test]
fn a_size_limit_is_enforced() {
    let (_tmp, root, _) = setup();
    std::fs::write(root.join("big"), vec![b'x'; 100]).unwrap();
    let ws = Workspace::open(&root).unwrap();
    let err = ws
        .read_limited(&ws.resolve("big").unwrap(), 10)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"big\" is 100 bytes, more than the 10-byte limit"
    );
}

#[test]
fn symlinks_pointing_out_are_refused_for_reads_and_writes_with_nothing_touched() {
    let (_tmp, root, outside) = setup();
    std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("secret-link")).unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", root.join("relative-link")).unwrap();
    for ws in both(&root) {
        for path in ["out/secret.txt", "secret-link", "relative-link"] {
            let err = ws.read(&ws.resolve(path).unwrap()).unwrap_err();
            assert!(err.is_escape(), "{path}: {err}");
        }
        for path in [
            "out/new.txt",
            "out/sub/new.txt",
            "secret-link",
            "relative-link",
        ] {
            let err = ws
                .write_atomic(&ws.resolve(path).unwrap(), b"pwned")
                .unwrap_err();
            assert!(err.is_escape(), "{path}: {err}");
        }
    }
    assert_eq!(listing(&outside), ["secret.txt"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret"
    );
}

#[test]
fn a_symlink_inside_the_root_is_followed_for_reads_only_where_the_kernel_confines_it() {
    let (_tmp, root, _) = setup();
    std::fs::write(root.join("real.txt"), "real").unwrap();
    std::os::unix::fs::symlink("real.txt", root.join("alias.txt")).unwrap();
    let [auto, walk] = both(&root);
    let p = auto.resolve("alias.txt").unwrap();
    match auto.read(&p) {
        Ok(bytes) => assert_eq!(bytes, b"real"),
        // A kernel without openat2 falls back to the no-follow walk.
        Err(e) => assert!(e.is_escape(), "{e}"),
    }
    assert!(walk.read(&p).unwrap_err().is_escape());
    // Writing never replaces a link, even one that stays inside.
    assert!(auto.write_atomic(&p, b"x").unwrap_err().is_escape());
    assert_eq!(
        std::fs::read_to_string(root.join("real.txt")).unwrap(),
        "real"
    );
}

/// Flips `root/sub` between a real directory and a symlink to `outside` until `stop`.
fn flipper(root: &Path, outside: &Path, stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    let sub = root.join("sub");
    let parked = root.join("sub-real");
    let outside = outside.to_path_buf();
    thread::spawn(move || {
        let mut flips = 0;
        while !stop.load(Ordering::Relaxed) {
            if std::fs::rename(&sub, &parked).is_ok() {
                // A writer may recreate `sub` as a directory the moment it is gone; clear it.
                for _ in 0..10 {
                    if std::os::unix::fs::symlink(&outside, &sub).is_ok() {
                        flips += 1;
                        break;
                    }
                    let _ = std::fs::remove_dir_all(&sub);
                }
                thread::yield_now();
                let _ = std::fs::remove_file(&sub);
                while std::fs::rename(&parked, &sub).is_err() {
                    let _ = std::fs::remove_dir_all(&sub);
                }
            }
            thread::yield_now();
        }
        flips
    })
}

#[test]
fn a_symlink_swapped_in_between_check_and_use_never_leads_outside() {
    let (_tmp, root, outside) = setup();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/secret.txt"), "inside").unwrap();
    for ws in both(&root) {
        let stop = Arc::new(AtomicBool::new(false));
        let flips = flipper(&root, &outside, stop.clone());
        let target = ws.resolve("sub/written.txt").unwrap();
        let nested = ws.resolve("sub/new-dir/written.txt").unwrap();
        let read = ws.resolve("sub/secret.txt").unwrap();
        let mut refused = 0;
        for _ in 0..2000 {
            for p in [&target, &nested] {
                // Under the flipper a write may also fail because its directory was removed;
                // what matters is that none lands outside.
                if ws.write_atomic(p, b"data").is_err() {
                    refused += 1;
                }
            }
            match ws.read(&read) {
                Ok(bytes) => assert_eq!(bytes, b"inside", "read escaped the root"),
                Err(_) => refused += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
        let flips = flips.join().unwrap();
        assert_eq!(listing(&outside), ["secret.txt"], "nothing written outside");
        assert_eq!(
            std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
            "secret"
        );
        // The race is real only if the flipper ran and some operations met the link.
        assert!(flips > 0 && refused > 0, "flips {flips}, refused {refused}");
    }
}

#[test]
fn a_concurrent_reader_never_sees_a_half_written_file() {
    let (_tmp, root, _) = setup();
    let ws = Workspace::open(&root).unwrap();
    let p = ws.resolve("atomic.bin").unwrap();
    let size = 1 << 20;
    ws.write_atomic(&p, &vec![b'a'; size]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let ws = ws.clone();
        let p = p.clone();
        let stop = stop.clone();
        thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let bytes = ws.read(&p).unwrap();
                assert_eq!(bytes.len(), size, "a torn length");
                let first = bytes[0];
                assert!(bytes.iter().all(|&b| b == first), "a mixed file");
                reads += 1;
            }
            reads
        })
    };
    for i in 0..40 {
        let byte = if i % 2 == 0 { b'b' } else { b'a' };
        ws.write_atomic(&p, &vec![byte; size]).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(listing(&root), ["atomic.bin"]);
}

#[cfg(unix)]
#[test]
fn hostile_ignore_files_neither_hang_nor_exhaust_the_listing() {
    let (_tmp, root, _outside) = setup();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("a.txt"), "a").unwrap();
    std::fs::write(root.join("sub/b.txt"), "b").unwrap();
    // A FIFO as a subdirectory's .gitignore: opening it would block until a writer came.
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("sub/.gitignore"))
        .status()
        .unwrap();
    assert!(made.success());
    // .git as a FIFO: the exclude lookup would open it.
    let made = std::process::Command::new("mkfifo")
        .arg(root.join(".git"))
        .status()
        .unwrap();
    assert!(made.success());
    let ws = Workspace::open(&root).unwrap();
    let dir = ws.resolve(".").unwrap();
    // Runs on a thread with a deadline: a hang fails the test instead of the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    let listing_ws = ws.clone();
    thread::spawn(move || {
        let _ = tx.send(listing_ws.files(&dir, 100, |_| true));
    });
    let listing = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the listing hung on a FIFO")
        .unwrap();
    let names: Vec<String> = listing.files.iter().map(ToString::to_string).collect();
    // The directory with the hostile ignore file is not entered; the rest is listed.
    assert_eq!(names, ["a.txt"]);
    // At the root, a symlink to an endless file is refused with a clear error.
    std::os::unix::fs::symlink("/dev/zero", root.join(".ignore")).unwrap();
    let err = ws
        .files(&ws.resolve(".").unwrap(), 100, |_| true)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(".ignore") && err.contains("at most 1 MiB"),
        "{err}"
    );
}

/// A workspace with an additional root `more` (a sibling of the root) and a third directory
/// outside both.
fn setup_more() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let (tmp, root, outside) = setup();
    let more = tmp.path().join("more");
    std::fs::create_dir_all(more.join("src")).unwrap();
    std::fs::write(more.join("src/lib.rs"), "pub fn more() {}\n").unwrap();
    (tmp, root, more, outside)
}

#[test]
fn an_absolute_path_beneath_an_additional_root_is_read_and_written_there_and_shown_absolute() {
    let (_tmp, root, more, outside) = setup_more();
    let ws = Workspace::open_with(&root, std::slice::from_ref(&more)).unwrap();
    let canonical = std::fs::canonicalize(&more).unwrap();
    assert_eq!(ws.more_roots().collect::<Vec<_>>(), [canonical.as_path()]);
    let lib = ws
        .resolve(&more.join("src/lib.rs").to_string_lossy())
        .unwrap();
    assert_eq!(lib.root(), Some(canonical.as_path()));
    assert_eq!(
        lib.to_string(),
        canonical.join("src/lib.rs").to_string_lossy()
    );
    assert_eq!(ws.read(&lib).unwrap(), b"pub fn more() {}\n");
    let new = ws
        .resolve(&more.join("gen/out.txt").to_string_lossy())
        .unwrap();
    ws.write_atomic(&new, b"made\n").unwrap();
    assert_eq!(std::fs::read(more.join("gen/out.txt")).unwrap(), b"made\n");
    assert_eq!(ws.absolute(&new), canonical.join("gen/out.txt"));
    // Relative paths stay beneath the root; `..` cannot climb out of an additional root.
    assert_eq!(ws.resolve("src/lib.rs").unwrap().root(), None);
    let climb = format!("{}/../outside/secret.txt", more.display());
    assert!(ws.resolve(&climb).unwrap_err().is_escape());
    // A path beneath neither is refused.
    let secret = outside.join("secret.txt");
    assert!(
        ws.resolve(&secret.to_string_lossy())
            .unwrap_err()
            .is_escape()
    );
    // A directory walk of an additional root lists its files, absolute.
    let dir = ws.resolve(&more.to_string_lossy()).unwrap();
    let files: Vec<String> = ws
        .files(&dir, 10, |_| true)
        .unwrap()
        .files
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        files,
        [
            canonical.join("gen/out.txt").to_string_lossy().into_owned(),
            canonical.join("src/lib.rs").to_string_lossy().into_owned(),
        ]
    );
}

#[test]
fn a_symlink_out_of_an_additional_root_is_refused_as_out_of_the_root() {
    let (_tmp, root, more, outside) = setup_more();
    std::os::unix::fs::symlink(&outside, more.join("out")).unwrap();
    let ws = Workspace::open_with(&root, std::slice::from_ref(&more)).unwrap();
    for ws in [ws.clone(), ws.with_resolution(Resolution::Walk)] {
        let escape = ws
            .resolve(&more.join("out/secret.txt").to_string_lossy())
            .unwrap();
        assert!(ws.read(&escape).unwrap_err().is_escape());
        assert!(ws.write_atomic(&escape, b"x").unwrap_err().is_escape());
    }
    assert_eq!(listing(&outside), ["secret.txt"]);
}

#[test]
fn additional_roots_must_exist_and_are_bounded_in_number() {
    let (tmp, root, more, _) = setup_more();
    let missing = tmp.path().join("missing");
    assert!(matches!(
        Workspace::open_with(&root, &[missing]),
        Err(WorkspaceError::Root { .. })
    ));
    let many = vec![more; MAX_MORE_ROOTS + 1];
    assert!(matches!(
        Workspace::open_with(&root, &many),
        Err(WorkspaceError::TooManyRoots { .. })
    ));
    // A root beneath the workspace's own adds nothing.
    std::fs::create_dir_all(root.join("inner")).unwrap();
    let ws = Workspace::open_with(&root, &[root.join("inner")]).unwrap();
    assert_eq!(ws.more_roots().count(), 0);
}
