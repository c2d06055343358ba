//! Agent presets through the command line: `cordis presets`, `check --preset` on each shipped
//! preset, `permute`/`stress --preset` determinism, and `run --preset` / `/preset` (piped and in
//! a pseudo-terminal), each against the bundled cordis.yml.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::cordis;

const BUNDLED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");
const SHIPPED: [&str; 4] = ["standard", "code", "minimal", "creative"];

fn digest_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("digest: "))
        .unwrap_or_else(|| panic!("no digest in:\n{out}"))
        .to_owned()
}

#[test]
fn presets_lists_the_shipped_roster_in_order_with_the_default_marked() {
    let run = cordis(&["presets", BUNDLED], &[]);
    assert_eq!(run.code, 0, "{}", run.err);
    let ids: Vec<&str> = run
        .out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .take(4)
        .collect();
    assert_eq!(ids, SHIPPED, "{}", run.out);
    assert!(run.out.starts_with("ID          NAME      ORDER  BROKEN\nstandard *  Standard  1\ncode        Code      2\n"), "{}", run.out);
    let run = cordis(&["presets", BUNDLED, "--json"], &[]);
    let value: serde_json::Value = serde_json::from_str(&run.out).unwrap();
    assert_eq!(value["default"], "standard");
    let listed: Vec<(&str, i64, bool)> = value["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap(),
                p["order"].as_i64().unwrap(),
                p["broken"].is_null(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("standard", 1, true),
            ("code", 2, true),
            ("minimal", 3, true),
            ("creative", 4, true)
        ]
    );
}

