//! Dylib plugin costs: booting 100 dylib entries of one (already built) C plugin, and the
//! per-call overhead of a plugin tool, raw and through the registry, against a built-in tool.
//!
//! Run with `cargo bench -p cordis-host --bench dylib` (needs `cc`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cordis_host::plan::{PlanOptions, Step, load_plan};
use cordis_host::{Builtins, LoadPlan, boot_blocking};
use cordis_runtime::{Context, PluginOptions, Schedule};
use cordis_tools::{ToolCall, ToolRegistry};
use divan::Bencher;

fn main() {
    divan::main();
}

/// Compiles the C fixture plugin once into the target directory; returns its directory.
fn plugin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().parent().unwrap().join("plugin-bench");
        std::fs::create_dir_all(&dir).unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-DCORDIS_THREAD_SAFE", "-I"])
            .arg(root.join("plugins/sdk/include"))
            .arg("-o")
            .arg(dir.join("libbench.so"))
            .arg(root.join("tests/fixtures/c-plugin/plugin.c"))
            .status()
            .expect("the dylib benchmarks need a C compiler (`cc`)");
        assert!(status.success());
        dir
    })
}

fn plan(yml: &str) -> LoadPlan {
    let file = plugin_dir().join("bench.yml").display().to_string();
    load_plan(
        yml,
        &file,
        &|_| None,
        &with_declare(),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn hundred_entries() -> LoadPlan {
    let mut yml = String::from("- id: sp\n  name: system-prompt\n- id: tools\n  name: tools\n");
    for i in 0..100 {
        yml.push_str(&format!(
            "- id: e{i}\n  name: ./libbench.so\n  config: p{i}_\n"
        ));
    }
    plan(&yml)
}

/// Boot (plan already resolved, library already loaded once) of 100 dylib entries, 5 tools each.
#[divan::bench(sample_count = 20)]
fn boot_100_dylib_entries(bencher: Bencher) {
    let plan = hundred_entries();
    let (report, _) = boot_blocking(&plan, Schedule::fifo()).unwrap();
    assert!(
        report.all_active(),
        "{:?}",
        report.entries.iter().find(|e| e.error.is_some())
    );
    bencher.bench_local(|| boot_blocking(&plan, Schedule::fifo()).unwrap());
}

/// One `invoke` through the C ABI (JSON in, JSON out), no runtime involved.
#[divan::bench]
fn invoke_raw(bencher: Bencher) {
    let path = plugin_dir().join("libbench.so").canonicalize().unwrap();
    let instance = cordis_dylib::open(&path, None)
        .unwrap()
        .create("\"raw_\"")
        .unwrap();
    bencher.bench_local(|| instance.invoke("raw_echo", "{\"x\":1}").unwrap());
}

fn registry_with(
    yml: &str,
) -> (
    tokio::runtime::Runtime,
    Context,
    std::sync::Arc<ToolRegistry>,
) {
    let plan = plan(yml);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let root = rt.block_on(async {
        let root = Context::root();
        for e in &plan.entries {
            if let Step::Plugin { prepared, .. } = &e.step {
                root.plugin_with(prepared.clone(), PluginOptions::default());
            }
        }
        root.idle().await;
        root
    });
    let reg = root.get::<ToolRegistry>().unwrap();
    (rt, root, reg)
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        call_id: "1".into(),
        name: name.into(),
        arguments: serde_json::json!({"x": 1}),
    }
}

/// One registry call of a dylib tool: semaphore, a foreign-call thread, the C call, JSON parse.
#[divan::bench]
fn execute_dylib_tool(bencher: Bencher) {
    let (rt, root, reg) = registry_with(
        "- id: sp\n  name: system-prompt\n- id: tools\n  name: tools\n- id: c\n  name: ./libbench.so\n  config: x_\n",
    );
    bencher.bench_local(|| rt.block_on(reg.execute(call("x_echo"), None)));
    root.dispose();
}

/// The same through a built-in (`tool-declare`) tool, for comparison.
#[divan::bench]
fn execute_builtin_tool(bencher: Bencher) {
    let (rt, root, reg) = registry_with(
        "- id: sp\n  name: system-prompt\n- id: tools\n  name: tools\n- id: d\n  name: tool-declare\n  config: {tools: [{name: x_echo, description: d, parameters: {type: object}}]}\n",
    );
    bencher.bench_local(|| rt.block_on(reg.execute(call("x_echo"), None)));
    root.dispose();
}

/// The host's own plugins plus `tool-declare`, which declares tools from config.
fn with_declare() -> Builtins {
    let mut table = Builtins::host();
    table.insert(cordis_tool_declare::DeclarePlugin);
    table
}
