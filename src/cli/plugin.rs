//! `cordis plugin add|list|update|remove`: third-party plugin files (shared libraries and
//! WebAssembly components) in a `cordis.yml`, each copied into the project, pinned by its
//! sha256, and admitted only when the composition with it passes `cordis check` and the reduced
//! permutation proof.
//!
//! Why a command and not an editor: a pin computed by hand is a pin nobody checked, and an entry
//! that conflicts with another (two entries claiming one tool) is found at the next boot instead
//! of before the file is written. `add` and `update` run the gate (`proof`) on the text they
//! would write and write nothing when it fails; every edit is made to the file's text (`edit`),
//! so its comments and layout stay, and the result is parsed again to show that exactly the
//! intended change was made before it is written, atomically (`files`).
//!
//! # Exit codes
//! `0` done; `1` refused: the new composition fails the check or the proof, a file does not
//! match its pin (`add --sha256`, `list`); `2` a usage or configuration error (a bad path or URL,
//! an unknown entry, a file that cannot be edited as text).

mod edit;
mod files;
mod proof;
mod source;

use std::io::{BufRead as _, IsTerminal as _};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use cordis_host::config::{RawConfig, RawEntry, dir_of, parse};
use cordis_host::{Builtins, Pos};

use super::render::safe;
use super::{ConfigArgs, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, Io};
use source::{Kind, Source};

/// The subcommands of `cordis plugin`.
#[derive(Debug, Clone, Subcommand)]
pub enum PluginCommand {
    /// Copy a plugin file (a dylib or a WebAssembly component) into the project, pin it and add
    /// its entry, once the new composition passes the check and the proof.
    ///
    /// PATH is a local file (a symbolic link, a FIFO or a directory is refused); URL is an
    /// https:// address (http:// is refused), downloaded only with --sha256 or, without it, at
    /// a terminal that confirms the hash cordis computed. Files of at most 256 MiB. The file is
    /// copied to plugins/ next to the config (.cordis/plugins/ when plugins/ holds anything but
    /// plugin files) and the entry (id, name, sha256) is appended in the file's own indentation,
    /// its comments and layout kept. The config is written only after the new composition boots
    /// with every entry active (as `cordis check`) and the reduced permutation proof (as
    /// `cordis permute`) finds one outcome; otherwise nothing changes (not the copied file
    /// either) and the reason is printed, naming the entry and the name in conflict. Exits 0
    /// when added, 1 when refused, 2 on usage or configuration errors.
    Add(AddArgs),
    /// List the config's plugin-file entries and whether each file matches its pin.
    ///
    /// One line each: id, kind (wasm or dylib), path, pin, and the file's state (matches,
    /// differs with the file's sha256, not pinned, missing). Exits 0 when every pinned file matches, 1 otherwise, 2 on configuration errors.
    List(ListArgs),
    /// Re-pin entry ID to the sha256 of its file as it is now, after the same check and proof.
    ///
    /// For a rebuilt or newly copied file: the entry's `sha256` value is replaced in place (or
    /// a `sha256:` line added after `name`), once the composition passes the check and the
    /// proof as `add` does; nothing else in the config moves. Exits 0 when pinned
    /// (or already pinned), 1 when refused, 2 on usage or configuration errors.
    Update(UpdateArgs),
    /// Remove entry ID from the config, and its file from the project's plugin directory.
    ///
    /// Only the entry's lines go (with the blank line that separated it; comments and the rest
    /// stay). Its file is deleted when it lies in plugins/ or .cordis/plugins/ next to the
    /// config and no other entry names it. Exits 0 when removed, 2 on usage or configuration errors.
    Remove(RemoveArgs),
}

/// The config a `cordis plugin` command edits, and how its entries load for the check.
#[derive(Debug, Clone, Args)]
pub struct PluginConfigArgs {
    /// The config file.
    #[arg(
        long = "config",
        short = 'c',
        value_name = "FILE",
        default_value = "cordis.yml"
    )]
    pub file: PathBuf,
    /// Apply timeout in milliseconds for entries that set no `timeout` of their own.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Also allow plugin libraries from this directory (repeatable), as `cordis check` does.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,
}

