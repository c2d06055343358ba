//! `cordis presets`: the roster a config's `agent-presets` entry finds; and the one way the
//! other commands' `--preset ID` mounts a preset and reads what a joined agent would receive.

use std::path::PathBuf;

use cordis_agent_presets::{
    AgentPresets, AgentPresetsConfig, PresetInfo, RowStatus, discover, resolve_roots, user_root,
};
use cordis_host::Builtins;
use cordis_host::diagnostic::Pos;
use cordis_host::loader::{BootReport, EntryReport, EntryStatus, boot_in_order};
use cordis_host::plan::Step;
use cordis_runtime::{Context, Schedule};
use cordis_system_prompt::{AssembleContext, SystemPrompt};
use serde_json::{Value, json};

use crate::builtins::HostComposer;

use super::render::safe;
use super::{EXIT_CONFIG, EXIT_OK, Io, PresetsArgs, load};

pub(crate) fn run(args: &PresetsArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let plan = load(&args.config, io, builtins)?;
    let file = args.config.file.display().to_string();
    // The roster's configuration as resolved, without booting anything (a composition may
    // start processes: MCP servers, shells): discovery only needs the roots and a composer.
    let Some(config) = presets_config(&plan) else {
        writeln!(
            io.err,
            "cordis: {} has no enabled agent-presets entry; add one (see the bundled cordis.yml):\n  - id: agent-presets\n    name: agent-presets\n    config: {{roots: [{{path: presets}}], default: standard}}",
            safe(&file)
        )?;
        return Ok(EXIT_CONFIG);
    };
    let (presets, _) = discovered(&config, &args.config, io, builtins);
    let default = config.default;
    if args.json {
        let presets: Vec<Value> = presets.iter().map(info_json).collect();
        let value = json!({"default": default, "presets": presets});
        writeln!(io.out, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(EXIT_OK);
    }
    write!(io.out, "{}", table(&presets, &default))?;
    Ok(EXIT_OK)
}

/// The presets `config` (an `agent-presets` entry's) finds, as `cordis presets` lists them, with
/// the composer that read them.
pub(crate) fn discovered(
    config: &AgentPresetsConfig,
    args: &super::ConfigArgs,
    io: &Io<'_>,
    builtins: &Builtins,
) -> (Vec<PresetInfo>, HostComposer) {
    let options = super::plan_options(args, io);
    let file = args.file.display().to_string();
    let home = (io.env)("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let roots = resolve_roots(
        config,
        &options.config_dir_for(&file),
        home.as_deref(),
        user_root(io.env).as_deref(),
        Some(&crate::builtins::shipped_presets()),
    );
    let composer = HostComposer::with_table(
        crate::builtins::for_config(builtins, &args.file, &options, io.env),
        options,
    );
    (discover(&roots, &composer), composer)
}

/// The plan of preset `id`'s composition, as `plan`'s `agent-presets` entry finds it: what
/// `permute --preset` reorders. `None` without such an entry or preset.
///
/// # Errors
/// Why the composition is unusable.
pub(crate) fn preset_plan(
    plan: &cordis_host::LoadPlan,
    args: &super::ConfigArgs,
    io: &Io<'_>,
    builtins: &Builtins,
    id: &str,
) -> Result<Option<cordis_host::LoadPlan>, String> {
    let Some(config) = presets_config(plan) else {
        return Ok(None);
    };
    let (presets, composer) = discovered(&config, args, io, builtins);
    match presets.iter().find(|p| p.id == id) {
        Some(preset) => composer
            .plan(&preset.composition)
            .map(|(plan, _)| Some(plan)),
        None => Ok(None),
    }
}

/// The resolved config of `plan`'s enabled `agent-presets` entry.
fn presets_config(plan: &cordis_host::LoadPlan) -> Option<AgentPresetsConfig> {
    plan.entries.iter().find_map(|e| match &e.step {
        Step::Plugin { prepared, .. } if prepared.plugin.name() == "agent-presets" => prepared
            .config
            .downcast_ref::<AgentPresetsConfig>()
            .cloned(),
        _ => None,
    })
}

fn info_json(p: &PresetInfo) -> Value {
    json!({
        "id": p.id,
        "name": p.name,
        "description": p.description,
        "order": p.order,
        "root": p.root.display().to_string(),
        "trust": p.trust.as_str(),
        "composition": p.composition.display().to_string(),
        "broken": p.broken,
    })
}

/// The listing: id (`*` marks the default), name, order, and a broken preset's reason.
fn table(presets: &[PresetInfo], default: &str) -> String {
    let rows: Vec<[String; 4]> = presets
        .iter()
        .map(|p| {
            let id = if p.id == default {
                format!("{} *", p.id)
            } else {
                p.id.clone()
            };
            [
                id,
                safe(p.name.as_deref().unwrap_or("-")).into_owned(),
                p.order.map_or_else(|| "-".to_owned(), |o| o.to_string()),
                p.broken
                    .as_deref()
                    .map_or_else(String::new, |b| format!("broken: {}", safe(b))),
            ]
        })
        .collect();
    let header = ["ID", "NAME", "ORDER", "BROKEN"];
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 4]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i == 3 {
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.push_str(&" ".repeat(w - cell.chars().count() + 2));
            }
        }
        format!("{}\n", out.trim_end())
    };
    let mut out = line(header);
    for row in &rows {
        out.push_str(&line([&row[0], &row[1], &row[2], &row[3]]));
    }
    if presets.iter().all(|p| p.id != default) {
        out.push_str(&format!(
            "the default preset \"{}\" is not among them\n",
            safe(default)
        ));
    } else {
        out.push_str("* the default (joined when no --preset is given)\n");
    }
    out
}

