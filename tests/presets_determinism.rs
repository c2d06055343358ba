//! Two agents on different presets in one process each keep their own request digest, the one
//! `cordis check --preset` prints, however the other agents come and go.

use crate::common;

use cordis::builtins::{for_config, standard};
use cordis::host::loader::boot;
use cordis::host::plan::{PlanOptions, load_plan};
use cordis_agent_loop::{AgentLoop, AgentOptions};
use cordis_agent_presets::AgentPresets;
use cordis_runtime::Context;
use cordis_system_prompt::{AssembleContext, ScopeKey, SystemPrompt};

const BUNDLED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");

/// The digest `cordis check --preset` prints for `preset`.
fn checked(preset: &str) -> String {
    let run = common::cordis(&["check", BUNDLED, "--seed", "3", "--preset", preset], &[]);
    assert_eq!(run.code, 0, "{}", run.err);
    run.out
        .lines()
        .find_map(|l| l.strip_prefix("digest: "))
        .unwrap()
        .to_owned()
}

/// The digest of `key`'s request, as the host digests one (the call config included).
async fn digest(root: &Context, prompt: &SystemPrompt, key: ScopeKey) -> String {
    let assembly = prompt.assemble(AssembleContext::scoped(key)).await.unwrap();
    let header = cordis::host::assembly::request_header(root, &assembly).unwrap();
    cordis::host::digest::sha256_hex(&header)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_on_different_presets_in_one_process_keep_their_digests() {
    let expected: Vec<(&str, String)> = ["code", "minimal", "creative", "standard"]
        .into_iter()
        // The CLI runs its own runtime: off this one's threads.
        .map(|p| (p, std::thread::spawn(move || checked(p)).join().unwrap()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let entry = "- id: sessions\n  name: sessions\n";
    assert!(include_str!("../cordis.yml").contains(entry));
    let source = include_str!("../cordis.yml").replace(
        entry,
        &format!(
            "{entry}  config: {{root: \"{}\"}}\n",
            dir.path().join("s").display()
        ),
    );
    let file = std::path::Path::new(BUNDLED);
    let options = PlanOptions::default();
    let table = for_config(&standard(), file, &options, &|_| None);
    let plan = load_plan(&source, BUNDLED, &|_| None, &table, &options).unwrap();
    let root = Context::root();
    assert!(boot(&root, &plan).await.all_active());
    let roster = root.get::<AgentPresets>().unwrap();
    let agents = root.get::<AgentLoop>().unwrap();
    let prompt = root.get::<SystemPrompt>().unwrap();
    let mut live = Vec::new();
    for (i, (preset, want)) in expected.iter().enumerate() {
        let (agent, _) = roster
            .create_agent(
                &agents,
                AgentOptions::new(format!("a{i}"), "m"),
                Some(preset),
            )
            .await
            .unwrap();
        assert_eq!(
            &digest(&root, &prompt, agent.scope_key()).await,
            want,
            "{preset}"
        );
        live.push((agent, want.clone()));
        // Every agent made so far still has its own.
        for (agent, want) in &live {
            assert_eq!(&digest(&root, &prompt, agent.scope_key()).await, want);
        }
    }
    // One goes away (its turn ran meanwhile): the others are untouched.
    let (gone, _) = live.remove(1);
    gone.run_turn("hello").await.unwrap();
    gone.dispose();
    for (agent, want) in &live {
        assert_eq!(&digest(&root, &prompt, agent.scope_key()).await, want);
    }
    // The global view is none of theirs but the deployment's.
    let global = prompt.assemble(AssembleContext::global()).await.unwrap();
    assert_eq!(
        cordis::host::digest::sha256_hex(
            &cordis::host::assembly::request_header(&root, &global).unwrap()
        ),
        expected[3].1,
        "standard = the host composition"
    );
    root.dispose();
}
