//! The reader through its entry points: positions, derived ids, every problem of a file at once.

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn errors(src: &str) -> Vec<String> {
    let (_, errors) = parse_lenient(src, "f.yml", &no_env);
    errors.iter().map(ToString::to_string).collect()
}

/// Regression: the `!!js` scan sliced a line by byte index and panicked inside a multi-byte
/// character (`text: How to use 😀`).
#[test]
fn non_ascii_text_never_panics_the_parser() {
    let samples = [
        "- id: a\n  name: debug/noop\n  config: {text: How to use 😀_smile.}\n",
        "- id: é\n  name: \"～\"\n# 😀 !!js\n",
        "- {id: a, name: debug/noop, config: {x: \"😀 !!js\"}}\n",
        "- id: a\n  name: debug/noop\n  config: \"${{ env.😀 }}\"\n",
        "😀: [\n",
    ];
    for src in samples {
        let _ = parse(src, "t.yml", &no_env);
    }
    let js = parse(
        "- id: a\n  name: x😀\n  config: !!js process.env.X\n",
        "t.yml",
        &no_env,
    );
    assert!(js.is_err());
}

#[test]
fn entries_get_their_lines_and_derived_ids() {
    let src = "# comment\n- id: a\n  name: debug/noop\n\n- name: cordis/group\n  config:\n    - name: debug/noop\n      config: {}\n    - id: c\n      name: debug/noop\n";
    let cfg = parse(src, "f.yml", &no_env).unwrap();
    assert_eq!(cfg.entries.len(), 2);
    assert_eq!(cfg.entries[0].id, "a");
    assert_eq!(cfg.entries[0].pos, Pos { line: 2, column: 1 });
    let group = &cfg.entries[1];
    assert!(group.is_group);
    assert_eq!(group.id, "cordis/group#1");
    assert_eq!(group.pos.line, 5);
    assert_eq!(group.children[0].id, "debug/noop#1.0");
    assert_eq!(group.children[0].pos, Pos { line: 7, column: 5 });
    assert_eq!(group.children[1].id, "c");
    assert_eq!(group.children[1].pos.line, 9);
}

#[test]
fn a_disabled_group_disables_its_children_and_skips_their_interpolation() {
    let src = "- name: cordis/group\n  disabled: true\n  config:\n  - name: debug/noop\n    config: {x: '${{ env.UNSET }}'}\n";
    let cfg = parse(src, "f.yml", &no_env).unwrap();
    assert!(cfg.entries[0].children[0].disabled);
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let (_, errors) = parse_lenient("- id: a\n  name: [x\n", "f.yml", &no_env);
    assert_eq!(errors.len(), 1);
    assert!(matches!(errors[0].problem, Problem::Syntax(_)));
    assert!(errors[0].pos.line >= 2, "{:?}", errors[0]);
}

/// A bad value is reported at the value (it was the key's column before the marked parse).
#[test]
fn every_entry_problem_is_reported_together() {
    let src = "- id: a\n  name: debug/noop\n  colour: red\n- id: b\n  disabled: maybe\n  name: debug/noop\n- id: c\n  name: debug/fault\n  config:\n    api: !!js process.env.KEY\n";
    let text = errors(src);
    assert_eq!(text.len(), 3, "{text:#?}");
    assert!(text[0].starts_with("f.yml:3:3: entry \"a\": unknown key \"colour\""));
    assert!(text[1].starts_with("f.yml:5:13: entry \"b\": key \"disabled\""));
    assert!(text[2].starts_with("f.yml:10:10: entry \"c\": the `!!js` tag"));
}

/// Regression (issue 12): the scanner took the first `timeout:` text after the dash, here
/// inside a config string, as the entry's key.
#[test]
fn a_key_inside_a_string_is_not_the_entry_key() {
    let src =
        "- id: a\n  name: debug/noop\n  config: {note: \"timeout: later\"}\n  timeout: soon\n";
    assert_eq!(
        errors(src),
        [
            "f.yml:4:12: entry \"a\": key \"timeout\" must be a positive number of milliseconds, found \"soon\""
        ]
    );
}

/// Regression (issue 12): the scanner found a nested `inject:` (inside config) first.
#[test]
fn a_nested_key_is_not_the_entry_key() {
    let src = "- id: a\n  name: debug/noop\n  config:\n    inject: [x]\n  inject: 5\n";
    assert_eq!(
        errors(src),
        ["f.yml:5:11: entry \"a\": key \"inject\" must be a list of service names, found 5"]
    );
}

