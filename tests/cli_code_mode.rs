//! `cordis run` over a Code Mode composition: the scripted model calls `run_code` with a program
//! making two tool calls; the transcript shows the sub-calls and the session log holds them.

use crate::common;

use std::io::Write;

const CONFIG: &str = r#"
- id: system-prompt
  name: system-prompt
  config: {persona: "You write programs."}
- id: tools
  name: tools
  config: {mode: code}
- id: code-runtime
  name: code-runtime
- id: llm
  name: llm
  config:
    adapter: scripted
    model: scripted
    responses:
      - toolCalls:
          - name: run_code
            arguments:
              description: Call alpha then beta
              code: "const a = await tools.alpha({}); console.log('captured output'); const b = await tools.beta({}); return a + '+' + b;"
      - text: "Done."
- id: sessions
  name: sessions
  config: {root: .sessions}
- id: agent-loop
  name: agent-loop
- id: stubs
  name: tool-declare
  config:
    tools:
      - {name: alpha, description: First., parameters: {type: object}, result: "CODE_ONE"}
      - {name: beta, description: Second., parameters: {type: object}, result: "CODE_TWO"}
"#;

#[test]
fn a_run_code_turn_shows_its_sub_calls_and_logs_them() {
    let dir = std::env::temp_dir().join(format!("cordis-code-mode-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), CONFIG).unwrap();
    let mut child = common::cordis_command(&dir, &["run", "--session", "cm"])
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let expected = "  ⏺ alpha {}\n    ⎿ CODE_ONE\n  ⏺ beta {}\n    ⎿ CODE_TWO\n  ⎿ captured output\n    CODE_ONE+CODE_TWO\n";
    assert!(stdout.contains(expected), "{stdout}");
    let log = std::fs::read_to_string(dir.join(".sessions/cm.jsonl")).unwrap();
    let kinds: Vec<String> = log
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .filter(|k| k.starts_with("tool/"))
        .collect();
    assert_eq!(
        kinds,
        [
            "tool/call",
            "tool/code-dispatch-start",
            "tool/code-dispatch",
            "tool/code-dispatch-start",
            "tool/code-dispatch",
            "tool/result"
        ]
    );
    assert!(log.contains(r#""subCallId":"call-0-0:code:2""#), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

const KILLED: &str = r#"
- id: system-prompt
  name: system-prompt
- id: tools
  name: tools
  config: {mode: code}
- id: code-runtime
  name: code-runtime
- id: llm
  name: llm
  config:
    adapter: scripted
    model: scripted
    responses:
      - toolCalls:
          - name: run_code
            arguments:
              description: Write a file, then run a command that outlives the process
              code: "await tools.write_file({path: 'made.txt', content: 'x'}); await tools.bash({command: 'touch ran.txt; exec sleep 30'}); return 'never';"
      - text: "Done."
- id: sessions
  name: sessions
  config: {root: .sessions}
- id: agent-loop
  name: agent-loop
- id: workspace
  name: workspace
  config: {root: .}
- id: fs
  name: tool-fs
- id: shell
  name: tool-shell
"#;

/// The kinds and sub-call names of a log's `tool/*` events.
fn tool_events(log: &str) -> Vec<String> {
    log.lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"].as_str().is_some_and(|k| k.starts_with("tool/")))
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["data"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn a_sub_call_is_logged_before_it_runs_so_a_killed_process_leaves_a_record_of_its_effects() {
    // The records used to be logged with the outer result: a kill -9 mid-program left a
    // written file and a command that ran, and no trace of either in the log.
    let dir = std::env::temp_dir().join(format!("cordis-code-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cordis.yml"), KILLED).unwrap();
    let mut child = common::cordis_command(&dir, &["run", "--session", "k"])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let ran = dir.join("ran.txt");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ran.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no flush, no disposal
    let _ = child.wait();
    drop(stdin);
    assert!(dir.join("made.txt").exists());
    let log = std::fs::read_to_string(dir.join(".sessions/k.jsonl")).unwrap();
    assert_eq!(
        tool_events(&log),
        [
            "tool/call run_code",
            "tool/code-dispatch-start write_file",
            "tool/code-dispatch write_file",
            "tool/code-dispatch-start bash",
        ],
        "{log}"
    );

    // The resumed session closes the interrupted turn and keeps the record of both effects.
    let resumed = common::cordis_command(&dir, &["run", "--resume", "k"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let log = std::fs::read_to_string(dir.join(".sessions/k.jsonl")).unwrap();
    assert_eq!(
        tool_events(&log),
        [
            "tool/call run_code",
            "tool/code-dispatch-start write_file",
            "tool/code-dispatch write_file",
            "tool/code-dispatch-start bash",
            "tool/result run_code",
        ],
        "{log}"
    );
    assert!(log.contains(r#""code":"INTERRUPTED""#), "{log}");
    assert!(log.contains(r#""reason":{"kind":"interrupted"}"#), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
