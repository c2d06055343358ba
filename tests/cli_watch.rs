//! `cordis check --watch` as a person uses it: start it on a copy of the bundled cordis.yml,
//! edit the file, read the reload summary, break the file, see the last good config kept.

use crate::common;

use std::process::{Command, Stdio};

use common::{lines, wait_for};

#[test]
fn editing_the_file_while_watching_prints_a_reload_summary_and_keeps_the_last_good_config() {
    let dir = std::env::temp_dir().join(format!("cordis-watch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    let original = include_str!("fixtures/stand-in-tools.yml");
    std::fs::write(&file, original).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .env(
            "XDG_STATE_HOME",
            std::env::temp_dir().join("cordis-test-state"),
        )
        .args(["check", file.to_str().unwrap(), "--watch", "--seed", "7"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let err = lines(child.stderr.take().unwrap());
    wait_for(&err, "watching");
    let first_digest = wait_for(&out, "digest: ");

    // Change one tool's description: that entry restarts, nothing else does.
    let edited = original.replace(
        "Read a UTF-8 text file from the workspace.",
        "Read a text file.",
    );
    assert_ne!(
        edited, original,
        "tests/fixtures/stand-in-tools.yml changed; update this test"
    );
    std::fs::write(&file, &edited).unwrap();
    let summary = wait_for(&out, "reload 1:");
    assert_eq!(
        summary,
        "cordis: reload 1: added -; removed -; restarted fs; failed -"
    );
    let second_digest = wait_for(&out, "digest: ");
    assert_ne!(first_digest, second_digest);

    // A broken edit is reported and changes nothing.
    std::fs::write(&file, "- id: [broken\n").unwrap();
    wait_for(&err, "still running the last good configuration");

    // Enabling the disabled entry adds it.
    std::fs::write(&file, edited.replace("  disabled: true\n", "")).unwrap();
    let summary = wait_for(&out, "reload 2:");
    assert_eq!(
        summary,
        "cordis: reload 2: added web; removed -; restarted -; failed -"
    );

    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