#[test]
fn unknown_and_refused_tags_are_named_at_their_position() {
    let src = "- id: a\n  name: debug/noop\n  config:\n    a: !!binary aGk=\n    b: !!js/function x\n    c: !<tag:yaml.org,2002:js/function> x\n    d: !custom x\n    e: !!str 12\n    f: !!int twelve\n    g: !!set {}\n";
    let text = errors(src);
    assert_eq!(
        text,
        [
            "f.yml:4:8: entry \"a\": YAML tag `!!binary` is not supported",
            "f.yml:5:8: entry \"a\": the `!!js` tag is not supported (no code is evaluated); use `${{ env.NAME }}` or `${{ env.NAME ?? 'default' }}` instead",
            "f.yml:6:8: entry \"a\": the `!!js` tag is not supported (no code is evaluated); use `${{ env.NAME }}` or `${{ env.NAME ?? 'default' }}` instead",
            "f.yml:7:8: entry \"a\": YAML tag `!custom` is not supported",
            "f.yml:9:8: entry \"a\": YAML tag `!!int` does not fit the value \"twelve\"",
            "f.yml:10:8: entry \"a\": YAML tag `!!set` is not supported",
        ]
    );
    let ok = parse(
        "- id: a\n  name: debug/noop\n  config: {e: !!str 12, f: !!int 7}\n",
        "f.yml",
        &no_env,
    )
    .unwrap();
    assert_eq!(
        ok.entries[0].config,
        Some(serde_json::json!({"e": "12", "f": 7}))
    );
}

/// Regression (issue 11): a UTF-8 byte-order mark was refused.
#[test]
fn a_byte_order_mark_is_accepted() {
    let cfg = parse("\u{feff}- id: a\n  name: debug/noop\n", "f.yml", &no_env).unwrap();
    assert_eq!(cfg.entries[0].pos, Pos { line: 1, column: 1 });
}

/// Regression (issue 11): with CR-only line endings every position was 1:1.
#[test]
fn cr_only_line_endings_give_real_positions() {
    let src = "- id: a\r  name: debug/noop\r- id: b\r  name: debug/noop\r  colour: red\r  config: {x: \"${{ env.NOPE }}\"}\r";
    let text = errors(src);
    assert_eq!(
        text,
        [
            "f.yml:5:3: entry \"b\": unknown key \"colour\"; allowed keys: id, name, config, disabled, inject, timeout, sha256",
            "f.yml:6:20: entry \"b\": environment variable \"NOPE\" is not set (use `${{ env.NOPE ?? 'default' }}` to give a default)",
        ]
    );
}

#[test]
fn an_unset_variable_is_pointed_at_inside_a_multi_line_string() {
    let src = "- id: a\n  name: debug/noop\n  config:\n    text: |\n      first line\n      then ${{ env.NOPE }}\n";
    assert!(errors(src)[0].starts_with("f.yml:6:16: entry \"a\": environment variable \"NOPE\""));
}

#[test]
fn a_chain_of_defaults_is_a_configuration_error() {
    let src = "- id: a\n  name: debug/noop\n  config: {k: \"${{ env.X ?? 'a' ?? 'b' }}\"}\n";
    assert!(
        errors(src)[0].starts_with("f.yml:3:16: entry \"a\": unsupported expression"),
        "{:?}",
        errors(src)
    );
}

#[test]
fn duplicate_keys_are_refused_at_the_second_key() {
    let src = "- id: a\n  name: debug/noop\n  id: b\n  config: {x: 1, x: 2}\n";
    assert_eq!(
        errors(src),
        [
            "f.yml:3:3: entry \"a\": duplicate key \"id\" (the first one would be silently replaced)",
            "f.yml:4:18: entry \"a\": duplicate key \"x\" (the first one would be silently replaced)",
        ]
    );
}

