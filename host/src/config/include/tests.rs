//! The include feature end to end: parses of files that include others, patches, limits.

use std::path::{Path, PathBuf};

use super::*;
use crate::config::RawEntry;
use crate::config::{RawConfig, parse_lenient, parse_with};
use serde_json::json;

/// A fresh directory holding `files` (name, text).
fn dir(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-include-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (file, text) in files {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn env(name: &str) -> Option<String> {
    (name == "SET").then(|| "from-env".to_owned())
}

/// Parses `dir/file` as the CLI does: its text, named by its path.
fn parse(dir: &Path, file: &str) -> (RawConfig, Vec<String>) {
    let path = dir.join(file).display().to_string();
    let text = std::fs::read_to_string(&path).unwrap();
    let (raw, errors) = parse_lenient(&text, &path, &env);
    let prefix = format!("{}/", dir.display());
    let errors = errors
        .iter()
        .map(|d| d.to_string().replace(&prefix, ""))
        .collect();
    (raw, errors)
}

fn ids(raw: &RawConfig) -> Vec<(String, bool)> {
    fn walk(list: &[RawEntry], out: &mut Vec<(String, bool)>) {
        for e in list {
            out.push((e.id.clone(), e.disabled));
            walk(&e.children, out);
        }
    }
    let mut out = Vec::new();
    walk(&raw.entries, &mut out);
    out
}

const BASE: &str = "- id: keep\n  name: debug/noop\n- name: debug/noop\n- id: grp\n  name: cordis/group\n  config:\n  - id: inner\n    name: debug/noop\n    config: {a: {b: 1, c: [1, 2]}, d: x, e: \"${{ env.SET }}\"}\n  - name: debug/noop\n- id: secret\n  name: debug/noop\n  config: {key: \"${{ env.UNSET }}\"}\n";

#[test]
fn an_include_is_a_group_of_the_files_entries_with_their_own_ids() {
    let d = dir(
        "group",
        &[
            (
                "a.yml",
                "- id: top\n  name: debug/noop\n- name: cordis/include\n  config: {path: ./parts/b.yml}\n",
            ),
            (
                "parts/b.yml",
                "- id: keep\n  name: debug/noop\n- name: debug/noop\n  config: {x: \"${{ env.SET }}\"}\n",
            ),
        ],
    );
    let (raw, errors) = parse(&d, "a.yml");
    assert_eq!(errors, Vec::<String>::new());
    let inc = &raw.entries[1];
    assert!(inc.is_group);
    assert_eq!(inc.id, "cordis/include#1");
    assert_eq!(
        inc.included.as_deref(),
        Some(d.join("parts/b.yml").display().to_string().as_str())
    );
    // Written ids stay; derived ones are numbered under the include, like a group's.
    let children: Vec<&str> = inc.children.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(children, ["keep", "debug/noop#1.1"]);
    assert_eq!(inc.children[1].config, Some(json!({"x": "from-env"})));
    // Disabling the include disables its entries.
    std::fs::write(
        d.join("a.yml"),
        "- name: cordis/include\n  disabled: true\n  config: {path: parts/b.yml}\n",
    )
    .unwrap();
    let (raw, _) = parse(&d, "a.yml");
    assert!(raw.entries[0].children.iter().all(|e| e.disabled));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn patches_disable_merge_and_insert_in_the_included_tree() {
    let d = dir(
        "patches",
        &[
            ("b.yml", BASE),
            (
                "a.yml",
                "- id: inc\n  name: cordis/include\n  config:\n    path: b.yml\n    patches:\n    - disable: secret\n    - merge: inner\n      config: {a: {c: [9], n: {m: \"${{ env.SET }}\"}}, d: null}\n    - insert: [{id: first, name: debug/noop}]\n      before: keep\n    - insert: [{name: debug/noop}, {id: last, name: debug/noop}]\n      after: inner\n    - insert: [{id: second, name: debug/noop}]\n      before: keep\n",
            ),
        ],
    );
    let (raw, errors) = parse(&d, "a.yml");
    // `secret`'s unset variable is not read: the patch disabled it first.
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(
        ids(&raw),
        [
            ("inc", false),
            ("first", false),
            ("second", false),
            ("keep", false),
            ("debug/noop#0.1", false),
            ("grp", false),
            ("inner", false),
            ("debug/noop#0.p3.0", false),
            ("last", false),
            ("debug/noop#0.2.1", false),
            ("secret", true),
        ]
        .map(|(i, d)| (i.to_owned(), d))
    );
    let inner = &raw.entries[0].children[4].children[0];
    assert_eq!(inner.id, "inner");
    assert_eq!(
        inner.config,
        Some(json!({"a": {"b": 1, "c": [9], "n": {"m": "from-env"}}, "e": "from-env"}))
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn entries_inserted_into_a_disabled_group_are_disabled_like_its_own() {
    let d = dir(
        "insert-disabled",
        &[
            ("b.yml", BASE),
            (
                "a.yml",
                "- name: cordis/include\n  config:\n    path: b.yml\n    patches:\n    - insert: [{id: new, name: debug/noop, config: {k: \"${{ env.UNSET }}\"}}]\n      after: inner\n    - disable: grp\n    - disable: secret\n",
            ),
        ],
    );
    let (raw, errors) = parse(&d, "a.yml");
    assert_eq!(errors, Vec::<String>::new());
    let grp = &raw.entries[0].children[2];
    assert_eq!(grp.id, "grp");
    let inside: Vec<(&str, bool)> = grp
        .children
        .iter()
        .map(|e| (e.id.as_str(), e.disabled))
        .collect();
    assert_eq!(
        inside,
        [("inner", true), ("new", true), ("debug/noop#0.2.1", true)]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_patch_naming_a_missing_id_lists_the_files_ids_and_a_merge_into_a_group_is_refused() {
    let d = dir(
        "unknown",
        &[
            ("b.yml", BASE),
            (
                "a.yml",
                "- name: cordis/include\n  config:\n    path: b.yml\n    patches:\n    - disable: nope\n    - merge: grp\n      config: {x: 1}\n    - insert: [{name: debug/noop}]\n    - {disable: keep, merge: keep}\n    - {disable: keep, colour: red}\n",
            ),
        ],
    );
    let (_, errors) = parse(&d, "a.yml");
    assert_eq!(
        errors,
        [
            "a.yml:1:1 → b.yml:13:22: entry \"secret\": environment variable \"UNSET\" is not set (use `${{ env.UNSET ?? 'default' }}` to give a default)",
            "a.yml:5:16: entry \"cordis/include#0\": patch names entry \"nope\", which \"b.yml\" does not have; its entries: keep, debug/noop#0.1, grp, inner, debug/noop#0.2.1, secret",
            "a.yml:6:14: entry \"cordis/include#0\": cannot merge config into \"grp\": it is a group or include, which has no config of its own; merge into one of its entries",
            "a.yml:8:5: entry \"cordis/include#0\": an `insert` patch needs exactly one of `before: ID` or `after: ID`; a patch is `{disable: ID}`, `{merge: ID, config: {…}}` or `{insert: [entries], before: ID}` (or `after: ID`)",
            "a.yml:9:5: entry \"cordis/include#0\": patch 3 has both `disable` and `merge`; a patch does one thing; a patch is `{disable: ID}`, `{merge: ID, config: {…}}` or `{insert: [entries], before: ID}` (or `after: ID`)",
            "a.yml:10:23: entry \"cordis/include#0\": unknown key \"colour\" in a `disable` patch; a patch is `{disable: ID}`, `{merge: ID, config: {…}}` or `{insert: [entries], before: ID}` (or `after: ID`)",
        ]
        .map(str::to_owned)
        .into_iter()
        .map(|e| e.replace("\"b.yml\"", &format!("\"{}\"", d.join("b.yml").display())))
        .map(|e| e.replace(&format!("{}/", d.display()), ""))
        .collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn problems_inside_included_files_name_the_file_after_the_include_chain() {
    let d = dir(
        "chain",
        &[
            (
                "a.yml",
                "- id: one\n  name: debug/noop\n  colour: red\n- id: inc\n  name: cordis/include\n  config: {path: sub/b.yml}\n- id: two\n  name: debug/noop\n  colour: blue\n",
            ),
            // Relative to b.yml's directory: sub/c.yml.
            (
                "sub/b.yml",
                "- id: b1\n  name: debug/noop\n  config: {x: \"${{ env.NOPE }}\"}\n- id: deeper\n  name: cordis/include\n  config: {path: c.yml}\n",
            ),
            (
                "sub/c.yml",
                "- id: c1\n  name: debug/noop\n  timeout: soon\n",
            ),
        ],
    );
    let (_, errors) = parse(&d, "a.yml");
    assert_eq!(
        errors,
        [
            "a.yml:3:3: entry \"one\": unknown key \"colour\"; allowed keys: id, name, config, disabled, inject, timeout, sha256",
            "a.yml:4:1 → sub/b.yml:3:20: entry \"b1\": environment variable \"NOPE\" is not set (use `${{ env.NOPE ?? 'default' }}` to give a default)",
            "a.yml:4:1 → sub/b.yml:4:1 → sub/c.yml:3:12: entry \"c1\": key \"timeout\" must be a positive number of milliseconds, found \"soon\"",
            "a.yml:9:3: entry \"two\": unknown key \"colour\"; allowed keys: id, name, config, disabled, inject, timeout, sha256",
        ]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn include_cycles_missing_files_and_directories_are_errors_with_the_chain() {
    let include = |path: &str| format!("- name: cordis/include\n  config: {{path: {path}}}\n");
    let d = dir(
        "cycle",
        &[
            (
                "a.yml",
                &format!(
                    "{}{}{}",
                    include("b.yml"),
                    include("missing.yml"),
                    include("sub")
                ),
            ),
            ("b.yml", &include("a.yml")),
            ("self.yml", &include("self.yml")),
            ("sub/x", ""),
        ],
    );
    let (_, errors) = parse(&d, "a.yml");
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert_eq!(
        errors[0],
        "a.yml:1:1 → b.yml:2:18: entry \"cordis/include#0.0\": include cycle: a.yml → b.yml → a.yml"
    );
    assert!(
        errors[1].starts_with(
            "a.yml:4:18: entry \"cordis/include#1\": cannot include \"missing.yml\": No such file"
        ),
        "{}",
        errors[1]
    );
    assert_eq!(
        errors[2],
        "a.yml:6:18: entry \"cordis/include#2\": cannot include \"sub\": it is a directory; an include must be a regular file"
    );
    // A file that cannot be read as YAML reports that, not every patch as unknown.
    std::fs::write(d.join("b.yml"), "- id: [broken\n").unwrap();
    std::fs::write(
        d.join("a.yml"),
        "- name: cordis/include\n  config: {path: b.yml, patches: [{disable: x}, {disable: y}]}\n",
    )
    .unwrap();
    let (_, errors) = parse(&d, "a.yml");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("a.yml:1:1 → b.yml:2:1: YAML syntax error"),
        "{}",
        errors[0]
    );
    let (_, errors) = parse(&d, "self.yml");
    assert_eq!(
        errors,
        ["self.yml:2:18: entry \"cordis/include#0\": include cycle: self.yml → self.yml"]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_blocking_and_a_symlink_is_followed() {
    let d = dir(
        "fifo",
        &[
            (
                "a.yml",
                "- name: cordis/include\n  config: {path: pipe}\n- name: cordis/include\n  config: {path: link.yml}\n",
            ),
            ("real/b.yml", "- id: via-link\n  name: debug/noop\n"),
        ],
    );
    let made = std::process::Command::new("mkfifo")
        .arg(d.join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("real/b.yml", d.join("link.yml")).unwrap();
    // Opening the FIFO would block until a writer comes: the parse must return (a generous
    // deadline turns a hang into a failure).
    let (tx, rx) = std::sync::mpsc::channel();
    let at = d.clone();
    std::thread::spawn(move || tx.send(parse(&at, "a.yml")));
    let (raw, errors) = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the parse blocked on the FIFO");
    assert_eq!(
        errors,
        [
            "a.yml:2:18: entry \"cordis/include#0\": cannot include \"pipe\": it is not a regular file (a FIFO, socket or device); an include must be a regular file"
        ]
    );
    assert_eq!(raw.entries[1].children[0].id, "via-link");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn depth_count_and_size_are_bounded() {
    // a0 → a1 → … → a20: deeper than MAX_DEPTH.
    let files: Vec<(String, String)> = (0..=20)
        .map(|i| {
            (
                format!("a{i}.yml"),
                format!(
                    "- name: cordis/include\n  config: {{path: a{}.yml}}\n",
                    i + 1
                ),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let d = dir("depth", &refs);
    let (_, errors) = parse(&d, "a0.yml");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].ends_with(&format!("includes nest deeper than {MAX_DEPTH} files")),
        "{}",
        errors[0]
    );
    assert_eq!(errors[0].matches(" → ").count(), MAX_DEPTH);
    let _ = std::fs::remove_dir_all(&d);

    // Each file includes the next one 4 times: 4^5 includes, refused after MAX_FILES.
    let files: Vec<(String, String)> = (0..5)
        .map(|i| {
            let one = format!(
                "- name: cordis/include\n  config: {{path: w{}.yml}}\n",
                i + 1
            );
            (format!("w{i}.yml"), one.repeat(4))
        })
        .chain([("w5.yml".to_owned(), "- name: debug/noop\n".to_owned())])
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let d = dir("wide", &refs);
    let (_, errors) = parse(&d, "w0.yml");
    assert!(!errors.is_empty());
    assert!(
        errors
            .iter()
            .all(|e| e.ends_with(&format!("more than {MAX_FILES} files included in all"))),
        "{errors:#?}"
    );

    let big = format!("# {}\n", "x".repeat(usize::try_from(MAX_BYTES).unwrap()));
    let d2 = dir(
        "big",
        &[
            ("big.yml", &big),
            (
                "a.yml",
                "- name: cordis/include\n  config: {path: big.yml}\n",
            ),
        ],
    );
    let (_, errors) = parse(&d2, "a.yml");
    assert_eq!(
        errors,
        [format!(
            "a.yml:2:18: entry \"cordis/include#0\": included files add up to more than {MAX_BYTES} bytes"
        )]
    );
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&d2);
}

/// Each file nests groups as deep as YAML lets one file; stacked by includes they
/// overflowed the stack (17 files: a crash, not an error).
#[test]
fn groups_nested_across_included_files_are_bounded() {
    let nested = |inner: String| {
        (0..100).fold(inner, |s, _| {
            format!("[{{name: cordis/group, config: {s}}}]")
        })
    };
    let files: Vec<(String, String)> = (0..17)
        .map(|i| {
            let inner = format!(
                "[{{name: cordis/include, config: {{path: f{}.yml}}}}]",
                i + 1
            );
            (format!("f{i}.yml"), nested(inner) + "\n")
        })
        .chain([("f17.yml".to_owned(), "- name: debug/noop\n".to_owned())])
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let d = dir("nesting", &refs);
    let (_, errors) = parse(&d, "f0.yml");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("f0.yml:1:") && errors[0].contains(" → f1.yml:1:"),
        "{}",
        errors[0]
    );
    assert!(
        errors[0].ends_with(&format!(
            "groups and includes nest deeper than {MAX_NESTING} levels across the included files"
        )),
        "{}",
        errors[0]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn files_read_ahead_are_parsed_again_without_the_disk() {
    let d = dir(
        "ahead",
        &[
            (
                "a.yml",
                "- name: cordis/include\n  config: {path: b.yml}\n- name: cordis/include\n  config: {path: gone.yml}\n",
            ),
            ("b.yml", "- id: b1\n  name: debug/noop\n"),
        ],
    );
    let file = d.join("a.yml").display().to_string();
    let text = std::fs::read_to_string(&file).unwrap();
    let mut files = IncludedFiles::read_ahead(&text, &file, &d);
    assert_eq!(files.paths(), [d.join("b.yml"), d.join("gone.yml")]);
    std::fs::remove_file(d.join("b.yml")).unwrap();
    let (raw, errors) = parse_with(&text, &file, &env, &mut files);
    assert_eq!(raw.entries[0].children[0].id, "b1");
    assert_eq!(errors.len(), 1, "{errors:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn include_config_shape_errors_are_reported() {
    let d = dir(
        "shape",
        &[(
            "a.yml",
            "- name: cordis/include\n- name: cordis/include\n  config: [x]\n- name: cordis/include\n  config: {patches: [], extra: 1}\n- name: cordis/include\n  config: {path: \"${{ env.SET }}.yml\"}\n- name: cordis/include\n  config: {path: 5}\n",
        )],
    );
    let (_, errors) = parse(&d, "a.yml");
    assert_eq!(
        errors,
        [
            "a.yml:1:1: entry \"cordis/include#0\": missing required key \"path\" (the file to include, relative to this file)",
            "a.yml:3:11: entry \"cordis/include#1\": an include's config must be a mapping `{path: FILE, patches: [...]}`, found a list",
            "a.yml:5:11: entry \"cordis/include#2\": missing required key \"path\" (the file to include, relative to this file)",
            "a.yml:5:25: entry \"cordis/include#2\": unknown include key \"extra\"; allowed keys: path, patches",
            "a.yml:7:18: entry \"cordis/include#3\": include paths are literal: `${{ … }}` is not interpolated in `path` (the watcher must find the same file without an environment)",
            "a.yml:9:18: entry \"cordis/include#4\": key \"path\" must be a file path relative to this file, found 5",
        ]
    );
    let _ = std::fs::remove_dir_all(&d);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any list of patches over the base file's ids (and unknown ones) parses without a
    /// panic, and every inserted entry lands exactly once.
    #[test]
    fn any_patch_list_applies_without_a_panic(
        patches in proptest::collection::vec((0..4usize, 0..8usize, proptest::bool::ANY), 0..12)
    ) {
        let targets = ["keep", "debug/noop#0.1", "grp", "inner", "debug/noop#0.2.1", "secret", "nope", "first0"];
        let mut yaml = String::from("- name: cordis/include\n  config:\n    path: b.yml\n    patches:\n");
        for (k, (verb, target, before)) in patches.iter().enumerate() {
            let t = targets[*target];
            yaml.push_str(&match verb {
                0 => format!("    - disable: \"{t}\"\n"),
                1 => format!("    - merge: \"{t}\"\n      config: {{a: null, z: {k}}}\n"),
                _ => format!(
                    "    - insert: [{{id: first{k}, name: debug/noop}}]\n      {}: \"{t}\"\n",
                    if *before { "before" } else { "after" }
                ),
            });
        }
        let d = dir("prop", &[("b.yml", BASE), ("a.yml", &yaml)]);
        let (raw, _) = parse(&d, "a.yml");
        let all = ids(&raw);
        for (k, (verb, target, _)) in patches.iter().enumerate() {
            let count = all.iter().filter(|(i, _)| *i == format!("first{k}")).count();
            let expected = usize::from(*verb >= 2 && targets[*target] != "nope" && targets[*target] != "first0");
            proptest::prop_assert_eq!(count, expected, "{}", yaml);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn merge_is_json_merge_patch() {
    let mut v = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": 1});
    merge(
        &mut v,
        &json!({"a": {"c": [3], "n": {"k": null, "m": 2}}, "d": null, "f": true}),
    );
    assert_eq!(
        v,
        json!({"a": {"b": 1, "c": [3], "n": {"m": 2}}, "e": 1, "f": true})
    );
    let mut null = serde_json::Value::Null;
    merge(&mut null, &json!({"x": 1, "y": null}));
    assert_eq!(null, json!({"x": 1}));
}

#[test]
fn joined_paths_drop_dot_components_only() {
    assert_eq!(join(Path::new("."), "./b.yml"), PathBuf::from("b.yml"));
    assert_eq!(join(Path::new(""), "b.yml"), PathBuf::from("b.yml"));
    assert_eq!(
        join(Path::new("conf"), "./parts/../b.yml"),
        PathBuf::from("conf/parts/../b.yml")
    );
    assert_eq!(
        join(Path::new("conf"), "/abs/b.yml"),
        PathBuf::from("/abs/b.yml")
    );
}

#[test]
fn unknown_targets_list_at_most_forty_ids() {
    let known: Vec<String> = (0..45).map(|i| format!("e{i}")).collect();
    let text = IncludeProblem::UnknownTarget {
        id: "x".into(),
        file: "b.yml".into(),
        known,
    }
    .to_string();
    assert!(text.ends_with("e38, e39 and 5 more"), "{text}");
}
