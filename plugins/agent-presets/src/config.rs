//! The `agent-presets` configuration and where its roots are.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// How far a root's presets are trusted (recorded and listed; both mount alike today).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// Shipped with the project.
    System,
    /// The user's own.
    User,
}

impl Trust {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::System => "system",
            Trust::User => "user",
        }
    }
}

/// One root as configured.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootConfig {
    /// A directory of presets: relative to the config file's directory; `~/` is the home.
    pub path: String,
    /// Its trust (default `system`).
    #[serde(default = "system")]
    pub trust: Trust,
}

fn system() -> Trust {
    Trust::System
}

fn yes() -> bool {
    true
}

/// Configuration of the `agent-presets` plugin.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentPresetsConfig {
    /// Roots in precedence order (an earlier root wins a duplicate id).
    #[serde(default)]
    pub roots: Vec<RootConfig>,
    /// The preset an agent joins when none is named (required).
    pub default: String,
    /// Also search the user's root after the configured ones (see [`user_root`]).
    #[serde(default = "yes")]
    pub include_user_root: bool,
}

/// A root resolved to a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The directory.
    pub path: PathBuf,
    /// Its trust.
    pub trust: Trust,
}

/// The user's root: `$XDG_CONFIG_HOME/cordis/agent-presets`, else
/// `$HOME/.config/cordis/agent-presets`; `None` without either variable.
pub fn user_root(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(xdg) = env("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(xdg).join("cordis").join("agent-presets"));
    }
    env("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".config/cordis/agent-presets"))
}

impl AgentPresetsConfig {
    /// The roots to search: the configured ones resolved against `base` (`~/` against `home`),
    /// then `user` as a `user` root when `includeUserRoot` holds.
    pub fn roots(&self, base: &Path, home: Option<&Path>, user: Option<&Path>) -> Vec<Root> {
        let mut roots: Vec<Root> = self
            .roots
            .iter()
            .map(|r| Root {
                path: expand(&r.path, base, home),
                trust: r.trust,
            })
            .collect();
        if self.include_user_root
            && let Some(user) = user
        {
            roots.push(Root {
                path: user.to_owned(),
                trust: Trust::User,
            });
        }
        roots
    }
}

/// Every root of a roster, in precedence order: [`AgentPresetsConfig::roots`], then the
/// application's shipped presets (a `system` root) when it has some. The `agent-presets` plugin
/// and `cordis presets` both resolve roots through this.
pub fn resolve_roots(
    config: &AgentPresetsConfig,
    base: &Path,
    home: Option<&Path>,
    user: Option<&Path>,
    shipped: Option<&Path>,
) -> Vec<Root> {
    let mut roots = config.roots(base, home, user);
    if let Some(shipped) = shipped {
        roots.push(Root {
            path: shipped.to_owned(),
            trust: Trust::System,
        });
    }
    roots
}

fn expand(path: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    if path == "~" {
        if let Some(home) = home {
            return home.to_owned();
        }
    } else if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = home
    {
        return home.join(rest);
    }
    base.join(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_required_and_roots_resolve_against_the_base_and_home() {
        let err = serde_yaml_ng::from_str::<AgentPresetsConfig>("roots: []").unwrap_err();
        assert!(err.to_string().contains("missing field `default`"), "{err}");
        let config: AgentPresetsConfig = serde_yaml_ng::from_str(
            "roots: [{path: presets}, {path: '~/mine', trust: user}, {path: /abs}]\ndefault: standard",
        )
        .unwrap();
        assert!(config.include_user_root);
        let roots = config.roots(
            Path::new("/proj"),
            Some(Path::new("/home/u")),
            Some(Path::new("/cfg/cordis/agent-presets")),
        );
        let paths: Vec<_> = roots.iter().map(|r| (r.path.clone(), r.trust)).collect();
        assert_eq!(
            paths,
            [
                (PathBuf::from("/proj/presets"), Trust::System),
                (PathBuf::from("/home/u/mine"), Trust::User),
                (PathBuf::from("/abs"), Trust::System),
                (PathBuf::from("/cfg/cordis/agent-presets"), Trust::User),
            ]
        );
    }

    #[test]
    fn the_user_root_prefers_xdg_config_home() {
        let env = |k: &str| match k {
            "XDG_CONFIG_HOME" => Some("/x".to_owned()),
            "HOME" => Some("/h".to_owned()),
            _ => None,
        };
        assert_eq!(
            user_root(&env),
            Some(PathBuf::from("/x/cordis/agent-presets"))
        );
        let env = |k: &str| (k == "HOME").then(|| "/h".to_owned());
        assert_eq!(
            user_root(&env),
            Some(PathBuf::from("/h/.config/cordis/agent-presets"))
        );
        assert_eq!(user_root(&|_| None), None);
    }
}
