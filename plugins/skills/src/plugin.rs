//! The `skills` plugin: the catalog section, the `skill` tool and the [`Skills`] service.

use std::sync::{Arc, LazyLock};

use cordis_instructions::{Handoff, user_config_dir};
use cordis_runtime::{BoxError, Claim, Context, Inject, Plugin, Service};
use cordis_system_prompt::{Section, SystemPrompt};
use cordis_tools::{ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use cordis_workspace::Workspace;
use serde_json::{Value, json};

use crate::config::SkillsConfig;
use crate::library::Library;

/// The catalog's section name.
pub const CATALOG_SECTION: &str = "skills:catalog";
/// The catalog's order: after the instructions (10).
pub const CATALOG_ORDER: f64 = 20.0;
/// The tool returning a skill's body.
pub const SKILL_TOOL: &str = "skill";
/// The variable holding the catalog text (never scanned for `{{references}}`).
const CATALOG_VARIABLE: &str = "skills_catalog";

/// The skills of a composition, for front ends ([`crate::skill_commands`], [`crate::expand`]).
#[derive(Debug)]
pub struct Skills {
    library: Arc<Library>,
}

impl Service for Skills {
    const NAME: &'static str = "skills";
}

impl Skills {
    /// The library the entry reads.
    pub fn library(&self) -> &Library {
        &self.library
    }
}

/// The `skills` plugin (see the crate docs). The user's directory comes from the process
/// environment unless [`SkillsPlugin::with_user_dir`] set it.
#[derive(Debug, Clone, Default)]
pub struct SkillsPlugin {
    user_dir: Option<Option<(std::path::PathBuf, String)>>,
}

impl SkillsPlugin {
    /// The plugin reading the user's skills under `dir/skills` (`dir` as
    /// [`cordis_instructions::user_config_dir`] returns it; `None`: no user skills).
    #[must_use]
    pub fn with_user_dir(mut self, dir: Option<(std::path::PathBuf, String)>) -> Self {
        self.user_dir = Some(dir);
        self
    }
}

const INJECT: &[Inject] = &[
    Inject::required(SystemPrompt::NAME),
    Inject::required(ToolRegistry::NAME),
    Inject::required(Workspace::NAME),
];

/// The `skill` tool's schema, built once per process: every apply (each boot, reload and
/// stress seed) copies it, and the registry recognises its shared parameters by identity
/// instead of compiling them again.
static SCHEMA: LazyLock<ToolSchema> = LazyLock::new(|| {
    ToolSchema {
    name: SKILL_TOOL.to_owned(),
    description: "Read a skill from the skills catalog: its full instructions, by name."
        .to_owned(),
    parameters: json!({
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill's name, as the catalog lists it"}},
        "required": ["name"]
    })
    .into(),
}
});

fn tool(library: Arc<Library>) -> ToolDefinition {
    ToolDefinition::new(SCHEMA.clone(), move |args: Value, _call| {
        let library = library.clone();
        async move {
            let name = args["name"].as_str().unwrap_or_default().to_owned();
            let found = tokio::task::spawn_blocking(move || {
                let skills = library.scan();
                match skills.iter().find(|s| s.name == name) {
                    Some(skill) => Ok(skill.body.clone()),
                    None => {
                        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
                        Err(format!(
                            "no skill named {name:?}; the skills are: {}",
                            if names.is_empty() {
                                "none".to_owned()
                            } else {
                                names.join(", ")
                            }
                        ))
                    }
                }
            })
            .await
            .map_err(|e| format!("the skill tool failed: {e}"))?;
            found.map(|body| ToolOutput::new(Value::String(body)))
        }
    })
    .read_only()
}

impl Plugin for SkillsPlugin {
    type Config = SkillsConfig;

    fn name(&self) -> &str {
        "skills"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn provides(&self, _config: &SkillsConfig) -> Vec<String> {
        vec![Skills::NAME.to_owned()]
    }

    fn claims(&self, _config: &SkillsConfig) -> Vec<Claim> {
        vec![
            Claim::tool(SKILL_TOOL),
            Claim::section(CATALOG_SECTION),
            Claim::new("variable", CATALOG_VARIABLE),
        ]
    }

    fn open_claims(&self, _config: &SkillsConfig) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &SkillsConfig) -> Result<(), BoxError> {
        let prompt = ctx.require::<SystemPrompt>()?;
        let registry = ctx.require::<ToolRegistry>()?;
        let ws = (*ctx.require::<Workspace>()?).clone();
        let user = if config.user {
            match &self.user_dir {
                Some(dir) => dir.clone(),
                None => user_config_dir(&|k| std::env::var(k).ok()),
            }
        } else {
            None
        };
        let library = Arc::new(Library::new(Some(ws), user, config.clone()));
        let lib = library.clone();
        let reference = format!("{{{{{CATALOG_VARIABLE}}}}}");
        // The section scans; the variable, evaluated next in the same assembly, takes that
        // catalog instead of scanning again.
        let handoff = Arc::new(Handoff::default());
        let h = handoff.clone();
        let _ = prompt.section(
            &ctx,
            Section::dynamic(CATALOG_SECTION, CATALOG_ORDER, move |at| {
                let catalog = lib.catalog();
                let empty = catalog.is_empty();
                h.put(at, catalog);
                if empty {
                    String::new()
                } else {
                    reference.clone()
                }
            }),
        )?;
        let lib = library.clone();
        let _ = prompt.variable(&ctx, CATALOG_VARIABLE, move |at| {
            Some(handoff.take(at).unwrap_or_else(|| lib.catalog()))
        })?;
        let _ = registry
            .register_scheduled(&ctx, tool(library.clone()))
            .await?;
        let _ = ctx.provide(Skills { library })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{AssembleContext, SystemPromptConfig, SystemPromptPlugin};
    use cordis_tools::{ToolCall, ToolsConfig, ToolsPlugin};
    use cordis_workspace::{WorkspaceConfig, WorkspacePlugin};

    use super::*;

    #[tokio::test]
    async fn the_catalog_is_a_section_and_the_tool_returns_a_body_read_again_each_time() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".agents/skills/deploy");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: deploy\ndescription: Ship it {{safely}}.\n---\nRun the deploy.\n",
        )
        .unwrap();
        let root = Context::root();
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(
            WorkspacePlugin,
            WorkspaceConfig {
                root: Some(tmp.path().to_path_buf()),
            },
        );
        let h = root.plugin(
            SkillsPlugin::default().with_user_dir(None),
            SkillsConfig::default(),
        );
        root.idle().await;
        assert_eq!(h.status(), ScopeStatus::Active);
        let sp = root.get::<SystemPrompt>().unwrap();
        let system = sp
            .assemble(AssembleContext::global())
            .await
            .unwrap()
            .render()
            .unwrap();
        assert!(
            system.ends_with("\n\n- deploy: Ship it {{safely}}."),
            "{system}"
        );
        let reg = root.get::<ToolRegistry>().unwrap();
        let call = |name: &str| ToolCall {
            call_id: "1".into(),
            name: SKILL_TOOL.into(),
            arguments: json!({"name": name}),
        };
        let got = reg.execute(call("deploy"), None).await;
        assert_eq!(got.content, json!("Run the deploy.\n"));
        let missing = reg.execute(call("nope"), None).await;
        assert!(missing.is_error);
        assert!(
            missing
                .content
                .to_string()
                .contains("the skills are: deploy")
        );
        // Hot reload: removed, the catalog section is gone at the next assembly.
        std::fs::remove_dir_all(&dir).unwrap();
        let assembly = sp.assemble(AssembleContext::global()).await.unwrap();
        assert!(!assembly.sections.iter().any(|s| s.name == CATALOG_SECTION));
        h.dispose();
        assert!(root.get::<Skills>().is_none());
        root.dispose();
        assert!(root.live().is_zero());
    }
}
