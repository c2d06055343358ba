//! The `skills` entry's configuration.

use serde::Deserialize;

/// Configuration of `skills`; unknown fields are rejected.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillsConfig {
    /// Whether the user's skills (`$XDG_CONFIG_HOME/cordis/skills/`) are read.
    #[serde(default = "yes")]
    pub user: bool,
    /// At most this many skill folders are read from each place (the first by name).
    #[serde(default = "max_skills")]
    pub max_skills: usize,
    /// At most this many bytes of a body reach the model (cut at a character, saying so).
    #[serde(default = "max_body_bytes")]
    pub max_body_bytes: usize,
    /// At most this many bytes of catalog lines; the skills past it are counted, not listed.
    #[serde(default = "max_catalog_bytes")]
    pub max_catalog_bytes: usize,
}

fn yes() -> bool {
    true
}
fn max_skills() -> usize {
    64
}
fn max_body_bytes() -> usize {
    64 << 10
}
fn max_catalog_bytes() -> usize {
    8 << 10
}

impl Default for SkillsConfig {
    fn default() -> Self {
        SkillsConfig {
            user: true,
            max_skills: max_skills(),
            max_body_bytes: max_body_bytes(),
            max_catalog_bytes: max_catalog_bytes(),
        }
    }
}
