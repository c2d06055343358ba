//! The `instructions` plugin: one prompt section per candidate file, read again at each
//! assembly.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cordis_runtime::{BoxError, Context, Inject, Plugin, Service};
use cordis_system_prompt::{Section, SystemPrompt};
use cordis_workspace::Workspace;

use crate::config::InstructionsConfig;
use crate::handoff::Handoff;
use crate::snapshot::Key;
use crate::source::Reader;
use crate::walk::{Candidate, candidates};

/// The prefix of every section this plugin registers (`instructions:AGENTS.md`); a
/// `request/header` change lists the section of each file that changed.
pub const SECTION_PREFIX: &str = "instructions:";
/// The order of the first instruction section (after the persona at 0); each next file is
/// 1/1024 later, so the files stay in canonical order and before the skills catalog (20).
pub const INSTRUCTIONS_ORDER: f64 = 10.0;

/// How many distinct warnings one entry prints (a file that stays bad warns once).
const MAX_WARNINGS: usize = 256;

/// The user's cordis config directory and how it is shown: `$XDG_CONFIG_HOME/cordis` (an
/// absolute `XDG_CONFIG_HOME`), else `~/.config/cordis` under `$HOME`; `None` without either.
pub fn user_config_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<(PathBuf, String)> {
    if let Some(xdg) = env("XDG_CONFIG_HOME").filter(|v| Path::new(v).is_absolute()) {
        return Some((
            Path::new(&xdg).join("cordis"),
            "$XDG_CONFIG_HOME/cordis".to_owned(),
        ));
    }
    let home = env("HOME").filter(|v| Path::new(v).is_absolute())?;
    Some((
        Path::new(&home).join(".config/cordis"),
        "~/.config/cordis".to_owned(),
    ))
}

/// The `instructions` plugin (see the crate docs).
///
/// The user's directory comes from the process environment unless
/// [`InstructionsPlugin::with_user_dir`] set it (a host passing its own environment).
#[derive(Debug, Clone, Default)]
pub struct InstructionsPlugin {
    user_dir: Option<Option<(PathBuf, String)>>,
}

impl InstructionsPlugin {
    /// The plugin reading the user's files from `dir` (as [`user_config_dir`] returns it;
    /// `None`: no user files).
    #[must_use]
    pub fn with_user_dir(mut self, dir: Option<(PathBuf, String)>) -> Self {
        self.user_dir = Some(dir);
        self
    }

    fn user_dir(&self) -> Option<(PathBuf, String)> {
        match &self.user_dir {
            Some(dir) => dir.clone(),
            None => user_config_dir(&|k| std::env::var(k).ok()),
        }
    }
}

const INJECT: &[Inject] = &[
    Inject::required(SystemPrompt::NAME),
    Inject::required(Workspace::NAME),
];

/// What every section of one entry shares.
pub(crate) struct Files {
    ws: Workspace,
    reader: Reader,
    max: usize,
    warned: Mutex<BTreeSet<String>>,
}

impl Files {
    /// The section text of `c`: its heading and text, empty when there is no such file (or it
    /// is empty, or cannot be used: then a warning naming it, once).
    fn render(&self, c: &Candidate) -> String {
        match self.reader.read(Some(&self.ws), &c.place, self.max) {
            Ok(Some(loaded)) if !loaded.text.trim().is_empty() => {
                let mut text = format!("Instructions from {}:\n\n{}", c.shown, loaded.text);
                if loaded.cut {
                    text.push_str(&format!(
                        "\n\n[{} is {} bytes; it was cut after the first {} (instructions maxBytes)]",
                        c.shown, loaded.size, self.max
                    ));
                }
                text
            }
            Ok(_) => String::new(),
            Err(e) => {
                self.warn(format!("instructions: {}: {e}", c.shown));
                String::new()
            }
        }
    }

    fn warn(&self, message: String) {
        let mut warned = cordis_runtime::lock(&self.warned);
        if warned.len() < MAX_WARNINGS && warned.insert(message.clone()) {
            tracing::warn!("{message}");
        }
    }
}

impl Plugin for InstructionsPlugin {
    type Config = InstructionsConfig;

