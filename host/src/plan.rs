//! Phase two of configuration: resolve the raw model into a load plan.
//!
//! Resolution looks every entry's `name` up in the [`Builtins`] table (or recognises a plugin
//! file: a registered [entry kind](crate::entry_kind) or a shared library, see [`EntrySource`]
//! and [Dylib entries](#dylib-entries)), checks that ids are unique across the whole tree, parses
//! each config with the plugin's own config type, and applies disabled groups to their children.
//! Like parsing, it never stops at the first problem.
//!
//! Disabled entries are checked for shape and id only: their plugin is not looked up and their
//! config not parsed, as cordis does not load them.
//!
//! # Dylib entries
//! A name that is a path (`./…`, `../…`, `/…`) or ends in `.so`, `.dylib` or `.dll` names a tool
//! plugin library. A relative path is resolved against the config file's directory; a bare file
//! name (`libx.so`) is looked for there, then in each plugin directory (`--plugin-dir`,
//! `CORDIS_PLUGIN_PATH`). The file must exist and, with symlinks and `..` resolved, lie inside
//! the config's directory or a plugin directory; otherwise the entry is a configuration error.
//! Problems only loading can find (handshake, `describe`, a `sha256` mismatch) fail the entry.
//!
//! # Entries of registered kinds
//! A name an [`EntryKind`] of the table recognizes (the `cordis` application registers `.wasm`,
//! WebAssembly component tool plugins) names a file of that kind: it is found and vetted
//! exactly like a library (same directories, symlinks resolved, `sha256` pin), and the kind
//! builds its plugin from the vetted path. A `.wasm` name with no such kind registered is a
//! configuration error ([`Problem::NoEntryKind`]), not a library.
//!
//! # Determinism
//! The plan is flat and in file order (a group before its children); the loader applies entries
//! in that order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cordis_runtime::{ErasedPlugin, Prepared, prepare};

use crate::builtins::Builtins;
use crate::config::{RawConfig, RawEntry, parse_with};
use crate::diagnostic::{ConfigErrors, Diagnostic, Pos, Problem};
use crate::dylib::DylibPlugin;
use crate::entry_kind::{EntryKind, well_known};
use crate::include::IncludedFiles;

/// The apply timeout when neither the entry nor the command line sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where an entry's plugin comes from.
#[derive(Clone)]
pub enum EntrySource {
    /// A plugin of the built-in table.
    Builtin(Arc<dyn ErasedPlugin>),
    /// A shared library at this path, as written (see [`crate::dylib`]).
    Dylib(PathBuf),
    /// A file of a registered entry kind at this path, as written (see [`crate::entry_kind`]).
    Kind(Arc<dyn EntryKind>, PathBuf),
}

impl EntrySource {
    /// Finds the source of `name`: a file of a registered entry kind, a shared-library path, or
    /// a built-in; `None` if none (a name of a [well-known](crate::entry_kind::WELL_KNOWN) kind
    /// no registered kind recognizes is never taken for a library).
    pub fn lookup(name: &str, builtins: &Builtins) -> Option<EntrySource> {
        if let Some(kind) = builtins.kind_for(name) {
            return Some(EntrySource::Kind(kind, PathBuf::from(name)));
        }
        if well_known(name).is_some() {
            return None;
        }
        if looks_like_dylib(name) {
            return Some(EntrySource::Dylib(PathBuf::from(name)));
        }
        builtins.get(name).map(EntrySource::Builtin)
    }
}

/// True for names that are paths to a shared library (or to a file of an entry kind, which
/// [`EntrySource::lookup`] asks first: this takes every `./…` path).
pub fn looks_like_dylib(name: &str) -> bool {
    name.starts_with("./")
        || name.starts_with("../")
        || name.starts_with('/')
        || [".so", ".dylib", ".dll"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

/// What the loader does with an entry.
#[derive(Clone)]
pub enum Step {
    /// Apply a plugin.
    Plugin {
        /// The plugin with its parsed config.
        prepared: Prepared,
        /// Extra services it must wait for.
        inject: Vec<String>,
        /// Its apply timeout.
        timeout: Duration,
    },
    /// Open a group scope for the entries whose `parent` is this one.
    Group,
    /// Nothing: the entry (or its group) is disabled.
    Disabled,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Plugin {
                prepared,
                inject,
                timeout,
            } => f
                .debug_struct("Plugin")
                .field("plugin", &prepared.plugin.name())
                .field("inject", inject)
                .field("timeout", timeout)
                .finish(),
            Step::Group => f.write_str("Group"),
            Step::Disabled => f.write_str("Disabled"),
        }
    }
}

