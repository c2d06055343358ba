//! The race in `racy/tally` is caught from a `#[test]` (cordis::testing) under `random` and
//! `pct`, the printed replay reproduces the divergence exactly, and the embedding binary's
//! `stress --exercise` catches it too.

use std::process::Command;

use cordis::runtime::Policy;
use cordis::testing::{Divergence, SEED_ENV, Stress, stress};
use cordis_example_racy::Tally;

const RACY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");
const FIXED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.fixed.yml");
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/script.yml");

/// A harness run over `config` that ignores the process environment, so a developer's
/// `CORDIS_SEED` cannot change what these tests assert.
fn harness(config: &str, policy: Policy) -> Stress {
    stress(config)
        .plugin(Tally)
        .seeds(1_000)
        .schedule(policy)
        .exercise(SCRIPT)
        .env(|_| None)
}

fn caught(policy: Policy) -> Divergence {
    let err = harness(RACY, policy).try_run().unwrap_err();
    let divergence = err
        .divergence()
        .unwrap_or_else(|| panic!("{policy}: not a divergence: {err}"))
        .clone();
    assert!(divergence.seeds[1] < 1_000, "{divergence}");
    assert!(
        divergence.diff.contains("first differing session event"),
        "{divergence}"
    );
    assert!(divergence.diff.contains("completedBefore"), "{divergence}");
    divergence
}

#[test]
fn the_harness_catches_the_race_under_random_and_pct() {
    caught(Policy::Random);
    caught(Policy::Pct { depth: 3 });
}

#[test]
fn without_the_race_every_seed_agrees() {
    let summary = harness(FIXED, Policy::Random).seeds(200).try_run().unwrap();
    assert_eq!(summary.seeds.len(), 200);
}

#[test]
#[should_panic(expected = "diverge (schedule pct:3)")]
fn run_panics_with_the_seeds_the_diff_and_the_replay_command() {
    harness(RACY, Policy::Pct { depth: 3 }).run();
}

#[test]
fn the_printed_replay_reproduces_the_divergence_exactly() {
    for policy in [Policy::Random, Policy::Pct { depth: 3 }] {
        let divergence = caught(policy);
        let [a, b] = divergence.seeds;
        // The printed command sets CORDIS_SEED to the two seeds and names this test.
        let prefix = format!("{SEED_ENV}={a},{b} cargo test");
        assert!(
            divergence.replay.starts_with(&prefix),
            "{}",
            divergence.replay
        );
        assert!(
            divergence
                .replay
                .ends_with("-- the_printed_replay_reproduces_the_divergence_exactly --exact"),
            "{}",
            divergence.replay
        );
        // What that command does: the same divergence, byte for byte.
        let seeds = format!("{a},{b}");
        let again = stress(RACY)
            .plugin(Tally)
            .schedule(policy)
            .exercise(SCRIPT)
            .env(move |name| (name == SEED_ENV).then(|| seeds.clone()))
            .try_run()
            .unwrap_err();
        let again = again.divergence().expect("the replay diverges again");
        assert_eq!(again.seeds, divergence.seeds);
        assert_eq!(again.outcomes, divergence.outcomes);
        assert_eq!(again.diff, divergence.diff);
        // And each seed alone replays its own outcome.
        for (seed, outcome) in divergence.seeds.iter().zip(&divergence.outcomes) {
            let alone = harness(RACY, policy).only_seeds([*seed]).try_run().unwrap();
            assert_eq!(&alone.outcome, outcome, "seed {seed}");
        }
    }
}

/// Runs `cordis-racy` with `args`: (exit code, stdout, stderr).
fn cordis_racy(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cordis-racy"))
        .args(args)
        .env_remove(SEED_ENV)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_embedding_binary_catches_it_with_stress_exercise_and_replays_each_seed() {
    for policy in ["random", "pct"] {
        let (code, _, err) = cordis_racy(&[
            "stress",
            RACY,
            "--exercise",
            SCRIPT,
            "--seeds",
            "1000",
            "--schedule",
            policy,
        ]);
        assert_eq!(code, 1, "{policy}: {err}");
        assert!(err.contains("diverge"), "{err}");
        assert!(err.contains("completedBefore"), "{err}");
        let replays: Vec<Vec<&str>> = err
            .lines()
            .filter_map(|l| l.trim().strip_prefix("cordis-racy "))
            .map(|l| l.split(' ').collect())
            .collect();
        assert_eq!(replays.len(), 2, "{err}");
        let mut logs = Vec::new();
        for args in &replays {
            let (code, first, err) = cordis_racy(args);
            assert_eq!(code, 0, "{err}");
            assert_eq!(
                first,
                cordis_racy(args).1,
                "{args:?} replays its log exactly"
            );
            logs.push(first);
        }
        assert_ne!(logs[0], logs[1], "{policy}: the two seeds' logs differ");
    }
}

#[test]
fn a_boot_time_race_is_caught_without_an_exercise_and_the_diff_names_the_field() {
    let err = stress(concat!(env!("CARGO_MANIFEST_DIR"), "/first-seen.yml"))
        .plugin(Tally)
        .plugin(cordis_example_racy::FirstSeen)
        .seeds(1_000)
        .env(|_| None)
        .try_run()
        .unwrap_err();
    let divergence = err.divergence().unwrap_or_else(|| panic!("{err}"));
    assert!(
        divergence.diff.contains("Registered after:"),
        "{divergence}"
    );
    assert!(divergence.diff.contains("/digest:"), "{divergence}");
    assert!(divergence.diff.contains("request header:"), "{divergence}");
    // The replay of each seed alone gives the outcome the divergence showed.
    for (seed, outcome) in divergence.seeds.iter().zip(&divergence.outcomes) {
        let alone = stress(concat!(env!("CARGO_MANIFEST_DIR"), "/first-seen.yml"))
            .plugin(Tally)
            .plugin(cordis_example_racy::FirstSeen)
            .only_seeds([*seed])
            .env(|_| None)
            .try_run()
            .unwrap();
        assert_eq!(&alone.outcome, outcome, "seed {seed}");
    }
}

#[test]
fn permute_reports_a_load_order_race_with_two_orders_whose_replays_reproduce_them() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/first-seen.yml");
    let (code, out, err) = cordis_racy(&["permute", file]);
    assert_eq!(code, 1, "{out}\n{err}");
    // first-seen registers names it does not state, so only its order against tally matters.
    assert!(out.contains("interacting: tally~first-seen"), "{out}");
    assert!(
        out.contains(
            "2 orders (every class) standing for all 24 orders of 4 entries: 2 distinct outcomes"
        ),
        "{out}"
    );
    assert!(
        err.contains("cordis: the outcome depends on load order:"),
        "{err}"
    );
    let differs = err
        .lines()
        .find(|l| l.trim_start().starts_with("the request differs: digest "))
        .unwrap_or_else(|| panic!("{err}"));
    let digests: Vec<&str> = differs
        .split_whitespace()
        .filter(|w| w.len() == 64)
        .collect();
    assert_eq!(digests.len(), 2, "{differs}");
    let replays: Vec<Vec<&str>> = err
        .lines()
        .filter_map(|l| l.trim().strip_prefix("replay: cordis-racy "))
        .map(|l| l.split(' ').collect())
        .collect();
    assert_eq!(replays.len(), 2, "{err}");
    for (args, digest) in replays.iter().zip(&digests) {
        let (code, out, err) = cordis_racy(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(
            out.lines().next(),
            Some(*digest),
            "{args:?} replays its order"
        );
    }
}
