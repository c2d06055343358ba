//! Project instructions: `AGENTS.md` files as prompt sections.
//!
//! The [`InstructionsPlugin`] reads, for each configured file name (default `AGENTS.md`; add
//! `CLAUDE.md` to read Claude Code's), the user's file (`$XDG_CONFIG_HOME/cordis/`, else
//! `~/.config/cordis/`) and the workspace root's and each parent's up to the repository root (the
//! nearest directory holding `.git`; only the workspace root when there is none). Each file is
//! one section, headed with its path as shown to the model (relative to the workspace, the
//! user's as `~/.config/cordis/AGENTS.md` or `$XDG_CONFIG_HOME/cordis/AGENTS.md`: never an
//! absolute path that differs per machine).
//!
//! # Determinism
//! Sections come in canonical order: the user's first, then outermost directory to innermost,
//! and within one directory in the order of `files`. The files are read again (stat first, see
//! [`source`]) each time a prompt is assembled, so a change between turns is a `request/header`
//! change whose `changed` list names the file's section (`instructions:AGENTS.md`).
//!
//! [`source`] is the bounded reader the `skills` plugin shares: symlinks out of the workspace,
//! FIFOs and other non-files are refused, and reads stop at a size bound.

mod config;
mod handoff;
mod plugin;
pub mod snapshot;
pub mod source;
mod walk;

pub use config::{DEFAULT_MAX_BYTES, InstructionsConfig};
pub use handoff::Handoff;
pub use plugin::{INSTRUCTIONS_ORDER, InstructionsPlugin, SECTION_PREFIX, user_config_dir};
pub use snapshot::Snapshot;
pub use source::{FileError, Loaded, Place, Reader};
pub use walk::{Candidate, MAX_LEVELS, candidates, repository_dirs};