impl std::fmt::Debug for EntrySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntrySource::Builtin(p) => write!(f, "Builtin({:?})", p.name()),
            EntrySource::Dylib(path) => write!(f, "Dylib({path:?})"),
            EntrySource::Kind(kind, path) => write!(f, "Kind({:?}, {path:?})", kind.label()),
        }
    }
}

/// One entry of the plan.
#[derive(Debug, Clone)]
pub struct PlannedEntry {
    /// The unique entry id.
    pub id: String,
    /// The plugin name as written.
    pub name: String,
    /// Where the entry is in its file.
    pub pos: Pos,
    /// The file it is written in, as diagnostics name it: [`LoadPlan::file`], or for an entry
    /// of an included file that file after its include chain (`a.yml:3:3 → b.yml`).
    pub file: String,
    /// Index of the enclosing group entry in [`LoadPlan::entries`].
    pub parent: Option<usize>,
    /// What to do.
    pub step: Step,
    /// For a dylib entry or one of a registered kind: the vetted file its plugin loads.
    pub library: Option<PathBuf>,
}

/// A resolved config file: every entry, in file order, ready to load.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// The file name as the user gave it.
    pub file: String,
    /// The entries, groups before their children.
    pub entries: Vec<PlannedEntry>,
}

/// Options of resolution.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Apply timeout of entries that do not set `timeout`.
    pub default_timeout: Duration,
    /// Directories plugin libraries may also load from (besides the config's directory).
    pub plugin_dirs: Vec<PathBuf>,
    /// The config file's directory; `None`: the parent of the file name given to [`load_plan`]
    /// (the current directory for a bare file name).
    pub config_dir: Option<PathBuf>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            default_timeout: DEFAULT_TIMEOUT,
            plugin_dirs: Vec::new(),
            config_dir: None,
        }
    }
}

impl PlanOptions {
    /// The directory relative dylib paths resolve against, for a config file named `file`.
    pub fn config_dir_for(&self, file: &str) -> PathBuf {
        match &self.config_dir {
            Some(dir) => dir.clone(),
            None => crate::config::dir_of(file),
        }
    }
}

/// Parses and resolves a config file in one go, reporting every problem of both phases.
///
/// Files the config includes (`cordis/include`) are read from disk relative to
/// [`PlanOptions::config_dir_for`] `file`; no other call is needed.
///
/// # Errors
/// Every problem found, in file order.
pub fn load_plan(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
    builtins: &Builtins,
    options: &PlanOptions,
) -> Result<LoadPlan, ConfigErrors> {
    load(source, file, env, builtins, options).map(|(_, plan)| plan)
}

/// [`load_plan`], also returning the raw model it resolved: the one plan-loading path that
/// `check`, boots and reloads share, so they report the same errors in the same order.
///
/// # Errors
/// Every problem found, in file order.
pub fn load(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
    builtins: &Builtins,
    options: &PlanOptions,
) -> Result<(RawConfig, LoadPlan), ConfigErrors> {
    let mut files = IncludedFiles::disk(options.config_dir_for(file));
    load_with(source, file, env, builtins, options, &mut files)
}

/// [`load`], reading included files through `files` (read ahead with
/// [`IncludedFiles::read_ahead`] to keep file reads off async threads).
///
/// # Errors
/// Every problem found, in file order.
pub fn load_with(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
    builtins: &Builtins,
    options: &PlanOptions,
    files: &mut IncludedFiles,
) -> Result<(RawConfig, LoadPlan), ConfigErrors> {
    let (raw, mut errors) = parse_with(source, file, env, files);
    let (plan, more) = resolve_lenient(&raw, builtins, options);
    errors.extend(more);
    if errors.is_empty() {
        Ok((raw, plan))
    } else {
        // Stable: problems at one position keep the order they were found in.
        raw.sort_diagnostics(&mut errors);
        Err(ConfigErrors(errors))
    }
}

