//! `cordis check` on good and bad fixtures: messages, JSON and exit codes.

use crate::common;

use common::{cordis, fixture};

fn check_bad(name: &str) -> (String, String) {
    let file = fixture(name);
    let run = cordis(&["check", &file, "--seed", "1"], &[]);
    assert_eq!(run.code, 2, "{name}: {}", run.err);
    assert!(run.out.is_empty(), "nothing is booted: {}", run.out);
    (file, run.err)
}

/// The position is the same as before; the wording is the new parser's (saphyr-parser).
#[test]
fn yaml_syntax_errors_name_file_line_and_column() {
    let (file, err) = check_bad("bad-yaml-syntax.yml");
    assert!(
        err.contains(&format!(
            "{file}:5:9: YAML syntax error: illegal placement of ':' indicator"
        )),
        "{err}"
    );
}

/// Points at the `name` value (it pointed at the entry's dash before the marked parse).
#[test]
fn unknown_plugins_suggest_the_closest_name() {
    let (file, err) = check_bad("bad-unknown-plugin.yml");
    assert!(err.contains(&format!("{file}:4:9: entry \"marker\": unknown plugin \"debug/provde\"; did you mean \"debug/provide\"?")), "{err}");
}

/// Points at both `id` values (it pointed at the entries' dashes before the marked parse).
#[test]
fn duplicate_ids_name_both_places() {
    let (file, err) = check_bad("bad-duplicate-id.yml");
    assert!(
        err.contains(&format!(
            "{file}:5:7: entry \"same\": duplicate id \"same\"; first used at {file}:1:7"
        )),
        "{err}"
    );
}

/// Regression (issue 12): a `config.<field>` error pointed at the entry's dash, not the field.
#[test]
fn config_type_errors_name_the_entry_and_the_field_path() {
    let (file, err) = check_bad("bad-config-type.yml");
    assert!(
        err.contains(&format!(
            "{file}:4:14: entry \"marker\": config.service: unknown variant `omega`"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{file}:9:15: entry \"faulty\": config.delay_ms: invalid type: string \"soon\""
        )),
        "{err}"
    );
    assert!(err.contains("cordis: 2 configuration errors in"), "{err}");
}

#[test]
fn unknown_entry_keys_name_the_key_and_the_allowed_ones() {
    let (file, err) = check_bad("bad-unknown-key.yml");
    assert!(err.contains(&format!("{file}:3:3: entry \"noop\": unknown key \"enabled\"; allowed keys: id, name, config, disabled, inject, timeout")), "{err}");
}

#[test]
fn the_js_tag_is_rejected_with_its_line() {
    let (file, err) = check_bad("bad-js-tag.yml");
    assert!(
        err.contains(&format!(
            "{file}:5:11: entry \"llm\": the `!!js` tag is not supported"
        )),
        "{err}"
    );
}

#[test]
fn an_unset_env_var_names_the_variable_entry_and_line() {
    let (file, err) = check_bad("bad-unset-env.yml");
    assert!(err.contains(&format!("{file}:7:16: entry \"llm\": environment variable \"CORDIS_TEST_SURELY_UNSET_KEY\" is not set")), "{err}");
    let set = cordis(
        &["check", &file, "--seed", "1"],
        &[("CORDIS_TEST_SURELY_UNSET_KEY", "k")],
    );
    assert_eq!(set.code, 0, "{}", set.err);
}

#[test]
fn every_error_of_a_file_is_reported_together() {
    let (_, err) = check_bad("bad-many.yml");
    for needle in [
        "unknown plugin \"debug/noopp\"; did you mean \"debug/noop\"?",
        "duplicate id \"a\"",
        "unknown key \"colour\"",
        "entry \"c\": config.service: invalid type: integer `7`",
        "plugin library \"./libplugin.so\" not found (looked for ",
        "cordis: 5 configuration errors",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in\n{err}");
    }
}

#[test]
fn a_missing_file_is_a_configuration_error() {
    let run = cordis(&["check", "/no/such/cordis.yml", "--seed", "1"], &[]);
    assert_eq!(run.code, 2);
    assert!(
        run.err.contains("cannot read /no/such/cordis.yml"),
        "{}",
        run.err
    );
}

