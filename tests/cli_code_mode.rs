//! `cordis run` over a Code Mode composition: the scripted model calls `run_code` with a program
//! making two tool calls; the transcript shows the sub-calls and the session log holds them.

mod common;

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
    let expected = "  [sub-call alpha {}]\n  [sub-result alpha] CODE_ONE\n  [sub-call beta {}]\n  [sub-result beta] CODE_TWO\n[result run_code] captured output\\u{000A}CODE_ONE+CODE_TWO\n";
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
