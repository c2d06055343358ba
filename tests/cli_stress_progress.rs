//! `cordis stress` progress the way people see it: a bar with seeds/s and the ETA on a
//! terminal, no bar (and no escape codes) when stderr is piped, and the summary line always.
#![cfg(unix)]

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::pty::Pty;

/// Generous: this only guards against a hang; nothing here measures speed.
const LIMIT: Duration = Duration::from_secs(120);

fn stress(seeds: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("cordis-test-state"),
    );
    cmd.args([
        "stress",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/good.yml"),
        "--seeds",
        seeds,
    ])
    .env_remove("CORDIS_SEED")
    .env_remove("RUST_LOG")
    .env_remove("GITHUB_ACTIONS");
    cmd
}

#[test]
fn on_a_terminal_stress_draws_a_bar_with_seeds_per_second_and_ends_with_the_summary() {
    let mut term = Pty::spawn(stress("3000"));
    assert_eq!(term.wait_exit(LIMIT), Some(0), "{}", term.screen());
    // The reader may not have taken the last writes off the terminal when the process exits.
    term.wait_for("3000 seeds agree: digest ", LIMIT);
    let screen = term.screen();
    // The bar's template: "{bar} {pos}/{len} seeds {per_sec} {eta}".
    assert!(screen.contains("/3000 seeds "), "{screen}");
    assert!(screen.contains("/s "), "no seeds/s on the bar: {screen}");
    // Not the piped form's periodic lines.
    assert!(
        !screen.contains("cordis: stress 300/3000 seeds (10%)"),
        "{screen}"
    );
    assert!(screen.contains("3000 seeds agree: digest "), "{screen}");
}

#[test]
fn piped_stress_prints_no_bar_and_no_escape_codes_and_the_summary_line() {
    let out = stress("50").output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "escape codes on a pipe: {stderr:?}"
    );
    assert!(!stderr.contains(" seeds/s"), "{stderr}");
    assert!(stdout.starts_with("50 seeds agree: digest "), "{stdout}");
}