/// Resolves a parsed config.
///
/// # Errors
/// Every problem found, in file order.
pub fn resolve(
    raw: &RawConfig,
    builtins: &Builtins,
    options: &PlanOptions,
) -> Result<LoadPlan, ConfigErrors> {
    let (plan, mut errors) = resolve_lenient(raw, builtins, options);
    if errors.is_empty() {
        Ok(plan)
    } else {
        raw.sort_diagnostics(&mut errors);
        Err(ConfigErrors(errors))
    }
}

struct Resolver<'a> {
    raw: &'a RawConfig,
    builtins: &'a Builtins,
    options: &'a PlanOptions,
    config_dir: PathBuf,
    /// Canonical allowed directories: the config's, then the plugin directories.
    allowed: Vec<PathBuf>,
    /// Every id so far: where (file as diagnostics name it, position).
    seen: BTreeMap<&'a str, (&'a str, Pos)>,
    entries: Vec<PlannedEntry>,
    errors: Vec<Diagnostic>,
}

fn resolve_lenient(
    raw: &RawConfig,
    builtins: &Builtins,
    options: &PlanOptions,
) -> (LoadPlan, Vec<Diagnostic>) {
    let config_dir = options.config_dir_for(&raw.file);
    let allowed = std::iter::once(&config_dir)
        .chain(&options.plugin_dirs)
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    let mut r = Resolver {
        raw,
        builtins,
        options,
        config_dir,
        allowed,
        seen: BTreeMap::new(),
        entries: Vec::new(),
        errors: Vec::new(),
    };
    for entry in &raw.entries {
        r.entry(entry, None);
    }
    let plan = LoadPlan {
        file: raw.file.clone(),
        entries: r.entries,
    };
    let mut errors = r.errors;
    // An inject cycle is reported at its first entry, which may be in an included file.
    errors.extend(crate::cycle::inject_cycles(&plan).into_iter().map(|mut d| {
        if let Some(entry) = plan
            .entries
            .iter()
            .find(|e| Some(&e.id) == d.entry.as_ref())
        {
            d.file.clone_from(&entry.file);
        }
        d
    }));
    errors.extend(crate::claims::conflicts(&plan));
    (plan, errors)
}

impl<'a> Resolver<'a> {
    /// Reports `problem` of `entry` at `pos` (the value it is about, in its file).
    fn error(&mut self, entry: &RawEntry, pos: Pos, problem: Problem) {
        self.errors.push(Diagnostic {
            file: self.raw.origin(entry).to_owned(),
            pos,
            entry: Some(entry.id.clone()),
            problem,
        });
    }

    fn entry(&mut self, entry: &'a RawEntry, parent: Option<usize>) {
        let id_pos = entry.marks.id.unwrap_or(entry.pos);
        let origin = self.raw.origin(entry);
        if let Some((file, first)) = self.seen.get(entry.id.as_str()) {
            let first = format!("{file}:{first}");
            self.error(
                entry,
                id_pos,
                Problem::DuplicateId {
                    id: entry.id.clone(),
                    first,
                },
            );
        } else {
            self.seen.insert(&entry.id, (origin, id_pos));
        }
        let name = entry.name.clone().unwrap_or_default();
        let (step, library) = if entry.disabled {
            (Some(Step::Disabled), None)
        } else if entry.is_group {
            (Some(Step::Group), None)
        } else if entry.name.is_none() {
            (None, None)
        } else {
            match self.plugin_step(entry, &name) {
                Some((step, library)) => (Some(step), library),
                None => (None, None),
            }
        };
        let index = self.entries.len();
        self.entries.push(PlannedEntry {
            id: entry.id.clone(),
            name,
            pos: entry.pos,
            file: origin.to_owned(),
            parent,
            step: step.unwrap_or(Step::Disabled),
            library,
        });
        for child in &entry.children {
            self.entry(child, Some(index));
        }
    }

