use std::path::Path;

use serde_json::json;

use super::*;

fn ws() -> (tempfile::TempDir, Workspace) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("root")).unwrap();
    std::fs::create_dir(tmp.path().join("outside")).unwrap();
    std::fs::write(tmp.path().join("outside/secret.txt"), "secret").unwrap();
    let ws = Workspace::open(tmp.path().join("root")).unwrap();
    (tmp, ws)
}

fn put(ws: &Workspace, rel: &str, content: &[u8]) {
    let p = ws.root().join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

fn outside_untouched(tmp: &Path) {
    let names: Vec<_> = std::fs::read_dir(tmp.join("outside"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["secret.txt"]);
    assert_eq!(
        std::fs::read_to_string(tmp.join("outside/secret.txt")).unwrap(),
        "secret"
    );
}

#[test]
fn read_file_numbers_lines_and_reports_size_and_line_count() {
    let (_tmp, ws) = ws();
    put(&ws, "a.txt", b"alpha\nbeta\ngamma");
    let r = read_file(&ws, &FsConfig::default(), json!({"path": "a.txt"})).unwrap();
    assert_eq!(r["content"], "     1\talpha\n     2\tbeta\n     3\tgamma\n");
    assert_eq!(
        (r["size"].as_u64(), r["total_lines"].as_u64()),
        (Some(16), Some(3))
    );
    assert!(r.get("truncated").is_none());
    let r = read_file(
        &ws,
        &FsConfig::default(),
        json!({"path": "a.txt", "start_line": 2, "end_line": 2}),
    )
    .unwrap();
    assert_eq!(r["content"], "     2\tbeta\n");
    assert_eq!(
        (r["start_line"].as_u64(), r["end_line"].as_u64()),
        (Some(2), Some(2))
    );
    let r = read_file(
        &ws,
        &FsConfig::default(),
        json!({"path": "a.txt", "start_line": 3, "end_line": 99}),
    )
    .unwrap();
    assert_eq!(r["content"], "     3\tgamma\n");
    put(&ws, "empty.txt", b"");
    let r = read_file(&ws, &FsConfig::default(), json!({"path": "empty.txt"})).unwrap();
    assert_eq!(
        (r["content"].as_str(), r["total_lines"].as_u64()),
        (Some(""), Some(0))
    );
}

#[test]
fn read_file_rejects_bad_ranges_and_arguments() {
    let (_tmp, ws) = ws();
    put(&ws, "a.txt", b"x\ny\n");
    let c = FsConfig::default();
    let e = read_file(&ws, &c, json!({"path": "a.txt", "start_line": 5})).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid line range for \"a.txt\" (2 lines): start_line 5 is past the end"
    );
    let e = read_file(
        &ws,
        &c,
        json!({"path": "a.txt", "start_line": 2, "end_line": 1}),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("end_line 1 is before start_line 2"),
        "{e}"
    );
    let e = read_file(&ws, &c, json!({"path": "a.txt", "start_line": 0})).unwrap_err();
    assert!(e.to_string().contains("1-based"), "{e}");
    let e = read_file(&ws, &c, json!({"file": "a.txt"})).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("invalid read_file arguments: unknown field `file`"),
        "{e}"
    );
}

#[test]
fn read_file_refuses_binary_files_with_their_size() {
    let (_tmp, ws) = ws();
    put(&ws, "img.bin", &[0x89, b'P', b'N', b'G', 0, 1, 2]);
    put(&ws, "latin1.txt", &[b'c', b'a', b'f', 0xe9]);
    let c = FsConfig::default();
    let e = read_file(&ws, &c, json!({"path": "img.bin"})).unwrap_err();
    assert_eq!(
        e.to_string(),
        "\"img.bin\" is a binary file (7 bytes); read_file works on text only"
    );
    let e = read_file(&ws, &c, json!({"path": "latin1.txt"})).unwrap_err();
    assert!(e.to_string().contains("binary file (4 bytes)"), "{e}");
    let small = FsConfig {
        max_file_bytes: 3,
        ..FsConfig::default()
    };
    let e = read_file(&ws, &small, json!({"path": "img.bin"})).unwrap_err();
    assert!(
        e.to_string()
            .contains("7 bytes, more than the 3-byte limit"),
        "{e}"
    );
}