/// Mounts preset `preset` on a booted runtime and turns `report` into what an agent joined to it
/// would get: the preset's rows appended as entries (`<preset>/<row>`), and the assembly and
/// digest of its standing scope (a scope-only read, as a joined agent's request carries it).
///
/// # Errors
/// The roster's message when the config has no roster or the preset does not mount.
pub(crate) async fn join_report(
    root: &Context,
    mut report: BootReport,
    preset: &str,
) -> Result<BootReport, String> {
    let Some(roster) = root.get::<AgentPresets>() else {
        return Err(
            "--preset needs an `agent-presets` entry (see the bundled cordis.yml), and it is not active"
                .to_owned(),
        );
    };
    let standing = roster
        .standing_key_for(Some(preset))
        .await
        .map_err(|e| e.to_string())?;
    for row in &standing.rows {
        report.entries.push(EntryReport {
            id: format!("{}/{}", standing.preset, row.id),
            name: row.name.clone(),
            pos: Pos::default(),
            status: match row.status {
                RowStatus::Active => EntryStatus::Active,
                RowStatus::Disabled => EntryStatus::Disabled,
                RowStatus::Pending => EntryStatus::Pending,
                RowStatus::Loading => EntryStatus::Loading,
                RowStatus::Failed => EntryStatus::Failed,
                RowStatus::Disposed => EntryStatus::Disposed,
                RowStatus::Conflict => EntryStatus::Conflict,
            },
            error: row.reason.clone(),
            waiting_for: Vec::new(),
            retrying: false,
            load_ms: None,
        });
    }
    let Some(prompt) = root.get::<SystemPrompt>() else {
        return Err("--preset needs a `system-prompt` entry".to_owned());
    };
    match prompt.assemble(AssembleContext::scoped(standing.key)).await {
        Ok(assembly) => match cordis_host::assembly::request_header(root, &assembly) {
            Ok(header) => {
                let mut view = cordis_host::assembly::view_json(root, &assembly);
                view["preset"] = json!(standing.preset);
                report.assembly = view;
                report.digest = cordis_host::digest::sha256_hex(&header);
                report.assembly_error = None;
            }
            Err(e) => fail_assembly(&mut report, e.to_string()),
        },
        Err(e) => fail_assembly(&mut report, e.to_string()),
    }
    Ok(report)
}

fn fail_assembly(report: &mut BootReport, message: String) {
    report.assembly = Value::Null;
    report.digest =
        cordis_host::digest::sha256_hex(format!("assemble failed: {message}").as_bytes());
    report.assembly_error = Some(message);
}

/// Boots `plan` on a fresh current-thread runtime under `schedule`, joins `preset`
/// ([`join_report`]), disposes, and returns the joined report (or why the preset did not mount)
/// with the live counts left after disposal.
///
/// # Errors
/// Only if the tokio runtime cannot be built.
pub(crate) fn boot_joined(
    plan: &cordis_host::LoadPlan,
    schedule: Schedule,
    preset: &str,
) -> std::io::Result<(Result<BootReport, String>, cordis_runtime::LiveCounts)> {
    let rt = cordis_host::shutdown::current_thread()?;
    let starts: Vec<usize> = (0..plan.entries.len()).collect();
    let outcome = rt.block_on(boot_joined_on(plan, schedule, preset, &starts, None));
    cordis_host::shutdown::end(rt);
    Ok(outcome)
}

/// [`boot_joined`] on the current runtime, with the plan's plugin entries started in `starts`
/// (plan indices) and the preset's rows in `mount`'s order: one order of the `--preset` proof.
pub(crate) async fn boot_joined_on(
    plan: &cordis_host::LoadPlan,
    schedule: Schedule,
    preset: &str,
    starts: &[usize],
    mount: Option<cordis_host::loader::MountOrder>,
) -> (Result<BootReport, String>, cordis_runtime::LiveCounts) {
    let (joined, leaked, _) = boot_joined_with_events(plan, schedule, preset, starts, mount).await;
    (joined, leaked)
}

/// [`boot_joined_on`], with the event footprints of the boot's entries and rows by label (see
/// [`cordis_host::permute::event_footprints`]): what the `--preset` proof refines itself by.
pub(crate) async fn boot_joined_with_events(
    plan: &cordis_host::LoadPlan,
    schedule: Schedule,
    preset: &str,
    starts: &[usize],
    mount: Option<cordis_host::loader::MountOrder>,
) -> (
    Result<BootReport, String>,
    cordis_runtime::LiveCounts,
    std::collections::BTreeMap<String, cordis_runtime::EventFootprint>,
) {
    let root = Context::root_with(schedule);
    let _mount = mount.map(|m| root.provide(m));
    let report = boot_in_order(&root, plan, &mut starts.iter().copied()).await;
    let joined = join_report(&root, report, preset).await;
    let events = cordis_host::permute::event_footprints(&root);
    root.dispose();
    root.tasks_finished().await;
    for _ in 0..16 {
        if root.live().is_zero() {
            break;
        }
        tokio::task::yield_now().await;
    }
    (joined, root.live(), events)
}