impl PluginConfigArgs {
    fn config(&self) -> ConfigArgs {
        ConfigArgs {
            file: self.file.clone(),
            timeout_ms: self.timeout_ms,
            plugin_dirs: self.plugin_dirs.clone(),
        }
    }
}

/// Arguments of `cordis plugin add`.
#[derive(Debug, Clone, Args)]
pub struct AddArgs {
    /// The plugin file: a path, or an https:// URL.
    #[arg(value_name = "PATH|URL")]
    pub source: String,
    /// The config to add it to.
    #[command(flatten)]
    pub config: PluginConfigArgs,
    /// The sha256 the file must have (64 hex digits, from its publisher); required to download
    /// a URL without a terminal.
    #[arg(long, value_name = "HEX", value_parser = parse_pin)]
    pub sha256: Option<String>,
    /// The new entry's id [default: the file's name without `lib` and extension].
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// The most load orders the proof boots; a composition with more classes is refused.
    #[arg(long, value_name = "N", default_value_t = 40_320, value_parser = clap::value_parser!(u64).range(1..))]
    pub max: u64,
}

/// Arguments of `cordis plugin list`.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// The config to list.
    #[command(flatten)]
    pub config: PluginConfigArgs,
    /// Print one JSON array on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cordis plugin update`.
#[derive(Debug, Clone, Args)]
pub struct UpdateArgs {
    /// The entry's id.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The config holding it.
    #[command(flatten)]
    pub config: PluginConfigArgs,
    /// The most load orders the proof boots; a composition with more classes is refused.
    #[arg(long, value_name = "N", default_value_t = 40_320, value_parser = clap::value_parser!(u64).range(1..))]
    pub max: u64,
}

/// Arguments of `cordis plugin remove`.
#[derive(Debug, Clone, Args)]
pub struct RemoveArgs {
    /// The entry's id.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The config holding it.
    #[command(flatten)]
    pub config: PluginConfigArgs,
}

/// `--sha256`: 64 hex digits, lowercased.
fn parse_pin(text: &str) -> Result<String, String> {
    let hex = text.trim().to_ascii_lowercase();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex)
    } else {
        Err("a sha256 pin is 64 hex digits (as `sha256sum FILE` prints)".to_owned())
    }
}

/// Runs a `cordis plugin` command.
pub(crate) fn run(
    command: &PluginCommand,
    io: &mut Io<'_>,
    builtins: &Builtins,
) -> anyhow::Result<u8> {
    match command {
        PluginCommand::Add(args) => add(args, io, builtins),
        PluginCommand::List(args) => list(args, io),
        PluginCommand::Update(args) => update(args, io, builtins),
        PluginCommand::Remove(args) => remove(args, io),
    }
}