#[test]
fn read_file_caps_lines_and_bytes_with_a_note_on_how_to_read_on() {
    let (_tmp, ws) = ws();
    put(&ws, "long.txt", numbered(50).as_bytes());
    let c = FsConfig {
        max_read_lines: 10,
        ..FsConfig::default()
    };
    let r = read_file(&ws, &c, json!({"path": "long.txt"})).unwrap();
    assert_eq!(r["truncated"], true);
    assert_eq!(r["end_line"], 10);
    assert_eq!(r["content"].as_str().unwrap().lines().count(), 10);
    assert!(
        r["note"]
            .as_str()
            .unwrap()
            .starts_with("truncated at line 10 of 50"),
        "{r}"
    );
    assert!(
        r["note"].as_str().unwrap().contains("use start_line=11"),
        "{r}"
    );
    let r = read_file(&ws, &c, json!({"path": "long.txt", "start_line": 45})).unwrap();
    assert!(r.get("truncated").is_none());
    assert_eq!(r["end_line"], 50);
    let c = FsConfig {
        max_read_bytes: 40,
        ..FsConfig::default()
    };
    let r = read_file(&ws, &c, json!({"path": "long.txt"})).unwrap();
    assert_eq!(r["truncated"], true);
    assert!(r["content"].as_str().unwrap().len() <= 40);
}

#[test]
fn write_file_creates_parents_and_replaces_atomically() {
    let (_tmp, ws) = ws();
    let r = write_file(
        &ws,
        json!({"path": "src/new/mod.rs", "content": "fn main() {}\n"}),
    )
    .unwrap();
    assert_eq!(
        r,
        json!({"path": "src/new/mod.rs", "bytes": 13, "created": true})
    );
    let r = write_file(&ws, json!({"path": "src/new/mod.rs", "content": "x"})).unwrap();
    assert_eq!(r["created"], false);
    assert_eq!(
        std::fs::read_to_string(ws.root().join("src/new/mod.rs")).unwrap(),
        "x"
    );
}

#[test]
fn edit_file_replaces_exactly_one_match() {
    let (_tmp, ws) = ws();
    put(&ws, "lib.rs", b"fn a() {}\nfn b() {}\n");
    let c = FsConfig::default();
    let r = edit_file(
        &ws,
        &c,
        json!({"path": "lib.rs", "old_string": "fn b()", "new_string": "fn bee()"}),
    )
    .unwrap();
    assert_eq!(
        r,
        json!({"path": "lib.rs", "replacements": 1, "lines": [2]})
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("lib.rs")).unwrap(),
        "fn a() {}\nfn bee() {}\n"
    );
}

