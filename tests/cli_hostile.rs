//! Hostile and careless input to the CLI: whatever a file or a plugin says reaches the terminal
//! escaped, and no size of it panics the renderer.

use crate::common;

use common::cordis;

fn write(name: &str, text: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("cordis-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cordis.yml");
    std::fs::write(&file, text).unwrap();
    let shown = file.display().to_string();
    (dir, shown)
}

#[test]
fn an_id_longer_than_any_formatter_width_is_rendered_without_panicking() {
    let id = "x".repeat(70_000);
    let (dir, file) = write("long-id", &format!("- {{id: {id}, name: debug/noop}}\n"));
    let run = cordis(&["check", &file, "--seed", "1"], &[]);
    assert_eq!(run.code, 0, "{}", run.err);
    assert!(run.out.contains(&id), "the table holds the whole id");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn terminal_escapes_in_a_config_never_reach_the_terminal_raw() {
    // An unknown plugin name is quoted back in the diagnostic.
    let (dir, file) = write(
        "escape",
        "- {id: a, name: \"debug/noop\\e[2J\\u202Eevil\"}\n",
    );
    let run = cordis(&["check", &file, "--seed", "1"], &[]);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(
        !run.err.contains('\u{1b}'),
        "raw ESC on stderr: {:?}",
        run.err
    );
    assert!(
        !run.err.contains('\u{202E}'),
        "raw RLO on stderr: {:?}",
        run.err
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_inject_cycle_is_a_configuration_error_naming_both_entries_and_positions() {
    let (dir, file) = write(
        "cycle",
        "- id: a\n  name: debug/provide\n  config: {service: alpha}\n  inject: [beta]\n- id: b\n  name: debug/provide\n  config: {service: beta}\n  inject: [alpha]\n- {id: c, name: debug/noop}\n",
    );
    let run = cordis(&["check", &file, "--seed", "1"], &[]);
    assert_eq!(run.code, 2, "{}{}", run.out, run.err);
    assert!(
        run.err.contains(&format!(
            "{file}:1:1: entry \"a\": inject cycle: \"a\" waits for beta, which only \"b\" (5:1) provides, \"b\" waits for alpha, which only \"a\" (1:1) provides"
        )),
        "{}",
        run.err
    );
    // Without the cycle (b no longer waits for alpha) it boots.
    std::fs::write(
        &file,
        "- id: a\n  name: debug/provide\n  config: {service: alpha}\n  inject: [beta]\n- id: b\n  name: debug/provide\n  config: {service: beta}\n",
    )
    .unwrap();
    let run = cordis(&["check", &file, "--seed", "1"], &[]);
    assert_eq!(run.code, 0, "{}", run.err);
    let _ = std::fs::remove_dir_all(&dir);
}
