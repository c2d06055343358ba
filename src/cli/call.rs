//! `cordis call`: boot a config and call one tool, the plugin author's quickest loop.
//!
//! The call goes through the registry exactly as a model's would (pre-execute, argument check,
//! guards, approval, the handler, post-execute), so what it prints is what an agent would get.
//! Nobody is asked: a call that would ask is denied unless `--yes` or `--approve TOOL` allows
//! it.

use std::sync::Arc;

use cordis_approvals::{AllowAll, AllowListed, ApproverService};
use cordis_host::Builtins;
use cordis_runtime::Schedule;
use cordis_tools::{ToolCall, ToolRegistry};

use super::render::{safe, safe_lines};
use super::{CallArgs, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Exit, Io};

/// How long an exiting `cordis call` waits for its cancellations to be sent.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The exit code after Ctrl-C (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

pub(crate) fn run(args: &CallArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let (config, tool, json) = match args.split() {
        Ok(split) => split,
        Err(why) => {
            writeln!(io.err, "cordis: {why}")?;
            return Err(Exit(EXIT_CONFIG).into());
        }
    };
    let arguments: serde_json::Value = match serde_json::from_str(&json) {
        Ok(v) => v,
        Err(e) => {
            writeln!(
                io.err,
                "cordis: the arguments are not JSON ({e}); give one JSON object, e.g. '{{\"path\": \"README.md\"}}'"
            )?;
            return Err(Exit(EXIT_CONFIG).into());
        }
    };
    let rt = cordis_host::shutdown::current_thread()?;
    let result = rt.block_on(async {
        let schedule = Schedule::new(args.schedule.policy_or(cordis_runtime::Policy::Fifo), 0);
        let (live, report) = super::boot_live(&config, schedule, io, builtins).await?;
        for e in report.entries.iter().filter(|e| !e.status.is_as_configured()) {
            writeln!(
                io.err,
                "cordis: entry {} ({}) is {}: {}",
                safe(&e.id),
                safe(&e.name),
                e.status,
                safe(e.error.as_deref().unwrap_or("waiting for services"))
            )?;
        }
        let Some(registry) = live.root().get::<ToolRegistry>() else {
            writeln!(
                io.err,
                "cordis: the configuration provides no `tools` registry: add an entry `{{id: tools, name: tools}}`"
            )?;
            live.root().dispose();
            return Err(Exit(EXIT_CONFIG).into());
        };
        let approver = match (args.yes, args.approve.is_empty()) {
            (true, _) => Some(ApproverService(Arc::new(AllowAll))),
            (false, false) => Some(ApproverService(Arc::new(AllowListed(
                args.approve.iter().cloned().collect(),
            )))),
            (false, true) => None,
        };
        let _approver = approver.map(|a| live.root().provide(a));
        let call = ToolCall {
            call_id: "cli-call".to_owned(),
            name: tool.clone(),
            arguments,
        };
        // Ctrl-C stops waiting: the call is dropped, which tells an MCP server the request is
        // cancelled; that notification is sent before the entries (and their servers) go.
        let result = tokio::select! {
            result = registry.execute(call, None) => Some(result),
            _ = tokio::signal::ctrl_c() => None,
        };
        cordis_mcp::cancels_sent(CANCEL_WAIT).await;
        live.root().dispose();
        let Some(result) = result else {
            writeln!(
                io.err,
                "cordis: {} cancelled (Ctrl-C); an MCP server was told (notifications/cancelled)",
                safe(&tool)
            )?;
            return Ok(EXIT_INTERRUPTED);
        };
        let content = match &result.content {
            serde_json::Value::String(text) => text.clone(),
            other => serde_json::to_string_pretty(other)?,
        };
        if result.is_error {
            writeln!(
                io.err,
                "cordis: {} failed ({}): {}",
                safe(&tool),
                safe(result.code.as_deref().unwrap_or("error")),
                safe_lines(&content)
            )?;
            return Ok(EXIT_FAILURE);
        }
        writeln!(io.out, "{}", safe_lines(&content))?;
        Ok(EXIT_OK)
    });
    cordis_host::shutdown::end(rt);
    result
}