#[test]
fn edit_file_says_when_nothing_or_several_places_match() {
    let (_tmp, ws) = ws();
    let before = "x = 1\ny = 2\nx = 1\n\nx = 1\n";
    put(&ws, "v.txt", before.as_bytes());
    let c = FsConfig::default();
    let e = edit_file(
        &ws,
        &c,
        json!({"path": "v.txt", "old_string": "z = 3", "new_string": "z = 4"}),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("old_string was not found in \"v.txt\""),
        "{e}"
    );
    let e = edit_file(
        &ws,
        &c,
        json!({"path": "v.txt", "old_string": "x = 1", "new_string": "x = 2"}),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "old_string matches 3 times in \"v.txt\" (at lines 1, 3, 5); include more surrounding lines to make it unique, or set replace_all to replace every occurrence"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("v.txt")).unwrap(),
        before,
        "failed edits change nothing"
    );
    for (old, new) in [("", "a"), ("same", "same")] {
        assert!(matches!(
            edit_file(
                &ws,
                &c,
                json!({"path": "v.txt", "old_string": old, "new_string": new})
            )
            .unwrap_err(),
            FsError::UselessEdit(_)
        ));
    }
    let r = edit_file(
        &ws,
        &c,
        json!({"path": "v.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true}),
    )
    .unwrap();
    assert_eq!(r["replacements"], 3);
    assert_eq!(
        std::fs::read_to_string(ws.root().join("v.txt")).unwrap(),
        "x = 2\ny = 2\nx = 2\n\nx = 2\n"
    );
}

#[test]
fn list_files_honours_gitignore_and_globs_in_sorted_order() {
    let (_tmp, ws) = ws();
    put(&ws, ".gitignore", b"target/\n*.log\n");
    for f in [
        "src/main.rs",
        "src/lib.rs",
        "src/util/mod.rs",
        "target/debug/out.rs",
        "run.log",
        "README.md",
        ".github/ci.yml",
    ] {
        put(&ws, f, b"x");
    }
    put(&ws, ".git/config", b"x");
    let c = FsConfig::default();
    let r = list_files(&ws, &c, json!({})).unwrap();
    assert_eq!(
        r["files"],
        json!([
            ".github/ci.yml",
            ".gitignore",
            "README.md",
            "src/lib.rs",
            "src/main.rs",
            "src/util/mod.rs"
        ])
    );
    let r = list_files(&ws, &c, json!({"pattern": "*.rs"})).unwrap();
    assert_eq!(
        r["files"],
        json!(["src/lib.rs", "src/main.rs", "src/util/mod.rs"])
    );
    let r = list_files(&ws, &c, json!({"pattern": "src/*.rs"})).unwrap();
    assert_eq!(r["files"], json!(["src/lib.rs", "src/main.rs"]));
    // The root's .gitignore applies when listing a subdirectory.
    put(&ws, "src/gen.log", b"x");
    let r = list_files(&ws, &c, json!({"path": "src"})).unwrap();
    assert_eq!(
        r["files"],
        json!(["src/lib.rs", "src/main.rs", "src/util/mod.rs"])
    );
    let small = FsConfig {
        max_list_entries: 2,
        ..FsConfig::default()
    };
    let r = list_files(&ws, &small, json!({"pattern": "*.rs"})).unwrap();
    assert_eq!(
        (r["count"].as_u64(), &r["truncated"]),
        (Some(2), &json!(true))
    );
    let e = list_files(&ws, &c, json!({"pattern": "[z-a"})).unwrap_err();
    assert!(e.to_string().starts_with("invalid glob"), "{e}");
}

#[test]
fn escape_attempts_are_refused_with_nothing_touched() {
    let (tmp, ws) = ws();
    std::os::unix::fs::symlink(tmp.path().join("outside"), ws.root().join("out")).unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("outside/secret.txt"),
        ws.root().join("link.txt"),
    )
    .unwrap();
    let c = FsConfig::default();
    let abs = tmp
        .path()
        .join("outside/secret.txt")
        .to_string_lossy()
        .into_owned();
    for path in [
        "../outside/secret.txt",
        abs.as_str(),
        "out/secret.txt",
        "link.txt",
    ] {
        let e = read_file(&ws, &c, json!({"path": path})).unwrap_err();
        assert!(
            e.to_string().contains("outside the workspace root"),
            "{path}: {e}"
        );
        let e = write_file(&ws, json!({"path": path, "content": "pwned"})).unwrap_err();
        assert!(
            e.to_string().contains("outside the workspace root"),
            "{path}: {e}"
        );
        let e = edit_file(
            &ws,
            &c,
            json!({"path": path, "old_string": "secret", "new_string": "pwned"}),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("outside the workspace root"),
            "{path}: {e}"
        );
    }
    for path in ["..", "../outside", "out"] {
        let e = list_files(&ws, &c, json!({"path": path})).unwrap_err();
        assert!(
            e.to_string().contains("outside the workspace root"),
            "{path}: {e}"
        );
    }
    let e = write_file(&ws, json!({"path": "out/new.txt", "content": "pwned"})).unwrap_err();
    assert!(e.to_string().contains("outside the workspace root"), "{e}");
    outside_untouched(tmp.path());
}