#[test]
fn the_good_sample_boots_every_enabled_entry() {
    let run = cordis(&["check", &fixture("good.yml"), "--seed", "42"], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.out, run.err);
    assert!(
        run.err.starts_with("cordis: seed 42 (schedule random)\n"),
        "{}",
        run.err
    );
    assert!(run.out.contains("needs-alpha-beta"), "{}", run.out);
    assert!(
        run.out.contains("assembly: none (no system-prompt entry)"),
        "{}",
        run.out
    );
    assert!(run.out.contains("not-yet") && run.out.contains("disabled"));
    assert!(run.out.contains("digest: "), "{}", run.out);
}

#[test]
fn json_output_has_seed_entries_assembly_and_a_digest_that_ignores_the_seed() {
    let file = fixture("good.yml");
    let a = cordis(&["check", &file, "--seed", "1", "--json"], &[]);
    let b = cordis(
        &["check", &file, "--json", "--schedule", "pct:3"],
        &[("CORDIS_SEED", "99")],
    );
    assert_eq!((a.code, b.code), (0, 0), "{}{}", a.err, b.err);
    let ja: serde_json::Value = serde_json::from_str(&a.out).unwrap();
    let jb: serde_json::Value = serde_json::from_str(&b.out).unwrap();
    assert_eq!(ja["seed"], 1);
    assert_eq!(jb["seed"], 99);
    assert_eq!(jb["schedule"], "pct:3");
    assert_eq!(ja["digest"], jb["digest"]);
    assert_eq!(ja["digest"].as_str().unwrap().len(), 64);
    assert_eq!(
        ja["assembly"],
        serde_json::Value::Null,
        "no system-prompt entry"
    );
    let entries = ja["entries"].as_array().unwrap();
    let statuses: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("provide-alpha", "active"),
            ("needs-alpha", "active"),
            ("tools", "active"),
            ("provide-beta", "active"),
            ("needs-alpha-beta", "active"),
            ("debug/noop#2.2", "active"),
            ("greeting", "active"),
            ("experimental", "disabled"),
            ("not-yet", "disabled"),
        ]
    );
}

#[test]
fn a_hanging_entry_times_out_alone_and_check_exits_1_with_the_seed() {
    let file = fixture("hang.yml");
    let run = cordis(
        &[
            "check",
            &file,
            "--seed",
            "5",
            "--timeout-ms",
            "50",
            "--json",
        ],
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.err);
    let j: serde_json::Value = serde_json::from_str(&run.out).unwrap();
    assert_eq!(j["entries"][0]["status"], "failed");
    assert_eq!(
        j["entries"][0]["error"],
        "apply did not finish within 50 ms (timeout)"
    );
    assert_eq!(j["entries"][1]["status"], "active");
    assert!(
        run.err
            .contains("stuck (seed 5, schedule random); replay: cordis check"),
        "{}",
        run.err
    );
    assert!(
        run.err.contains("--seed 5 --schedule random"),
        "{}",
        run.err
    );
}

