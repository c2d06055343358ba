//! Hot reload: each kind of edit, invalid edits, and a seeded stress of edit sequences that must
//! always settle to exactly a fresh boot of the last file.

use std::sync::{Arc, Mutex};

use cordis_host::Builtins;
use cordis_host::plan::PlanOptions;
use cordis_host::reload::{LiveConfig, follow, summary_line};
use cordis_runtime::{ConfigReloaded, Context, Policy, Schedule};

fn no_env(_: &str) -> Option<String> {
    None
}

const BASE: &str = "\
- id: system-prompt
  name: system-prompt
  config: {persona: Be brief.}
- id: tools
  name: tools
- id: weather
  name: tool-declare
  config:
    tools:
      - {name: weather, description: Weather v1., parameters: {type: object}}
- id: steady
  name: tool-declare
  config:
    tools:
      - {name: steady, description: Never changes., parameters: {type: object}}
";

async fn boot(src: &str) -> LiveConfig {
    let root = Context::root_with(Schedule::new(Policy::Random, 1));
    let (live, report) = LiveConfig::boot(
        root,
        src,
        "cordis.yml",
        &no_env,
        with_declare(),
        PlanOptions::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.all_active(), "{:?}", report.entries);
    live
}

async fn description_of(live: &LiveConfig, tool: &str) -> Option<String> {
    let prompt = live.root().get::<cordis_system_prompt::SystemPrompt>()?;
    let assembly = prompt
        .assemble(cordis_system_prompt::AssembleContext::global())
        .await
        .ok()?;
    assembly
        .tools
        .iter()
        .find(|t| t.name == tool)
        .map(|t| t.description.clone())
}

#[tokio::test]
async fn a_changed_config_restarts_the_entry_with_the_new_value_and_keeps_the_others() {
    let mut live = boot(BASE).await;
    let steady = live.scope_id("steady");
    let weather = live.scope_id("weather");
    assert_eq!(
        description_of(&live, "weather").await.as_deref(),
        Some("Weather v1.")
    );

    let edited = BASE.replace("Weather v1.", "Weather v2.");
    let summary = live.reload(&edited, &no_env).await.unwrap();
    assert_eq!(summary.restarted, ["weather"]);
    assert!(summary.added.is_empty() && summary.removed.is_empty() && summary.failed.is_empty());
    assert_eq!(
        description_of(&live, "weather").await.as_deref(),
        Some("Weather v2."),
        "the restarted plugin sees the new config"
    );
    assert_eq!(
        live.scope_id("steady"),
        steady,
        "unchanged entries keep their scope"
    );
    assert_ne!(live.scope_id("weather"), weather);
    assert!(live.scope_id("tools").is_some(), "the registry stayed up");
    assert_eq!(
        summary_line(&summary),
        "reload 1: added -; removed -; restarted weather; failed -"
    );
    live.root().dispose();
}

#[tokio::test]
async fn removed_added_and_disabled_entries_are_disposed_and_loaded() {
    let mut live = boot(BASE).await;
    let without_steady = BASE.split("- id: steady").next().unwrap().to_owned();
    let with_new = format!(
        "{without_steady}- id: fresh\n  name: tool-declare\n  config:\n    tools:\n      - {{name: fresh, description: New., parameters: {{type: object}}}}\n"
    );
    let s = live.reload(&with_new, &no_env).await.unwrap();
    assert_eq!(
        (s.added.as_slice(), s.removed.as_slice()),
        (&["fresh".to_owned()][..], &["steady".to_owned()][..])
    );
    assert_eq!(description_of(&live, "steady").await, None);
    assert_eq!(
        description_of(&live, "fresh").await.as_deref(),
        Some("New.")
    );

    let disabled = with_new.replace("- id: fresh\n", "- id: fresh\n  disabled: true\n");
    let s = live.reload(&disabled, &no_env).await.unwrap();
    assert_eq!(s.removed, ["fresh"]);
    assert_eq!(description_of(&live, "fresh").await, None);
    let s = live.reload(&with_new, &no_env).await.unwrap();
    assert_eq!(s.added, ["fresh"]);
    live.root().dispose();
    assert!(live.root().live().is_zero(), "{:?}", live.root().live());
}

#[tokio::test]
async fn an_invalid_edit_is_reported_and_the_last_good_configuration_keeps_running() {
    let mut live = boot(BASE).await;
    let before = live.report().await;
    let ids = ["system-prompt", "tools", "weather", "steady"].map(|id| live.scope_id(id));
    for bad in [
        "- id: [unclosed\n".to_owned(),
        BASE.replace(
            "name: tool-declare\n  config:\n    tools:\n      - {name: weather",
            "name: tool-declair\n  config:\n    tools:\n      - {name: weather",
        ),
        format!("{BASE}- id: tools\n  name: tools\n"),
        BASE.replace("{persona: Be brief.}", "{persona: 3, toolOrder: nope}"),
    ] {
        let errors = live.reload(&bad, &no_env).await.unwrap_err();
        assert!(!errors.diagnostics().is_empty());
        assert!(errors.to_string().contains("cordis.yml:"), "{errors}");
        let after = live.report().await;
        assert_eq!(after.digest, before.digest);
        assert_eq!(
            ["system-prompt", "tools", "weather", "steady"].map(|id| live.scope_id(id)),
            ids
        );
    }
    live.root().dispose();
}