#[test]
fn a_directory_swapped_for_a_symlink_mid_write_never_lets_write_or_edit_escape() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let (tmp, ws) = ws();
    let sub = ws.root().join("sub");
    let parked = ws.root().join("parked");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("secret.txt"), "secret").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, outside) = (stop.clone(), tmp.path().join("outside"));
        std::thread::spawn(move || {
            let mut flips = 0u32;
            while !stop.load(Ordering::Relaxed) {
                if std::fs::rename(&sub, &parked).is_ok() {
                    if std::os::unix::fs::symlink(&outside, &sub).is_ok() {
                        flips += 1;
                    }
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&sub);
                    while std::fs::rename(&parked, &sub).is_err() {
                        let _ = std::fs::remove_dir_all(&sub);
                    }
                }
                std::thread::yield_now();
            }
            flips
        })
    };
    let c = FsConfig::default();
    let mut refused = 0;
    for i in 0..1000 {
        let content = format!("pwned {i}");
        let writes = [
            write_file(&ws, json!({"path": "sub/secret.txt", "content": content})),
            write_file(&ws, json!({"path": "sub/new/file.txt", "content": content})),
            edit_file(
                &ws,
                &c,
                json!({"path": "sub/secret.txt", "old_string": "secret", "new_string": "x"}),
            ),
        ];
        refused += writes.iter().filter(|r| r.is_err()).count();
        // Put the marker back for the next edit, through the boundary.
        let _ = write_file(&ws, json!({"path": "sub/secret.txt", "content": "secret"}));
    }
    stop.store(true, Ordering::Relaxed);
    assert!(flipper.join().unwrap() > 0 && refused > 0);
    outside_untouched(tmp.path());
}

#[test]
fn read_file_cuts_a_huge_line_instead_of_returning_nothing() {
    let (_tmp, ws) = ws();
    put(
        &ws,
        "min.js",
        format!("{}\nnext\n", "x".repeat(10_000)).as_bytes(),
    );
    let c = FsConfig {
        max_line_chars: 10,
        max_read_bytes: 50,
        ..FsConfig::default()
    };
    let r = read_file(&ws, &c, json!({"path": "min.js"})).unwrap();
    assert_eq!(
        r["content"],
        "     1\txxxxxxxxxx [… line cut at 10 of 10000 characters]\n"
    );
    assert_eq!(
        (r["end_line"].as_u64(), &r["truncated"]),
        (Some(1), &json!(true))
    );
    let r = read_file(&ws, &c, json!({"path": "min.js", "start_line": 2})).unwrap();
    assert_eq!(r["content"], "     2\tnext\n");
}

#[test]
fn a_short_old_string_matching_everywhere_is_counted_exactly_and_listed_briefly() {
    let (_tmp, ws) = ws();
    let c = FsConfig::default();
    put(&ws, "many.txt", "e\n".repeat(50_000).as_bytes());
    let e = edit_file(
        &ws,
        &c,
        json!({"path": "many.txt", "old_string": "e", "new_string": "f"}),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("old_string matches 50000 times"), "{e}");
    assert!(
        e.contains("(at lines 1, 2, 3,") && e.contains("20, …)"),
        "{e}"
    );
    assert!(e.len() < 400, "{e}");
    let r = edit_file(
        &ws,
        &c,
        json!({"path": "many.txt", "old_string": "e", "new_string": "f", "replace_all": true}),
    )
    .unwrap();
    assert_eq!(r["replacements"], 50_000);
    assert_eq!(r["lines"].as_array().unwrap().len(), 20);
}

/// Regression (issue 24, medium 5): `replace_all` of a short string with a long one in a large
/// file built the result before any check (a 4 GB allocation aborted the host). Now its size is
/// computed first and an edit past `max_file_bytes` is refused, the file untouched.
#[test]
fn an_edit_whose_result_would_pass_the_file_limit_is_refused_before_it_is_built() {
    let (_tmp, ws) = ws();
    let c = FsConfig {
        max_file_bytes: 100_000,
        ..FsConfig::default()
    };
    let original = "e\n".repeat(50_000);
    put(&ws, "many.txt", original.as_bytes());
    let e = edit_file(
        &ws,
        &c,
        json!({"path": "many.txt", "old_string": "e", "new_string": "long!", "replace_all": true}),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "replacing 50000 occurrence(s) in \"many.txt\" would make it 300000 bytes, over the limit of 100000 (`maxFileBytes`); replace fewer at a time or write the file in parts"
    );
    let path = ws.resolve("many.txt").unwrap();
    assert_eq!(
        ws.read_limited(&path, 1 << 20).unwrap(),
        original.as_bytes()
    );
    // Exactly at the limit is allowed.
    let r = edit_file(
        &ws,
        &c,
        json!({"path": "many.txt", "old_string": "e", "new_string": "f", "replace_all": true}),
    )
    .unwrap();
    assert_eq!(r["replacements"], 50_000);
}
