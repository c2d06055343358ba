//! The `sessions` plugin: provides the [`SessionStore`].
//!
//! Where logs go: a configured `root` (relative to the config file's directory); by default the
//! user's state directory, one folder per project (`$XDG_STATE_HOME/cordis/sessions/<key>/`,
//! else `~/.local/state/…`), so transcripts never land in the workspace the agent works on;
//! `memory: true` writes nothing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cordis_runtime::{BoxError, Context, Plugin};
use serde::Deserialize;

use crate::store::{Durability, SessionStore};

/// Configuration of the `sessions` plugin: `{root?: dir, memory?: bool, durability?: fsync | none}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SessionConfig {
    /// Directory of `<id>.jsonl` files, relative to the config file's directory; absent: the
    /// user's state directory, per project.
    #[serde(default)]
    pub root: Option<PathBuf>,
    /// Keep sessions in memory only, writing nothing (tests, benchmarks, throwaway agents).
    #[serde(default)]
    pub memory: bool,
    /// How appends reach the disk.
    #[serde(default)]
    pub durability: Durability,
}

impl SessionConfig {
    /// Sessions kept in memory only.
    pub fn in_memory() -> Self {
        SessionConfig {
            memory: true,
            ..SessionConfig::default()
        }
    }
}

/// Why a `sessions` entry has no root to write to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionRootError {
    /// Both `root` and `memory: true`.
    #[error("give the sessions entry either `root` or `memory: true`, not both")]
    RootAndMemory,
    /// The default root needs a state directory, and the environment names none.
    #[error(
        "no state directory for session logs: set XDG_STATE_HOME or HOME, or give the sessions entry a `root`"
    )]
    NoStateDir,
}

/// The `sessions` plugin: resolves relative roots against `base_dir` and puts the default root
/// under `state_dir`.
#[derive(Debug, Clone, Default)]
pub struct SessionPlugin {
    base_dir: Option<PathBuf>,
    /// `None`: not given, asked of this process's environment when needed.
    state_dir: Option<Option<PathBuf>>,
    /// The [`project_key`] of the base directory's canonical path, resolved by the first boot
    /// that needs it and shared by every later boot of this plugin value (one config load):
    /// `cordis stress` boots thousands of times, and each resolve is a round trip to a
    /// blocking thread (the key is a function of the path alone, so it is kept, not the path).
    project: Arc<OnceLock<String>>,
}

impl SessionPlugin {
    /// Relative roots resolve against `dir` (the config file's directory), which also names
    /// the project whose folder the default root is (default: the current directory).
    #[must_use]
    pub fn with_base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = Some(dir.into());
        self.project = Arc::default();
        self
    }

    /// The folder the default roots go under (see [`state_dir`]; `None`: there is none, so a
    /// `sessions` entry needs a `root`). Without this call, this process's environment is asked.
    #[must_use]
    pub fn with_state_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.state_dir = Some(dir);
        self
    }

    /// Where `config`'s sessions go: `None` in memory.
    ///
    /// # Errors
    /// `root` with `memory`, or the default root without a state directory.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads (the project directory's canonical path, once per plugin value) and
    /// creates nothing.
    pub async fn root_for(
        &self,
        config: &SessionConfig,
    ) -> Result<Option<PathBuf>, SessionRootError> {
        let base = self.base_dir.clone().unwrap_or_else(|| PathBuf::from("."));
        match (&config.root, config.memory) {
            (Some(_), true) => Err(SessionRootError::RootAndMemory),
            (None, true) => Ok(None),
            (Some(root), false) => Ok(Some(if root.is_absolute() {
                root.clone()
            } else {
                join_relative(&base, root)
            })),
            (None, false) => {
                let state = match &self.state_dir {
                    Some(dir) => dir.clone(),
                    None => state_dir(&|name| std::env::var(name).ok()),
                };
                let state = state.ok_or(SessionRootError::NoStateDir)?;
                let key = match self.project.get() {
                    Some(key) => key.clone(),
                    None => match tokio::fs::canonicalize(&base).await {
                        // Only a resolved path is kept: a directory made later is seen then.
                        Ok(dir) => self.project.get_or_init(|| project_key(&dir)).clone(),
                        Err(_) => project_key(&std::path::absolute(&base).unwrap_or(base)),
                    },
                };
                Ok(Some(state.join(key)))
            }
        }
    }
}

/// `root` under `base`, without a `./` in front when `base` is the current directory (so the
/// paths cordis prints stay as the user wrote them).
fn join_relative(base: &Path, root: &Path) -> PathBuf {
    if base.as_os_str().is_empty() || base == Path::new(".") {
        root.to_owned()
    } else {
        base.join(root)
    }
}