    fn name(&self) -> &str {
        "instructions"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    /// The sections are named by the files found at apply time (see [`SECTION_PREFIX`]).
    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(vec!["section", "variable"])
    }

    async fn apply(&self, ctx: Context, config: &InstructionsConfig) -> Result<(), BoxError> {
        config.check_names()?;
        let prompt = ctx.require::<SystemPrompt>()?;
        let ws = (*ctx.require::<Workspace>()?).clone();
        let user = if config.user { self.user_dir() } else { None };
        let plan = plan(&ws, config, user).await?;
        let files = Arc::new(Files {
            ws,
            reader: Reader::new(),
            max: config.max_bytes,
            warned: Mutex::default(),
        });
        for planned in plan.iter() {
            register(&ctx, &prompt, &files, planned)?;
        }
        Ok(())
    }
}

/// One candidate file as the entry registers it: the names that follow from its place in the
/// canonical order.
#[derive(Debug)]
struct Planned {
    candidate: Arc<Candidate>,
    /// The variable holding its text (`instructions_0`).
    variable: String,
    /// That variable referenced (`{{instructions_0}}`).
    reference: String,
    /// The section (`instructions:AGENTS.md`).
    section: String,
    order: f64,
}

/// The candidates under `ws`'s root for `config`'s names and the user's directory `user`, as
/// registered: walked now (a few `stat` calls up the tree, off the async threads) or, inside a
/// run's snapshot, once per snapshot. The key holds every input of the walk: the root, the
/// configured names as written (a valid list always yields the same checked names; an invalid
/// one errs before anything is kept) and the user's directory.
async fn plan(
    ws: &Workspace,
    config: &InstructionsConfig,
    user: Option<(PathBuf, String)>,
) -> Result<Arc<[Planned]>, BoxError> {
    let key = crate::snapshot::active().then(|| walk_key(ws.root(), &config.files, user.as_ref()));
    if let Some(plan) = key
        .as_ref()
        .and_then(crate::snapshot::get::<Arc<[Planned]>>)
    {
        return Ok(plan);
    }
    let names = config.file_names()?;
    let root = ws.root().to_path_buf();
    let list = tokio::task::spawn_blocking(move || {
        candidates(
            &root,
            &names,
            user.as_ref()
                .map(|(dir, shown)| (dir.as_path(), shown.as_str())),
        )
    })
    .await?;
    let plan: Arc<[Planned]> = list.into_iter().enumerate().map(planned).collect();
    if let Some(key) = key {
        crate::snapshot::put(key, plan.clone());
    }
    Ok(plan)
}

/// What [`plan`]'s result is kept under.
fn walk_key(root: &Path, files: &[String], user: Option<&(PathBuf, String)>) -> Key {
    let mut key = Key::new("walk").path(root).num(files.len() as u64);
    for name in files {
        key = key.str(name);
    }
    match user {
        None => key.tag(0),
        Some((dir, shown)) => key.tag(1).path(dir).str(shown),
    }
}

/// The `i`th candidate's names (see [`Planned`]).
fn planned((i, candidate): (usize, Candidate)) -> Planned {
    let variable = format!("instructions_{i}");
    #[expect(
        clippy::cast_precision_loss,
        reason = "the candidate count is bounded far below 2^52"
    )]
    let order = INSTRUCTIONS_ORDER + i as f64 / 1024.0;
    Planned {
        reference: format!("{{{{{variable}}}}}"),
        section: format!("{SECTION_PREFIX}{}", candidate.shown),
        variable,
        candidate: Arc::new(candidate),
        order,
    }
}

