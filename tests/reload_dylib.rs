//! Hot reload of dylib entries: a changed library file is loaded again from a new
//! content-addressed copy (the old library is never unloaded), and `sha256` pins are checked
//! again.
#![cfg(unix)]

use crate::common;

use common::plugins::{self, lib, lib_name};

use cordis_host::plan::PlanOptions;
use cordis_host::reload::LiveConfig;
use cordis_runtime::{Context, Schedule};

fn no_env(_: &str) -> Option<String> {
    None
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn tools(live: &LiveConfig) -> Vec<String> {
    let report = live.report().await;
    report.assembly["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_changed_library_file_is_loaded_again_and_its_pin_checked_again() {
    let dir = plugins::dir().join("reload-dylib");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config_file = dir.join("cordis.yml").display().to_string();
    let library = dir.join(lib_name("swap"));
    std::fs::copy(lib("c_good"), &library).unwrap();
    let yml = format!(
        "- {{id: sp, name: system-prompt}}\n- {{id: tools, name: tools}}\n- id: swap\n  name: ./{}\n",
        lib_name("swap")
    );
    let options = PlanOptions {
        config_dir: Some(dir.clone()),
        ..PlanOptions::default()
    };
    let root = Context::root_with(Schedule::fifo());
    let (mut live, report) = LiveConfig::boot(
        root,
        &yml,
        &config_file,
        &no_env,
        cordis::builtins::standard(),
        options,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.healthy(), "{:?}", report.entries);
    assert!(tools(&live).await.contains(&"echo".to_owned()));

    // Same file, same bytes: nothing to do.
    let s = live.reload(&yml, &no_env).await.unwrap();
    assert!(s.restarted.is_empty(), "{s:?}");

    // New bytes at the same path: the entry restarts and the new library's tools replace the
    // old ones (the old library stays loaded, unused).
    std::fs::copy(lib("cordis-example-text-tools"), &library).unwrap();
    let s = live.reload(&yml, &no_env).await.unwrap();
    assert_eq!(s.restarted, ["swap"], "{s:?}");
    let now = tools(&live).await;
    assert!(
        now.contains(&"reverse".to_owned()) && !now.contains(&"echo".to_owned()),
        "{now:?}"
    );

    // A pin to the old bytes: the next reload checks it against the file and fails the entry.
    let old_hash = cordis_host::dylib::file_sha256(&lib("c_good")).unwrap();
    let pinned = format!("{yml}  sha256: {}\n", hex(&old_hash));
    let s = live.reload(&pinned, &no_env).await.unwrap();
    assert_eq!(
        (s.restarted.as_slice(), s.failed.as_slice()),
        (&["swap".to_owned()][..], &["swap".to_owned()][..])
    );
    let report = live.report().await;
    let entry = report.entries.iter().find(|e| e.id == "swap").unwrap();
    assert!(
        entry
            .error
            .as_deref()
            .unwrap_or("")
            .contains("sha256 mismatch"),
        "{entry:?}"
    );

    // Put the pinned bytes back: the pin holds again.
    std::fs::copy(lib("c_good"), &library).unwrap();
    let s = live.reload(&pinned, &no_env).await.unwrap();
    assert_eq!(s.restarted, ["swap"]);
    assert!(s.failed.is_empty(), "{s:?}");
    assert!(tools(&live).await.contains(&"echo".to_owned()));
    live.root().dispose();
}