#[tokio::test]
async fn plugins_observe_each_reload_as_an_event() {
    let mut live = boot(BASE).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let _ = live
        .root()
        .on::<ConfigReloaded>(move |e| s.lock().unwrap().push((e.number, e.restarted.clone())));
    live.reload(&BASE.replace("v1", "v3"), &no_env)
        .await
        .unwrap();
    live.reload(&BASE.replace("v1", "v3"), &no_env)
        .await
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [(1, vec!["weather".to_owned()]), (2, vec![])]
    );
    live.root().dispose();
}

/// A random valid (or, one time in six, invalid) config over a fixed pool of entry ids, with
/// seeded apply delays so edits land while entries are still loading.
fn random_config(schedule: &Schedule, step: u64) -> String {
    let draw = |what: &str, n: u64| schedule.draw(&format!("edit/{step}/{what}"), n);
    if draw("invalid", 6) == 0 {
        return [
            "- id: [broken\n",
            "- id: x\n  name: no-such-plugin\n",
            "- {id: a, name: debug/noop, colour: red}\n",
        ][draw("which", 3) as usize]
            .to_owned();
    }
    let mut yml = String::from("- id: system-prompt\n  name: system-prompt\n");
    if draw("order", 3) == 0 {
        yml.push_str("  config: {toolOrder: [t1, \"<unlisted-tools>\"]}\n");
    }
    yml.push_str("- id: tools\n  name: tools\n");
    for i in 0..5 {
        match draw(&format!("e{i}"), 5) {
            0 => continue,
            1 => yml.push_str(&format!(
                "- id: slow{i}\n  name: debug/fault\n  config: {{mode: ok, delay_ms: {}}}\n",
                draw(&format!("d{i}"), 30)
            )),
            _ => {}
        }
        let disabled = if draw(&format!("off{i}"), 4) == 0 {
            "  disabled: true\n"
        } else {
            ""
        };
        yml.push_str(&format!(
            "- id: t{i}\n  name: tool-declare\n{disabled}  config:\n    tools:\n      - {{name: t{i}, description: \"v{}\", parameters: {{type: object}}}}\n",
            draw(&format!("v{i}"), 3)
        ));
    }
    if draw("group", 2) == 0 {
        yml.push_str(&format!(
            "- id: g\n  name: cordis/group\n  config:\n    - id: g1\n      name: tool-declare\n      config: {{tools: [{{name: g1, description: \"g{}\", parameters: {{type: object}}}}]}}\n",
            draw("gv", 2)
        ));
    }
    yml
}

fn is_valid(src: &str) -> bool {
    cordis_host::plan::load_plan(src, "x", &no_env, &with_declare(), &PlanOptions::default())
        .is_ok()
}

async fn run_sequence(seed: u64) {
    let schedule = Schedule::new(Policy::Random, seed);
    let first = (0..)
        .map(|k| random_config(&schedule, 1000 + k))
        .find(|s| is_valid(s))
        .unwrap();
    let live = boot(&first).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let follower = tokio::spawn(async move { follow(live, rx, &no_env, |_, _| {}).await });
    let mut last_valid = first;
    let edits = 2 + schedule.draw("edits", 6);
    for step in 0..edits {
        let src = random_config(&schedule, step);
        if is_valid(&src) {
            last_valid = src.clone();
        }
        tx.send(src).unwrap();
        // Sometimes right away (mid-load), sometimes after things settled.
        let pause = schedule.draw(&format!("pause/{step}"), 40);
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
    }
    drop(tx);
    let live = follower.await.unwrap();
    let after = live.report().await;

    let fresh = boot(&last_valid).await;
    let expected = fresh.report().await;
    let statuses = |r: &cordis_host::BootReport| {
        r.entries
            .iter()
            .map(|e| (e.id.clone(), e.status.as_str()))
            .collect::<Vec<_>>()
    };
    assert_eq!(statuses(&after), statuses(&expected), "seed {seed}");
    assert_eq!(live.fingerprints(), fresh.fingerprints(), "seed {seed}");
    assert_eq!(after.digest, expected.digest, "seed {seed}");
    assert_eq!(
        live.root().live(),
        fresh.root().live(),
        "seed {seed}: live registrations"
    );
    live.root().dispose();
    fresh.root().dispose();
    live.root().tasks_finished().await;
    assert!(
        live.root().live().is_zero(),
        "seed {seed}: {:?}",
        live.root().live()
    );
}

/// `CORDIS_RELOAD_SEQUENCES=5000 cargo test -p cordis-host --release --test host reload::`
/// for a larger
/// budget; CI runs 300.
#[test]
fn random_edit_sequences_settle_to_a_fresh_boot_of_the_last_file() {
    let sequences: u64 = std::env::var("CORDIS_RELOAD_SEQUENCES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    for seed in 0..sequences {
        rt.block_on(run_sequence(seed));
    }
}

/// The host's own plugins plus `tool-declare`, which declares tools from config.
fn with_declare() -> Builtins {
    let mut table = Builtins::host();
    table.insert(cordis_tool_declare::DeclarePlugin);
    table
}