/// The config's text and its parse; on errors prints them and returns the exit code.
fn read_config(
    config: &PluginConfigArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<(String, RawConfig), u8>> {
    let file = config.file.display().to_string();
    let text = match std::fs::read_to_string(&config.file) {
        Ok(text) => text,
        Err(e) => {
            writeln!(
                io.err,
                "cordis: cannot read {}: {e} (name the config with --config FILE)",
                safe(&file)
            )?;
            return Ok(Err(EXIT_CONFIG));
        }
    };
    match parse(&text, &file, io.env) {
        Ok(raw) => Ok(Ok((text, raw))),
        Err(errors) => {
            super::print_config_errors(&errors, &file, io)?;
            Ok(Err(EXIT_CONFIG))
        }
    }
}

/// Every entry written in the config's own file (groups' children too, an included file's
/// entries not), depth first.
fn own_entries(entries: &[RawEntry]) -> Vec<&RawEntry> {
    let mut out = Vec::new();
    for entry in entries {
        out.push(entry);
        if entry.included.is_none() {
            out.extend(own_entries(&entry.children));
        }
    }
    out
}

/// Whether an entry's name is a plugin file (a path, or a name with a plugin extension).
fn is_plugin_file(name: &str) -> bool {
    name.starts_with("./")
        || name.starts_with("../")
        || name.starts_with('/')
        || files::PLUGIN_EXTENSIONS.iter().any(|x| name.ends_with(x))
}

/// What the parse says about every entry (ids, names, pins, configs), depth first, leaving out
/// the entry `skip` and its children: what an edit must keep, or change exactly.
type Fact = (
    String,
    Option<String>,
    Option<String>,
    Option<serde_json::Value>,
    bool,
);

fn facts(entries: &[RawEntry], skip: Option<&str>) -> Vec<Fact> {
    let mut out = Vec::new();
    for e in entries {
        if Some(e.id.as_str()) == skip {
            continue;
        }
        out.push((
            e.id.clone(),
            e.name.clone(),
            e.sha256.clone(),
            e.config.clone(),
            e.disabled,
        ));
        out.extend(facts(&e.children, skip));
    }
    out
}

/// The file name a plugin is stored under: the source's name with only `[A-Za-z0-9._-]`, with
/// the extension its kind loads by.
fn stored_name(source: &Source, kind: Kind) -> String {
    let raw = source.file_name();
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with('.') || name.starts_with('-') {
        name.insert_str(0, "plugin");
    }
    let ext = kind.extension();
    if !name.ends_with(ext) {
        if let Some(other) = files::PLUGIN_EXTENSIONS
            .iter()
            .find(|x| name.ends_with(**x))
        {
            name.truncate(name.len() - other.len());
        }
        name.push_str(ext);
    }
    name
}

/// The id a stored file's entry gets by default: its name without `lib` and extension.
fn default_id(stored: &str, kind: Kind) -> String {
    let stem = stored.strip_suffix(kind.extension()).unwrap_or(stored);
    let stem = match kind {
        Kind::Dylib(_) => stem
            .strip_prefix("lib")
            .filter(|s| !s.is_empty())
            .unwrap_or(stem),
        Kind::Wasm => stem,
    };
    let id = stem.replace('.', "-");
    if id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        id
    } else {
        format!("plugin-{id}")
    }
}

/// Whether `id` can be written as a plain YAML scalar that reads back as this string.
fn plain_id(id: &str) -> bool {
    const WORDS: [&str; 11] = [
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", "~", "nan",
    ];
    id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !WORDS.contains(&id.to_ascii_lowercase().as_str())
}

/// Whether stdin and stderr are a terminal (someone can answer a question).
fn at_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The bytes of `source`: read, or downloaded (with a pin, or confirmed at a terminal). On
/// refusal prints why and returns the exit code.
fn fetch(
    source: &Source,
    pin: Option<&str>,
    io: &mut Io<'_>,
) -> anyhow::Result<Result<Vec<u8>, u8>> {
    let bytes = match source {
        Source::Path(path) => source::read_file(path, false),
        Source::Url(url) => {
            if pin.is_none() && !at_terminal() {
                writeln!(
                    io.err,
                    "cordis: {} has no pin, and there is no terminal to confirm one: pass --sha256 HEX (the file's sha256, from its publisher), e.g. {} plugin add {} --sha256 <64 hex digits>",
                    safe(url.as_str()),
                    super::program::name(),
                    safe(url.as_str())
                )?;
                return Ok(Err(EXIT_CONFIG));
            }
            writeln!(io.err, "cordis: downloading {}", safe(url.as_str()))?;
            source::download(url)
        }
    };
    let bytes = match bytes {
        Ok(bytes) => bytes,
        Err(e) => {
            writeln!(io.err, "cordis: plugin add: {}", safe(&e.to_string()))?;
            return Ok(Err(EXIT_CONFIG));
        }
    };
    let hex = source::sha256_hex(&bytes);
    match (pin, source) {
        (Some(pin), _) if pin != hex => {
            writeln!(
                io.err,
                "cordis: plugin add: the file's sha256 is {hex}, but --sha256 gave {pin}; nothing changed"
            )?;
            Ok(Err(EXIT_FAILURE))
        }
        (None, Source::Url(url)) => {
            write!(
                io.err,
                "cordis: {} ({} bytes) has sha256 {hex}\ncordis: compare it with its publisher's; add it pinned to this hash? [y/N] ",
                safe(url.as_str()),
                bytes.len()
            )?;
            io.err.flush()?;
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
                Ok(Ok(bytes))
            } else {
                writeln!(io.err, "cordis: not added; nothing changed")?;
                Ok(Err(EXIT_FAILURE))
            }
        }
        _ => Ok(Ok(bytes)),
    }
}

