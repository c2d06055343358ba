//! The `tool-cordis` plugin: `cordis_inspect`, which lists every entry of the running
//! composition (the host's entries and the rows of mounted presets) with its plugin and status,
//! so an agent building compositions can see what loaded and what did not; `cordis_mount`,
//! which mounts a composition file for the calling agent alone (its rows under a realm of their
//! own, parented to the agent's preset, so the agent sees their tools from its next step), and
//! `cordis_unmount`, which takes the last mount away again.
//!
//! A mount is planned before anyone approves it (see `plan`): the file must be inside the
//! workspace or a preset root (after symlinks; its includes too), and the approval shows its
//! rows and what they start (a server command, a library, a connection); the plan shown is the
//! plan mounted. A mount is refused as a preset is (a row that does not become active, a row
//! that publishes a service), it unwinds with the agent, and it is not in the session log: a
//! resumed session runs its preset without the mounts.
//!
//! # Determinism
//! The listing is sorted by entry id, then plugin, then status and failure text; scope ids
//! (which depend on load order) are never shown.

mod plan;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cordis_agent_loop::AgentLoop;
use cordis_agent_presets::AgentPresets;
use cordis_runtime::{BoxError, Context, Inject, Plugin, Position, ScopeHandle, lock};
use cordis_schema::ScopeKey;
use cordis_tools::{
    Decision, NoConfig, ToolDefinition, ToolRegistry, ToolsPostExecute, ToolsPreExecute,
};

use crate::plan::{MountPresenter, Plans};
use schemars::JsonSchema;
use serde::Deserialize;

/// The tool name.
pub const CORDIS_INSPECT: &str = "cordis_inspect";
/// The mount tool's name.
pub const CORDIS_MOUNT: &str = "cordis_mount";
/// The unmount tool's name.
pub const CORDIS_UNMOUNT: &str = "cordis_unmount";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {}

// The argument types are commented with `//`: doc comments would become schema descriptions.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MountArgs {
    // The composition file (cordis.yml format): in the workspace (relative to its root) or a preset root.
    path: String,
}

/// One agent's mounts, innermost last: the file, its realm, and the parent it replaced.
type Mounts = Arc<Mutex<BTreeMap<ScopeKey, Vec<(String, ScopeHandle, ScopeKey)>>>>;

/// `cordis_mount`: the body of one call.
async fn mount(
    root: Context,
    mounts: Mounts,
    plans: Plans,
    call: cordis_tools::ToolCallContext,
    path: String,
) -> Result<String, String> {
    // The plan the approval showed; a call that skipped the pipeline's pre-execute plans now.
    let planned = match plans.take(call.scope, &call.call_id) {
        Some(plan) if plan.given == path => plan,
        _ => Arc::new(plan::plan(&root, &path).await?),
    };
    let scope = call
        .scope
        .ok_or("cordis_mount mounts for an agent: call it from an agent's scope".to_owned())?;
    let agents = root
        .get::<AgentLoop>()
        .ok_or("cordis_mount needs the agent-loop service".to_owned())?;
    let agent = agents
        .agent_by_scope(scope)
        .ok_or("cordis_mount mounts for an agent: this scope is none".to_owned())?;
    let roster = root
        .get::<AgentPresets>()
        .ok_or("cordis_mount needs an agent-presets entry".to_owned())?;
    let previous = agent
        .parent_scope()
        .ok_or("cordis_mount: the agent joined no preset".to_owned())?;
    let (mounted, handle) = roster
        .mount_prepared(&planned.file, &*planned.composition, previous)
        .await
        .map_err(|e| e.to_string())?;
    if let Err(e) = agent.rejoin(mounted.key) {
        handle.dispose();
        return Err(e.to_string());
    }
    // The mount goes with the agent.
    if let Some(actx) = agent.context() {
        let on_dispose = handle.clone();
        let _ = actx.effect("cordis_mount", move || on_dispose.dispose());
    }
    lock(&mounts)
        .entry(scope)
        .or_default()
        .push((path.clone(), handle, previous));
    let rows: Vec<String> = mounted
        .rows
        .iter()
        .map(|r| format!("{} ({})", r.id, r.name))
        .collect();
    Ok(format!(
        "mounted {path}: {}; its tools are yours from the next step",
        if rows.is_empty() {
            "no rows".to_owned()
        } else {
            format!("rows {}", rows.join(", "))
        }
    ))
}

/// `cordis_unmount`: the body of one call.
fn unmount(root: &Context, mounts: &Mounts, scope: Option<ScopeKey>) -> Result<String, String> {
    let scope = scope.ok_or("cordis_unmount: call it from an agent's scope".to_owned())?;
    let agent = root
        .get::<AgentLoop>()
        .and_then(|agents| agents.agent_by_scope(scope))
        .ok_or("cordis_unmount: this scope is no agent's".to_owned())?;
    let Some((path, handle, previous)) = lock(mounts).get_mut(&scope).and_then(Vec::pop) else {
        return Err("cordis_unmount: nothing is mounted (cordis_mount mounts)".to_owned());
    };
    agent.rejoin(previous).map_err(|e| e.to_string())?;
    handle.dispose();
    Ok(format!("unmounted {path}"))
}