/// Regression (issue 11): bidi, zero-width and control characters in ids were accepted and
/// printed raw.
#[test]
fn hidden_characters_in_ids_and_names_are_refused_and_never_printed_raw() {
    for (id, code, kind) in [
        ("a\u{202e}b", "U+202E", "bidirectional"),
        ("a\u{200b}b", "U+200B", "zero-width"),
        ("a\u{1b}[2Jb", "U+001B", "control"),
        ("a\u{2066}b", "U+2066", "bidirectional"),
    ] {
        let escaped: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() {
                    c.to_string()
                } else {
                    format!("\\u{:04X}", c as u32)
                }
            })
            .collect();
        let src = format!("- id: \"{escaped}\"\n  name: debug/noop\n");
        let text = errors(&src);
        assert_eq!(text.len(), 1, "{text:?}");
        assert!(
            text[0].starts_with("f.yml:1:7: entry \"a\\u{"),
            "{}",
            text[0]
        );
        assert!(
            text[0].contains(&format!("contains {code}, a {kind} character")),
            "{}",
            text[0]
        );
        assert!(!text[0].contains(id), "printed raw: {}", text[0]);
    }
    let text = errors("- id: ok\n  name: \"x\\u202Ey\"\n");
    assert!(
        text[0].contains("name \"x\\u{202e}y\" contains U+202E"),
        "{text:?}"
    );
}

#[test]
fn a_very_long_id_is_just_an_id() {
    let id = "x".repeat(70_000);
    let cfg = parse(
        &format!("- id: {id}\n  name: debug/noop\n  colour: red\n"),
        "f.yml",
        &no_env,
    );
    let err = cfg.unwrap_err().to_string();
    assert!(err.starts_with(&format!("f.yml:3:3: entry \"{id}\": unknown key")));
}

/// Issue 11: an anchored megabyte aliased 2,000 times took 30 s and 6 GB.
#[test]
fn alias_amplification_is_refused_before_any_value_is_built() {
    let mut src = format!(
        "- id: a\n  name: debug/noop\n  config:\n    big: &big \"{}\"\n    copies:\n",
        "x".repeat(1 << 20)
    );
    for _ in 0..2_000 {
        src.push_str("      - *big\n");
    }
    let text = errors(&src);
    assert_eq!(
        text,
        [format!(
            "f.yml:7:9: YAML aliases expand to more than {} bytes; refusing to build the value (aliases may repeat at most 1 MiB, or the file's size if larger)",
            src.len()
        )]
    );
    let small = "- id: a\n  name: debug/noop\n  config: {a: &x {k: v}, b: *x}\n";
    let cfg = parse(small, "f.yml", &no_env).unwrap();
    assert_eq!(
        cfg.entries[0].config,
        Some(serde_json::json!({"a": {"k": "v"}, "b": {"k": "v"}}))
    );
}

/// Issue 11: 100,000 brackets took 52 s before the error.
#[test]
fn deep_nesting_is_refused_with_the_limit() {
    let src = format!(
        "- id: a\n  name: debug/noop\n  config: {}\n",
        "[".repeat(100_000)
    );
    assert_eq!(
        errors(&src),
        ["f.yml:3:266: YAML nesting is deeper than 255 levels"]
    );
}

#[test]
fn config_positions_follow_the_serde_path() {
    let src = "- id: a\n  name: debug/noop\n  config:\n    list:\n      - {name: x}\n      - {name: y, extra: 1}\n    a.b: {c: 2}\n";
    let cfg = parse(src, "f.yml", &no_env).unwrap();
    let e = &cfg.entries[0];
    let at = |path: &str, msg: &str| cfg.config_pos(e, path, msg).to_string();
    assert_eq!(at("list[1].name", "invalid type"), "6:16");
    assert_eq!(
        at("list[1]", "unknown field `extra`, expected `name`"),
        "6:19"
    );
    assert_eq!(at("a.b.c", "x"), "7:14");
    assert_eq!(at("list[7]", "x"), "5:7");
    assert_eq!(at(".", "missing field `x`"), "4:5");
}

/// Regression (issue 27): with CR-only line endings the tab was reported at the scalar
/// before it (2:9): the tab scan split lines with `str::lines`, which does not end a line at
/// a lone `\r`, so it never reached line 3.
#[test]
fn a_tab_is_reported_on_its_own_line_whatever_the_line_endings() {
    for end in ["\n", "\r\n", "\r"] {
        let src = ["- id: a", "  name: tool-todo", "\t- bad tab"].join(end);
        assert_eq!(
            errors(&src),
            ["f.yml:3:1: YAML syntax error: a tab character; YAML indents with spaces, not tabs"],
            "line ending {end:?}"
        );
    }
}