/// The path `name` (as an entry writes it) resolves to from the config's directory.
fn resolve(config_dir: &Path, name: &str) -> PathBuf {
    if Path::new(name).is_absolute() {
        PathBuf::from(name)
    } else {
        config_dir.join(name)
    }
}

/// `name` relative to `config_dir` as an entry writes it (`./plugins/x.wasm`).
fn entry_name(config_dir: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(config_dir).unwrap_or(path);
    format!("./{}", rel.display())
}

fn add(args: &AddArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let source = match Source::parse(&args.source) {
        Ok(source) => source,
        Err(e) => {
            writeln!(io.err, "cordis: plugin add: {}", safe(&e.to_string()))?;
            return Ok(EXIT_CONFIG);
        }
    };
    let (text, raw) = match read_config(&args.config, io)? {
        Ok(read) => read,
        Err(code) => return Ok(code),
    };
    let bytes = match fetch(&source, args.sha256.as_deref(), io)? {
        Ok(bytes) => bytes,
        Err(code) => return Ok(code),
    };
    let kind = match Kind::of(&bytes, &args.source) {
        Ok(kind) => kind,
        Err(e) => {
            writeln!(io.err, "cordis: plugin add: {}", safe(&e.to_string()))?;
            return Ok(EXIT_CONFIG);
        }
    };
    let hex = source::sha256_hex(&bytes);
    let stored = stored_name(&source, kind);
    let id = args.id.clone().unwrap_or_else(|| default_id(&stored, kind));
    let file = args.config.file.display().to_string();
    if !plain_id(&id) {
        writeln!(
            io.err,
            "cordis: plugin add: \"{}\" cannot be an entry id here: start with a letter or _, then letters, digits, _ - . /; choose one with --id ID",
            safe(&id)
        )?;
        return Ok(EXIT_CONFIG);
    }
    if own_entries(&raw.entries).iter().any(|e| e.id == id) {
        writeln!(
            io.err,
            "cordis: plugin add: {} already has an entry \"{}\"; choose another id with --id ID (or `{} plugin update {}` to re-pin that one)",
            safe(&file),
            safe(&id),
            super::program::name(),
            safe(&id)
        )?;
        return Ok(EXIT_CONFIG);
    }
    let config_dir = dir_of(&file);
    let dir = files::plugin_dir(&config_dir);
    let name = entry_name(&config_dir, &dir.join(&stored));
    let dashes: Vec<Pos> = raw.entries.iter().map(|e| e.pos).collect();
    let new = match edit::layout(&text, &dashes) {
        Ok(layout) => edit::append(
            &text,
            &layout,
            &[("id", &id), ("name", &name), ("sha256", &hex)],
        ),
        Err(e) => {
            writeln!(
                io.err,
                "cordis: plugin add: {}: {e}; add the entry by hand:\n- id: {id}\n  name: {name}\n  sha256: {hex}",
                safe(&file)
            )?;
            return Ok(EXIT_CONFIG);
        }
    };
    let mut expected = facts(&raw.entries, None);
    expected.push((
        id.clone(),
        Some(name.clone()),
        Some(hex.clone()),
        Some(serde_json::Value::Null),
        false,
    ));
    if !edits_exactly(&new, &file, &expected, io) {
        writeln!(
            io.err,
            "cordis: plugin add: appending to {} as text would not add just the entry; add it by hand:\n- id: {id}\n  name: {name}\n  sha256: {hex}",
            safe(&file)
        )?;
        return Ok(EXIT_CONFIG);
    }
    let placed = match files::place(&dir, &stored, &bytes) {
        Ok(placed) => placed,
        Err(e) => {
            writeln!(io.err, "cordis: plugin add: {}", safe(&e.to_string()))?;
            return Ok(EXIT_CONFIG);
        }
    };
    let passed = match proof::gate(&new, &args.config.config(), args.max, io, builtins) {
        Ok(proof::Gate::Passed(summary)) => summary,
        Ok(proof::Gate::Refused(code)) => {
            placed.undo();
            writeln!(
                io.err,
                "cordis: not added: entry \"{}\" ({name}) would break the composition; nothing changed ({} and {} are as they were)",
                safe(&id),
                safe(&file),
                safe(&dir.display().to_string())
            )?;
            return Ok(code);
        }
        Err(e) => {
            placed.undo();
            return Err(e);
        }
    };
    if let Err(e) = files::write_config(&args.config.file, &text, &new) {
        placed.undo();
        writeln!(
            io.err,
            "cordis: plugin add: cannot write {}: {e}",
            safe(&file)
        )?;
        return Ok(EXIT_FAILURE);
    }
    writeln!(
        io.out,
        "added entry \"{}\" to {}: {name}, sha256 {hex}",
        safe(&id),
        safe(&file)
    )?;
    writeln!(io.out, "{passed}")?;
    Ok(EXIT_OK)
}

