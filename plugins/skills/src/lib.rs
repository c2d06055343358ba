//! Skills: folders `<name>/SKILL.md` with YAML front matter (`name`, `description`) and a body
//! (the common format), from the workspace's `.agents/skills/` and the user's
//! `$XDG_CONFIG_HOME/cordis/skills/` (else `~/.config/cordis/skills/`).
//!
//! - The **catalog** (each skill's name and description, sorted by name) is the prompt section
//!   [`CATALOG_SECTION`]; it is read again at each assembly, so adding, changing or removing a
//!   skill between turns is a `request/header` change naming that section.
//! - The read-only [`SKILL_TOOL`] tool returns a skill's body by name.
//! - [`skill_commands`] and [`expand`] let front ends offer `/<name> [args]`.
//!
//! # Determinism
//! Folders are read in name order; a name the user's folder and the workspace both have is the
//! **user's** (a repository cannot replace a skill the user relies on), the workspace's is left
//! out with a warning. Malformed front matter is a warning naming the file and line; that skill
//! is left out, the others kept. Bounds: [`SkillsConfig`]'s `maxSkills` per folder, `maxBodyBytes`
//! per body and `maxCatalogBytes` for the catalog.

mod commands;
mod config;
mod library;
mod plugin;
mod skill;

pub use commands::{SkillCommand, expand, skill_commands};
pub use config::SkillsConfig;
pub use library::{Library, Origin, Skill};
pub use plugin::{CATALOG_ORDER, CATALOG_SECTION, SKILL_TOOL, Skills, SkillsPlugin};
pub use skill::{FrontMatter, Malformed, parse};