/// The folder the default session roots go under: `$XDG_STATE_HOME/cordis/sessions`, else
/// `$HOME/.local/state/cordis/sessions` (`None` without either).
pub fn state_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(xdg) = env("XDG_STATE_HOME").filter(|v| Path::new(v).is_absolute()) {
        return Some(PathBuf::from(xdg).join("cordis").join("sessions"));
    }
    env("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".local/state/cordis/sessions"))
}

/// A project's folder name under the state directory: its directory's name (made safe) and a
/// hash of its whole path, so two checkouts named alike stay apart and the name is readable.
pub fn project_key(project: &Path) -> String {
    let name: String = project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    let name = match name.trim_start_matches('.') {
        "" => "root",
        name => name,
    };
    // FNV-1a over the path's bytes: stable across runs, builds and machines.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in project.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{name}-{hash:016x}")
}

impl Plugin for SessionPlugin {
    type Config = SessionConfig;

    fn name(&self) -> &str {
        "sessions"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn provides(&self, _config: &Self::Config) -> Vec<String> {
        vec![<crate::SessionStore as cordis_runtime::Service>::NAME.to_owned()]
    }

    async fn apply(&self, ctx: Context, config: &SessionConfig) -> Result<(), BoxError> {
        let root = self.root_for(config).await?;
        let _ = ctx.provide(SessionStore::new(root, config.durability))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn roots_are_relative_to_the_config_file_or_per_project_in_the_state_dir() {
        let plugin = SessionPlugin::default()
            .with_base_dir("/no/such/project")
            .with_state_dir(Some(PathBuf::from("/state/cordis/sessions")));
        let dir = |root: &str| SessionConfig {
            root: Some(PathBuf::from(root)),
            ..SessionConfig::default()
        };
        assert_eq!(
            plugin.root_for(&dir(".sessions")).await,
            Ok(Some(PathBuf::from("/no/such/project/.sessions")))
        );
        assert_eq!(
            plugin.root_for(&dir("/abs")).await,
            Ok(Some(PathBuf::from("/abs")))
        );
        assert_eq!(plugin.root_for(&SessionConfig::in_memory()).await, Ok(None));
        let default = plugin
            .root_for(&SessionConfig::default())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            default,
            PathBuf::from("/state/cordis/sessions")
                .join(project_key(Path::new("/no/such/project")))
        );
        let both = SessionConfig {
            memory: true,
            ..dir("x")
        };
        assert_eq!(
            plugin.root_for(&both).await,
            Err(SessionRootError::RootAndMemory)
        );
        let nowhere = SessionPlugin::default().with_state_dir(None);
        assert_eq!(
            nowhere.root_for(&SessionConfig::default()).await,
            Err(SessionRootError::NoStateDir)
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_project_directory_is_resolved_once_per_plugin_value() {
        let tmp = tempfile::tempdir().unwrap();
        let (one, two, link) = (
            tmp.path().join("one"),
            tmp.path().join("two"),
            tmp.path().join("link"),
        );
        std::fs::create_dir(&one).unwrap();
        std::fs::create_dir(&two).unwrap();
        std::os::unix::fs::symlink(&one, &link).unwrap();
        let plugin = SessionPlugin::default()
            .with_base_dir(&link)
            .with_state_dir(Some(PathBuf::from("/state")));
        let config = SessionConfig::default();
        let first = plugin.root_for(&config).await.unwrap().unwrap();
        let one_key = project_key(&std::fs::canonicalize(&one).unwrap());
        assert_eq!(first, Path::new("/state").join(&one_key));
        // The link now names another directory: this plugin value keeps what it resolved
        // (later boots of one config load agree), a fresh one resolves again.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&two, &link).unwrap();
        assert_eq!(plugin.clone().root_for(&config).await.unwrap(), Some(first));
        let fresh = plugin.with_base_dir(&link).root_for(&config).await.unwrap();
        let two_key = project_key(&std::fs::canonicalize(&two).unwrap());
        assert_eq!(fresh, Some(Path::new("/state").join(two_key)));
    }

    #[test]
    fn the_state_dir_is_xdg_then_home() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            state_dir(&env(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/cordis/sessions"))
        );
        // A relative XDG_STATE_HOME is invalid by the spec: ignored.
        assert_eq!(
            state_dir(&env(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/cordis/sessions"))
        );
        assert_eq!(state_dir(&env(&[])), None);
    }

    #[test]
    fn project_keys_are_readable_stable_and_apart() {
        let a = project_key(Path::new("/home/u/work/calc"));
        assert!(
            a.starts_with("calc-") && a.len() == "calc-".len() + 16,
            "{a}"
        );
        assert_eq!(a, project_key(Path::new("/home/u/work/calc")));
        assert_ne!(a, project_key(Path::new("/home/u/other/calc")));
        assert!(project_key(Path::new("/")).starts_with("root-"));
        assert!(project_key(Path::new("/tmp/my project")).starts_with("my_project-"));
    }
}
