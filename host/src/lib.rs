//! The generic host: reads `cordis.yml`, resolves it into a load plan, loads its entries
//! concurrently into a runtime under a seeded schedule, reloads it live, and proves boots agree
//! ([`permute`]). It knows no agent plugin and no command line: the `cordis` application (the
//! root package) builds its plugin table on [`Builtins::host`] and drives this crate.
//!
//! Configuration runs in two phases: [`config`] reads the raw model (file:line errors attach
//! there; [`include`](mod@include) loads other files into it), [`plan`] resolves it against the
//! [`builtins`] table and vets plugin file paths: [`dylib`] turns shared libraries into plugins,
//! and [entry kinds](entry_kind) the application registers turn other files (`.wasm`) into
//! plugins, so this crate links no plugin engine. [`loader`] boots a plan and reports on every
//! entry; [`digest`] makes that report comparable across seeds.

pub mod assembly;
pub mod builtins;
pub mod claims;
pub mod config;
pub mod cycle;
pub mod debug;
pub mod diagnostic;
pub mod digest;
pub mod dylib;
pub mod echo;
pub mod entry_kind;
pub mod env;
pub mod fault;
pub mod hidden;
pub mod loader;
pub mod log_probe;
pub mod permute;
pub mod plan;
pub mod reload;
pub mod shutdown;
pub mod watch;

pub use assembly::{AssemblyView, assembly_view};
pub use builtins::Builtins;
pub use config::{RawConfig, RawEntry};
pub use config::{include, yaml};
pub use diagnostic::{ConfigErrors, Diagnostic, Pos, Problem};
pub use entry_kind::EntryKind;
pub use loader::{
    BootReport, EntryReport, EntryStatus, boot, boot_blocking, entry_report, start_under,
};
pub use plan::{EntrySource, LoadPlan, PlanOptions, PlannedEntry, Step, load_plan};