/// Registers `planned`'s section and the variable holding its text: the text goes in as a
/// variable's value, which is never scanned for `{{references}}`, so a file may hold braces.
fn register(
    ctx: &Context,
    prompt: &SystemPrompt,
    files: &Arc<Files>,
    planned: &Planned,
) -> Result<(), BoxError> {
    let candidate = planned.candidate.clone();
    let reference = planned.reference.clone();
    // The section reads the file; its variable, evaluated next in the same assembly, takes
    // that text instead of reading again.
    let handoff = Arc::new(Handoff::default());
    let (f, c, h) = (files.clone(), candidate.clone(), handoff.clone());
    let _ = prompt.section(
        ctx,
        Section::dynamic(planned.section.clone(), planned.order, move |at| {
            let text = f.render(&c);
            let empty = text.is_empty();
            h.put(at, text);
            if empty {
                String::new()
            } else {
                reference.clone()
            }
        }),
    )?;
    let f = files.clone();
    let _ = prompt.variable(ctx, &planned.variable, move |at| {
        Some(handoff.take(at).unwrap_or_else(|| f.render(&candidate)))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{AssembleContext, SystemPromptConfig, SystemPromptPlugin};
    use cordis_workspace::{WorkspaceConfig, WorkspacePlugin};

    use super::*;

    async fn system(root: &Context) -> String {
        let sp = root.get::<SystemPrompt>().unwrap();
        let assembly = sp.assemble(AssembleContext::global()).await.unwrap();
        assembly.render().unwrap()
    }

    async fn boot(ws: &Path, user: Option<&Path>, config: InstructionsConfig) -> Context {
        let root = Context::root();
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.plugin(
            WorkspacePlugin,
            WorkspaceConfig {
                root: Some(ws.to_path_buf()),
            },
        );
        let plugin = InstructionsPlugin::default()
            .with_user_dir(user.map(|u| (u.to_path_buf(), "~/.config/cordis".to_owned())));
        let h = root.plugin(plugin, config);
        root.idle().await;
        assert_eq!(h.status(), ScopeStatus::Active);
        root
    }

    #[tokio::test]
    async fn files_render_user_first_then_outermost_to_innermost_with_braces_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(tmp.path()).unwrap();
        let (repo, user) = (top.join("repo"), top.join("user"));
        let ws = repo.join("ws");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join("AGENTS.md"), "user rules").unwrap();
        std::fs::write(repo.join("AGENTS.md"), "repo rules").unwrap();
        std::fs::write(ws.join("AGENTS.md"), "use {{braces}} freely").unwrap();
        std::fs::write(ws.join("CLAUDE.md"), "claude rules").unwrap();
        // Above the repository root: never read.
        std::fs::write(top.join("AGENTS.md"), "outside").unwrap();
        let config = InstructionsConfig {
            files: vec!["AGENTS.md".into(), "CLAUDE.md".into()],
            ..Default::default()
        };
        let root = boot(&ws, Some(&user), config).await;
        assert_eq!(
            system(&root).await,
            "Instructions from ~/.config/cordis/AGENTS.md:\n\nuser rules\n\n\
             Instructions from ../AGENTS.md:\n\nrepo rules\n\n\
             Instructions from AGENTS.md:\n\nuse {{braces}} freely\n\n\
             Instructions from CLAUDE.md:\n\nclaude rules"
        );
        // Changed, removed and added between two assemblies: read again each time.
        std::fs::write(ws.join("AGENTS.md"), "changed").unwrap();
        std::fs::remove_file(repo.join("AGENTS.md")).unwrap();
        std::fs::write(repo.join("CLAUDE.md"), "new").unwrap();
        assert_eq!(
            system(&root).await,
            "Instructions from ~/.config/cordis/AGENTS.md:\n\nuser rules\n\n\
             Instructions from ../CLAUDE.md:\n\nnew\n\n\
             Instructions from AGENTS.md:\n\nchanged\n\n\
             Instructions from CLAUDE.md:\n\nclaude rules"
        );
        root.dispose();
        assert!(root.live().is_zero());
    }

    #[tokio::test]
    async fn a_large_file_is_cut_saying_so_and_a_bad_one_is_left_out() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(ws.join(".git")).unwrap();
        std::fs::write(ws.join("AGENTS.md"), "x".repeat(100)).unwrap();
        std::fs::create_dir(ws.join("CLAUDE.md")).unwrap();
        let config = InstructionsConfig {
            files: vec!["AGENTS.md".into(), "CLAUDE.md".into()],
            max_bytes: 10,
            user: false,
        };
        let root = boot(&ws, None, config).await;
        assert_eq!(
            system(&root).await,
            format!(
                "Instructions from AGENTS.md:\n\n{}\n\n[AGENTS.md is 100 bytes; it was cut after the first 10 (instructions maxBytes)]",
                "x".repeat(10)
            )
        );
        root.dispose();
    }

    #[test]
    fn inside_a_snapshot_the_walk_is_kept_per_root_names_and_user_directory() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(tmp.path()).unwrap();
        let (ws, other, user) = (top.join("ws"), top.join("other"), top.join("user"));
        for dir in [&ws, &other, &user] {
            std::fs::create_dir_all(dir.join(".git")).unwrap();
        }
        std::fs::write(ws.join("AGENTS.md"), "ws agents").unwrap();
        std::fs::write(ws.join("CLAUDE.md"), "ws claude").unwrap();
        std::fs::write(other.join("AGENTS.md"), "other agents").unwrap();
        std::fs::write(user.join("AGENTS.md"), "user agents").unwrap();
        let files = |names: &[&str]| InstructionsConfig {
            files: names.iter().map(|n| (*n).to_owned()).collect(),
            ..Default::default()
        };
        let text = |ws: &Path, user: Option<&Path>, config: InstructionsConfig| {
            rt.block_on(async {
                let root = boot(ws, user, config).await;
                let text = system(&root).await;
                root.dispose();
                text
            })
        };
        let snapshot = crate::Snapshot::new();
        snapshot.enter(|| {
            let agents = text(&ws, None, files(&["AGENTS.md"]));
            assert_eq!(agents, "Instructions from AGENTS.md:\n\nws agents");
            assert_eq!(text(&ws, None, files(&["AGENTS.md"])), agents);
            // Every input of the walk is in its key: other names, another root, a user
            // directory each find their own files.
            assert_eq!(
                text(&ws, None, files(&["CLAUDE.md"])),
                "Instructions from CLAUDE.md:\n\nws claude"
            );
            assert_eq!(
                text(&ws, None, files(&["CLAUDE.md", "AGENTS.md"])),
                "Instructions from CLAUDE.md:\n\nws claude\n\nInstructions from AGENTS.md:\n\nws agents"
            );
            assert_eq!(
                text(&other, None, files(&["AGENTS.md"])),
                "Instructions from AGENTS.md:\n\nother agents"
            );
            assert_eq!(
                text(&ws, Some(&user), files(&["AGENTS.md"])),
                "Instructions from ~/.config/cordis/AGENTS.md:\n\nuser agents\n\n\
                 Instructions from AGENTS.md:\n\nws agents"
            );
            // A bad name is refused even after a good list was kept.
            let bad = rt.block_on(async {
                let root = Context::root();
                root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
                root.plugin(
                    WorkspacePlugin,
                    WorkspaceConfig {
                        root: Some(ws.clone()),
                    },
                );
                let h = root.plugin(
                    InstructionsPlugin::default().with_user_dir(None),
                    files(&["AGENTS.md", "a/b"]),
                );
                root.idle().await;
                let status = h.status();
                root.dispose();
                status
            });
            assert_eq!(bad, ScopeStatus::Failed);
        });
    }

    #[test]
    fn a_file_name_with_a_slash_is_a_config_error() {
        let config: InstructionsConfig =
            serde_json::from_value(serde_json::json!({"files": ["a/AGENTS.md"]})).unwrap();
        assert!(config.file_names().unwrap_err().contains("a/AGENTS.md"));
        let config: InstructionsConfig = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(config, InstructionsConfig::default());
        assert!(
            serde_json::from_value::<InstructionsConfig>(serde_json::json!({"file": []})).is_err()
        );
    }

    #[test]
    fn the_user_directory_is_shown_without_the_home_path() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/ada".to_owned()),
            _ => None,
        };
        assert_eq!(
            user_config_dir(&env),
            Some((
                PathBuf::from("/home/ada/.config/cordis"),
                "~/.config/cordis".to_owned()
            ))
        );
        let env = |k: &str| match k {
            "XDG_CONFIG_HOME" => Some("/cfg".to_owned()),
            "HOME" => Some("/home/ada".to_owned()),
            _ => None,
        };
        assert_eq!(user_config_dir(&env).unwrap().1, "$XDG_CONFIG_HOME/cordis");
        assert_eq!(user_config_dir(&|_| None), None);
    }
}
