//! An MCP stdio server in the sandbox (`sandbox`, `network`), as `tool-shell`'s commands: under
//! `workspace-write` it writes in the workspace and its temp dir and nowhere else, and connects
//! out only with `network: true`; where the kernel has no Landlock the server is refused, never
//! run unsandboxed.

use cordis_mcp::McpPlugin;
use cordis_runtime::prelude::*;
use cordis_sandbox::SandboxMode;
use cordis_workspace::{WorkspaceConfig, WorkspacePlugin};
use serde_json::json;

use super::super::{call, cfg, root_with_tools, settle, text};

/// A runtime with a workspace at `root` and the fixture server `fx` offering `write`,
/// `connect` and `env`, sandboxed as `mode` with `network`.
fn boot(root: &std::path::Path, mode: SandboxMode, network: bool) -> (Context, ScopeHandle) {
    let ctx = root_with_tools();
    ctx.plugin(
        WorkspacePlugin,
        WorkspaceConfig {
            root: Some(root.to_path_buf()),
        },
    );
    let mut config = cfg("fx", &["--tools", "write,connect,env"]);
    config.sandbox = Some(mode);
    config.network = Some(network);
    config.fail_on_startup_error = true;
    // As the loader does: the entry waits for what it `needs` (the workspace).
    let needs = cordis_runtime::Plugin::needs(&McpPlugin, &config);
    assert_eq!(needs, ["workspace"]);
    let entry = ctx.plugin_with(
        cordis_runtime::Prepared::new(McpPlugin, config),
        cordis_runtime::PluginOptions {
            inject: vec![cordis_runtime::Inject::required("workspace")],
            ..Default::default()
        },
    );
    (ctx, entry)
}

async fn write(ctx: &Context, path: &std::path::Path) -> (bool, String) {
    let result = call(
        ctx,
        "mcp__fx__write",
        json!({"path": path.display().to_string(), "text": "x"}),
    )
    .await;
    (result.is_error, text(&result))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_write_server_writes_only_in_the_workspace_and_connects_out_only_with_network()
{
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let (ctx, entry) = boot(&root, SandboxMode::WorkspaceWrite, false);
    let status = settle(&entry).await;
    if cordis_sandbox::landlock_abi().is_none() {
        eprintln!("SKIP: this kernel has no Landlock; asserting the fail-closed refusal instead");
        assert_eq!(status, ScopeStatus::Failed);
        let failure = entry.failure().unwrap().message;
        assert!(failure.contains("cannot be enforced"), "{failure}");
        return;
    }
    assert_eq!(status, ScopeStatus::Active, "{:?}", entry.failure());

    let (failed, said) = write(&ctx, &root.join("inside.txt")).await;
    assert!(!failed, "{said}");
    assert!(root.join("inside.txt").exists());
    // Its private temp dir is its TMPDIR, and writable.
    let tmp = call(&ctx, "mcp__fx__env", json!({"name": "TMPDIR"})).await;
    let tmp = text(&tmp);
    assert!(tmp.contains("cordis-mcp-"), "{tmp}");
    let (failed, said) = write(&ctx, &std::path::Path::new(&tmp).join("t")).await;
    assert!(!failed, "{said}");

    let target = outside.path().join("escaped.txt");
    let (failed, said) = write(&ctx, &target).await;
    assert!(failed && said.contains("Permission denied"), "{said}");
    assert!(!target.exists());

    // No network: a loopback listener is not reachable.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let result = call(&ctx, "mcp__fx__connect", json!({"addr": addr})).await;
    assert!(result.is_error, "{}", text(&result));
    ctx.dispose();
    // The temp dir goes with the server.
    let gone = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        !std::path::Path::new(&tmp).exists()
    });
    assert!(gone, "{tmp} was left behind");

    // With `network: true` it connects.
    let (ctx, entry) = boot(&root, SandboxMode::WorkspaceWrite, true);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let result = call(&ctx, "mcp__fx__connect", json!({"addr": addr})).await;
    assert!(!result.is_error, "{}", text(&result));
    ctx.dispose();

    // Read-only: not even the workspace.
    let (ctx, entry) = boot(&root, SandboxMode::ReadOnly, false);
    assert_eq!(settle(&entry).await, ScopeStatus::Active);
    let (failed, said) = write(&ctx, &root.join("read-only.txt")).await;
    assert!(failed && said.contains("Permission denied"), "{said}");
    ctx.dispose();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_server_without_a_workspace_entry_is_refused_naming_it() {
    let ctx = root_with_tools();
    let mut config = cfg("fx", &["--tools", "write"]);
    config.sandbox = Some(SandboxMode::WorkspaceWrite);
    config.fail_on_startup_error = true;
    let entry = ctx.plugin(McpPlugin, config);
    assert_eq!(settle(&entry).await, ScopeStatus::Failed);
    let failure = entry.failure().unwrap().message;
    assert!(
        failure.contains("`sandbox: workspace-write` needs the composition's `workspace` entry"),
        "{failure}"
    );
    ctx.dispose();
}
