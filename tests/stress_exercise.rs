//! Whole-session determinism: `cordis stress --exercise` boots, holds a scripted conversation
//! whose tool calls run in parallel, disposes, and compares the session logs of every seed.

use crate::common;

use std::collections::BTreeSet;

use common::{cordis, fixture};
use cordis::exercise::{ExerciseScript, exercise, exercise_plan};
use cordis_host::digest::canonical_bytes;
use cordis_host::{PlanOptions, load_plan};
use cordis_runtime::{Policy, Schedule};

fn plan(name: &str) -> cordis_host::LoadPlan {
    let file = fixture(&format!("exercise/{name}"));
    let source = std::fs::read_to_string(&file).unwrap();
    load_plan(
        &source,
        &file,
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn script() -> ExerciseScript {
    ExerciseScript::load(std::path::Path::new(&fixture("exercise/script.yml"))).unwrap()
}

/// One exercise of `fixture` per seed of `0..seeds` under the random schedule, each checked to
/// leave nothing live after disposal.
fn exercises(fixture: &str, seeds: u64) -> Vec<cordis::exercise::ExerciseOutcome> {
    let script = script();
    let plan = exercise_plan(&plan(fixture), &script).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    (0..seeds)
        .map(|seed| {
            let run = rt
                .block_on(exercise(
                    &plan,
                    &script,
                    Schedule::new(Policy::Random, seed),
                ))
                .unwrap();
            assert!(
                run.live_after.is_zero(),
                "seed {seed}: {:?}",
                run.live_after
            );
            run
        })
        .collect()
}

#[test]
fn the_log_agrees_across_seeds_while_tool_completion_order_varies() {
    let mut logs = BTreeSet::new();
    let mut completion_orders = BTreeSet::new();
    for run in exercises("parallel.yml", 64) {
        assert!(
            run.turns.iter().all(|t| t.contains("completed")),
            "{:?}",
            run.turns
        );
        assert_eq!(run.completions.len(), 5, "{:?}", run.completions);
        logs.insert(canonical_bytes(&run.comparable()));
        completion_orders.insert(run.completions);
    }
    // Not vacuous: the tools really finished in different orders...
    assert!(completion_orders.len() > 1, "{completion_orders:?}");
    // ...and the log never showed it.
    assert_eq!(logs.len(), 1);
}

#[test]
fn stress_exercise_over_the_parallel_composition_agrees() {
    let run = cordis(
        &[
            "stress",
            &fixture("exercise/parallel.yml"),
            "--exercise",
            &fixture("exercise/script.yml"),
            "--seeds",
            "300",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.err);
    assert!(run.out.starts_with("300 seeds agree"), "{}", run.out);
}

/// The replay commands a divergence printed, as argument lists.
fn replays(err: &str) -> Vec<Vec<String>> {
    err.lines()
        .filter_map(|l| l.trim().strip_prefix("cordis "))
        .map(|l| l.split(' ').map(str::to_owned).collect())
        .collect()
}

#[test]
fn a_racy_plugin_is_caught_under_random_and_pct_and_each_replay_reproduces_its_log() {
    for policy in ["random", "pct"] {
        let run = cordis(
            &[
                "stress",
                &fixture("exercise/racy.yml"),
                "--exercise",
                &fixture("exercise/script.yml"),
                "--seeds",
                "1000",
                "--schedule",
                policy,
            ],
            &[],
        );
        assert_eq!(run.code, 1, "{policy}: {}", run.out);
        assert!(run.err.contains("diverge"), "{}", run.err);
        assert!(
            run.err.contains("first differing session event"),
            "{}",
            run.err
        );
        let commands = replays(&run.err);
        assert_eq!(commands.len(), 2, "{}", run.err);
        let mut logs = Vec::new();
        for command in &commands {
            let args: Vec<&str> = command.iter().map(String::as_str).collect();
            let first = cordis(&args, &[]);
            let again = cordis(&args, &[]);
            assert_eq!(first.code, 0, "{}", first.err);
            assert!(
                first.out.contains("\"type\":\"tool/result\""),
                "{}",
                first.out
            );
            // A seed replays its log exactly.
            assert_eq!(first.out, again.out, "{command:?}");
            logs.push(first.out);
        }
        // And the two seeds' logs differ, as the divergence said.
        assert_ne!(logs[0], logs[1], "{policy}");
    }
}

#[test]
fn an_exercise_needs_an_agent_and_a_valid_script() {
    let dir = std::env::temp_dir().join(format!("cordis-exercise-bad-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let bad_script = dir.join("bad.yml");
    std::fs::write(&bad_script, "turn: [oops]\n").unwrap();
    let run = cordis(
        &[
            "stress",
            &fixture("exercise/parallel.yml"),
            "--exercise",
            bad_script.to_str().unwrap(),
            "--seeds",
            "1",
        ],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(run.err.contains("not an exercise script"), "{}", run.err);
    let run = cordis(
        &[
            "stress",
            &fixture("good.yml"),
            "--exercise",
            &fixture("exercise/script.yml"),
            "--seeds",
            "1",
        ],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(run.err.contains("has no `llm` entry"), "{}", run.err);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mutating_tools_run_one_at_a_time_in_call_order_so_the_race_is_gone() {
    let mut logs = BTreeSet::new();
    for (seed, run) in exercises("racy-mutating.yml", 64).into_iter().enumerate() {
        // Completion order is call order, every seed.
        let tools: Vec<&str> = run
            .completions
            .iter()
            .map(|c| c.rsplit(": ").next().unwrap())
            .collect();
        assert_eq!(
            tools,
            ["alpha", "beta", "gamma", "gamma", "alpha"],
            "seed {seed}"
        );
        logs.insert(canonical_bytes(&run.comparable()));
    }
    assert_eq!(logs.len(), 1);
}

/// `stress --exercise ARGS --jobs N --json`: (exit code, stdout with `seconds` scrubbed, stderr).
fn exercise_with_jobs(composition: &str, extra: &[&str], jobs: &str) -> (u8, String, String) {
    let script = fixture("exercise/script.yml");
    let mut args = vec!["stress", composition, "--exercise", &script, "--jobs", jobs];
    args.extend_from_slice(extra);
    let run = cordis(&args, &[]);
    let out = if extra.contains(&"--json") {
        let mut value: serde_json::Value = serde_json::from_str(&run.out).unwrap();
        value["seconds"] = 0.into();
        serde_json::to_string_pretty(&value).unwrap()
    } else {
        run.out
    };
    (run.code, out, run.err)
}

#[test]
fn an_exercise_on_one_or_two_workers_reports_the_same_and_prints_logs_in_seed_order() {
    let parallel = fixture("exercise/parallel.yml");
    let one = exercise_with_jobs(&parallel, &["--seeds", "40", "--json"], "1");
    assert_eq!(one.0, 0, "{}", one.2);
    assert!(one.1.contains("\"runs\": 40"), "{}", one.1);
    assert_eq!(
        exercise_with_jobs(&parallel, &["--seeds", "40", "--json"], "2"),
        one
    );
    // Each seed's log, in seed order, whichever worker ran it.
    let logs = ["--seeds", "6", "--print-log"];
    let one = exercise_with_jobs(&parallel, &logs, "1");
    assert_eq!(one.0, 0, "{}", one.2);
    assert_eq!(
        one.1.matches("\"type\":\"request/header\"").count(),
        6,
        "{}",
        one.1
    );
    assert_eq!(exercise_with_jobs(&parallel, &logs, "3"), one);
}

#[test]
fn a_racy_exercise_on_two_workers_names_the_seeds_one_worker_names() {
    let racy = fixture("exercise/racy.yml");
    for start in ["0", "7"] {
        let args = [
            "--seeds",
            "200",
            "--start",
            start,
            "--schedule",
            "pct",
            "--json",
        ];
        let one = exercise_with_jobs(&racy, &args, "1");
        assert_eq!(one.0, 1, "{}", one.2);
        assert!(one.2.contains("diverge"), "{}", one.2);
        assert_eq!(
            exercise_with_jobs(&racy, &args, "2"),
            one,
            "--start {start}"
        );
    }
}
