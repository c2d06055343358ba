//! What `cordis check` tells a person about `mcp` entries: a server that cannot start leaves
//! its entry pending with the reason (a warning, exit 0), and fails the boot only with
//! `failOnStartupError`; a bad server name points at its value.

use crate::common;

use common::{cordis, fixture};

#[test]
fn a_down_server_is_a_pending_entry_with_its_reason_by_default_and_a_failed_entry_when_strict() {
    let lenient = cordis(&["check", &fixture("mcp/down-lenient.yml")], &[]);
    assert_eq!(lenient.code, 0, "{}\n{}", lenient.out, lenient.err);
    let row = lenient
        .out
        .lines()
        .find(|l| l.starts_with("down "))
        .unwrap();
    assert!(row.contains(" pending "), "{row}");
    assert!(
        row.contains(
            "mcp(down): cannot connect: cannot start \"/nonexistent/mcp-server\": No such file or directory (os error 2); retry 1 of 10 in 500 ms"
        ),
        "{row}"
    );
    assert!(
        lenient.out.contains("tools (canonical order, 0)"),
        "{}",
        lenient.out
    );
    assert!(
        lenient
            .err
            .contains("cordis: warning: entry \"down\" is pending and retries by itself: mcp(down): cannot connect"),
        "{}",
        lenient.err
    );
    assert!(!lenient.err.contains("not active"), "{}", lenient.err);

    let strict = cordis(&["check", &fixture("mcp/down-strict.yml")], &[]);
    assert_eq!(strict.code, 1, "{}\n{}", strict.out, strict.err);
    let row = strict.out.lines().find(|l| l.starts_with("down ")).unwrap();
    assert!(row.contains("failed"), "{row}");
    assert!(
        row.contains(
            "mcp(down): initial connection or tool synchronization failed: cannot connect: cannot start \"/nonexistent/mcp-server\""
        ),
        "{row}"
    );
}

#[test]
fn a_bad_server_name_points_at_its_value() {
    let file = fixture("mcp/bad-server-name.yml");
    let run = cordis(&["check", &file], &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.out, run.err);
    assert!(
        run.err.contains(&format!(
            "{file}:7:13: entry \"files\": config.server: mcp: server name \"my files\" is invalid"
        )),
        "{}",
        run.err
    );
}

#[test]
fn a_tool_filter_naming_one_tool_in_both_lists_or_with_an_unknown_key_points_at_it() {
    let file = fixture("mcp/bad-tool-filter.yml");
    let run = cordis(&["check", &file], &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.out, run.err);
    assert!(
        run.err.contains(&format!("{file}:10:7: entry \"files\": config.tools: tool \"write\" is both in `tools.allow` and in `tools.deny`")),
        "{}",
        run.err
    );
    assert!(
        run.err.contains(&format!("{file}:20:13: entry \"docs\": config.tools.only: unknown field `only`, expected `allow` or `deny`")),
        "{}",
        run.err
    );
}
