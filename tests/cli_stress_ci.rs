//! `cordis stress` for CI: shard reports and their merge, JUnit files, time budgets and GitHub
//! annotations, driven through the CLI as a CI job would.

use crate::common;

use common::{cordis, fixture};

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-stress-ci-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn shard(dir: &std::path::Path, i: u64, n: u64, seeds: u64) -> String {
    let report = dir.join(format!("shard-{i}.json")).display().to_string();
    let run = cordis(
        &[
            "stress",
            &fixture("good.yml"),
            "--seeds",
            &seeds.to_string(),
            "--shard",
            &format!("{i}/{n}"),
            "--report",
            &report,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    report
}

#[test]
fn four_merged_shards_cover_exactly_the_seeds_of_one_run_and_a_missing_one_is_a_gap() {
    let dir = temp("merge");
    let reports: Vec<String> = (0..4).map(|i| shard(&dir, i, 4, 50)).collect();
    let whole = cordis(
        &["stress", &fixture("good.yml"), "--seeds", "50", "--json"],
        &[],
    );
    assert_eq!(whole.code, 0, "{}", whole.err);
    let whole: serde_json::Value = serde_json::from_str(&whole.out).unwrap();
    assert_eq!(whole["runs"], 50);

    let mut args = vec!["stress", "merge"];
    args.extend(reports.iter().map(String::as_str));
    let merged = cordis(&args, &[]);
    assert_eq!(merged.code, 0, "{}{}", merged.out, merged.err);
    assert!(
        merged.out.contains("50 of 50 seed indices covered"),
        "{}",
        merged.out
    );
    assert!(
        merged
            .out
            .contains(&format!("digest {}", whole["digest"].as_str().unwrap())),
        "{}",
        merged.out
    );

    let without_two = vec!["stress", "merge", &reports[0], &reports[1], &reports[3]];
    let merged = cordis(&without_two, &[]);
    assert_eq!(merged.code, 1, "{}", merged.out);
    assert!(
        merged.out.contains("38 of 50 seed indices covered"),
        "{}",
        merged.out
    );
    assert!(
        merged
            .out
            .contains("gap: shard 2/4: seed indices 2, 6, …, 46 (12 indices, one in 4)\n"),
        "{}",
        merged.out
    );
    assert!(merged.out.contains("verdict: FAILED"), "{}", merged.out);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_budget_cut_shard_of_a_trillion_seeds_merges_to_one_gap_and_a_doctored_one_is_refused() {
    // The old merge walked all 10^12 indices (it never finished) and kept a gap per index.
    let dir = temp("trillion");
    let report = dir.join("cut.json");
    let run = cordis(
        &[
            "stress",
            &fixture("good.yml"),
            "--seeds",
            "1000000000000",
            "--time-budget",
            "300ms",
            "--report",
            &report.display().to_string(),
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    let merged = cordis(&["stress", "merge", &report.display().to_string()], &[]);
    assert_eq!(merged.code, 1, "{}{}", merged.out, merged.err);
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let runs = written["runs"].as_u64().unwrap();
    assert!(
        merged.out.contains(&format!(
            "{runs} of 1000000000000 seed indices covered\ngap: seed indices {runs}..=999999999999 ({} indices)\n",
            1_000_000_000_000 - runs
        )),
        "{}",
        merged.out
    );

    // The same report claiming the whole range while having run nothing.
    let mut doctored = written.clone();
    doctored["runs"] = 0.into();
    doctored["coveredBelow"] = 1_000_000_000_000u64.into();
    let fake = dir.join("fake.json");
    std::fs::write(&fake, doctored.to_string()).unwrap();
    let merged = cordis(&["stress", "merge", &fake.display().to_string()], &[]);
    assert_eq!(merged.code, 2, "{}{}", merged.out, merged.err);
    assert!(
        merged.err.contains(&format!(
            "{} is not a consistent shard report: it claims the indices below 1000000000000 (1000000000000 of shard 0/1) but \"runs\" is 0; write it again with cordis stress --report FILE",
            fake.display()
        )),
        "{}",
        merged.err
    );
    let mut zero = written;
    zero["shardCount"] = 0.into();
    std::fs::write(&fake, zero.to_string()).unwrap();
    let merged = cordis(&["stress", "merge", &fake.display().to_string()], &[]);
    assert_eq!(merged.code, 2, "{}", merged.err);
    assert!(
        merged
            .err
            .contains("\"shardCount\" is 0 (a run has at least one shard)"),
        "{}",
        merged.err
    );

    // A FIFO where a report should be is refused, not waited on.
    let fifo = dir.join("fifo.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let merged = cordis(&["stress", "merge", &fifo.display().to_string()], &[]);
    assert_eq!(merged.code, 2, "{}", merged.err);
    assert!(merged.err.contains("not a regular file"), "{}", merged.err);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shards_of_two_different_runs_do_not_merge() {
    let dir = temp("mismatch");
    let a = shard(&dir, 0, 2, 10);
    let b = dir.join("other.json").display().to_string();
    let run = cordis(
        &[
            "stress",
            &fixture("good.yml"),
            "--seeds",
            "12",
            "--shard",
            "1/2",
            "--report",
            &b,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    let merged = cordis(&["stress", "merge", &a, &b], &[]);
    assert_eq!(merged.code, 2, "{}", merged.err);
    assert!(merged.err.contains("seeds differs"), "{}", merged.err);
    let _ = std::fs::remove_dir_all(&dir);
}

const SEEDED_FAULT: &str = "\
- {id: steady, name: debug/noop}
- id: flaky
  name: debug/fault
  config: {mode: seeded}
";

#[test]
fn a_divergence_writes_a_junit_failure_with_the_replay_and_annotates_the_entry_line() {
    let dir = temp("diverge");
    let file = dir.join("cordis.yml");
    std::fs::write(&file, SEEDED_FAULT).unwrap();
    let junit = dir.join("junit.xml");
    let run = cordis(
        &[
            "stress",
            file.to_str().unwrap(),
            "--seeds",
            "200",
            "--junit",
            junit.to_str().unwrap(),
            "--timeout-ms",
            "200",
        ],
        &[("GITHUB_ACTIONS", "true")],
    );
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(
        xml.contains("<failure message=\"divergence under schedule random\">"),
        "{xml}"
    );
    assert!(xml.contains("replay:\n  cordis check"), "{xml}");
    // The flaky entry is on line 2 of the file.
    assert!(
        run.out.contains(&format!(
            "::error file={},line=2,title=cordis stress::divergence in entry \"flaky\"",
            file.display()
        )),
        "{}",
        run.out
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_time_budget_runs_seeds_until_spent_and_says_how_many() {
    let run = cordis(
        &["stress", &fixture("good.yml"), "--time-budget", "300ms"],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    assert!(run.out.contains("seeds agree"), "{}", run.out);
    assert!(run.out.contains("time budget spent"), "{}", run.out);
    let neither = cordis(&["stress", &fixture("good.yml")], &[]);
    assert_eq!(neither.code, 2);
    assert!(
        neither.err.contains("--seeds N, --time-budget DURATION"),
        "{}",
        neither.err
    );
    let bad = cordis(
        &["stress", &fixture("good.yml"), "--time-budget", "soon"],
        &[],
    );
    assert_eq!(bad.code, 2);
    assert!(bad.err.contains("is not a duration"), "{}", bad.err);
}

/// Two entries claiming one tool at run time: `check` fails it under every seed.
const CONFLICT: &str = "- {id: system-prompt, name: system-prompt}\n- {id: tools, name: tools}\n\
    - {id: a, name: debug/claim, config: {tools: [echo, mine]}}\n\
    - {id: b, name: debug/claim, config: {tools: [echo]}}\n";

/// Regression (issue 40, finding 12): `stress` exited 0 (JUnit: 0 failures) when two entries
/// conflicted over a tool at run time, while `check` and `permute` exit 1 for the same file.
/// Seeds that agree on a boot `check` fails now fail `stress`, with the reason on stderr, in
/// the JSON report, in JUnit and in the GitHub annotations.
#[test]
fn seeds_that_agree_on_a_conflict_fail_stress_as_check_and_permute_fail_it() {
    let dir = temp("conflict");
    let file = dir.join("cordis.yml");
    std::fs::write(&file, CONFLICT).unwrap();
    let file = file.display().to_string();
    assert_eq!(cordis(&["check", &file, "--seed", "0"], &[]).code, 1);
    assert_eq!(cordis(&["permute", &file], &[]).code, 1);

    let junit = dir.join("junit.xml").display().to_string();
    let report = dir.join("shard.json").display().to_string();
    let run = cordis(
        &[
            "stress", &file, "--seeds", "8", "--junit", &junit, "--report", &report,
        ],
        &[("GITHUB_ACTIONS", "true")],
    );
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    assert!(
        run.err.contains(
            "cordis: 8 seeds agree, but on a boot `cordis check` fails (schedule random):\n  \
             2 entries are not active: a (conflict), b (conflict)\n  \
             conflict: tool \"echo\" is claimed by entries \"a\" and \"b\", so none of them gets it; "
        ),
        "{}",
        run.err
    );
    assert!(
        run.err.contains(&format!(
            "\nreplay:\n  cordis check {file} --seed 0 --schedule random\n"
        )),
        "{}",
        run.err
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(
        xml.contains(
            "<failure message=\"check under schedule random: 2 entries are not active: a (conflict), b (conflict)\">"
        ),
        "{xml}"
    );
    assert!(
        xml.contains("claimed by entries &quot;a&quot; and &quot;b&quot;"),
        "{xml}"
    );
    let shard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(shard["failure"]["kind"], "check", "{shard}");
    assert_eq!(shard["failure"]["entries"], serde_json::json!(["a", "b"]));
    assert_eq!(shard["runs"], 8);
    // One annotation per entry, at its line.
    for line in [3, 4] {
        assert!(
            run.out.contains(&format!(
                "::error file={file},line={line},title=cordis stress::check in entry"
            )),
            "{}",
            run.out
        );
    }
    // The merge of such a shard fails too.
    let merged = cordis(&["stress", "merge", &report], &[]);
    assert_eq!(merged.code, 1, "{}", merged.out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 40, finding 15): `stress --exercise` said "0 entries not active" while
/// entries were in `conflict` (it counted a key the exercise outcome does not have). They are
/// counted, and the run fails as the boot's `check` does.
#[test]
fn an_exercise_over_a_conflict_counts_the_entries_not_active_and_fails() {
    let dir = temp("exercise-conflict");
    let file = dir.join("cordis.yml");
    let parallel = std::fs::read_to_string(fixture("exercise/parallel.yml")).unwrap();
    std::fs::write(
        &file,
        format!(
            "{parallel}- {{id: a, name: debug/claim, config: {{tools: [echo]}}}}\n- {{id: b, name: debug/claim, config: {{tools: [echo]}}}}\n"
        ),
    )
    .unwrap();
    let run = cordis(
        &[
            "stress",
            file.to_str().unwrap(),
            "--exercise",
            &fixture("exercise/script.yml"),
            "--seeds",
            "4",
        ],
        &[],
    );
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    assert!(!run.out.contains("0 entries not active"), "{}", run.out);
    assert!(
        run.err
            .contains("2 entries are not active: a (conflict), b (conflict)"),
        "{}",
        run.err
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 40, finding 15): `stress merge` took a shard report whose `"digest"` was
/// null as agreeing (a hand-edited file, or one written by something else). It is refused,
/// naming the file.
#[test]
fn a_shard_report_with_a_null_digest_is_refused_naming_the_file() {
    let dir = temp("null-digest");
    let report = shard(&dir, 0, 1, 6);
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    json["digest"] = serde_json::Value::Null;
    std::fs::write(&report, json.to_string()).unwrap();
    let merged = cordis(&["stress", "merge", &report], &[]);
    assert_eq!(merged.code, 2, "{}{}", merged.out, merged.err);
    assert!(
        merged.err.contains(&format!(
            "cordis: {report} is not a consistent shard report: \"digest\" is null, yet it ran 6 seeds without a failure"
        )),
        "{}",
        merged.err
    );
    let _ = std::fs::remove_dir_all(&dir);
}
