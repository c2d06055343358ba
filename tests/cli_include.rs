//! `cordis/include` as a person uses it (issue 14): a preset that includes a base composition
//! and patches it, the errors of included files named after their include chain, and
//! `check --watch` reloading when only an included file changes.

use crate::common;

use std::process::{Command, Stdio};

use common::{cordis, fixture, lines, wait_for};

/// The fixture directory with a trailing slash, to strip from messages.
fn fixtures() -> String {
    format!("{}/", fixture("include"))
}

#[test]
fn check_boots_a_preset_that_includes_and_patches_a_base_file() {
    let run = cordis(
        &["check", &fixture("include/preset.yml"), "--seed", "1"],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    let rows: Vec<(&str, &str)> = run
        .out
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (cells[0], cells[2])
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("own", "active"),
            ("base", "active"),
            // Inserted before `provide-alpha`.
            ("first", "active"),
            ("provide-alpha", "active"),
            ("greeting", "active"),
            ("tools", "active"),
            ("needs-alpha", "active"),
            // Inserted after `needs-alpha` by patch 3, inside the included group.
            ("debug/noop#1.p3.0", "active"),
            // The base file's derived id, numbered under the include.
            ("debug/noop#1.2.1", "active"),
            // Disabled by a patch: its unset variable is never read.
            ("secret", "disabled"),
        ]
    );
    // The output names the included file and its entries.
    let included = run
        .out
        .lines()
        .find(|l| l.starts_with("included: "))
        .expect("an `included:` line")
        .replace(&fixtures(), "");
    assert_eq!(
        included,
        "included: preset.yml:5:1 → parts/base.yml (provide-alpha, greeting, tools, needs-alpha, debug/noop#1.2.1, secret)"
    );
}

#[test]
fn the_merge_patch_reaches_the_plugin_config() {
    // The same preset whose merge patch also sets `mode: error`: the entry fails as that mode
    // makes it, so the plugin got the merged config.
    let dir = temp("merge");
    std::fs::create_dir_all(dir.join("parts")).unwrap();
    std::fs::copy(
        fixture("include/parts/base.yml"),
        dir.join("parts/base.yml"),
    )
    .unwrap();
    let preset = std::fs::read_to_string(fixture("include/preset.yml"))
        .unwrap()
        .replace("note: patched", "note: patched\n          mode: error");
    std::fs::write(dir.join("preset.yml"), preset).unwrap();
    let run = cordis(
        &[
            "check",
            dir.join("preset.yml").to_str().unwrap(),
            "--seed",
            "1",
        ],
        &[],
    );
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    let greeting = run
        .out
        .lines()
        .find(|l| l.starts_with("greeting "))
        .unwrap();
    assert!(greeting.contains("failed"), "{greeting}");
    // Where the failed entry is written.
    assert!(
        run.err.contains(&format!(
            "cordis: entry \"greeting\" is written in {}:5:1 → {}:7:1",
            dir.join("preset.yml").display(),
            dir.join("parts/base.yml").display()
        )),
        "{}",
        run.err
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn problems_in_an_included_file_are_reported_in_that_file_after_the_include_chain() {
    let run = cordis(
        &["check", &fixture("include/bad-chain.yml"), "--seed", "1"],
        &[],
    );
    assert_eq!(run.code, 2);
    let err = run.err.replace(&fixtures(), "");
    let lines: Vec<&str> = err.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "bad-chain.yml:6:1 → parts/bad.yml:3:9: entry \"typo\": unknown plugin \"debug/noopp\"; did you mean \"debug/noop\"?",
            "bad-chain.yml:6:1 → parts/bad.yml:9:16: entry \"needs-env\": environment variable \"INCLUDE_UNSET\" is not set (use `${{ env.INCLUDE_UNSET ?? 'default' }}` to give a default)",
            "bad-chain.yml:11:18: entry \"base\": patch names entry \"nope\", which \"parts/bad.yml\" does not have; its entries: typo, needs-env",
            "cordis: 3 configuration errors in bad-chain.yml",
        ]
    );
    // Variables are read in included files as in the top-level file.
    let run = cordis(
        &["check", &fixture("include/bad-chain.yml"), "--seed", "1"],
        &[("INCLUDE_UNSET", "set")],
    );
    assert!(!run.err.contains("INCLUDE_UNSET"), "{}", run.err);
}

#[test]
fn an_include_cycle_and_a_missing_file_are_configuration_errors() {
    let run = cordis(
        &["check", &fixture("include/cycle.yml"), "--seed", "1"],
        &[],
    );
    assert_eq!(run.code, 2);
    assert_eq!(
        run.err.replace(&fixtures(), "").lines().nth(1),
        Some(
            "cycle.yml:2:1 → parts/cycle.yml:4:18: entry \"back\": include cycle: cycle.yml → parts/cycle.yml → parts/../cycle.yml"
        )
    );
    let run = cordis(
        &["check", &fixture("include/missing.yml"), "--seed", "1"],
        &[],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.err.replace(&fixtures(), "").contains(
            "missing.yml:4:18: entry \"gone\": cannot include \"parts/does-not-exist.yml\": No such file"
        ),
        "{}",
        run.err
    );
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("cordis-cli-include-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn editing_only_an_included_file_while_watching_reloads_it() {
    let dir = temp("watch");
    std::fs::create_dir_all(dir.join("parts")).unwrap();
    let base = std::fs::read_to_string(fixture("include/parts/base.yml")).unwrap();
    std::fs::write(dir.join("parts/base.yml"), &base).unwrap();
    std::fs::copy(fixture("include/preset.yml"), dir.join("preset.yml")).unwrap();
    let file = dir.join("preset.yml");

    let mut child = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env(
            "XDG_STATE_HOME",
            std::env::temp_dir().join("cordis-test-state"),
        )
        .args(["check", file.to_str().unwrap(), "--watch", "--seed", "7"])
        .env("RUST_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let err = lines(child.stderr.take().unwrap());
    assert_eq!(
        wait_for(&err, "watching"),
        format!(
            "cordis: watching {} and the file it includes for changes (Ctrl-C to stop)",
            file.display()
        )
    );
    let first_digest = wait_for(&out, "digest: ");

    // A new entry in the included file is added.
    let with_extra =
        format!("{base}\n- id: extra\n  name: debug/provide\n  config: {{service: gamma}}\n");
    std::fs::write(dir.join("parts/base.yml"), &with_extra).unwrap();
    assert_eq!(
        wait_for(&out, "reload 1:"),
        "cordis: reload 1: added extra; removed -; restarted -; failed -"
    );
    assert_ne!(wait_for(&out, "digest: "), first_digest);

    // An edit of an entry in the included file restarts that entry only.
    std::fs::write(
        dir.join("parts/base.yml"),
        with_extra.replacen("mode: ok", "mode: ok\n    delay_ms: 1", 1),
    )
    .unwrap();
    assert_eq!(
        wait_for(&out, "reload 2:"),
        "cordis: reload 2: added -; removed -; restarted greeting; failed -"
    );

    // A broken included file is reported in that file and changes nothing.
    std::fs::write(dir.join("parts/base.yml"), "- id: [broken\n").unwrap();
    let error = wait_for(&err, "YAML syntax error");
    assert!(
        error.starts_with(&format!(
            "{}:5:1 → {}:",
            file.display(),
            dir.join("parts/base.yml").display()
        )),
        "{error}"
    );
    // Only the syntax error: the preset's patches are not reported against an unreadable file.
    assert_eq!(
        wait_for(&err, "still running the last good configuration"),
        "cordis: reload rejected (1 configuration error); still running the last good configuration"
    );

    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