/// Whether `new` parses (no env needed beyond what the file had) into exactly `expected`.
fn edits_exactly(new: &str, file: &str, expected: &[Fact], io: &Io<'_>) -> bool {
    parse(new, file, io.env).is_ok_and(|raw| facts(&raw.entries, None) == expected)
}

/// How a plugin file compares with its entry's pin.
fn file_state(path: &Path, pin: Option<&str>) -> (Option<String>, &'static str) {
    match source::read_file(path, true) {
        Err(source::SourceError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            (None, "missing")
        }
        Err(_) => (None, "unreadable"),
        Ok(bytes) => {
            let hex = source::sha256_hex(&bytes);
            let state = match pin {
                None => "not pinned",
                Some(pin) if pin == hex => "matches",
                Some(_) => "differs",
            };
            (Some(hex), state)
        }
    }
}

fn list(args: &ListArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let (_, raw) = match read_config(&args.config, io)? {
        Ok(read) => read,
        Err(code) => return Ok(code),
    };
    let config_dir = dir_of(&args.config.file.display().to_string());
    let mut rows = Vec::new();
    let mut code = EXIT_OK;
    for entry in own_entries(&raw.entries) {
        let Some(name) = entry.name.as_deref().filter(|n| is_plugin_file(n)) else {
            continue;
        };
        let kind = if name.ends_with(".wasm") {
            "wasm"
        } else {
            "dylib"
        };
        let (hex, state) = file_state(&resolve(&config_dir, name), entry.sha256.as_deref());
        if matches!(state, "missing" | "unreadable" | "differs") {
            code = EXIT_FAILURE;
        }
        rows.push((
            entry.id.clone(),
            kind,
            name.to_owned(),
            entry.sha256.clone(),
            hex,
            state,
        ));
    }
    if args.json {
        let json: Vec<serde_json::Value> = rows
            .iter()
            .map(|(id, kind, name, pin, hex, state)| {
                serde_json::json!({"id": id, "kind": kind, "path": name, "sha256": pin, "fileSha256": hex, "state": state})
            })
            .collect();
        writeln!(io.out, "{}", serde_json::to_string_pretty(&json)?)?;
        return Ok(code);
    }
    if rows.is_empty() {
        writeln!(
            io.out,
            "no plugin-file entries in {}",
            safe(&args.config.file.display().to_string())
        )?;
        return Ok(code);
    }
    let w_id = rows.iter().map(|r| r.0.chars().count()).fold(2, usize::max);
    let w_name = rows.iter().map(|r| r.2.chars().count()).fold(4, usize::max);
    writeln!(
        io.out,
        "{:<w_id$}  {:<5}  {:<w_name$}  {:<64}  FILE",
        "ID", "KIND", "PATH", "SHA256"
    )?;
    for (id, kind, name, pin, hex, state) in &rows {
        let state = match (*state, hex) {
            ("differs", Some(hex)) => format!("differs: the file's sha256 is {hex}"),
            (state, _) => state.to_owned(),
        };
        writeln!(
            io.out,
            "{:<w_id$}  {kind:<5}  {:<w_name$}  {:<64}  {state}",
            safe(id),
            safe(name),
            pin.as_deref().unwrap_or("-"),
        )?;
    }
    Ok(code)
}

