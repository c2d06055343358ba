//! `cordis stress` for CI: shard reports and their merge, JUnit files, time budgets and GitHub
//! annotations, driven through the CLI as a CI job would.

mod common;

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
    assert!(merged.out.contains("gap: seed index 2\n"), "{}", merged.out);
    assert!(merged.out.contains("verdict: FAILED"), "{}", merged.out);
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
