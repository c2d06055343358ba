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

/// A shard report with its timing scrubbed: the one field that differs between two runs of
/// the same seeds (`seconds`), so what is left must be byte-identical.
fn untimed(json: &str) -> String {
    let mut value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["seconds"] = 0.into();
    serde_json::to_string_pretty(&value).unwrap()
}

/// A JUnit file with its `time="…"` attributes scrubbed.
fn untimed_xml(xml: &str) -> String {
    xml.split(" time=\"")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_owned()
            } else {
                part.split_once('"')
                    .map_or(String::new(), |(_, rest)| rest.to_owned())
            }
        })
        .collect::<Vec<_>>()
        .join(" time=\"\"")
}

/// `cordis stress ARGS --jobs N` with a JSON report and a JUnit file: (exit code, stdout,
/// stderr, report, JUnit), timings scrubbed.
fn with_jobs(
    dir: &std::path::Path,
    args: &[&str],
    jobs: u64,
) -> (u8, String, String, String, String) {
    let report = dir.join(format!("report-{jobs}.json"));
    let junit = dir.join(format!("junit-{jobs}.xml"));
    let jobs = jobs.to_string();
    let mut all = vec!["stress"];
    all.extend_from_slice(args);
    all.extend([
        "--jobs",
        &jobs,
        "--report",
        report.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let run = cordis(&all, &[]);
    let report = untimed(&std::fs::read_to_string(&report).unwrap());
    let junit = untimed_xml(&std::fs::read_to_string(&junit).unwrap());
    (run.code, run.out, run.err, report, junit)
}

#[test]
fn stress_on_one_or_two_workers_writes_the_same_reports_for_the_bundled_config() {
    let dir = temp("jobs-bundled");
    let bundled = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");
    let args = ["--seeds", "300", bundled];
    let one = with_jobs(&dir, &args, 1);
    assert_eq!(one.0, 0, "{}", one.2);
    assert!(one.1.starts_with("300 seeds agree: digest "), "{}", one.1);
    assert!(one.3.contains("\"runs\": 300"), "{}", one.3);
    for jobs in [2, 3] {
        assert_eq!(with_jobs(&dir, &args, jobs), one, "--jobs {jobs}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_divergence_found_on_many_workers_names_the_lowest_seed_not_the_first_to_finish() {
    // From seed 8 under this fault plan: seed 8 boots, seed 9 times out after 200 ms (the
    // lowest divergence), seeds 10 and 11 boot as 8 did and seed 12 fails at once. On two
    // workers seed 12's divergence is found while seed 9 still runs.
    let dir = temp("jobs-lowest");
    let file = dir.join("cordis.yml");
    std::fs::write(&file, SEEDED_FAULT).unwrap();
    let args = [
        file.to_str().unwrap(),
        "--seeds",
        "100",
        "--start",
        "8",
        "--timeout-ms",
        "200",
    ];
    let one = with_jobs(&dir, &args, 1);
    assert_eq!(one.0, 1, "{}", one.2);
    assert!(
        one.2
            .contains("cordis: seeds 8 and 9 diverge (schedule random):"),
        "{}",
        one.2
    );
    assert!(one.3.contains("\"coveredBelow\": 2,"), "{}", one.3);
    for jobs in [2, 4] {
        assert_eq!(with_jobs(&dir, &args, jobs), one, "--jobs {jobs}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The environment of shard `i` of `n` under each CI engine `--shard auto` reads.
fn engine_env(engine: &str, i: u64, n: u64) -> Vec<(String, String)> {
    let pairs: Vec<(&str, String)> = match engine {
        "kubernetes" => vec![("JOB_COMPLETION_INDEX", i.to_string())],
        "gitlab" => vec![
            ("CI_NODE_INDEX", (i + 1).to_string()),
            ("CI_NODE_TOTAL", n.to_string()),
        ],
        "buildkite" => vec![
            ("BUILDKITE_PARALLEL_JOB", i.to_string()),
            ("BUILDKITE_PARALLEL_JOB_COUNT", n.to_string()),
        ],
        "circleci" => vec![
            ("CIRCLE_NODE_INDEX", i.to_string()),
            ("CIRCLE_NODE_TOTAL", n.to_string()),
        ],
        _ => unreachable!("{engine}"),
    };
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

#[test]
fn shards_take_their_place_from_each_ci_engine_and_merge_into_the_whole_run() {
    let dir = temp("engines");
    let whole = cordis(
        &["stress", &fixture("good.yml"), "--seeds", "30", "--json"],
        &[],
    );
    assert_eq!(whole.code, 0, "{}", whole.err);
    let whole: serde_json::Value = serde_json::from_str(&whole.out).unwrap();
    let said = [
        (
            "kubernetes",
            "a Kubernetes Indexed Job (JOB_COMPLETION_INDEX=1) with --shard-count 3",
        ),
        ("gitlab", "GitLab (CI_NODE_INDEX=2, CI_NODE_TOTAL=3)"),
        (
            "buildkite",
            "Buildkite (BUILDKITE_PARALLEL_JOB=1, BUILDKITE_PARALLEL_JOB_COUNT=3)",
        ),
        (
            "circleci",
            "CircleCI (CIRCLE_NODE_INDEX=1, CIRCLE_NODE_TOTAL=3)",
        ),
    ];
    let good = fixture("good.yml");
    for (engine, shard_one) in said {
        let mut reports = Vec::new();
        for i in 0..3 {
            let report = dir.join(format!("{engine}-{i}.json")).display().to_string();
            let env = engine_env(engine, i, 3);
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let mut args = vec![
                "stress", &good, "--seeds", "30", "--shard", "auto", "--report", &report,
            ];
            if engine == "kubernetes" {
                args.extend(["--shard-count", "3"]);
            }
            let run = cordis(&args, &env);
            assert_eq!(run.code, 0, "{engine} {i}: {}", run.err);
            assert!(
                run.err.contains(&format!(
                    "cordis: seeds 0..30 (schedule random, shard {i}/3)"
                )),
                "{engine}: {}",
                run.err
            );
            if i == 1 {
                assert!(
                    run.err
                        .contains(&format!("cordis: shard 1/3 from {shard_one}\n")),
                    "{engine}: {}",
                    run.err
                );
            }
            let written: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
            assert_eq!(
                (
                    written["shardIndex"].as_u64(),
                    written["shardCount"].as_u64()
                ),
                (Some(i), Some(3))
            );
            reports.push(report);
        }
        let mut args = vec!["stress", "merge", "--expect", "3"];
        args.extend(reports.iter().map(String::as_str));
        let merged = cordis(&args, &[]);
        assert_eq!(merged.code, 0, "{engine}: {}{}", merged.out, merged.err);
        assert!(
            merged.out.contains("30 of 30 seed indices covered"),
            "{}",
            merged.out
        );
        assert!(
            merged.out.contains(&format!(
                "digest {} from shard(s) 0, 1, 2",
                whole["digest"].as_str().unwrap()
            )),
            "{}",
            merged.out
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shard_auto_refuses_to_guess_and_refuses_engines_that_disagree() {
    let good = fixture("good.yml");
    let auto = |env: &[(&str, &str)], extra: &[&str]| {
        let mut args = vec!["stress", &good, "--seeds", "4", "--shard", "auto"];
        args.extend_from_slice(extra);
        cordis(&args, env)
    };
    // Nothing set (GitHub Actions has no variable for a matrix job's index).
    let run = auto(&[("GITHUB_ACTIONS", "true")], &[]);
    assert_eq!(run.code, 2, "{}", run.err);
    for var in [
        "JOB_COMPLETION_INDEX",
        "CI_NODE_INDEX/CI_NODE_TOTAL",
        "BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT",
        "CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL",
        "${{ strategy.job-index }}/${{ strategy.job-total }}",
    ] {
        assert!(run.err.contains(var), "{var}: {}", run.err);
    }
    // Two engines disagreeing.
    let run = auto(
        &[
            ("CI_NODE_INDEX", "2"),
            ("CI_NODE_TOTAL", "4"),
            ("CIRCLE_NODE_INDEX", "3"),
            ("CIRCLE_NODE_TOTAL", "4"),
        ],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(
        run.err.contains(
            "the CI variables disagree: GitLab (CI_NODE_INDEX=2, CI_NODE_TOTAL=4) says shard index 1 but CircleCI (CIRCLE_NODE_INDEX=3, CIRCLE_NODE_TOTAL=4) says shard index 3"
        ),
        "{}",
        run.err
    );
    // Two engines agreeing are one answer.
    let run = auto(
        &[
            ("CI_NODE_INDEX", "2"),
            ("CI_NODE_TOTAL", "4"),
            ("BUILDKITE_PARALLEL_JOB", "1"),
            ("BUILDKITE_PARALLEL_JOB_COUNT", "4"),
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    // --shard-count against the engine's count.
    let run = auto(
        &[("CI_NODE_INDEX", "2"), ("CI_NODE_TOTAL", "4")],
        &["--shard-count", "5"],
    );
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(
        run.err
            .contains("says shard count 4 but --shard-count 5 says shard count 5"),
        "{}",
        run.err
    );
    // A Kubernetes index without a count; a 1-based index of 0; an index past the count.
    let run = auto(&[("JOB_COMPLETION_INDEX", "2")], &[]);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(run.err.contains("a Kubernetes Indexed Job (JOB_COMPLETION_INDEX=2) gives this job's index but not how many jobs there are; pass --shard-count N"), "{}", run.err);
    let run = auto(&[("CI_NODE_INDEX", "0"), ("CI_NODE_TOTAL", "4")], &[]);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(
        run.err
            .contains("CI_NODE_INDEX=\"0\" is 0, but it counts from 1"),
        "{}",
        run.err
    );
    let run = auto(&[("JOB_COMPLETION_INDEX", "4")], &["--shard-count", "4"]);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(
        run.err
            .contains("gives shard index 4 but the shard count is 4"),
        "{}",
        run.err
    );
    let run = auto(
        &[
            ("BUILDKITE_PARALLEL_JOB", "one"),
            ("BUILDKITE_PARALLEL_JOB_COUNT", "4"),
        ],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(
        run.err
            .contains("BUILDKITE_PARALLEL_JOB=\"one\" is not a whole number"),
        "{}",
        run.err
    );
}

#[test]
fn merge_expect_names_the_missing_shards_and_refuses_two_reports_of_one_shard() {
    let dir = temp("expect");
    let reports: Vec<String> = (0..4).map(|i| shard(&dir, i, 4, 40)).collect();
    let merged = cordis(
        &["stress", "merge", "--expect", "4", &reports[0], &reports[3]],
        &[],
    );
    assert_eq!(merged.code, 1, "{}{}", merged.out, merged.err);
    assert!(
        merged
            .out
            .contains("missing: 2 of 4 expected shards sent no report: shards 1, 2\n"),
        "{}",
        merged.out
    );
    assert!(merged.out.contains("verdict: FAILED"), "{}", merged.out);

    let copy = dir.join("again.json").display().to_string();
    std::fs::copy(&reports[1], &copy).unwrap();
    let mut all: Vec<&str> = vec!["stress", "merge", "--expect", "4"];
    all.extend(reports.iter().map(String::as_str));
    assert_eq!(cordis(&all, &[]).code, 0);
    all.push(&copy);
    let merged = cordis(&all, &[]);
    assert_eq!(merged.code, 2, "{}{}", merged.out, merged.err);
    assert!(
        merged.err.contains(&format!(
            "shard 1 has two reports, {} and {copy}; merge one report per shard",
            reports[1]
        )),
        "{}",
        merged.err
    );

    let merged = cordis(&["stress", "merge", "--expect", "3", &reports[0]], &[]);
    assert_eq!(merged.code, 2, "{}", merged.err);
    assert!(
        merged.err.contains(&format!(
            "{} is a shard report of 4 shards, but --expect says 3",
            reports[0]
        )),
        "{}",
        merged.err
    );
    let _ = std::fs::remove_dir_all(&dir);
}
