//! Abandoned plugin calls are observable: `cordis_dylib::foreign::stats()` counts a tool call
//! that timed out while its plugin is still stuck in it.
#![cfg(unix)]

use crate::common::plugins;

use std::time::Duration;

use cordis_host::plan::{PlanOptions, Step, load_plan};
use cordis_runtime::{Context, Inject, PluginOptions};
use cordis_tools::{ToolCall, ToolRegistry, codes};

#[tokio::test]
async fn a_timed_out_call_into_a_hung_plugin_is_counted_as_abandoned_and_stuck() {
    let yml = format!(
        "- id: system-prompt\n  name: system-prompt\n- id: tools\n  name: tools\n- id: h\n  name: ./{}\n  config: s_\n",
        plugins::lib_name("c_invoke_hangs")
    );
    let file = plugins::dir().join("foreign-stats.yml");
    std::fs::write(&file, &yml).unwrap();
    let plan = load_plan(
        &yml,
        &file.display().to_string(),
        &|_| None,
        &cordis::builtins::standard(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let root = Context::root();
    for e in &plan.entries {
        if let Step::Plugin {
            prepared, inject, ..
        } = &e.step
        {
            let options = PluginOptions {
                label: Some(e.id.clone()),
                inject: inject.iter().map(Inject::required_named).collect(),
                timeout: Some(Duration::from_secs(10)),
                place: None,
            };
            root.plugin_with(prepared.clone(), options);
        }
    }
    root.idle().await;
    let before = cordis_dylib::foreign::stats();
    let reg = root.get::<ToolRegistry>().unwrap();
    let call = ToolCall {
        call_id: "1".into(),
        name: "s_hang".into(),
        arguments: serde_json::json!({}),
    };
    let r = reg.execute(call, None).await;
    assert_eq!(r.code.as_deref(), Some(codes::TOOL_TIMEOUT), "{r:?}");
    let after = cordis_dylib::foreign::stats();
    assert_eq!(
        after.abandoned,
        before.abandoned + 1,
        "{before:?} {after:?}"
    );
    assert!(after.stuck >= 1 && after.running >= 1, "{after:?}");
    root.dispose();
}
