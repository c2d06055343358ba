//! Agent presets: named compositions an agent joins.
//!
//! A preset is a directory `<root>/<id>/` holding `agent.cordis.yml` (a composition: a list of
//! plugin rows, like `cordis.yml`) and optionally `preset.yml` (`name`, `description`, `order`:
//! display only). Ids match `^[a-z0-9][a-z0-9-]*$`; other directories are skipped. Roots are
//! searched in precedence order (the project's, then the user's); an earlier root wins an id.
//!
//! # Standing mounts
//! The [`AgentPresets`] service (plugin `agent-presets`) mounts each preset **once per process**
//! under a standing scope of its own, made with `Context::child_realm`: every row of the
//! composition applies there, so the tools its rows register, the restriction and presentation
//! they declare (`tool-restrict`, `tool-presentation`) land in the realm's layer of the
//! registry, and the persona and tool order they set (`persona`, `tool-order`, this crate's
//! rows) apply to assemblies whose scope chain reaches the realm. An agent
//! joins by binding its registry scope's parent to the standing key
//! ([`AgentPresets::create_agent`]), and so sees exactly its preset and nothing of the others.
//!
//! Mounting is single-flight per id and keyed by the stamp (modification time and size) of the
//! composition file: a changed file mounts a new **generation** for later joiners, while agents
//! already joined keep theirs; superseded generations stay mounted while the roster lives (as in
//! the reference, they are never reclaimed). A row that publishes a service is refused —
//! services are process-wide, so it would leak out of the preset — and so is a row that does not
//! become active; the error names the preset, the rows and why.
//!
//! # The invariant
//! When a roster exists, assembling a prompt for an **agent** that joined no preset fails (the
//! roster is a tool provider whose answer for such an agent is "unavailable"); a scope-only read
//! (a standing key, `cordis check`) is not an agent and is admitted.
//!
//! Mounting needs the host's loader, which a plugin crate cannot depend on: the application
//! passes a [`Composer`] that reads, resolves and mounts a composition file.

mod composer;
mod config;
mod discovery;
mod error;
mod persona;
mod plugin;
mod roster;

pub use composer::{Composer, Composition, RowInfo, RowReport, RowStatus};
pub use config::{AgentPresetsConfig, Root, RootConfig, Trust, resolve_roots, user_root};
pub use discovery::{COMPOSITION_FILE, METADATA_FILE, PresetInfo, discover, is_preset_id};
pub use error::{JoinError, PresetError};
pub use persona::{PersonaConfig, PersonaPlugin, ToolOrderConfig, ToolOrderPlugin};
pub use plugin::AgentPresetsPlugin;
pub use roster::{AgentPresets, Standing};