    /// The plugin of `entry` (named `name`) with its config, and the vetted file it loads
    /// (for a dylib entry or one of a registered kind).
    fn plugin_step(&mut self, entry: &RawEntry, name: &str) -> Option<(Step, Option<PathBuf>)> {
        let (plugin, library) = self.plugin_of(entry, name)?;
        // A config with interpolation errors was already reported.
        let value = entry.config.as_ref()?;
        let step = match prepare(plugin, value) {
            Ok(prepared) => Some(Step::Plugin {
                // The entry's own `inject` plus what the plugin needs with this config, so the
                // entry itself waits (and `check` names the service) instead of a hidden part.
                inject: {
                    let mut inject = entry.inject.clone();
                    for service in prepared.plugin.needs_erased(&*prepared.config) {
                        if !inject.contains(&service) {
                            inject.push(service);
                        }
                    }
                    inject
                },
                prepared,
                timeout: entry
                    .timeout_ms
                    .map_or(self.options.default_timeout, Duration::from_millis),
            }),
            Err(e) => {
                let (file, pos) = self.raw.config_at(entry, &e.path, &e.message);
                self.errors.push(Diagnostic {
                    file: file.to_owned(),
                    pos,
                    entry: Some(entry.id.clone()),
                    problem: Problem::Config(e),
                });
                None
            }
        };
        step.map(|step| (step, library))
    }

    /// The plugin `name` stands for, and the vetted file it loads, if it is a file; reports why
    /// there is none.
    fn plugin_of(
        &mut self,
        entry: &RawEntry,
        name: &str,
    ) -> Option<(Arc<dyn ErasedPlugin>, Option<PathBuf>)> {
        let name_pos = entry.marks.name.unwrap_or(entry.pos);
        let problem = match EntrySource::lookup(name, self.builtins) {
            Some(EntrySource::Builtin(plugin)) => {
                if entry.sha256.is_none() {
                    return Some((plugin, None));
                }
                let pos = entry.marks.sha256.unwrap_or(name_pos);
                let problem = Problem::Sha256OnBuiltin {
                    name: name.to_owned(),
                };
                self.error(entry, pos, problem);
                return None;
            }
            Some(source) => match self.locate(name) {
                Ok(path) => {
                    let pin = entry.sha256.as_deref().map(parse_sha256);
                    let plugin = match source {
                        EntrySource::Kind(kind, _) => kind.plugin(name, path.clone(), pin),
                        _ => Arc::new(DylibPlugin::new(name, path.clone(), pin)),
                    };
                    return Some((plugin, Some(path)));
                }
                Err(problem) => problem,
            },
            None => match well_known(name) {
                Some((suffix, kind)) => Problem::NoEntryKind {
                    name: name.to_owned(),
                    kind,
                    suffix,
                },
                None => Problem::UnknownPlugin {
                    name: name.to_owned(),
                    suggestions: self.builtins.suggest(name),
                },
            },
        };
        self.error(entry, name_pos, problem);
        None
    }
}