/// A project with its own roster root `mine` (default `ok`) holding `ok` and a broken `bad`.
fn project(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cordis-presets-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (id, composition) in [("ok", "[]\n"), ("bad", "- id: x\n  name: no-such-plugin\n")] {
        std::fs::create_dir_all(dir.join("mine").join(id)).unwrap();
        std::fs::write(
            dir.join("mine").join(id).join("agent.cordis.yml"),
            composition,
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("cordis.yml"),
        "- {id: system-prompt, name: system-prompt}\n- {id: tools, name: tools}\n- id: presets\n  name: agent-presets\n  config: {roots: [{path: mine}], default: ok, includeUserRoot: false}\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_broken_preset_is_listed_with_its_reason_and_refused_by_check() {
    let dir = project("broken");
    let file = dir.join("cordis.yml").display().to_string();
    let run = cordis(&["presets", &file], &[]);
    assert_eq!(run.code, 0, "{}", run.err);
    let bad = run.out.lines().find(|l| l.starts_with("bad ")).unwrap();
    assert!(
        bad.contains("broken: ") && bad.contains("no-such-plugin"),
        "{bad}"
    );
    assert!(
        run.out.lines().any(|l| l.starts_with("ok *")),
        "{}",
        run.out
    );
    let run = cordis(&["check", &file, "--seed", "1", "--preset", "bad"], &[]);
    assert_eq!(run.code, 1, "{}", run.err);
    assert!(
        run.err
            .contains("cordis: agent-presets: preset \"bad\" failed to mount: "),
        "{}",
        run.err
    );
    let run = cordis(&["check", &file, "--seed", "1", "--preset", "nope"], &[]);
    assert_eq!(run.code, 1);
    // Listed by order (the shipped ones declare theirs), then by id.
    assert!(
        run.err.contains(
            "agent-presets: preset \"nope\" not found (available: standard, code, minimal, creative, bad, ok)"
        ),
        "{}",
        run.err
    );
    // A file without a roster says so.
    let plain = dir.join("plain.yml");
    std::fs::write(&plain, "- {id: tools, name: tools}\n").unwrap();
    let run = cordis(&["presets", &plain.display().to_string()], &[]);
    assert_eq!(run.code, 2);
    assert!(
        run.err.contains("has no enabled agent-presets entry"),
        "{}",
        run.err
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cordis check --preset ID` on the bundled file: exit code, stdout.
fn check(preset: &str) -> (u8, String, String) {
    let run = cordis(&["check", BUNDLED, "--seed", "1", "--preset", preset], &[]);
    (run.code, run.out, run.err)
}

/// The tool names `check` printed.
fn tools(out: &str) -> Vec<String> {
    out.lines()
        .skip_while(|l| !l.starts_with("tools (canonical order"))
        .skip(1)
        .take_while(|l| !l.starts_with("digest"))
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

#[test]
fn check_mounts_each_shipped_preset_with_every_row_active_and_prints_its_assembly() {
    let plain = cordis(&["check", BUNDLED, "--seed", "1"], &[]);
    assert_eq!(plain.code, 0, "{}", plain.err);
    let mut digests = Vec::new();
    for preset in SHIPPED {
        let (code, out, err) = check(preset);
        assert_eq!(code, 0, "{preset}: {err}\n{out}");
        let rows: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with(&format!("{preset}/")))
            .collect();
        assert!(rows.iter().all(|r| r.contains(" active")), "{rows:?}");
        digests.push(digest_of(&out));
        let tools = tools(&out);
        match preset {
            "standard" => assert_eq!(tools, self::tools(&plain.out)),
            "code" => assert_eq!(tools, ["run_code"], "{out}"),
            "minimal" => assert_eq!(tools, ["bash", "edit_file", "read_file", "write_file"]),
            "creative" => assert!(tools.contains(&"cordis_inspect".to_owned()), "{tools:?}"),
            _ => unreachable!(),
        }
        if preset != "standard" {
            assert!(!rows.is_empty(), "{preset} has rows: {out}");
        }
    }
    // standard is the host composition as it is; the others each present something else.
    assert_eq!(digests[0], digest_of(&plain.out));
    let mut distinct = digests.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{digests:?}");
}

#[test]
fn permute_and_stress_give_one_digest_per_shipped_preset() {
    for preset in SHIPPED {
        let (_, out, _) = check(preset);
        let expected = digest_of(&out);
        let run = cordis(
            &[
                "permute",
                BUNDLED,
                "--preset",
                preset,
                "--max",
                "24",
                "--threads",
                "2",
            ],
            &[],
        );
        assert_eq!(run.code, 0, "{preset}: {}\n{}", run.err, run.out);
        assert!(run.out.contains(": 1 distinct outcome,"), "{}", run.out);
        assert_eq!(digest_of(&run.out), expected, "{preset}");
        let run = cordis(
            &["stress", BUNDLED, "--preset", preset, "--seeds", "16"],
            &[],
        );
        assert_eq!(run.code, 0, "{preset}: {}\n{}", run.err, run.out);
        assert!(
            run.out
                .contains(&format!("16 seeds agree: digest {expected}")),
            "{preset}: {}",
            run.out
        );
    }
}

/// A fresh directory holding a copy of the bundled cordis.yml (the shipped presets are found
/// through their compiled-in root).
fn fresh(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("cordis-presets-run-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("xdg")).unwrap();
    std::fs::write(dir.join("cordis.yml"), include_str!("../cordis.yml")).unwrap();
    dir
}

fn run_piped(dir: &Path, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut cmd = common::cordis_command(dir, args);
    cmd.env("XDG_CONFIG_HOME", dir.join("xdg"));
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The session log's lines as JSON.
fn log(dir: &Path, id: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(common::sessions_dir(dir).join(format!("{id}.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Tool names of the first logged request header.
fn header_tools(log: &[serde_json::Value]) -> Vec<String> {
    let header = log
        .iter()
        .find(|e| e["type"] == "request/header")
        .unwrap_or_else(|| panic!("no request/header in {log:?}"));
    header["data"]["header"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn run_records_the_preset_in_the_header_and_a_resumed_session_keeps_it() {
    let dir = fresh("record");
    let (code, _, err) = run_piped(
        &dir,
        &["run", "--session", "m", "--preset", "minimal"],
        "hello\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("; adapter scripted; preset minimal;"), "{err}");
    let first = log(&dir, "m");
    assert_eq!(first[0]["agentPreset"], "minimal", "{:?}", first[0]);
    assert_eq!(
        header_tools(&first),
        ["bash", "edit_file", "read_file", "write_file"]
    );
    let (code, _, err) = run_piped(&dir, &["run", "--resume", "m"], "again\n");
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("resuming session m"), "{err}");
    assert!(err.contains("preset minimal;"), "{err}");
    let (code, _, err) = run_piped(&dir, &["run", "--resume", "m", "--preset", "code"], "x\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "session m runs preset minimal; --preset code only chooses the preset of a new session"
        ),
        "{err}"
    );
    // Without --preset a new session joins the default.
    let (code, _, err) = run_piped(&dir, &["run", "--session", "d"], "hello\n");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(log(&dir, "d")[0]["agentPreset"], "standard");
    let (code, _, err) = run_piped(&dir, &["run", "--session", "n", "--preset", "nope"], "");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("agent-presets: preset \"nope\" not found (available: standard, code, minimal, creative)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_preset_line_switches_a_blank_session_and_is_refused_after_a_turn() {
    let dir = fresh("switch");
    let (code, out, err) = run_piped(
        &dir,
        &["run", "--session", "p"],
        "/preset\n/preset code\nhello\n/preset minimal\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("> /preset\n> /preset code\n> hello\n"),
        "{out}"
    );
    assert!(
        err.contains("cordis: preset standard; available: standard, code, minimal, creative"),
        "{err}"
    );
    assert!(
        err.contains("cordis: session p now runs preset code"),
        "{err}"
    );
    assert!(
        err.contains("agent \"main\" already has 1 turn(s) in session \"p\""),
        "{err}"
    );
    let events = log(&dir, "p");
    assert_eq!(events[0]["agentPreset"], "standard");
    let selected: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "agent-preset/selected")
        .collect();
    assert_eq!(selected.len(), 1, "{events:?}");
    assert_eq!(selected[0]["data"]["agentPreset"], "code");
    // The switch decided what the model saw.
    assert_eq!(header_tools(&events), ["run_code"]);
    // And a resumed run joins the switched preset, not the header's.
    let (code, _, err) = run_piped(&dir, &["run", "--resume", "p"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("preset code;"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn a_preset_line_switches_in_a_terminal() {
    const LIMIT: Duration = Duration::from_secs(60);
    let dir = fresh("tty");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cordis"));
    cmd.env("XDG_STATE_HOME", dir.join(".state"));
    cmd.args(["run", "--yes", "--session", "tty"])
        .current_dir(&dir)
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .env_remove("CORDIS_LLM")
        .env_remove("RUST_LOG")
        .env_remove("CORDIS_SEED");
    let mut term = common::pty::Pty::spawn(cmd);
    term.wait_for("> ", LIMIT);
    term.send("/preset minimal\r");
    term.wait_for("now runs preset minimal", LIMIT);
    term.send("hello\r");
    term.wait_for("Noted.", LIMIT);
    term.send("/preset code\r");
    term.wait_for("already has 1 turn(s)", LIMIT);
    term.send("\x04");
    assert_eq!(term.wait_exit(LIMIT), Some(0), "screen:\n{}", term.screen());
    let events = log(&dir, "tty");
    assert_eq!(
        header_tools(&events),
        ["bash", "edit_file", "read_file", "write_file"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reload_that_restarts_the_roster_joins_the_agent_again() {
    use std::io::Write;
    let dir = fresh("reload");
    let mut cmd = common::cordis_command(
        &dir,
        &["run", "--watch", "--session", "w", "--preset", "minimal"],
    );
    cmd.env("XDG_CONFIG_HOME", dir.join("xdg"));
    let mut child = cmd.spawn().unwrap();
    let out = common::lines(child.stdout.take().unwrap());
    let err = common::lines(child.stderr.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    common::wait_for(&err, "watching cordis.yml");
    writeln!(stdin, "first").unwrap();
    common::wait_for(&out, "Noted.");
    let file = dir.join("cordis.yml");
    let edited = std::fs::read_to_string(&file).unwrap().replace(
        "default: standard}",
        "default: standard, includeUserRoot: false}",
    );
    std::fs::write(&file, edited).unwrap();
    assert_eq!(
        common::wait_for(&err, "reload 1:"),
        "cordis: reload 1: added -; removed -; restarted agent-presets; failed -"
    );
    assert_eq!(
        common::wait_for(&err, "rejoined"),
        "cordis: rejoined preset minimal"
    );
    writeln!(stdin, "second").unwrap();
    common::wait_for(&out, "Noted.");
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // Both turns ran on minimal's tools (the second request would fail unjoined).
    let events = log(&dir, "w");
    let tools: Vec<Vec<String>> = events
        .iter()
        .filter(|e| e["type"] == "request/header")
        .map(|e| {
            e["data"]["header"]["tools"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .map(|t| t["name"].as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    assert!(!tools.is_empty());
    let failed = events
        .iter()
        .filter(|e| e["type"] == "turn/end" && e["data"]["reason"]["kind"] == "error")
        .count();
    assert_eq!(failed, 0, "{events:?}");
    assert_eq!(tools[0], ["bash", "edit_file", "read_file", "write_file"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_exercise_under_each_preset_gives_one_log_per_preset_and_the_logs_differ() {
    let dir = std::env::temp_dir().join(format!("cordis-presets-ex-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.yml");
    std::fs::write(
        &script,
        "turns: [\"list the files\"]\nresponses:\n  - toolCalls: [{name: list_files, arguments: {pattern: \"*.nothing\"}}]\n  - text: done\n",
    )
    .unwrap();
    let script = script.display().to_string();
    let mut logs = Vec::new();
    for preset in ["standard", "code"] {
        let run = cordis(
            &[
                "stress",
                BUNDLED,
                "--preset",
                preset,
                "--exercise",
                &script,
                "--seeds",
                "6",
            ],
            &[],
        );
        assert_eq!(run.code, 0, "{preset}: {}\n{}", run.err, run.out);
        assert!(run.out.contains("6 seeds agree"), "{preset}: {}", run.out);
        let run = cordis(
            &[
                "stress",
                BUNDLED,
                "--preset",
                preset,
                "--exercise",
                &script,
                "--seeds",
                "1",
                "--print-log",
            ],
            &[],
        );
        logs.push(run.out);
    }
    // Standard calls list_files natively; under code the direct call is refused (collapsed).
    assert!(logs[0].contains("\"name\":\"list_files\""), "{}", logs[0]);
    assert!(
        logs[1].contains("only `run_code` is callable directly"),
        "{}",
        logs[1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A FIFO planted where a composition or its display file should be is listed as broken and
/// refused by `check --preset`, without blocking the command (opening a FIFO for reading
/// waits for a writer that never comes).
#[test]
fn a_fifo_in_a_preset_directory_is_refused_without_hanging() {
    let dir = project("fifo");
    std::fs::create_dir_all(dir.join("mine").join("pipe")).unwrap();
    for fifo in [
        dir.join("mine").join("pipe").join("agent.cordis.yml"),
        dir.join("mine").join("ok").join("preset.yml"),
    ] {
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
    }
    let file = dir.join("cordis.yml").display().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let listed = cordis(&["presets", &file], &[]);
        let checked = cordis(&["check", &file, "--seed", "1", "--preset", "pipe"], &[]);
        let _ = tx.send((listed, checked));
    });
    let (listed, checked) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a FIFO in a preset directory hung the command");
    assert_eq!(listed.code, 0, "{}", listed.err);
    let pipe = listed.out.lines().find(|l| l.starts_with("pipe ")).unwrap();
    assert!(
        pipe.contains("broken: ") && pipe.contains("not a regular file"),
        "{pipe}"
    );
    assert!(
        listed.out.lines().any(|l| l.starts_with("ok *")),
        "{}",
        listed.out
    );
    assert_eq!(checked.code, 1, "{}", checked.err);
    assert!(
        checked.err.contains("not a regular file"),
        "{}",
        checked.err
    );
}

/// A copy of the bundled cordis.yml beside a preset `id` whose composition is `rows`.
fn with_preset(name: &str, id: &str, rows: &str) -> (PathBuf, String) {
    let dir = fresh(name);
    let preset = dir.join("presets").join(id);
    std::fs::create_dir_all(&preset).unwrap();
    std::fs::write(preset.join("agent.cordis.yml"), rows).unwrap();
    let file = dir.join("cordis.yml").display().to_string();
    (dir, file)
}

/// Regression (issue 23): two `persona` rows in one preset both reported active, and which one
/// the agents got depended on which registered first.
#[test]
fn a_preset_with_two_rows_overriding_one_thing_is_refused_naming_both_rows() {
    let rows = "- {id: terse, name: persona, config: {text: Be terse.}}\n- {id: chatty, name: persona, config: {text: Be chatty.}}\n";
    let (dir, file) = with_preset("two-personas", "dup", rows);
    let xdg = dir.join("xdg").display().to_string();
    let env = [("XDG_CONFIG_HOME", xdg.as_str())];
    let run = cordis(&["permute", &file, "--preset", "dup"], &env);
    assert_eq!(run.code, 2, "{}\n{}", run.out, run.err);
    assert!(
        run.err
            .contains("entry \"terse\": override \"persona\" is also claimed by entry \"chatty\""),
        "{}",
        run.err
    );
    let check = cordis(&["check", &file, "--preset", "dup", "--seed", "1"], &env);
    assert_ne!(check.code, 0, "{}", check.out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `--preset` proof permutes the preset's rows too: two rows registering one tool at run
/// time (names they do not state) are explored in both orders and give one outcome, both rows
/// in conflict, the tool withheld from the preset's agents.
#[test]
fn permute_with_a_preset_explores_its_interacting_rows_and_finds_one_outcome() {
    let rows = "- {id: a, name: debug/claim, config: {tools: [shared, only_a], note: from a}}\n- {id: b, name: debug/claim, config: {tools: [shared], note: from b}}\n";
    let (dir, file) = with_preset("claiming-rows", "pair", rows);
    let xdg = dir.join("xdg").display().to_string();
    let env = [("XDG_CONFIG_HOME", xdg.as_str())];
    let run = cordis(&["permute", &file, "--preset", "pair"], &env);
    // `fs` uses the presenters when there are (its edit approvals show a whole-file diff), so
    // its order against `presenter` is explored too.
    assert!(
        run.out.contains("interacting: fs~presenter, pair/a~pair/b"),
        "{}",
        run.out
    );
    assert!(
        run.out.contains("4 orders (every class) standing for all 121645100408832000 orders of 19 entries: 1 distinct outcome"),
        "{}",
        run.out
    );
    // Not healthy (the rows conflict, so the preset does not mount), but the same in every
    // order, naming both rows.
    assert_eq!(run.code, 1, "{}", run.err);
    assert!(!run.err.contains("depends on load order"), "{}", run.err);
    assert!(
        run.err.contains(
            "a (debug/claim): conflict: tool \"shared\" is claimed by entries \"a\" and \"b\""
        ),
        "{}",
        run.err
    );
    // Brute force over every order of the rows agrees (the host entries commute).
    let brute = cordis(
        &["permute", &file, "--preset", "pair", "--all", "--max", "64"],
        &env,
    );
    assert!(brute.out.contains(": 1 distinct outcome"), "{}", brute.out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `--preset` proof is refined by events too: two rows that each listen to `debug/fault`
/// and emit it while applying claim nothing in common, yet which mounts first changes how often
/// each listener runs; the proof names the pair and the event and boots both of its orders (on
/// both orders of `fs~presenter`: four).
#[test]
fn permute_with_a_preset_explores_rows_meeting_through_an_event() {
    let rows = "- {id: a, name: debug/fault, config: {mode: listener-panic}}\n- {id: b, name: debug/fault, config: {mode: listener-panic}}\n";
    let (dir, file) = with_preset("event-rows", "loud", rows);
    let xdg = dir.join("xdg").display().to_string();
    let env = [("XDG_CONFIG_HOME", xdg.as_str())];
    let run = cordis(&["permute", &file, "--preset", "loud"], &env);
    assert!(
        run.err
            .contains("permuting 19 plugin entries (1 interacting pair): 2 orders"),
        "{}",
        run.err
    );
    assert!(
        run.out
            .contains("interacting: fs~presenter, loud/a~loud/b (event debug/fault)"),
        "{}",
        run.out
    );
    assert!(
        run.out.contains("4 orders (every class) standing for all"),
        "{}",
        run.out
    );
    let _ = std::fs::remove_dir_all(&dir);
}
