//! Determinism against orders nobody controls: three MCP fixture servers list their tools in a
//! seeded random order, in pages, after seeded delays (`tests/fixtures/mcp/three-servers.yml`);
//! `cordis check`, `cordis stress` and `cordis permute` must all print one digest, and no server
//! process may outlive the boots.
//!
//! CI runs 60 seeds; `cordis stress tests/fixtures/mcp/three-servers.yml --seeds 500` (with
//! `CORDIS_MCP_FIXTURE` set) is the full run.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{cordis, fixture};
use cordis_host::loader::boot_blocking;
use cordis_host::{PlanOptions, load_plan};
use cordis_runtime::{Policy, Schedule};

/// The fixture server binary, under the name the MCP modules use.
pub(crate) use crate::common::npm::mcp_fixture_server as fixture_server;

fn digest_line(out: &str) -> String {
    out.lines()
        .rev()
        .find_map(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "digest" && *w != "digest:")
                .nth(1)
                .map(|d| d.trim_end_matches(';').to_owned())
        })
        .unwrap_or_else(|| panic!("no digest in:\n{out}"))
}

/// Pids of running processes whose executable is `bin`.
fn running(bin: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == bin))
        .collect()
}

#[test]
fn three_servers_in_random_order_give_one_digest_to_check_stress_and_permute() {
    let bin = fixture_server().display().to_string();
    let env = [("CORDIS_MCP_FIXTURE", bin.as_str())];
    let file = fixture("mcp/three-servers.yml");

    let check = cordis(&["check", &file, "--seed", "7"], &env);
    assert_eq!(check.code, 0, "{}\n{}", check.out, check.err);
    for tool in [
        "mcp__alpha__extra_03",
        "mcp__beta__toggle",
        "mcp__gamma__admin_reset_",
    ] {
        assert!(check.out.contains(tool), "{tool} missing:\n{}", check.out);
    }
    let digest = digest_line(&check.out);

    let stress = cordis(&["stress", &file, "--seeds", "60"], &env);
    assert_eq!(stress.code, 0, "{}\n{}", stress.out, stress.err);
    assert!(stress.out.contains("60 seeds agree"), "{}", stress.out);
    assert_eq!(digest_line(&stress.out), digest, "stress vs check");

    // The catalog (prompts, resources) is digested and compared too: another seed's check
    // gives the same.
    let catalog = catalog_line(&check.out);
    let again = cordis(&["check", &file, "--seed", "8"], &env);
    assert_eq!(catalog_line(&again.out), catalog, "catalog, seed 7 vs 8");
    let permute = cordis(&["permute", &file], &env);
    assert_eq!(permute.code, 0, "{}\n{}", permute.out, permute.err);
    assert!(
        permute.out.contains("1 distinct outcome"),
        "{}",
        permute.out
    );
    assert_eq!(digest_line(&permute.out), digest, "permute vs check");

    // A SIGKILL lands a moment after `kill` returns: poll (the deadline only turns a leak into
    // a failure).
    let started = std::time::Instant::now();
    let mut left = running(fixture_server());
    while !left.is_empty() && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = running(fixture_server());
    }
    assert!(
        left.is_empty(),
        "server processes outlived their boots: {left:?}"
    );
}

/// The `catalog:` line of `cordis check`.
fn catalog_line(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("catalog: "))
        .unwrap_or_else(|| panic!("no catalog in:\n{out}"))
        .to_owned()
}