/// The entry `id` of the config's own file that names a plugin file; prints why not.
fn find_plugin_entry<'a>(
    raw: &'a RawConfig,
    id: &str,
    file: &str,
    io: &mut Io<'_>,
) -> std::io::Result<Option<&'a RawEntry>> {
    let entries = own_entries(&raw.entries);
    match entries.iter().find(|e| e.id == id) {
        Some(e) if e.name.as_deref().is_some_and(is_plugin_file) => Ok(Some(e)),
        found => {
            let ids: Vec<&str> = entries
                .iter()
                .filter(|e| e.name.as_deref().is_some_and(is_plugin_file))
                .map(|e| e.id.as_str())
                .collect();
            let what = if found.is_some() {
                "is not a plugin-file entry (its name is no path to a library or component)"
            } else {
                "is not an entry of it"
            };
            writeln!(
                io.err,
                "cordis: {}: \"{}\" {what}; its plugin-file entries are: {} (`{} plugin list`)",
                safe(file),
                safe(id),
                if ids.is_empty() {
                    "none".to_owned()
                } else {
                    safe(&ids.join(", ")).into_owned()
                },
                super::program::name()
            )?;
            Ok(None)
        }
    }
}

fn update(args: &UpdateArgs, io: &mut Io<'_>, builtins: &Builtins) -> anyhow::Result<u8> {
    let (text, raw) = match read_config(&args.config, io)? {
        Ok(read) => read,
        Err(code) => return Ok(code),
    };
    let file = args.config.file.display().to_string();
    let Some(entry) = find_plugin_entry(&raw, &args.id, &file, io)? else {
        return Ok(EXIT_CONFIG);
    };
    let name = entry.name.clone().unwrap_or_default();
    let path = resolve(&dir_of(&file), &name);
    let bytes = match source::read_file(&path, true) {
        Ok(bytes) => bytes,
        Err(e) => {
            writeln!(
                io.err,
                "cordis: plugin update: entry \"{}\": {}",
                safe(&args.id),
                safe(&e.to_string())
            )?;
            return Ok(EXIT_CONFIG);
        }
    };
    let hex = source::sha256_hex(&bytes);
    if entry.sha256.as_deref() == Some(hex.as_str()) {
        writeln!(
            io.out,
            "entry \"{}\" is pinned to its file already: sha256 {hex}",
            safe(&args.id)
        )?;
        return Ok(EXIT_OK);
    }
    let name_pos = entry.marks.name.unwrap_or(entry.pos);
    let new = match edit::set_pin(
        &text,
        &args.id,
        entry.pos,
        name_pos,
        entry.marks.sha256,
        &hex,
    ) {
        Ok(new) => new,
        Err(e) => {
            writeln!(
                io.err,
                "cordis: plugin update: {}: {e}; set `sha256: {hex}` by hand",
                safe(&file)
            )?;
            return Ok(EXIT_CONFIG);
        }
    };
    let expected: Vec<Fact> = facts(&raw.entries, None)
        .into_iter()
        .map(|mut f| {
            if f.0 == args.id {
                f.2 = Some(hex.clone());
            }
            f
        })
        .collect();
    if !edits_exactly(&new, &file, &expected, io) {
        writeln!(
            io.err,
            "cordis: plugin update: editing {} as text would change more than the pin; set `sha256: {hex}` by hand",
            safe(&file)
        )?;
        return Ok(EXIT_CONFIG);
    }
    match proof::gate(&new, &args.config.config(), args.max, io, builtins)? {
        proof::Gate::Passed(summary) => {
            if let Err(e) = files::write_config(&args.config.file, &text, &new) {
                writeln!(
                    io.err,
                    "cordis: plugin update: cannot write {}: {e}",
                    safe(&file)
                )?;
                return Ok(EXIT_FAILURE);
            }
            let was = entry.sha256.as_deref().unwrap_or("no pin");
            writeln!(
                io.out,
                "entry \"{}\" pinned to sha256 {hex} (was {was})",
                safe(&args.id)
            )?;
            writeln!(io.out, "{summary}")?;
            Ok(EXIT_OK)
        }
        proof::Gate::Refused(code) => {
            writeln!(
                io.err,
                "cordis: not updated: with its file as it is now, entry \"{}\" would break the composition; {} is as it was",
                safe(&args.id),
                safe(&file)
            )?;
            Ok(code)
        }
    }
}