impl Resolver<'_> {
    /// Finds a plugin file (a dylib entry's library, or a file of a registered kind) and checks
    /// that it lies in an allowed directory.
    fn locate(&self, name: &str) -> Result<PathBuf, Problem> {
        let written = Path::new(name);
        let written = written.strip_prefix(".").unwrap_or(written);
        let candidates: Vec<PathBuf> = if written.is_absolute() {
            vec![written.to_owned()]
        } else if written.components().count() == 1 {
            std::iter::once(&self.config_dir)
                .chain(&self.options.plugin_dirs)
                .map(|d| d.join(written))
                .collect()
        } else {
            vec![self.config_dir.join(written)]
        };
        let Some(found) = candidates.iter().find(|c| c.exists()) else {
            return Err(Problem::DylibMissing {
                path: name.to_owned(),
                looked: candidates
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let resolved = found.canonicalize().map_err(|e| Problem::DylibMissing {
            path: name.to_owned(),
            looked: format!("{} ({e})", found.display()),
        })?;
        if self.allowed.iter().any(|dir| resolved.starts_with(dir)) {
            Ok(resolved)
        } else {
            Err(Problem::DylibOutsideDirs {
                path: name.to_owned(),
                resolved: resolved.display().to_string(),
                allowed: self
                    .allowed
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    }
}

/// 64 hex digits (checked when the config was parsed) as bytes.
fn parse_sha256(hex: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = hex
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(src: &str) -> Result<LoadPlan, ConfigErrors> {
        load_plan(
            src,
            "c.yml",
            &|_| None,
            &Builtins::host(),
            &PlanOptions::default(),
        )
    }

    #[test]
    fn a_good_file_resolves_in_file_order_with_groups_before_children() {
        let plan = plan(
            "- id: p\n  name: debug/provide\n  config: {service: alpha}\n- id: g\n  name: cordis/group\n  config:\n  - id: n\n    name: debug/noop\n    timeout: 50\n",
        )
        .unwrap();
        let ids: Vec<&str> = plan.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["p", "g", "n"]);
        assert_eq!(plan.entries[2].parent, Some(1));
        match &plan.entries[2].step {
            Step::Plugin { timeout, .. } => assert_eq!(*timeout, Duration::from_millis(50)),
            _ => panic!("n is a plugin"),
        }
    }

    #[test]
    fn unknown_names_duplicates_config_errors_and_dylibs_are_all_reported() {
        let err = plan(
            "- id: a\n  name: debug/noopp\n- id: a\n  name: debug/noop\n- id: b\n  name: debug/provide\n  config: {service: 3}\n- id: d\n  name: ./libthing.so\n",
        )
        .unwrap_err()
        .to_string();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 4, "{err}");
        assert_eq!(
            lines[0],
            "c.yml:2:9: entry \"a\": unknown plugin \"debug/noopp\"; did you mean \"debug/noop\"?"
        );
        assert_eq!(
            lines[1],
            "c.yml:3:7: entry \"a\": duplicate id \"a\"; first used at c.yml:1:7"
        );
        assert!(
            lines[2].starts_with("c.yml:7:21: entry \"b\": config.service: "),
            "{}",
            lines[2]
        );
        assert_eq!(
            lines[3],
            "c.yml:9:9: entry \"d\": plugin library \"./libthing.so\" not found (looked for ./libthing.so)"
        );
    }

    /// A kind of `.wasm` files whose plugin is `debug/noop`, recording the path it was given.
    struct NoopKind(Arc<std::sync::Mutex<Vec<PathBuf>>>);

    impl EntryKind for NoopKind {
        fn label(&self) -> &str {
            "WebAssembly component"
        }

        fn recognizes(&self, name: &str) -> bool {
            name.ends_with(".wasm")
        }

        fn plugin(&self, _: &str, path: PathBuf, _: Option<[u8; 32]>) -> Arc<dyn ErasedPlugin> {
            self.0.lock().unwrap().push(path);
            Arc::new(crate::debug::Noop)
        }
    }

    #[test]
    fn a_wasm_entry_loads_through_a_registered_kind_and_is_an_error_without_one() {
        let d = dir(
            "kind",
            &[("a.yml", "- id: w\n  name: ./w.wasm\n"), ("w.wasm", "")],
        );
        assert_eq!(
            plan_at(&d).unwrap_err(),
            [
                "a.yml:2:9: entry \"w\": \"./w.wasm\" is a WebAssembly component (\".wasm\"), but no entry kind for it is registered in this host, so it cannot be loaded; the application must register one (`Builtins::insert_kind`)"
            ]
        );
        let given = Arc::default();
        let mut table = Builtins::host();
        table.insert_kind(NoopKind(Arc::clone(&given)));
        let file = d.join("a.yml").display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let plan = load_plan(&text, &file, &|_| None, &table, &PlanOptions::default()).unwrap();
        let vetted = d.join("w.wasm").canonicalize().unwrap();
        assert_eq!(plan.entries[0].library.as_ref(), Some(&vetted));
        assert_eq!(*given.lock().unwrap(), [vetted]);
        assert!(matches!(plan.entries[0].step, Step::Plugin { .. }));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn disabled_entries_are_not_resolved() {
        let plan = plan("- id: x\n  name: not-a-plugin\n  disabled: true\n").unwrap();
        assert!(matches!(plan.entries[0].step, Step::Disabled));
    }

    /// A fresh directory holding `files` (name, text).
    fn dir(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cordis-plan-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        dir
    }

    /// Loads `dir/a.yml` as the CLI does; the errors without the directory.
    fn plan_at(dir: &Path) -> Result<LoadPlan, Vec<String>> {
        let file = dir.join("a.yml").display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let prefix = format!("{}/", dir.display());
        load_plan(
            &text,
            &file,
            &|_| None,
            &Builtins::host(),
            &PlanOptions::default(),
        )
        .map_err(|e| {
            e.diagnostics()
                .iter()
                .map(|d| d.to_string().replace(&prefix, ""))
                .collect()
        })
    }

    #[test]
    fn an_included_entry_resolves_with_its_file_and_a_duplicate_id_names_both_places() {
        let d = dir(
            "dup",
            &[
                (
                    "a.yml",
                    "- id: x\n  name: debug/noop\n- name: cordis/include\n  config: {path: b.yml}\n",
                ),
                (
                    "b.yml",
                    "- id: y\n  name: debug/noop\n- id: x\n  name: debug/noop\n",
                ),
            ],
        );
        assert_eq!(
            plan_at(&d).unwrap_err(),
            ["a.yml:3:1 → b.yml:3:7: entry \"x\": duplicate id \"x\"; first used at a.yml:1:7"]
        );
        std::fs::write(
            d.join("a.yml"),
            "- name: cordis/include\n  config: {path: b.yml}\n- id: y\n  name: debug/noop\n",
        )
        .unwrap();
        std::fs::write(d.join("b.yml"), "- id: y\n  name: debug/noop\n").unwrap();
        assert_eq!(
            plan_at(&d).unwrap_err(),
            ["a.yml:3:7: entry \"y\": duplicate id \"y\"; first used at a.yml:1:1 → b.yml:1:7"]
        );
        std::fs::write(
            d.join("a.yml"),
            "- id: inc\n  name: cordis/include\n  config: {path: b.yml}\n",
        )
        .unwrap();
        let plan = plan_at(&d).unwrap();
        assert_eq!(plan.entries[1].id, "y");
        assert_eq!(plan.entries[1].parent, Some(0));
        assert!(matches!(plan.entries[0].step, Step::Group));
        assert_eq!(
            plan.entries[1].file,
            format!("{}:1:1 → {}", plan.file, d.join("b.yml").display())
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_config_error_points_at_the_file_that_wrote_the_bad_value() {
        let d = dir(
            "config-at",
            &[
                (
                    "a.yml",
                    "- name: cordis/include\n  config:\n    path: b.yml\n    patches:\n    - merge: f\n      config: {mode: sideways}\n    - merge: g\n      config: {note: fine}\n",
                ),
                (
                    "b.yml",
                    "- id: f\n  name: debug/fault\n  config: {mode: ok}\n- id: g\n  name: debug/fault\n  config: {mode: [1]}\n",
                ),
            ],
        );
        let errors = plan_at(&d).unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:#?}");
        // The bad mode of `f` came from the patch; the bad mode of `g` from the included file.
        assert!(
            errors[0].starts_with("a.yml:1:1 → b.yml:6:18: entry \"g\": config.mode"),
            "{}",
            errors[0]
        );
        assert!(
            errors[1].starts_with("a.yml:6:22: entry \"f\": config.mode"),
            "{}",
            errors[1]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_inject_cycle_inside_an_included_file_names_that_file() {
        let d = dir(
            "cycle",
            &[
                ("a.yml", "- name: cordis/include\n  config: {path: b.yml}\n"),
                (
                    "b.yml",
                    "- id: p\n  name: debug/provide\n  config: {service: alpha}\n  inject: [beta]\n- id: q\n  name: debug/provide\n  config: {service: beta}\n  inject: [alpha]\n",
                ),
            ],
        );
        let errors = plan_at(&d).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].starts_with("a.yml:1:1 → b.yml:1:1: entry \"p\": inject cycle"),
            "{}",
            errors[0]
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
