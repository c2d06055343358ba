//! `cordis stress` reads the instruction and skill files once per run (a snapshot shared by
//! its boots and workers); every seed still sees exactly what a fresh boot (`cordis check`)
//! sees.

use crate::common;

use common::cordis;

/// A repository holding a workspace with an `AGENTS.md` at each level and a skill.
fn workspace(name: &str) -> std::path::PathBuf {
    let top = std::env::temp_dir().join(format!("cordis-stress-src-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let ws = top.join("ws");
    std::fs::create_dir_all(top.join(".git")).unwrap();
    std::fs::create_dir_all(ws.join(".agents/skills/deploy")).unwrap();
    std::fs::write(top.join("AGENTS.md"), "Repository rules.").unwrap();
    std::fs::write(ws.join("AGENTS.md"), "Workspace rules.").unwrap();
    std::fs::write(
        ws.join(".agents/skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship it.\n---\nRun the deploy.\n",
    )
    .unwrap();
    ws
}

#[test]
fn every_seed_of_a_run_sees_the_files_a_fresh_boot_reads() {
    let ws = workspace("fresh");
    let bundled = concat!(env!("CARGO_MANIFEST_DIR"), "/cordis.yml");
    let env = [("CORDIS_WORKSPACE", ws.to_str().unwrap())];
    let check = cordis(&["check", bundled, "--seed", "7", "--json"], &env);
    assert_eq!(check.code, 0, "{}", check.err);
    let check: serde_json::Value = serde_json::from_str(&check.out).unwrap();
    let sections: Vec<&str> = check["assembly"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(
        sections.contains(&"instructions:../AGENTS.md")
            && sections.contains(&"instructions:AGENTS.md")
            && sections.contains(&"skills:catalog"),
        "{sections:?}"
    );
    let digest = check["digest"].as_str().unwrap();
    for jobs in ["1", "2"] {
        let run = cordis(&["stress", bundled, "--seeds", "40", "--jobs", jobs], &env);
        assert_eq!(run.code, 0, "{}", run.err);
        assert_eq!(
            run.out.lines().next().unwrap(),
            format!("40 seeds agree: digest {digest}; 0 entries not active in every run"),
            "--jobs {jobs}"
        );
    }
    // A changed file is seen by the next run (the snapshot lives as long as one run).
    std::fs::write(ws.join("AGENTS.md"), "Changed rules.").unwrap();
    let run = cordis(&["stress", bundled, "--seeds", "5"], &env);
    assert_eq!(run.code, 0, "{}", run.err);
    assert!(!run.out.contains(digest), "{}", run.out);
    let _ = std::fs::remove_dir_all(ws.parent().unwrap());
}