fn remove(args: &RemoveArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let (text, raw) = match read_config(&args.config, io)? {
        Ok(read) => read,
        Err(code) => return Ok(code),
    };
    let file = args.config.file.display().to_string();
    let Some(entry) = find_plugin_entry(&raw, &args.id, &file, io)? else {
        return Ok(EXIT_CONFIG);
    };
    let new = match edit::remove(&text, entry.pos) {
        Ok(new) => new,
        Err(e) => {
            writeln!(
                io.err,
                "cordis: plugin remove: {}: {e}; remove the entry by hand",
                safe(&file)
            )?;
            return Ok(EXIT_CONFIG);
        }
    };
    if !edits_exactly(&new, &file, &facts(&raw.entries, Some(&args.id)), io) {
        writeln!(
            io.err,
            "cordis: plugin remove: cutting entry \"{}\" out of {} as text would change more than that entry; remove it by hand",
            safe(&args.id),
            safe(&file)
        )?;
        return Ok(EXIT_CONFIG);
    }
    if let Err(e) = files::write_config(&args.config.file, &text, &new) {
        writeln!(
            io.err,
            "cordis: plugin remove: cannot write {}: {e}",
            safe(&file)
        )?;
        return Ok(EXIT_FAILURE);
    }
    writeln!(
        io.out,
        "removed entry \"{}\" from {}",
        safe(&args.id),
        safe(&file)
    )?;
    let config_dir = dir_of(&file);
    let name = entry.name.clone().unwrap_or_default();
    let path = resolve(&config_dir, &name);
    let in_plugin_dir = files::CANDIDATES.iter().any(|c| {
        let dir = config_dir.join(c);
        path.parent()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .zip(std::fs::canonicalize(&dir).ok())
            .is_some_and(|(p, d)| p == d)
    });
    let still_used = parse(&new, &file, io.env).is_ok_and(|raw| {
        own_entries(&raw.entries).iter().any(|e| {
            e.name
                .as_deref()
                .is_some_and(|n| resolve(&config_dir, n) == path)
        })
    });
    if in_plugin_dir && !still_used {
        match std::fs::remove_file(&path) {
            Ok(()) => {
                writeln!(io.out, "removed {}", safe(&name))?;
                // The directory `add` made, when nothing else is left in it.
                for c in files::CANDIDATES.iter().rev() {
                    let _ = std::fs::remove_dir(config_dir.join(c));
                }
                let _ = std::fs::remove_dir(config_dir.join(".cordis"));
            }
            Err(e) => writeln!(
                io.err,
                "cordis: plugin remove: could not remove {}: {e}",
                safe(&path.display().to_string())
            )?,
        }
    }
    Ok(EXIT_OK)
}