#[test]
fn a_pending_entry_names_the_services_it_waits_for() {
    let dir = std::env::temp_dir().join(format!("cordis-host-pending-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    std::fs::write(
        &file,
        "- id: lonely\n  name: debug/noop\n  inject: [gamma, alpha]\n",
    )
    .unwrap();
    let run = cordis(&["check", file.to_str().unwrap(), "--seed", "0"], &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.out.contains("pending")
            && run
                .out
                .contains("waiting for services \"alpha\", \"gamma\""),
        "{}",
        run.out
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let bad = cordis(&["stress", "x.yml", "--seeds", "3", "--shard", "2/2"], &[]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.err
            .contains("shard index 2 must be below the shard count 2"),
        "{}",
        bad.err
    );
    let policy = cordis(&["check", "x.yml", "--schedule", "lifo"], &[]);
    assert_eq!(policy.code, 2);
    assert!(
        policy.err.contains("unknown schedule policy \"lifo\""),
        "{}",
        policy.err
    );
    let help = cordis(&["check", "--help"], &[]);
    assert_eq!(help.code, 0);
    assert!(
        help.out.contains("--seed") && help.out.contains("CORDIS_SEED"),
        "{}",
        help.out
    );
    let seed = cordis(&["check", &fixture("good.yml")], &[("CORDIS_SEED", "x")]);
    assert_eq!(seed.code, 2);
}

#[test]
fn the_bundled_config_prints_the_assembly_in_canonical_order() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");
    let a = cordis(&["check", file, "--seed", "3", "--json"], &[]);
    let b = cordis(
        &[
            "check",
            file,
            "--seed",
            "4",
            "--schedule",
            "pct:2",
            "--json",
        ],
        &[],
    );
    assert_eq!((a.code, b.code), (0, 0), "{}{}", a.err, b.err);
    let ja: serde_json::Value = serde_json::from_str(&a.out).unwrap();
    let jb: serde_json::Value = serde_json::from_str(&b.out).unwrap();
    assert_eq!(
        ja["assembly"]["tools"],
        serde_json::json!([
            "todo_write",
            "bash",
            "edit_file",
            "grep",
            "list_files",
            "read_file",
            "skill",
            "subagent",
            "write_file"
        ]),
        "toolOrder puts todo_write first, the rest sorted"
    );
    assert_eq!(ja["assembly"]["sections"][0]["name"], "deployment:persona");
    assert_eq!(ja["digest"], jb["digest"]);
    let text = cordis(&["check", file, "--seed", "3"], &[]);
    assert!(
        text.out.contains("tools (canonical order, 9):"),
        "{}",
        text.out
    );
}

#[test]
fn an_unknown_tool_order_name_fails_check_with_the_reference_message() {
    let dir = std::env::temp_dir().join(format!("cordis-ghost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    std::fs::write(
        &file,
        "- {id: sp, name: system-prompt, config: {toolOrder: [ghost, '<unlisted-tools>']}}\n- {id: tools, name: tools}\n- {id: todo, name: tool-todo}\n",
    )
    .unwrap();
    let run = cordis(&["check", file.to_str().unwrap(), "--seed", "1"], &[]);
    assert_eq!(run.code, 1, "{}", run.err);
    assert!(
        run.err.contains("assembling the request failed: toolOrder lists unregistered tool \"ghost\"; known tools: todo_write"),
        "{}",
        run.err
    );
    // One other seed failing the same way proves nothing: the replay, and no guess either way.
    assert!(run.err.contains("replay: cordis check"), "{}", run.err);
    assert!(!run.err.contains("scheduling race"), "{}", run.err);
    assert!(!run.err.contains("depends on the schedule"), "{}", run.err);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 12): `timeout:` inside a config string was taken for the entry's key.
#[test]
fn a_key_inside_a_string_is_not_mistaken_for_the_entry_key() {
    let (file, err) = check_bad("bad-key-in-string.yml");
    assert!(
        err.contains(&format!(
            "{file}:4:12: entry \"quiet\": key \"timeout\" must be a positive number of milliseconds, found \"soon\""
        )),
        "{err}"
    );
}

/// Regression (issue 12): a group's child's `inject:` was reported for the group's own key.
#[test]
fn a_nested_key_is_not_mistaken_for_the_entry_key() {
    let (file, err) = check_bad("bad-nested-key.yml");
    assert!(
        err.contains(&format!(
            "{file}:7:3: entry \"outer\": key \"inject\" must be absent on a group"
        )),
        "{err}"
    );
}

/// Regression (issue 12): a bad `toolOrder` failed at run time (and inside `agent-core`, not at
/// all: check exited 0). It is now a configuration error at the value, exit 2.
#[test]
fn tool_order_shape_errors_are_configuration_errors_at_the_value() {
    let (file, err) = check_bad("bad-tool-order.yml");
    let rest = "toolOrder must contain the \"<unlisted-tools>\" rest entry (where unlisted tools are inserted)";
    for needle in [
        format!("{file}:4:16: entry \"prompt\": config.toolOrder: {rest}"),
        format!("{file}:9:16: entry \"core\": config.toolOrder: {rest}"),
        format!(
            "{file}:14:23: entry \"twice\": config.toolOrder: toolOrder lists \"bash\" more than once"
        ),
        "cordis: 3 configuration errors".to_owned(),
    ] {
        assert!(err.contains(&needle), "missing {needle:?} in\n{err}");
    }
}

/// Regression (issue 11): hidden characters in ids were accepted and printed raw, unknown tags
/// were dropped, a chain of defaults was accepted, and CR-only line endings put every position
/// at 1:1. A byte-order mark is accepted.
#[test]
fn hostile_text_is_refused_at_real_positions_and_never_printed_raw() {
    let dir = std::env::temp_dir().join(format!("cordis-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    let text = std::fs::read_to_string(fixture("bad-hostile.yml")).unwrap();
    std::fs::write(&file, format!("\u{feff}{}", text.replace('\n', "\r"))).unwrap();
    let file = file.to_str().unwrap();
    let run = cordis(&["check", file, "--seed", "1"], &[]);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(!run.err.contains('\u{202e}'), "printed raw: {}", run.err);
    for needle in [
        format!(
            "{file}:3:7: entry \"ok\\u{{202e}}evil\": id \"ok\\u{{202e}}evil\" contains U+202E, a bidirectional character"
        ),
        format!("{file}:9:11: entry \"tagged\": YAML tag `!!binary` is not supported"),
        format!("{file}:14:12: entry \"chained\": unsupported expression"),
        "cordis: 3 configuration errors".to_owned(),
    ] {
        assert!(
            run.err.contains(&needle),
            "missing {needle:?} in\n{}",
            run.err
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 11): an anchored megabyte aliased 2,000 times took 30 s and 6 GB, and
/// 100,000 brackets took 52 s before the error. Both are refused before values are built.
#[test]
fn hostile_yaml_sizes_are_refused_with_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("cordis-bombs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut bomb = format!(
        "- id: a\n  name: debug/noop\n  config:\n    big: &big \"{}\"\n    copies:\n",
        "x".repeat(1 << 20)
    );
    for _ in 0..2_000 {
        bomb.push_str("      - *big\n");
    }
    let deep = format!(
        "- id: a\n  name: debug/noop\n  config: {}\n",
        "[".repeat(100_000)
    );
    for (name, src, needle) in [
        ("bomb.yml", &bomb, "7:9: YAML aliases expand to more than "),
        (
            "deep.yml",
            &deep,
            "3:266: YAML nesting is deeper than 255 levels",
        ),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, src).unwrap();
        let run = cordis(&["check", file.to_str().unwrap(), "--seed", "1"], &[]);
        assert_eq!(run.code, 2, "{name}: {}", run.err);
        assert!(run.err.contains(needle), "{name}: {}", run.err);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_code_mode_presentation_without_a_code_runtime_is_pending_on_it_by_name() {
    let source = std::fs::read_to_string(fixture("code-mode.yml")).unwrap();
    let start = source
        .find("- id: code-runtime")
        .expect("the fixture's runtime entry");
    let end = start + source[start..].find("\n- ").expect("the next entry") + 1;
    let without = format!("{}{}", &source[..start], &source[end..]);
    let dir = std::env::temp_dir().join(format!("cordis-code-pending-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    std::fs::write(&file, without).unwrap();
    let run = cordis(&["check", file.to_str().unwrap(), "--seed", "1"], &[]);
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    let row = run
        .out
        .lines()
        .find(|l| l.starts_with("presentation "))
        .unwrap_or_else(|| panic!("{}", run.out));
    assert!(
        row.contains("pending") && row.contains("waiting for service \"code-runtime\""),
        "{row}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `yml` to a fresh file and returns the errors `cordis check` and `cordis permute`
/// print for it (both must refuse it before loading anything, with exit code 2).
fn refused(name: &str, yml: &str) -> (String, String) {
    let dir = std::env::temp_dir().join(format!("cordis-claims-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    std::fs::write(&file, yml).unwrap();
    let file = file.display().to_string();
    let check = cordis(&["check", &file, "--seed", "1"], &[]);
    assert_eq!(check.code, 2, "{name}: {}\n{}", check.err, check.out);
    assert!(check.out.is_empty(), "nothing is booted: {}", check.out);
    let permute = cordis(&["permute", &file], &[]);
    assert_eq!(permute.code, 2, "{name}: {}", permute.err);
    // The diagnostics, with the file named F (the seed and summary lines differ).
    let lines = |s: &str| -> String {
        s.lines()
            .filter(|l| !l.starts_with("cordis: "))
            .map(|l| l.replace(&file, "F"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        lines(&check.err),
        lines(&permute.err),
        "check and permute agree"
    );
    let err = lines(&check.err);
    let _ = std::fs::remove_dir_all(&dir);
    (file, err)
}

const TOOLS: &str = "- {id: system-prompt, name: system-prompt}\n- {id: tools, name: tools}\n";

fn declare(id: &str, tool: &str, description: &str) -> String {
    format!(
        "- id: {id}\n  name: tool-declare\n  config:\n    tools:\n      - {{name: {tool}, description: \"{description}\", parameters: {{type: object}}}}\n"
    )
}

/// Regression (issue 23): two `tool-declare` entries with one tool name loaded with the first
/// to register winning, so the seed (and the file order under `cordis run`) chose the tool.
#[test]
fn two_entries_declaring_one_tool_are_refused_before_loading_naming_both_in_either_order() {
    let one = declare("one", "echo", "one's echo");
    let two = declare("two", "echo", "two's echo");
    let (_, err) = refused("tool", &format!("{TOOLS}{one}{two}"));
    assert!(
        err.contains("F:3:1: entry \"one\": tool \"echo\" is also claimed by entry \"two\" (F:8:1): one name, one owner; remove it from all but one of the entries, or disable all but one"),
        "{err}"
    );
    let (_, err) = refused("tool-swapped", &format!("{TOOLS}{two}{one}"));
    assert!(
        err.contains(
            "F:3:1: entry \"two\": tool \"echo\" is also claimed by entry \"one\" (F:8:1)"
        ),
        "{err}"
    );
    // Three claimants: one diagnostic, every other entry named.
    let three = declare("three", "echo", "three's echo");
    let (_, err) = refused("tool-three", &format!("{TOOLS}{one}{two}{three}"));
    assert!(
        err.contains("entry \"one\": tool \"echo\" is also claimed by entries \"two\" (F:8:1) and \"three\" (F:13:1)"),
        "{err}"
    );
}

#[test]
fn two_providers_of_one_service_are_refused_naming_both_entries_not_scope_numbers() {
    let llm = |id: &str, model: &str| {
        format!(
            "- {{id: {id}, name: llm, config: {{adapter: scripted, model: {model}, responses: [{{text: hi}}]}}}}\n"
        )
    };
    let (_, err) = refused("llm", &format!("{}{}", llm("fast", "a"), llm("slow", "b")));
    assert!(
        err.contains(
            "F:1:1: entry \"fast\": service \"llm\", service \"request-config\" are also claimed by entry \"slow\" (F:2:1): one name, one owner; remove them"
        ),
        "{err}"
    );
    assert!(!err.contains("scope "), "{err}");
    // A security policy is never first-come: two approvals entries are refused too.
    let approvals = "- {id: strict, name: approvals, config: {tools: {bash: deny}}}\n- {id: lax, name: approvals, config: {tools: {bash: allow}}}\n";
    let (_, err) = refused("approvals", &format!("{TOOLS}{approvals}"));
    assert!(
        err.contains(
            "entry \"strict\": service \"approvals\" is also claimed by entry \"lax\" (F:4:1)"
        ),
        "{err}"
    );
}

#[test]
fn agent_core_beside_a_system_prompt_entry_is_refused_for_what_its_hidden_children_provide() {
    let yml = "- {id: core, name: agent-core, config: {persona: P}}\n- {id: sp, name: system-prompt, config: {persona: Q}}\n";
    let (_, err) = refused("agent-core", yml);
    assert!(
        err.contains("F:1:1: entry \"core\": section \"deployment:persona\", service \"system-prompt\" are also claimed by entry \"sp\" (F:2:1)"),
        "{err}"
    );
}

#[test]
fn two_override_rows_of_one_kind_and_two_mcp_entries_of_one_server_are_refused() {
    let rows = "- {id: p1, name: persona, config: {text: A}}\n- {id: p2, name: persona, config: {text: B}}\n\
                - {id: o1, name: tool-order, config: {toolOrder: [a, '<unlisted-tools>']}}\n- {id: o2, name: tool-order, config: {}}\n\
                - {id: m1, name: tool-presentation, config: {mode: native}}\n- {id: m2, name: tool-presentation, config: {mode: native}}\n";
    let (_, err) = refused("overrides", &format!("{TOOLS}{rows}"));
    for (a, what, b) in [
        ("p1", "override \"persona\"", "p2"),
        ("o1", "override \"tool order\"", "o2"),
        ("m1", "override \"tool presentation\"", "m2"),
    ] {
        assert!(
            err.contains(&format!(
                "entry \"{a}\": {what} is also claimed by entry \"{b}\""
            )),
            "{a}: {err}"
        );
    }
    let mcp = "- {id: a, name: mcp, config: {server: fx, transport: stdio, command: 'true'}}\n- {id: b, name: mcp, config: {server: fx, transport: stdio, command: 'false'}}\n";
    let (_, err) = refused("mcp", &format!("{TOOLS}{mcp}"));
    assert!(
        err.contains("entry \"a\": mcp server \"fx\" is also claimed by entry \"b\" (F:4:1)"),
        "{err}"
    );
}

/// Names only run time knows (plugins that do not state them): contested, reported the same on
/// both entries under every seed, named a conflict rather than a race.
#[test]
fn a_name_two_entries_claim_at_run_time_is_a_conflict_under_every_seed() {
    let dir = std::env::temp_dir().join(format!("cordis-run-claims-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    std::fs::write(
        &file,
        format!("{TOOLS}- {{id: a, name: debug/claim, config: {{tools: [echo, mine]}}}}\n- {{id: b, name: debug/claim, config: {{tools: [echo]}}}}\n"),
    )
    .unwrap();
    let file = file.display().to_string();
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..12 {
        let run = cordis(
            &["check", &file, "--seed", &seed.to_string(), "--json"],
            &[],
        );
        assert_eq!(run.code, 1, "{}", run.err);
        let report: serde_json::Value = serde_json::from_str(&run.out).unwrap();
        let entries = report["entries"].as_array().unwrap();
        let (a, b) = (&entries[2], &entries[3]);
        assert_eq!(
            (&a["status"], &b["status"]),
            (&"conflict".into(), &"conflict".into())
        );
        assert_eq!(a["error"], b["error"]);
        assert_eq!(report["assembly"]["tools"], serde_json::json!(["mine"]));
        outcomes.insert(report["digest"].to_string());
    }
    assert_eq!(outcomes.len(), 1, "one outcome under every seed");
    let text = cordis(&["check", &file, "--seed", "3"], &[]);
    assert!(
        text.err
            .contains("entries claim one name (a conflict, the same in every load order)"),
        "{}",
        text.err
    );
    assert!(!text.err.contains("replay:"), "{}", text.err);
    assert!(
        text.err.contains(
            "tool \"echo\" is claimed by entries \"a\" and \"b\", so none of them gets it"
        ),
        "{}",
        text.err
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 40, finding 15): `check --preset X --json` printed no JSON when the preset
/// could not mount, so a script reading stdout got nothing to parse. It prints the error as
/// JSON (and still exits 1).
#[test]
fn check_preset_json_prints_the_error_as_json_when_the_preset_cannot_mount() {
    let run = cordis(
        &[
            "check",
            &common::fixture("good.yml"),
            "--seed",
            "4",
            "--preset",
            "reviewer",
            "--json",
        ],
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.err);
    let json: serde_json::Value = serde_json::from_str(&run.out)
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}): {:?}", run.out));
    assert_eq!(json["seed"], 4);
    assert_eq!(json["schedule"], "random");
    assert_eq!(json["preset"], "reviewer");
    assert_eq!(
        json["error"],
        "--preset needs an `agent-presets` entry (see the bundled cordis.yml), and it is not active"
    );
}
