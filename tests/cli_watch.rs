//! `cordis check --watch` as a person uses it: start it on a copy of the bundled cordis.yml,
//! edit the file, read the reload summary, break the file, see the last good config kept.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Reads lines from a child stream on a thread, so the test can wait with a deadline.
fn lines(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (at most 30 s) for a line containing `needle`; returns every line read meanwhile.
fn wait_for(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no line containing {needle:?}; saw:\n{}", seen.join("\n"));
}

#[test]
fn editing_the_file_while_watching_prints_a_reload_summary_and_keeps_the_last_good_config() {
    let dir = std::env::temp_dir().join(format!("cordis-watch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    let original = include_str!("../cordis.yml");
    std::fs::write(&file, original).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_cordis"))
        .args(["check", file.to_str().unwrap(), "--watch", "--seed", "7"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let err = lines(child.stderr.take().unwrap());
    let (mut seen_out, mut seen_err) = (Vec::new(), Vec::new());
    wait_for(&err, "watching", &mut seen_err);
    let first_digest = wait_for(&out, "digest: ", &mut seen_out);

    // Change one tool's description: that entry restarts, nothing else does.
    let edited = original.replace(
        "Read a UTF-8 text file from the workspace.",
        "Read a text file.",
    );
    assert_ne!(
        edited, original,
        "the bundled cordis.yml changed; update this test"
    );
    std::fs::write(&file, &edited).unwrap();
    let summary = wait_for(&out, "reload 1:", &mut seen_out);
    assert_eq!(
        summary,
        "cordis: reload 1: added -; removed -; restarted fs; failed -"
    );
    let second_digest = wait_for(&out, "digest: ", &mut seen_out);
    assert_ne!(first_digest, second_digest);

    // A broken edit is reported and changes nothing.
    std::fs::write(&file, "- id: [broken\n").unwrap();
    wait_for(
        &err,
        "still running the last good configuration",
        &mut seen_err,
    );

    // Enabling the disabled entry adds it.
    std::fs::write(&file, edited.replace("  disabled: true\n", "")).unwrap();
    let summary = wait_for(&out, "reload 2:", &mut seen_out);
    assert_eq!(
        summary,
        "cordis: reload 2: added web; removed -; restarted -; failed -"
    );

    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
