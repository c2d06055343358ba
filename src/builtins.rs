//! The standard plugin table of the `cordis` application: the host's own plugins plus every
//! agent plugin crate this package links. Adding a built-in plugin touches its crate and this
//! table.

use std::path::Path;
use std::sync::Arc;

use cordis_agent_presets::AgentPresetsPlugin;
use cordis_host::Builtins;
use cordis_host::plan::PlanOptions;

mod composer;
mod wasm;

pub use composer::HostComposer;
pub use wasm::WasmKind;

/// Every built-in plugin `cordis` offers: the host's (`tools`, `system-prompt`, `debug/*`) and
/// `tool-todo`, `tool-declare`, `llm`, `sessions`, `agent-loop`, `agent-core`, `tool-subagent`,
/// and the workspace tools: `workspace`, `tool-fs`, `tool-search`, `tool-shell`, `approvals`,
/// `presenter`, Code Mode's `code-runtime` and `tool-presentation`, and agent presets'
/// `agent-presets` with its rows `persona`, `tool-order`, `tool-restrict` and `tool-cordis`,
/// and `mcp` (one MCP server's tools per entry), project `instructions` (`AGENTS.md`),
/// `skills` (`SKILL.md` folders) and `deferred-tools` (tool search); and the entry kind of
/// `.wasm` files ([`WasmKind`]: WebAssembly component tool plugins).
pub fn standard() -> Builtins {
    let mut table = Builtins::host();
    table.insert_kind(WasmKind);
    table.insert(cordis_tool_todo::TodoPlugin::default());
    table.insert(cordis_tool_declare::DeclarePlugin);
    table.insert(cordis_llm::LlmPlugin);
    table.insert(cordis_session::SessionPlugin::default());
    table.insert(cordis_agent_loop::AgentLoopPlugin);
    table.insert(cordis_agent_core::AgentCorePlugin);
    table.insert(cordis_tool_subagent::SubagentPlugin);
    table.insert(cordis_workspace::WorkspacePlugin);
    table.insert(cordis_tool_fs::FsPlugin);
    table.insert(cordis_tool_search::SearchPlugin);
    table.insert(cordis_tool_shell::ShellPlugin);
    table.insert(cordis_approvals::ApprovalsPlugin);
    table.insert(cordis_presenter::PresenterPlugin);
    table.insert(cordis_code_runtime_quickjs::CodeRuntimePlugin);
    table.insert(cordis_tools::ToolPresentationPlugin);
    table.insert(cordis_tools::ToolRestrictPlugin);
    table.insert(cordis_agent_presets::PersonaPlugin);
    table.insert(cordis_agent_presets::ToolOrderPlugin);
    table.insert(cordis_tool_cordis::ToolCordisPlugin);
    table.insert(
        AgentPresetsPlugin::new(Arc::new(HostComposer::standard()))
            .with_shipped_root(Some(shipped_presets())),
    );
    table.insert(cordis_mcp::McpPlugin);
    table.insert(cordis_history::HistoryPlugin);
    table.insert(cordis_instructions::InstructionsPlugin::default());
    table.insert(cordis_skills::SkillsPlugin::default());
    table.insert(cordis_hooks::HooksPlugin::default());
    table.insert(cordis_deferred_tools::DeferredToolsPlugin);
    table
}

/// The presets shipped with `cordis` (`standard`, `code`, `minimal`, `creative`): the
/// repository's `presets/` directory, whose path is compiled in, so a copy of the bundled
/// `cordis.yml` elsewhere still finds them (a project's own `presets/` root comes first).
pub fn shipped_presets() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("presets")
}

/// `table` for loading the config file `file`: its `sessions` plugin resolves a relative root
/// against the file's directory and puts the default one under the user's state directory
/// (from `env`: `$XDG_STATE_HOME`, `$HOME`); its `agent-presets` plugin (when it has one)
/// resolves relative roots against the file's directory, takes the user root from `env`
/// (`$XDG_CONFIG_HOME`, `$HOME`; so do `instructions` and `skills` for the user's files), and
/// mounts presets through `table` itself with `options`'
/// timeouts and plugin directories.
pub fn for_config(
    table: &Builtins,
    file: &Path,
    options: &PlanOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Builtins {
    let dir = options.config_dir_for(&file.display().to_string());
    let mut table = table.clone();
    if table.get("sessions").is_some() {
        table.insert(
            cordis_session::SessionPlugin::default()
                .with_base_dir(dir.clone())
                .with_state_dir(cordis_session::state_dir(env)),
        );
    }
    // Project instructions and skills read the user's files from `env`, as presets do.
    let user_dir = cordis_instructions::user_config_dir(env);
    if table.get("instructions").is_some() {
        table.insert(
            cordis_instructions::InstructionsPlugin::default().with_user_dir(user_dir.clone()),
        );
    }
    if table.get("skills").is_some() {
        table.insert(cordis_skills::SkillsPlugin::default().with_user_dir(user_dir));
    }
    // Hooks from a file in the workspace run only in a trusted workspace: they learn where.
    if table.get("hooks").is_some() {
        let store = cordis_hooks::trust::store_path(env);
        table.insert(cordis_hooks::HooksPlugin::default().with_origin(dir.clone(), store));
    }
    if table.get("agent-presets").is_none() {
        return table;
    }
    let composer = HostComposer::with_table(table.clone(), options.clone());
    let plugin = AgentPresetsPlugin::new(Arc::new(composer))
        .with_base_dir(dir)
        .with_user_root(cordis_agent_presets::user_root(env))
        .with_shipped_root(Some(shipped_presets()));
    table.insert(plugin);
    table
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_standard_table_names_every_agent_plugin_and_suggests_from_it() {
        let table = super::standard();
        for name in [
            "tool-todo",
            "llm",
            "sessions",
            "agent-loop",
            "agent-core",
            "debug/noop",
        ] {
            assert!(table.get(name).is_some(), "{name} missing");
        }
        assert_eq!(table.suggest("agent-lop")[0], "agent-loop");
    }
}