/// Servers that list their prompts and resources in other orders (other seeds, other page
/// sizes) give one catalog digest; a server offering one prompt more gives another.
#[test]
fn prompts_and_resources_listed_in_any_order_give_one_catalog_digest() {
    let bin = fixture_server().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, args: &str| {
        let file = dir.path().join(name);
        std::fs::write(
            &file,
            format!(
                "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
                 - id: a\n  name: mcp\n  config: {{transport: stdio, server: a, command: \"{bin}\", args: [--catalog, {args}]}}\n\
                 - id: b\n  name: mcp\n  config: {{transport: stdio, server: b, command: \"{bin}\", args: [--catalog, --extra-catalog, \"6\"]}}\n"
            ),
        )
        .unwrap();
        file.display().to_string()
    };
    let catalog_of = |file: &str| {
        let check = cordis(&["check", file], &[]);
        assert_eq!(check.code, 0, "{}\n{}", check.out, check.err);
        (catalog_line(&check.out), digest_line(&check.out))
    };
    let one = catalog_of(&write(
        "one.yml",
        "--extra-catalog, \"7\", --seed, \"1\", --page-size, \"2\"",
    ));
    let other = catalog_of(&write(
        "other.yml",
        "--extra-catalog, \"7\", --seed, \"99\", --page-size, \"5\"",
    ));
    assert_eq!(
        one, other,
        "listing order changed the catalog or the request"
    );
    let more = catalog_of(&write("more.yml", "--extra-catalog, \"8\", --seed, \"1\""));
    assert_ne!(
        more.0, one.0,
        "one prompt and resource more is another catalog"
    );
}

/// One tool nested past the JSON parser's limit used to make the whole tool list unreadable
/// ("no answer" after the call timeout); now it alone is left out.
#[test]
fn a_tool_nested_400_levels_is_left_out_and_its_neighbours_stay() {
    let bin = fixture_server().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.yml");
    std::fs::write(
        &file,
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n- id: srv\n  name: mcp\n  config: {{transport: stdio, server: srv, command: \"{bin}\", args: [--tools, \"add,deep,greet\"], failOnStartupError: true, callTimeoutMs: 20000}}\n"
        ),
    )
    .unwrap();
    let check = cordis(&["check", &file.display().to_string()], &[]);
    assert_eq!(check.code, 0, "{}\n{}", check.out, check.err);
    assert!(
        check.out.contains("mcp__srv__add") && check.out.contains("mcp__srv__greet"),
        "{}",
        check.out
    );
    // The reason ("its definition nests 402 levels, over the 64-level limit") goes to the
    // warning log; `cordis_mcp`'s unit tests assert its text.
    assert!(!check.out.contains("mcp__srv__deep"), "{}", check.out);
}

/// The race is real: with other server seeds (list order, page timing, delays) and other
/// schedule seeds, the tools are registered in different orders, and the digest does not move.
#[test]
fn registration_orders_differ_between_seeds_but_the_digest_does_not() {
    let bin = fixture_server().display().to_string();
    let file = fixture("mcp/three-servers.yml");
    let template = std::fs::read_to_string(&file).unwrap();
    let env = move |name: &str| (name == "CORDIS_MCP_FIXTURE").then(|| bin.clone());
    let mut digests = std::collections::BTreeSet::new();
    let mut orders = std::collections::BTreeSet::new();
    for seed in 0..12u64 {
        // The composition's server seeds, shifted per run; delays up to 80 ms.
        let source = template
            .replace("--seed, \"11\"", &format!("--seed, \"{}\"", 100 + 3 * seed))
            .replace("--seed, \"22\"", &format!("--seed, \"{}\"", 101 + 3 * seed))
            .replace("--seed, \"33\"", &format!("--seed, \"{}\"", 102 + 3 * seed))
            .replace("--max-delay-ms, \"12\"", "--max-delay-ms, \"80\"");
        assert_ne!(source, template);
        let plan = load_plan(
            &source,
            &file,
            &env,
            &cordis::builtins::standard(),
            &PlanOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (report, live) = boot_blocking(&plan, Schedule::new(Policy::Random, seed)).unwrap();
        assert!(report.all_active(), "seed {seed}: {:?}", report.entries);
        assert!(live.is_zero(), "seed {seed}: {live:?} left after dispose");
        let order: Vec<String> = report
            .trace
            .iter()
            .filter(|t| t.kind == Schedule::TRACE_REGISTER)
            .map(|t| t.detail.clone())
            .collect();
        assert_eq!(
            order.len(),
            32,
            "seed {seed}: every tool registered once (14 + 10 + 6, and alpha's and beta's read_resource)"
        );
        orders.insert(order);
        digests.insert(report.digest);
    }
    assert_eq!(digests.len(), 1, "one digest");
    assert!(
        orders.len() > 1,
        "the registration order should vary with the seeds"
    );
}

/// A stdio server runs process-scoped: it cannot read the host's secrets back through
/// `/proc/$PPID/environ` (the host blanked its environment block and is not dumpable), while
/// the server still starts and answers.
#[test]
fn a_stdio_server_cannot_read_the_hosts_environment_through_proc() {
    let bin = fixture_server().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen.txt");
    let file = dir.path().join("probe.yml");
    let probe = format!(
        "(cat /proc/$PPID/environ; cat /proc/$PPID/mem) 2>/dev/null | tr '\\\\0' '\\\\n' | grep -c CORDIS_TEST_SECRET > {}; exec {bin} --tools add",
        seen.display()
    );
    std::fs::write(
        &file,
        format!(
            "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n- id: srv\n  name: mcp\n  config: {{transport: stdio, server: srv, command: sh, args: [-c, {probe:?}], failOnStartupError: true}}\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .args(["check", &file.display().to_string()])
        .env("CORDIS_TEST_SECRET", "s3cret-value")
        .env("XDG_STATE_HOME", dir.path().join(".state"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("mcp__srv__add"),
        "the server answered: {stdout}"
    );
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), "0\n");
}

/// Regression (issue 40, finding 13): a server whose tool list changes right after the client
/// connected (its first `tools/list` answers the old list, the list changes before that answer
/// is sent, `list_changed` follows) booted one way or the other by the wall clock: whether the
/// re-sync landed before the boot's report. Now the boot confirms each list it took, so every
/// seed boots with the final list, one digest.
#[test]
fn a_tool_list_that_changes_right_after_connecting_boots_one_way_under_every_seed() {
    let bin = fixture_server().display().to_string();
    let source = format!(
        "- {{id: system-prompt, name: system-prompt}}\n- {{id: tools, name: tools}}\n\
         - id: srv\n  name: mcp\n  config: {{transport: stdio, server: srv, command: \"{bin}\", args: [--tools, \"add,greet\", --change-at-start], failOnStartupError: true}}\n"
    );
    let file = std::env::temp_dir()
        .join("cordis-mcp-change-at-start.yml")
        .display()
        .to_string();
    let mut digests = std::collections::BTreeSet::new();
    let mut tool_sets = std::collections::BTreeSet::new();
    for seed in 0..40u64 {
        let plan = load_plan(
            &source,
            &file,
            &|_: &str| None,
            &cordis::builtins::standard(),
            &PlanOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (report, live) = boot_blocking(&plan, Schedule::new(Policy::Random, seed)).unwrap();
        assert!(report.all_active(), "seed {seed}: {:?}", report.entries);
        assert!(live.is_zero(), "seed {seed}: {live:?} left after dispose");
        let tools: Vec<String> = report.assembly["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        tool_sets.insert(tools);
        digests.insert(report.digest);
    }
    assert_eq!(
        tool_sets,
        std::collections::BTreeSet::from([vec![
            "mcp__srv__add".to_owned(),
            "mcp__srv__greet".to_owned(),
            "mcp__srv__late".to_owned()
        ]]),
        "every seed boots with the final list"
    );
    assert_eq!(digests.len(), 1, "one digest: {digests:?}");
    // What a person runs: stress agrees over its seeds, and a seed's replay boots the same.
    std::fs::write(&file, &source).unwrap();
    let stress = cordis(&["stress", &file, "--seeds", "20"], &[]);
    assert_eq!(stress.code, 0, "{}\n{}", stress.out, stress.err);
    assert!(stress.out.contains("20 seeds agree"), "{}", stress.out);
    let check = cordis(&["check", &file, "--seed", "3"], &[]);
    assert!(check.out.contains("mcp__srv__late"), "{}", check.out);
    assert_eq!(digest_line(&check.out), digest_line(&stress.out));
    let _ = std::fs::remove_file(&file);
}