/// One line per labelled scope of the runtime `ctx` lives in: `id (plugin): status[: why]`.
pub fn inspect(ctx: &Context) -> String {
    let mut lines: Vec<(String, String, String)> = ctx
        .scopes()
        .into_iter()
        .filter_map(|s| {
            let label = s.label?;
            let mut status = s.status.as_str().to_owned();
            if let Some(failure) = &s.failure {
                status.push_str(&format!(": {failure}"));
            } else if !s.missing.is_empty() {
                status.push_str(&format!(": waiting for {}", s.missing.join(", ")));
            }
            Some((label, s.plugin, status))
        })
        .collect();
    lines.sort();
    lines
        .into_iter()
        .map(|(id, plugin, status)| format!("{id} ({plugin}): {status}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tool registry; the presenters when there are (for the mount approval's card).
const INJECT: &[Inject] = &[
    Inject::required(<ToolRegistry as cordis_runtime::Service>::NAME),
    Inject::optional(<cordis_presenter::Presenters as cordis_runtime::Service>::NAME),
];

/// The `tool-cordis` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolCordisPlugin;

impl Plugin for ToolCordisPlugin {
    type Config = NoConfig;

    fn name(&self) -> &str {
        "tool-cordis"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn claims(&self, _config: &Self::Config) -> Vec<cordis_runtime::Claim> {
        [CORDIS_INSPECT, CORDIS_MOUNT, CORDIS_UNMOUNT]
            .into_iter()
            .map(cordis_runtime::Claim::tool)
            .collect()
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, _config: &NoConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let root = ctx.root_context();
        let description = "List every entry of the running cordis composition (the host's entries and the rows of mounted agent presets): its id, plugin and status, with the reason when it is not active.";
        let inspect_root = root.clone();
        let tool = ToolDefinition::typed(CORDIS_INSPECT, description, move |Args {}, _call| {
            let text = inspect(&inspect_root);
            async move { Ok(text) }
        })
        .read_only();
        let _ = registry.register_scheduled(&ctx, tool).await?;
        let mounts = Mounts::default();
        let plans = Plans::default();
        // Planned before the approvals' listener (at the back) asks anyone: a file that may not
        // be mounted is refused without a prompt, and the prompt shows what the file starts.
        let (plan_root, planning) = (root.clone(), plans.clone());
        let _ = ctx.on_waterfall::<ToolsPreExecute, _, _>(Position::Front, move |mut v, next| {
            let (root, plans) = (plan_root.clone(), planning.clone());
            async move {
                let given = v.call.arguments.get("path").and_then(|p| p.as_str());
                // A call its policy denies is not planned: planning reads files and resolves
                // paths, and its errors would tell the model about them.
                let denied = root
                    .get::<cordis_approvals::Approvals>()
                    .is_some_and(|a| a.denies(CORDIS_MOUNT));
                if let (CORDIS_MOUNT, Decision::Allow, Some(given), false) =
                    (v.call.name.as_str(), &v.decision, given, denied)
                {
                    match plan::plan(&root, given).await {
                        Ok(plan) => plans.insert(v.scope, &v.call.call_id, plan),
                        Err(why) => v.decision = Decision::Deny(why),
                    }
                }
                let v = next.run(v).await;
                // Denied later (the user said no): no call will take the plan.
                if v.call.name == CORDIS_MOUNT && matches!(v.decision, Decision::Deny(_)) {
                    let _ = plans.take(v.scope, &v.call.call_id);
                }
                v
            }
        });
        let ended = plans.clone();
        // A call refused after planning (a guard, bad arguments) leaves its plan here.
        let _ = ctx.on_waterfall::<ToolsPostExecute, _, _>(Position::Front, move |v, next| {
            if v.call.name == CORDIS_MOUNT {
                let _ = ended.take(v.scope, &v.call.call_id);
            }
            next.run(v)
        });
        if let Some(presenters) = ctx.get::<cordis_presenter::Presenters>() {
            let presenter = Arc::new(MountPresenter {
                plans: plans.clone(),
            });
            let _ = presenters.register(&ctx, CORDIS_MOUNT, presenter)?;
        }
        let (mount_root, mount_state, mount_plans) = (root.clone(), mounts.clone(), plans);
        let description = "Mount a cordis composition file (cordis.yml format) from the workspace or a preset root for yourself: its rows load under a scope of their own on top of your preset, and their tools are yours from the next step. Refused, with the rows named, when a row does not become active or provides a service.";
        let tool = ToolDefinition::typed(CORDIS_MOUNT, description, move |a: MountArgs, call| {
            mount(
                mount_root.clone(),
                mount_state.clone(),
                mount_plans.clone(),
                call,
                a.path,
            )
        });
        let _ = registry.register_scheduled(&ctx, tool).await?;
        let description = "Unmount the composition you mounted last with cordis_mount.";
        let tool = ToolDefinition::typed(CORDIS_UNMOUNT, description, move |Args {}, call| {
            let result = unmount(&root, &mounts, call.scope);
            async move { result }
        });
        let _ = registry.register_scheduled(&ctx, tool).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lists_labelled_entries_sorted_with_their_status() {
        let root = Context::root();
        let _ = root.provide(ToolRegistry::new(root.clone()));
        let options = |label: &str| cordis_runtime::PluginOptions {
            label: Some(label.into()),
            ..Default::default()
        };
        let b = root.plugin_with(
            cordis_runtime::Prepared::new(ToolCordisPlugin, NoConfig {}),
            options("b-cordis"),
        );
        let a = root.plugin_with(
            cordis_runtime::Prepared::new(
                cordis_runtime::FnPlugin::new("waiter", |_ctx: Context, (): ()| async { Ok(()) })
                    .inject(Inject::required("nobody")),
                (),
            ),
            options("a-waits"),
        );
        root.idle().await;
        let _ = (a, b);
        assert_eq!(
            inspect(&root),
            "a-waits (waiter): pending: waiting for nobody\nb-cordis (tool-cordis): active"
        );
        let registry = root.get::<ToolRegistry>().unwrap();
        for name in [CORDIS_INSPECT, CORDIS_MOUNT, CORDIS_UNMOUNT] {
            assert!(registry.get(name, None).is_some(), "{name}");
        }
        root.dispose();
    }
}
