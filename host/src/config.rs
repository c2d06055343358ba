//! The raw `cordis.yml` model: what the file says, with a position for every key and value.
//!
//! This is phase one of two (phase two is [`crate::plan`]): no plugin is looked up and nothing is
//! loaded here. The only outside input is the environment, read through the `env` function the
//! caller passes, for `${{ env.NAME }}` interpolation ([`crate::env`]).
//!
//! # Format
//! A top-level YAML list of entries `{id?, name, config?, disabled?, inject?, timeout?, sha256?}`.
//! `timeout` is the apply timeout in milliseconds. `sha256` pins the file of a dylib entry (one
//! whose `name` is a path to a shared library) to a hex SHA-256 hash. An entry named `cordis/group` (or
//! `@cordisjs/plugin-group`) is a group: its `config` is a nested list of entries, and disabling
//! it disables them all. An entry named `cordis/include` loads another file's entries as such a
//! group, with patches (see [`crate::include`]). Inside string values of `config`, `${{ env.NAME }}` and
//! `${{ env.NAME ?? 'default' }}` are replaced by the variable's value (no code is evaluated;
//! the result is always a string). cordis's `!!js` tag and every other non-core tag are
//! rejected. Entries of disabled entries (and groups) are not interpolated, so their variables
//! need not be set. Ids and names may not contain control, bidirectional or zero-width
//! characters (they would disguise what a terminal shows).
//!
//! # Ids
//! An entry without `id` gets one derived from its name and position, never a random one:
//! `debug/noop#2` is the third top-level entry, `debug/noop#0.3` the fourth entry of the group
//! that is the first top-level entry.
//!
//! # Positions
//! The file is read into a [`Tree`](crate::yaml::Tree) that marks every node, so a diagnostic
//! points at the key or value it is about: an unknown key at the key, a bad value at the value,
//! an unset variable at `env.NAME` inside the string. An entry's own position is its dash (or,
//! in a flow list, its opening brace). Positions count lines as YAML does (`\n`, `\r\n` or a
//! lone `\r`) and columns in characters, from 1.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::diagnostic::{ConfigErrors, Diagnostic, Pos, Problem, hidden_char};
use crate::env::{interpolate, needle};
use crate::include::{INCLUDE_NAMES, IncludeProblem, IncludedFiles, Session, Source};
use crate::yaml::{Kind, NodeId, Tree, duplicate_keys};

/// The plugin names that make an entry a group.
pub const GROUP_NAMES: &[&str] = &["cordis/group", "@cordisjs/plugin-group"];

/// A parsed config file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawConfig {
    /// The file name, as the user gave it (used in every message).
    pub file: String,
    /// The top-level entries, in file order.
    pub entries: Vec<RawEntry>,
    /// The files the entries were read from, with their marked trees (for positions inside
    /// `config`): the top-level file first, then every included one.
    sources: Sources,
}

/// The parsed files behind a [`RawConfig`], shared; equal when it is the same parse.
#[derive(Clone)]
struct Sources(Arc<Vec<Source>>);

impl PartialEq for Sources {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sources")
    }
}

/// Where an entry's keys' values were written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryMarks {
    /// The `id` value.
    pub id: Option<Pos>,
    /// The `name` value.
    pub name: Option<Pos>,
    /// The `config` value.
    pub config: Option<Pos>,
    /// The `sha256` value.
    pub sha256: Option<Pos>,
}

/// One entry as written.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEntry {
    /// The entry id: as written, or derived from name and position.
    pub id: String,
    /// True when `id` was written in the file.
    pub explicit_id: bool,
    /// The plugin name (`None` if missing or not a string; a diagnostic says so).
    pub name: Option<String>,
    /// The config value after interpolation (`null` when absent; `None` when it had errors).
    pub config: Option<serde_json::Value>,
    /// Disabled by itself or by an enclosing group.
    pub disabled: bool,
    /// Extra required services.
    pub inject: Vec<String>,
    /// Apply timeout in milliseconds, if set.
    pub timeout_ms: Option<u64>,
    /// The pinned SHA-256 of a dylib entry's file (lowercase hex, 64 digits), if set.
    pub sha256: Option<String>,
    /// Child entries, for a group (for an include: the included file's entries, patched).
    pub children: Vec<RawEntry>,
    /// True for a group entry (an include is a group).
    pub is_group: bool,
    /// For an include: the included file, as reached from the current directory.
    pub included: Option<String>,
    /// Where the entry starts (its dash).
    pub pos: Pos,
    /// Where its values were written.
    pub marks: EntryMarks,
    /// The `config` node in the tree, for [`RawConfig::config_pos`].
    config_node: Option<NodeId>,
    /// The file it is written in: an index into the parse's sources.
    source: usize,
    /// The merge patches applied to its config, in order: (source, `config` node of the patch).
    merges: Vec<(usize, NodeId)>,
}

impl RawConfig {
    /// What diagnostics about `entry` print before `:line:column`: its file, after the chain
    /// of includes that led there (`a.yml:3:3 → b.yml`).
    pub fn origin(&self, entry: &RawEntry) -> &str {
        self.sources
            .0
            .get(entry.source)
            .map_or(self.file.as_str(), |s| s.origin.as_str())
    }

    /// Sorts diagnostics of this parse in file order, an included file's right after its
    /// include entry's (stable: problems at one position keep the order they were found in).
    pub fn sort_diagnostics(&self, errors: &mut [Diagnostic]) {
        let sources = &self.sources.0;
        if sources.len() <= 1 {
            errors.sort_by_key(|d| d.pos);
            return;
        }
        errors.sort_by_cached_key(|d| {
            let mut key = sources
                .iter()
                .find(|s| s.origin == d.file)
                .map(|s| s.chain.clone())
                .unwrap_or_default();
            key.push(d.pos);
            key
        });
    }

    /// Where a problem with `entry`'s config at `path` (serde_path_to_error's form, such as
    /// `tools[2].name`) was written: the value at the deepest part of the path that exists; for
    /// an `unknown field` message, that field's key. The entry's position if it has no config.
    pub fn config_pos(&self, entry: &RawEntry, path: &str, message: &str) -> Pos {
        self.config_at(entry, path, message).1
    }

    /// [`RawConfig::config_pos`] with the file: for a config patched by `merge`, the patch
    /// that wrote the deepest part of `path` (the later one on a tie), else the entry's file.
    pub fn config_at(&self, entry: &RawEntry, path: &str, message: &str) -> (&str, Pos) {
        let sources = &self.sources.0;
        let layers = std::iter::once((entry.source, entry.config_node))
            .chain(entry.merges.iter().map(|&(s, n)| (s, Some(n))));
        let mut best: Option<(usize, usize, NodeId)> = None;
        for (source, node) in layers {
            let (Some(node), Some(file)) = (node, sources.get(source)) else {
                continue;
            };
            let (found, depth) = walk(&file.tree, node, path);
            if best.is_none_or(|(d, ..)| depth >= d) {
                best = Some((depth, source, found));
            }
        }
        let Some((_, source, node)) = best else {
            return (self.origin(entry), entry.pos);
        };
        let file = &sources[source];
        let tree = &file.tree;
        if let (Some(field), Kind::Map(pairs)) = (
            message
                .strip_prefix("unknown field `")
                .and_then(|m| m.split('`').next()),
            &tree.node(node).kind,
        ) && let Some((key, _)) = pairs
            .iter()
            .find(|(k, _)| key_text(tree, *k).as_deref() == Some(field))
        {
            return (&file.origin, tree.node(*key).pos);
        }
        (&file.origin, tree.node(node).pos)
    }
}

/// Follows `path` from `node` as far as it exists: the node reached and how many steps.
fn walk(tree: &Tree, mut node: NodeId, path: &str) -> (NodeId, usize) {
    let mut depth = 0;
    let mut rest = path.trim_start_matches('.');
    while !rest.is_empty() {
        let next = match &tree.node(node).kind {
            Kind::Seq(items) if rest.starts_with('[') => {
                let Some(end) = rest.find(']') else { break };
                let Some(item) = rest[1..end]
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i))
                else {
                    break;
                };
                rest = &rest[end + 1..];
                *item
            }
            Kind::Map(pairs) => {
                // The longest key the path continues with (keys may contain dots).
                let found = pairs
                    .iter()
                    .filter_map(|(k, v)| {
                        let key = key_text(tree, *k)?;
                        let after = rest.strip_prefix(key.as_str())?;
                        (after.is_empty() || after.starts_with(['.', '[']))
                            .then_some((key.len(), *v))
                    })
                    .max_by_key(|(len, _)| *len);
                let Some((len, value)) = found else { break };
                rest = &rest[len..];
                value
            }
            _ => break,
        };
        node = next;
        depth += 1;
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    (node, depth)
}

fn key_text(tree: &Tree, key: NodeId) -> Option<String> {
    match tree.node(key).kind {
        Kind::Str(..) => tree.str(key).map(str::to_owned),
        Kind::Int(i) => Some(i.to_string()),
        Kind::UInt(u) => Some(u.to_string()),
        Kind::Bool(b) => Some(b.to_string()),
        Kind::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

/// Character index → byte offset, for pointing inside a scalar (built only when needed).
#[derive(Default)]
struct SourceMap {
    ascii: bool,
    offsets: OnceLock<Vec<usize>>,
}

impl SourceMap {
    fn new(source: &str) -> SourceMap {
        SourceMap {
            ascii: source.is_ascii(),
            offsets: OnceLock::new(),
        }
    }

    fn byte(&self, source: &str, index: usize) -> usize {
        if self.ascii {
            return index.min(source.len());
        }
        let offsets = self
            .offsets
            .get_or_init(|| source.char_indices().map(|(b, _)| b).collect());
        offsets.get(index).copied().unwrap_or(source.len())
    }
}

/// Parses a config file, collecting every problem; included files are read from disk,
/// relative to `file`'s directory.
///
/// # Errors
/// Every problem of the file (and of the files it includes), in file order.
pub fn parse(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<RawConfig, ConfigErrors> {
    let (config, errors) = parse_lenient(source, file, env);
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// The directory a config file named `file` is in (the current directory for a bare name).
pub fn dir_of(file: &str) -> std::path::PathBuf {
    match Path::new(file).parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => std::path::PathBuf::from("."),
    }
}

/// Parses as far as possible: the entries that could be read, and every problem found (in file
/// order). Included files are read from disk, relative to `file`'s directory.
pub fn parse_lenient(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> (RawConfig, Vec<Diagnostic>) {
    parse_with(source, file, env, &mut IncludedFiles::disk(dir_of(file)))
}

/// [`parse_lenient`], reading included files through `files` (see [`crate::include`]).
pub fn parse_with(
    source: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
    files: &mut IncludedFiles,
) -> (RawConfig, Vec<Diagnostic>) {
    let mut session = Session::new(files, file);
    let (entries, mut errors) =
        read_file(source, 0, "", false, env, &mut session, &BTreeSet::new());
    let config = RawConfig {
        file: file.to_owned(),
        entries,
        sources: Sources(Arc::new(session.sources)),
    };
    config.sort_diagnostics(&mut errors);
    (config, errors)
}

/// Reads the entries of one file of a parse (source `index` of `session`); `prefix` is the
/// position path of the include entry that included it (empty for the top-level file), and
/// `disable` the ids that patches of enclosing includes disable.
fn read_file(
    text: &str,
    index: usize,
    prefix: &str,
    disabled: bool,
    env: &dyn Fn(&str) -> Option<String>,
    session: &mut Session<'_>,
    disable: &BTreeSet<String>,
) -> (Vec<RawEntry>, Vec<Diagnostic>) {
    let file = session.sources[index].origin.clone();
    let tree = match Tree::parse(text) {
        Ok(tree) => tree,
        Err(fatal) => {
            let error = Diagnostic {
                file,
                pos: fatal.pos,
                entry: None,
                problem: fatal.problem,
            };
            return (Vec::new(), vec![error]);
        }
    };
    let map = SourceMap::new(text);
    let mut r = Reader {
        file,
        index,
        source: text,
        tree: &tree,
        map: &map,
        env,
        session,
        disable,
        errors: Vec::new(),
        claimed: vec![false; tree.tag_problems.len()],
    };
    let entries = match tree.root {
        None => Vec::new(),
        Some(root) => r.list(root, prefix, disabled),
    };
    r.claim(0, usize::MAX, None);
    let errors = r.errors;
    session.sources[index].tree = Arc::new(tree);
    (entries, errors)
}

struct Reader<'a, 'f> {
    /// What diagnostics print as the file (with its include chain).
    file: String,
    /// Its index among the session's sources.
    index: usize,
    source: &'a str,
    tree: &'a Tree,
    map: &'a SourceMap,
    env: &'a dyn Fn(&str) -> Option<String>,
    session: &'a mut Session<'f>,
    /// Ids that patches of the includes around this file disable.
    disable: &'a BTreeSet<String>,
    errors: Vec<Diagnostic>,
    /// Per refused tag: already reported.
    claimed: Vec<bool>,
}

fn kind_of(k: &Kind) -> &'static str {
    match k {
        Kind::Null => "null",
        Kind::Bool(_) => "a boolean",
        Kind::Int(_) | Kind::UInt(_) | Kind::Float(_) => "a number",
        Kind::Str(..) => "a string",
        Kind::Seq(_) => "a list",
        Kind::Map(_) => "a mapping",
    }
}

/// What a patch does.
enum PatchVerb {
    Disable,
    /// The `config` mapping to merge.
    Merge(NodeId),
    /// The entry list to insert, before or after the target.
    Insert {
        entries: NodeId,
        before: bool,
    },
}

/// One patch of an include.
struct Patch {
    /// Its index in `patches` (numbers the ids of inserted entries).
    index: usize,
    /// The id it names, and where.
    target: String,
    target_pos: Pos,
    verb: PatchVerb,
}

/// The slots of an entry's known keys: (key node, value node).
#[derive(Default)]
struct Fields {
    id: Option<(NodeId, NodeId)>,
    name: Option<(NodeId, NodeId)>,
    config: Option<(NodeId, NodeId)>,
    disabled: Option<(NodeId, NodeId)>,
    inject: Option<(NodeId, NodeId)>,
    timeout: Option<(NodeId, NodeId)>,
    sha256: Option<(NodeId, NodeId)>,
}

impl Reader<'_, '_> {
    fn error(&mut self, pos: Pos, entry: Option<&str>, problem: Problem) {
        self.errors.push(Diagnostic {
            file: self.file.clone(),
            pos,
            entry: entry.map(str::to_owned),
            problem,
        });
    }

    fn short(&self, id: NodeId) -> String {
        let node = self.tree.node(id);
        match &node.kind {
            Kind::Str(..) => format!("\"{}\"", self.tree.str(id).unwrap_or_default()),
            Kind::Int(i) => i.to_string(),
            Kind::UInt(u) => u.to_string(),
            Kind::Float(f) => f.to_string(),
            Kind::Bool(b) => b.to_string(),
            other => kind_of(other).to_owned(),
        }
    }

    fn bad(&mut self, value: NodeId, entry: &str, key: &'static str, expected: &'static str) {
        let found = self.short(value);
        let pos = self.tree.node(value).pos;
        self.error(
            pos,
            Some(entry),
            Problem::BadField {
                key,
                expected,
                found,
            },
        );
    }

    /// Reports the refused tags among nodes `from..=to` not reported yet; true if there were.
    fn claim(&mut self, from: NodeId, to: NodeId, entry: Option<&str>) -> bool {
        let problems = &self.tree.tag_problems;
        let start = problems.partition_point(|(_, id, _)| *id < from);
        let mut any = false;
        for ((pos, id, problem), claimed) in
            problems[start..].iter().zip(&mut self.claimed[start..])
        {
            if *id > to {
                break;
            }
            any = true;
            if !*claimed {
                *claimed = true;
                self.errors.push(Diagnostic {
                    file: self.file.clone(),
                    pos: *pos,
                    entry: entry.map(str::to_owned),
                    problem: problem.clone(),
                });
            }
        }
        any
    }

    /// Where a list item starts: its dash when it has one on its line, else the node itself.
    fn item_pos(&self, id: NodeId) -> Pos {
        let node = self.tree.node(id);
        let start = self.map.byte(self.source, node.span.0);
        let before = self.source[..start].trim_end_matches([' ', '\t']);
        let gap = start - before.len();
        if before.ends_with('-') && node.pos.column > gap + 1 {
            Pos {
                line: node.pos.line,
                column: node.pos.column - gap - 1,
            }
        } else {
            node.pos
        }
    }

    /// Reads a list of entries; `prefix` is the position path of the enclosing group.
    fn list(&mut self, list: NodeId, prefix: &str, disabled: bool) -> Vec<RawEntry> {
        let Kind::Seq(items) = &self.tree.node(list).kind else {
            let node = self.tree.node(list);
            self.error(
                node.pos,
                None,
                Problem::NotAList {
                    found: kind_of(&node.kind),
                },
            );
            return Vec::new();
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if let Some(entry) = self.entry(*item, (prefix, i), disabled) {
                out.push(entry);
            }
        }
        out
    }

    /// Reads one entry; `at` is its group's position path and its index there (formatted only
    /// when needed: for a derived id or a group's children).
    fn entry(
        &mut self,
        item: NodeId,
        at: (&str, usize),
        parent_disabled: bool,
    ) -> Option<RawEntry> {
        let position = || {
            if at.0.is_empty() {
                at.1.to_string()
            } else {
                format!("{}.{}", at.0, at.1)
            }
        };
        let tree = self.tree;
        let node = tree.node(item);
        let pos = self.item_pos(item);
        let Kind::Map(pairs) = &node.kind else {
            self.claim(item, node.last, None);
            self.error(
                pos,
                None,
                Problem::EntryNotMapping {
                    found: kind_of(&node.kind),
                },
            );
            return None;
        };
        let mut fields = Fields::default();
        let mut unknown = Vec::new();
        for &(k, v) in pairs {
            let slot = match tree.str(k) {
                Some("id") => &mut fields.id,
                Some("name") => &mut fields.name,
                Some("config") => &mut fields.config,
                Some("disabled") => &mut fields.disabled,
                Some("inject") => &mut fields.inject,
                Some("timeout") => &mut fields.timeout,
                Some("sha256") => &mut fields.sha256,
                _ => {
                    unknown.push(k);
                    continue;
                }
            };
            // A repeated key is reported below; the first one counts.
            slot.get_or_insert((k, v));
        }
        let name = fields
            .name
            .and_then(|(_, v)| tree.str(v))
            .map(str::to_owned);
        let (id, explicit_id) = match fields.id.map(|(_, v)| (v, &tree.node(v).kind)) {
            Some((v, Kind::Str(..))) => (tree.str(v).unwrap_or_default().to_owned(), true),
            Some((_, Kind::Int(i))) => (i.to_string(), true),
            Some((_, Kind::UInt(u))) => (u.to_string(), true),
            Some((_, Kind::Float(f))) => (f.to_string(), true),
            _ => (
                format!("{}#{}", name.as_deref().unwrap_or("entry"), position()),
                false,
            ),
        };
        for k in unknown {
            let key = match tree.str(k) {
                Some(s) => s.to_owned(),
                None => self.short(k),
            };
            self.error(tree.node(k).pos, Some(&id), Problem::UnknownKey { key });
        }
        if pairs.len() > 1 {
            for k in duplicate_keys(tree, pairs) {
                let key = key_text(tree, k).unwrap_or_default();
                self.error(tree.node(k).pos, Some(&id), Problem::DuplicateKey { key });
            }
        }
        if let Some((_, v)) = fields.id
            && !explicit_id
        {
            self.bad(v, &id, "id", "a string");
        }
        match fields.name {
            Some((_, v)) if name.is_none() => self.bad(v, &id, "name", "a string"),
            Some(_) => {}
            None => self.error(pos, Some(&id), Problem::MissingName),
        }
        for (key, value, at) in [
            ("id", explicit_id.then_some(&id), fields.id),
            ("name", name.as_ref(), fields.name),
        ] {
            if let (Some(value), Some((_, v))) = (value, at)
                && let Some((ch, kind)) = hidden_char(value)
            {
                let problem = Problem::HiddenCharacter {
                    key,
                    value: value.clone(),
                    ch,
                    kind,
                };
                self.error(tree.node(v).pos, Some(&id), problem);
            }
        }
        let own_disabled = match fields.disabled.map(|(_, v)| (v, &tree.node(v).kind)) {
            None | Some((_, Kind::Null)) => false,
            Some((_, Kind::Bool(b))) => *b,
            Some((v, _)) => {
                self.bad(v, &id, "disabled", "true or false");
                false
            }
        };
        // An entry a patch disables is disabled before its config is read, so its variables
        // need not be set.
        let disabled = parent_disabled || own_disabled || self.disable.contains(&id);
        let inject = match fields.inject.map(|(_, v)| (v, &tree.node(v).kind)) {
            None | Some((_, Kind::Null)) => Vec::new(),
            Some((v, Kind::Str(..))) => vec![tree.str(v).unwrap_or_default().to_owned()],
            Some((_, Kind::Seq(items))) if items.iter().all(|i| tree.str(*i).is_some()) => items
                .iter()
                .filter_map(|i| tree.str(*i).map(str::to_owned))
                .collect(),
            Some((v, _)) => {
                self.bad(v, &id, "inject", "a list of service names");
                Vec::new()
            }
        };
        let timeout_ms = match fields.timeout.map(|(_, v)| (v, &tree.node(v).kind)) {
            None | Some((_, Kind::Null)) => None,
            Some((_, Kind::Int(t))) if *t > 0 => Some(*t as u64),
            Some((_, Kind::UInt(t))) => Some(*t),
            Some((v, _)) => {
                self.bad(v, &id, "timeout", "a positive number of milliseconds");
                None
            }
        };
        let sha256 = match fields.sha256.map(|(_, v)| (v, tree.str(v))) {
            None => None,
            Some((v, _)) if tree.node(v).kind == Kind::Null => None,
            Some((_, Some(s))) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Some(s.to_ascii_lowercase())
            }
            Some((v, _)) => {
                self.bad(v, &id, "sha256", "a SHA-256 hash as 64 hex digits");
                None
            }
        };
        let is_include = name.as_deref().is_some_and(|n| INCLUDE_NAMES.contains(&n));
        let is_group = is_include || name.as_deref().is_some_and(|n| GROUP_NAMES.contains(&n));
        let config_node = fields.config.map(|(_, v)| v);
        let mut children = Vec::new();
        let mut included = None;
        let config = if is_group {
            for (key, field) in [("inject", fields.inject), ("timeout", fields.timeout)] {
                if let Some((k, v)) = field
                    && tree.node(v).kind != Kind::Null
                {
                    self.error(
                        tree.node(k).pos,
                        Some(&id),
                        Problem::BadField {
                            key,
                            expected: "absent on a group (set it on the group's entries)",
                            found: "a value".to_owned(),
                        },
                    );
                }
            }
            // The position path counts the groups and includes around the entries: each level
            // is a recursion of the reader (and of resolution). One file cannot nest this deep
            // (YAML nesting is capped); includes must not stack files up beyond it.
            if position().split('.').count() >= crate::include::MAX_NESTING {
                let limit = crate::include::MAX_NESTING;
                let problem = Problem::Include(IncludeProblem::NestedTooDeep { limit });
                self.error(pos, Some(&id), problem);
            } else if is_include {
                (children, included) = self.include(config_node, &id, &position(), pos, disabled);
            } else if let Some(list) = config_node
                && tree.node(list).kind != Kind::Null
            {
                children = self.list(list, &position(), disabled);
            }
            self.claim(item, node.last, Some(&id));
            Some(serde_json::Value::Null)
        } else if self.claim(item, node.last, Some(&id)) {
            None
        } else if disabled {
            Some(serde_json::Value::Null)
        } else {
            match config_node {
                None => Some(serde_json::Value::Null),
                Some(c) => {
                    let before = self.errors.len();
                    let value = self.json(c, &id);
                    (self.errors.len() == before).then_some(value)
                }
            }
        };
        Some(RawEntry {
            id,
            explicit_id,
            name,
            config,
            disabled,
            inject,
            timeout_ms,
            sha256,
            children,
            is_group,
            included,
            pos,
            marks: EntryMarks {
                id: fields.id.map(|(_, v)| tree.node(v).pos),
                name: fields.name.map(|(_, v)| tree.node(v).pos),
                config: config_node.map(|v| tree.node(v).pos),
                sha256: fields.sha256.map(|(_, v)| tree.node(v).pos),
            },
            config_node,
            source: self.index,
            merges: Vec::new(),
        })
    }

    /// Reads an include entry (`id`, at `at`, whose `config` is `config`): the included file's
    /// entries with the patches applied, and the file's name.
    fn include(
        &mut self,
        config: Option<NodeId>,
        id: &str,
        prefix: &str,
        at: Pos,
        disabled: bool,
    ) -> (Vec<RawEntry>, Option<String>) {
        let tree = self.tree;
        let problem = |p: IncludeProblem| Problem::Include(p);
        let Some(config) = config.filter(|c| tree.node(*c).kind != Kind::Null) else {
            self.error(at, Some(id), problem(IncludeProblem::MissingPath));
            return (Vec::new(), None);
        };
        let Kind::Map(pairs) = &tree.node(config).kind else {
            let found = self.short(config);
            let pos = tree.node(config).pos;
            self.error(
                pos,
                Some(id),
                problem(IncludeProblem::NotAMapping { found }),
            );
            return (Vec::new(), None);
        };
        if pairs.len() > 1 {
            for k in duplicate_keys(tree, pairs) {
                let key = key_text(tree, k).unwrap_or_default();
                self.error(tree.node(k).pos, Some(id), Problem::DuplicateKey { key });
            }
        }
        let (mut path, mut patches) = (None, None);
        for &(k, v) in pairs {
            match tree.str(k) {
                Some("path") => _ = path.get_or_insert(v),
                Some("patches") => _ = patches.get_or_insert(v),
                _ => {
                    let key = tree.str(k).map_or_else(|| self.short(k), str::to_owned);
                    let pos = tree.node(k).pos;
                    self.error(pos, Some(id), problem(IncludeProblem::UnknownKey { key }));
                }
            }
        }
        let patches = self.patches(patches, id);
        let Some(path) = path else {
            let pos = tree.node(config).pos;
            self.error(pos, Some(id), problem(IncludeProblem::MissingPath));
            return (Vec::new(), None);
        };
        let path_pos = tree.node(path).pos;
        let written = match tree.str(path) {
            Some(w) if !w.is_empty() => w,
            _ => {
                self.bad(path, id, "path", "a file path relative to this file");
                return (Vec::new(), None);
            }
        };
        if written.contains("${{") {
            self.error(
                path_pos,
                Some(id),
                problem(IncludeProblem::InterpolatedPath),
            );
            return (Vec::new(), None);
        }
        let entered = match self.session.enter(self.index, at, written) {
            Ok(entered) => entered,
            Err(p) => {
                self.error(path_pos, Some(id), problem(p));
                return (Vec::new(), None);
            }
        };
        let mut disable = self.disable.clone();
        for patch in &patches {
            if let PatchVerb::Disable = patch.verb {
                disable.insert(patch.target.clone());
            }
        }
        let (mut children, errors) = read_file(
            &entered.text,
            entered.index,
            prefix,
            disabled,
            self.env,
            self.session,
            &disable,
        );
        self.session.leave();
        // A file none of whose entries could be read (a syntax error, say) has its own errors;
        // its patches would only add "no such entry" for each.
        let unreadable = children.is_empty() && !errors.is_empty();
        self.errors.extend(errors);
        if !unreadable {
            self.apply(patches, &mut children, id, prefix, disabled, &entered.shown);
        }
        (children, Some(entered.shown))
    }

    /// Reads an include's `patches` list, reporting every malformed patch.
    fn patches(&mut self, list: Option<NodeId>, id: &str) -> Vec<Patch> {
        let tree = self.tree;
        let Some(list) = list.filter(|l| tree.node(*l).kind != Kind::Null) else {
            return Vec::new();
        };
        let bad = |what: String| Problem::Include(IncludeProblem::BadPatch { what });
        let Kind::Seq(items) = &tree.node(list).kind else {
            let what = format!("`patches` must be a list, found {}", self.short(list));
            self.error(tree.node(list).pos, Some(id), bad(what));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (index, &item) in items.iter().enumerate() {
            let pos = self.item_pos(item);
            let Kind::Map(pairs) = &tree.node(item).kind else {
                let what = format!("patch {index} is {}", kind_of(&tree.node(item).kind));
                self.error(pos, Some(id), bad(what));
                continue;
            };
            if pairs.len() > 1 {
                for k in duplicate_keys(tree, pairs) {
                    let key = key_text(tree, k).unwrap_or_default();
                    self.error(tree.node(k).pos, Some(id), Problem::DuplicateKey { key });
                }
            }
            let get = |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| tree.str(*k) == Some(key))
                    .map(|(_, v)| *v)
            };
            let verbs: Vec<&str> = ["disable", "merge", "insert"]
                .into_iter()
                .filter(|v| get(v).is_some())
                .collect();
            let [verb] = verbs[..] else {
                let what = if verbs.is_empty() {
                    format!("patch {index} has none of `disable`, `merge`, `insert`")
                } else {
                    format!(
                        "patch {index} has both `{}`; a patch does one thing",
                        verbs.join("` and `")
                    )
                };
                self.error(pos, Some(id), bad(what));
                continue;
            };
            let allowed: &[&str] = match verb {
                "disable" => &["disable"],
                "merge" => &["merge", "config"],
                _ => &["insert", "before", "after"],
            };
            let mut ok = true;
            for &(k, _) in pairs {
                let key = tree.str(k).map_or_else(|| self.short(k), str::to_owned);
                if !allowed.contains(&key.as_str()) {
                    let what = format!("unknown key \"{key}\" in a `{verb}` patch");
                    self.error(tree.node(k).pos, Some(id), bad(what));
                    ok = false;
                }
            }
            let target_of = |r: &mut Self, node: NodeId, what: &str| {
                let text = match &tree.node(node).kind {
                    Kind::Str(..) => tree.str(node).map(str::to_owned),
                    Kind::Int(_) | Kind::UInt(_) => key_text(tree, node),
                    _ => None,
                };
                if text.is_none() {
                    let what = format!("{what} takes an entry id, found {}", r.short(node));
                    r.error(tree.node(node).pos, Some(id), bad(what));
                }
                text.map(|t| (t, tree.node(node).pos))
            };
            let (target, verb) = match verb {
                "disable" => {
                    let Some(t) = get("disable").and_then(|n| target_of(self, n, "`disable`"))
                    else {
                        continue;
                    };
                    (t, PatchVerb::Disable)
                }
                "merge" => {
                    let target = get("merge").and_then(|n| target_of(self, n, "`merge`"));
                    let config = get("config");
                    let Some(config) =
                        config.filter(|c| matches!(tree.node(*c).kind, Kind::Map(_)))
                    else {
                        let what = match config {
                            Some(c) => format!(
                                "a `merge` patch's `config` must be a mapping, found {}",
                                self.short(c)
                            ),
                            None => "a `merge` patch needs `config: {…}`".to_owned(),
                        };
                        let at = config.map_or(pos, |c| tree.node(c).pos);
                        self.error(at, Some(id), bad(what));
                        continue;
                    };
                    let Some(target) = target else { continue };
                    (target, PatchVerb::Merge(config))
                }
                _ => {
                    let entries = get("insert").unwrap_or(item);
                    if !matches!(tree.node(entries).kind, Kind::Seq(_)) {
                        let what = format!(
                            "`insert` takes a list of entries, found {}",
                            self.short(entries)
                        );
                        self.error(tree.node(entries).pos, Some(id), bad(what));
                        continue;
                    }
                    let (before, after) = (get("before"), get("after"));
                    let (anchor, before) = match (before, after) {
                        (Some(b), None) => (b, true),
                        (None, Some(a)) => (a, false),
                        _ => {
                            let what = "an `insert` patch needs exactly one of `before: ID` or `after: ID`".to_owned();
                            self.error(pos, Some(id), bad(what));
                            continue;
                        }
                    };
                    let side = if before { "`before`" } else { "`after`" };
                    let Some(t) = target_of(self, anchor, side) else {
                        continue;
                    };
                    (t, PatchVerb::Insert { entries, before })
                }
            };
            if ok {
                out.push(Patch {
                    index,
                    target: target.0,
                    target_pos: target.1,
                    verb,
                });
            }
        }
        out
    }

    /// Applies an include's patches, in order, to the entries of its file.
    fn apply(
        &mut self,
        patches: Vec<Patch>,
        children: &mut Vec<RawEntry>,
        id: &str,
        prefix: &str,
        disabled: bool,
        shown: &str,
    ) {
        use crate::include::{disable_tree, entry_at, find, ids, list_of};
        // Patches name entries of the included file, not ones other patches inserted.
        let known = ids(children);
        let mut inserted: Vec<(Vec<usize>, bool, Vec<RawEntry>)> = Vec::new();
        for patch in patches {
            let Some(path) = find(children, &patch.target) else {
                let problem = IncludeProblem::UnknownTarget {
                    id: patch.target,
                    file: shown.to_owned(),
                    known: known.clone(),
                };
                self.error(patch.target_pos, Some(id), Problem::Include(problem));
                continue;
            };
            match patch.verb {
                PatchVerb::Disable => disable_tree(entry_at(children, &path)),
                PatchVerb::Merge(node) => {
                    let entry = entry_at(children, &path);
                    if entry.is_group {
                        let problem = IncludeProblem::MergeIntoGroup { id: patch.target };
                        self.error(patch.target_pos, Some(id), Problem::Include(problem));
                        continue;
                    }
                    // Like a disabled entry's own config, a patch of one is not interpolated.
                    if disabled || entry.disabled {
                        continue;
                    }
                    let before = self.errors.len();
                    let value = self.json(node, id);
                    let entry = entry_at(children, &path);
                    if self.errors.len() == before
                        && let Some(config) = &mut entry.config
                    {
                        crate::include::merge(config, &value);
                        entry.merges.push((self.index, node));
                    }
                }
                PatchVerb::Insert { entries, before } => {
                    // Into a disabled group, disabled like the group's own entries (patches
                    // disabled their targets while the file was read, so this is final).
                    let group_disabled =
                        path.len() > 1 && entry_at(children, &path[..path.len() - 1]).disabled;
                    let prefix = format!("{prefix}.p{}", patch.index);
                    let new = self.list(entries, &prefix, disabled || group_disabled);
                    inserted.push((path, before, new));
                }
            }
        }
        // Inserted last, at the deepest and latest place first, so the places found above stay
        // valid; several inserts at one place keep their written order.
        let mut points: Vec<(Vec<usize>, usize, Vec<RawEntry>)> = inserted
            .into_iter()
            .enumerate()
            .map(|(written, (mut path, before, new))| {
                if let Some(last) = path.last_mut()
                    && !before
                {
                    *last += 1;
                }
                (path, written, new)
            })
            .collect();
        points.sort_by(|a, b| (&b.0, b.1).cmp(&(&a.0, a.1)));
        for (point, _, new) in points {
            let Some((&at, parent)) = point.split_last() else {
                continue;
            };
            list_of(children, parent).splice(at..at, new);
        }
    }

    /// Converts a config value to JSON, interpolating `${{ env.X }}` in strings.
    fn json(&mut self, id: NodeId, entry: &str) -> serde_json::Value {
        use serde_json::Value as Json;
        let tree = self.tree;
        match &tree.node(id).kind {
            Kind::Null => Json::Null,
            Kind::Bool(b) => Json::Bool(*b),
            Kind::Int(i) => Json::from(*i),
            Kind::UInt(u) => Json::from(*u),
            Kind::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
            Kind::Str(..) => {
                let s = tree.str(id).unwrap_or_default();
                match interpolate(s, self.env) {
                    Ok(out) => Json::String(out),
                    Err(problem) => {
                        let at = self.find_in(id, &needle(&problem));
                        self.error(at, Some(entry), problem);
                        Json::Null
                    }
                }
            }
            Kind::Seq(items) => Json::Array(items.iter().map(|i| self.json(*i, entry)).collect()),
            Kind::Map(pairs) => {
                let mut out = serde_json::Map::new();
                if pairs.len() > 1 {
                    for k in duplicate_keys(tree, pairs) {
                        let key = key_text(tree, k).unwrap_or_default();
                        self.error(tree.node(k).pos, Some(entry), Problem::DuplicateKey { key });
                    }
                }
                for (k, v) in pairs {
                    let key = match &tree.node(*k).kind {
                        Kind::Str(..) | Kind::Int(_) | Kind::UInt(_) | Kind::Bool(_) => {
                            key_text(tree, *k).unwrap_or_default()
                        }
                        Kind::Float(f) => f.to_string(),
                        _ => {
                            let found = self.short(*k);
                            self.error(
                                tree.node(*k).pos,
                                Some(entry),
                                Problem::NonStringKey { found },
                            );
                            continue;
                        }
                    };
                    let value = self.json(*v, entry);
                    out.insert(key, value);
                }
                Json::Object(out)
            }
        }
    }

    /// The position of the first `needle` in a scalar's source text; the scalar's own
    /// position if it is not there verbatim (an escape sequence, say).
    fn find_in(&self, id: NodeId, needle: &str) -> Pos {
        let node = self.tree.node(id);
        let start = self.map.byte(self.source, node.span.0);
        let end = self.map.byte(self.source, node.span.1).max(start);
        let text = &self.source[start..end];
        let Some(at) = text.find(needle) else {
            return node.pos;
        };
        let mut pos = node.pos;
        let mut chars = text[..at].chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\r' if chars.peek() == Some(&'\n') => {}
                '\n' | '\r' => {
                    pos.line += 1;
                    pos.column = 1;
                }
                _ => pos.column += 1,
            }
        }
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn errors(src: &str) -> Vec<String> {
        let (_, errors) = parse_lenient(src, "f.yml", &no_env);
        errors.iter().map(ToString::to_string).collect()
    }

    /// Regression: the `!!js` scan sliced a line by byte index and panicked inside a multi-byte
    /// character (`text: How to use 😀`).
    #[test]
    fn non_ascii_text_never_panics_the_parser() {
        let samples = [
            "- id: a\n  name: debug/noop\n  config: {text: How to use 😀_smile.}\n",
            "- id: é\n  name: \"～\"\n# 😀 !!js\n",
            "- {id: a, name: debug/noop, config: {x: \"😀 !!js\"}}\n",
            "- id: a\n  name: debug/noop\n  config: \"${{ env.😀 }}\"\n",
            "😀: [\n",
        ];
        for src in samples {
            let _ = parse(src, "t.yml", &no_env);
        }
        let js = parse(
            "- id: a\n  name: x😀\n  config: !!js process.env.X\n",
            "t.yml",
            &no_env,
        );
        assert!(js.is_err());
    }

    #[test]
    fn entries_get_their_lines_and_derived_ids() {
        let src = "# comment\n- id: a\n  name: debug/noop\n\n- name: cordis/group\n  config:\n    - name: debug/noop\n      config: {}\n    - id: c\n      name: debug/noop\n";
        let cfg = parse(src, "f.yml", &no_env).unwrap();
        assert_eq!(cfg.entries.len(), 2);
        assert_eq!(cfg.entries[0].id, "a");
        assert_eq!(cfg.entries[0].pos, Pos { line: 2, column: 1 });
        let group = &cfg.entries[1];
        assert!(group.is_group);
        assert_eq!(group.id, "cordis/group#1");
        assert_eq!(group.pos.line, 5);
        assert_eq!(group.children[0].id, "debug/noop#1.0");
        assert_eq!(group.children[0].pos, Pos { line: 7, column: 5 });
        assert_eq!(group.children[1].id, "c");
        assert_eq!(group.children[1].pos.line, 9);
    }

    #[test]
    fn a_disabled_group_disables_its_children_and_skips_their_interpolation() {
        let src = "- name: cordis/group\n  disabled: true\n  config:\n  - name: debug/noop\n    config: {x: '${{ env.UNSET }}'}\n";
        let cfg = parse(src, "f.yml", &no_env).unwrap();
        assert!(cfg.entries[0].children[0].disabled);
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let (_, errors) = parse_lenient("- id: a\n  name: [x\n", "f.yml", &no_env);
        assert_eq!(errors.len(), 1);
        assert!(matches!(errors[0].problem, Problem::Syntax(_)));
        assert!(errors[0].pos.line >= 2, "{:?}", errors[0]);
    }

    /// A bad value is reported at the value (it was the key's column before the marked parse).
    #[test]
    fn every_entry_problem_is_reported_together() {
        let src = "- id: a\n  name: debug/noop\n  colour: red\n- id: b\n  disabled: maybe\n  name: debug/noop\n- id: c\n  name: debug/fault\n  config:\n    api: !!js process.env.KEY\n";
        let text = errors(src);
        assert_eq!(text.len(), 3, "{text:#?}");
        assert!(text[0].starts_with("f.yml:3:3: entry \"a\": unknown key \"colour\""));
        assert!(text[1].starts_with("f.yml:5:13: entry \"b\": key \"disabled\""));
        assert!(text[2].starts_with("f.yml:10:10: entry \"c\": the `!!js` tag"));
    }

    /// Regression (issue 12): the scanner took the first `timeout:` text after the dash, here
    /// inside a config string, as the entry's key.
    #[test]
    fn a_key_inside_a_string_is_not_the_entry_key() {
        let src =
            "- id: a\n  name: debug/noop\n  config: {note: \"timeout: later\"}\n  timeout: soon\n";
        assert_eq!(
            errors(src),
            [
                "f.yml:4:12: entry \"a\": key \"timeout\" must be a positive number of milliseconds, found \"soon\""
            ]
        );
    }

    /// Regression (issue 12): the scanner found a nested `inject:` (inside config) first.
    #[test]
    fn a_nested_key_is_not_the_entry_key() {
        let src = "- id: a\n  name: debug/noop\n  config:\n    inject: [x]\n  inject: 5\n";
        assert_eq!(
            errors(src),
            ["f.yml:5:11: entry \"a\": key \"inject\" must be a list of service names, found 5"]
        );
    }

    #[test]
    fn unknown_and_refused_tags_are_named_at_their_position() {
        let src = "- id: a\n  name: debug/noop\n  config:\n    a: !!binary aGk=\n    b: !!js/function x\n    c: !<tag:yaml.org,2002:js/function> x\n    d: !custom x\n    e: !!str 12\n    f: !!int twelve\n    g: !!set {}\n";
        let text = errors(src);
        assert_eq!(
            text,
            [
                "f.yml:4:8: entry \"a\": YAML tag `!!binary` is not supported",
                "f.yml:5:8: entry \"a\": the `!!js` tag is not supported (no code is evaluated); use `${{ env.NAME }}` or `${{ env.NAME ?? 'default' }}` instead",
                "f.yml:6:8: entry \"a\": the `!!js` tag is not supported (no code is evaluated); use `${{ env.NAME }}` or `${{ env.NAME ?? 'default' }}` instead",
                "f.yml:7:8: entry \"a\": YAML tag `!custom` is not supported",
                "f.yml:9:8: entry \"a\": YAML tag `!!int` does not fit the value \"twelve\"",
                "f.yml:10:8: entry \"a\": YAML tag `!!set` is not supported",
            ]
        );
        let ok = parse(
            "- id: a\n  name: debug/noop\n  config: {e: !!str 12, f: !!int 7}\n",
            "f.yml",
            &no_env,
        )
        .unwrap();
        assert_eq!(
            ok.entries[0].config,
            Some(serde_json::json!({"e": "12", "f": 7}))
        );
    }

    /// Regression (issue 11): a UTF-8 byte-order mark was refused.
    #[test]
    fn a_byte_order_mark_is_accepted() {
        let cfg = parse("\u{feff}- id: a\n  name: debug/noop\n", "f.yml", &no_env).unwrap();
        assert_eq!(cfg.entries[0].pos, Pos { line: 1, column: 1 });
    }

    /// Regression (issue 11): with CR-only line endings every position was 1:1.
    #[test]
    fn cr_only_line_endings_give_real_positions() {
        let src = "- id: a\r  name: debug/noop\r- id: b\r  name: debug/noop\r  colour: red\r  config: {x: \"${{ env.NOPE }}\"}\r";
        let text = errors(src);
        assert_eq!(
            text,
            [
                "f.yml:5:3: entry \"b\": unknown key \"colour\"; allowed keys: id, name, config, disabled, inject, timeout, sha256",
                "f.yml:6:20: entry \"b\": environment variable \"NOPE\" is not set (use `${{ env.NOPE ?? 'default' }}` to give a default)",
            ]
        );
    }

    #[test]
    fn an_unset_variable_is_pointed_at_inside_a_multi_line_string() {
        let src = "- id: a\n  name: debug/noop\n  config:\n    text: |\n      first line\n      then ${{ env.NOPE }}\n";
        assert!(
            errors(src)[0].starts_with("f.yml:6:16: entry \"a\": environment variable \"NOPE\"")
        );
    }

    #[test]
    fn a_chain_of_defaults_is_a_configuration_error() {
        let src = "- id: a\n  name: debug/noop\n  config: {k: \"${{ env.X ?? 'a' ?? 'b' }}\"}\n";
        assert!(
            errors(src)[0].starts_with("f.yml:3:16: entry \"a\": unsupported expression"),
            "{:?}",
            errors(src)
        );
    }

    #[test]
    fn duplicate_keys_are_refused_at_the_second_key() {
        let src = "- id: a\n  name: debug/noop\n  id: b\n  config: {x: 1, x: 2}\n";
        assert_eq!(
            errors(src),
            [
                "f.yml:3:3: entry \"a\": duplicate key \"id\" (the first one would be silently replaced)",
                "f.yml:4:18: entry \"a\": duplicate key \"x\" (the first one would be silently replaced)",
            ]
        );
    }

    /// Regression (issue 11): bidi, zero-width and control characters in ids were accepted and
    /// printed raw.
    #[test]
    fn hidden_characters_in_ids_and_names_are_refused_and_never_printed_raw() {
        for (id, code, kind) in [
            ("a\u{202e}b", "U+202E", "bidirectional"),
            ("a\u{200b}b", "U+200B", "zero-width"),
            ("a\u{1b}[2Jb", "U+001B", "control"),
            ("a\u{2066}b", "U+2066", "bidirectional"),
        ] {
            let escaped: String = id
                .chars()
                .map(|c| {
                    if c.is_ascii_graphic() {
                        c.to_string()
                    } else {
                        format!("\\u{:04X}", c as u32)
                    }
                })
                .collect();
            let src = format!("- id: \"{escaped}\"\n  name: debug/noop\n");
            let text = errors(&src);
            assert_eq!(text.len(), 1, "{text:?}");
            assert!(
                text[0].starts_with("f.yml:1:7: entry \"a\\u{"),
                "{}",
                text[0]
            );
            assert!(
                text[0].contains(&format!("contains {code}, a {kind} character")),
                "{}",
                text[0]
            );
            assert!(!text[0].contains(id), "printed raw: {}", text[0]);
        }
        let text = errors("- id: ok\n  name: \"x\\u202Ey\"\n");
        assert!(
            text[0].contains("name \"x\\u{202e}y\" contains U+202E"),
            "{text:?}"
        );
    }

    #[test]
    fn a_very_long_id_is_just_an_id() {
        let id = "x".repeat(70_000);
        let cfg = parse(
            &format!("- id: {id}\n  name: debug/noop\n  colour: red\n"),
            "f.yml",
            &no_env,
        );
        let err = cfg.unwrap_err().to_string();
        assert!(err.starts_with(&format!("f.yml:3:3: entry \"{id}\": unknown key")));
    }

    /// Issue 11: an anchored megabyte aliased 2,000 times took 30 s and 6 GB.
    #[test]
    fn alias_amplification_is_refused_before_any_value_is_built() {
        let mut src = format!(
            "- id: a\n  name: debug/noop\n  config:\n    big: &big \"{}\"\n    copies:\n",
            "x".repeat(1 << 20)
        );
        for _ in 0..2_000 {
            src.push_str("      - *big\n");
        }
        let text = errors(&src);
        assert_eq!(
            text,
            [format!(
                "f.yml:7:9: YAML aliases expand to more than {} bytes; refusing to build the value (aliases may repeat at most 1 MiB, or the file's size if larger)",
                src.len()
            )]
        );
        let small = "- id: a\n  name: debug/noop\n  config: {a: &x {k: v}, b: *x}\n";
        let cfg = parse(small, "f.yml", &no_env).unwrap();
        assert_eq!(
            cfg.entries[0].config,
            Some(serde_json::json!({"a": {"k": "v"}, "b": {"k": "v"}}))
        );
    }

    /// Issue 11: 100,000 brackets took 52 s before the error.
    #[test]
    fn deep_nesting_is_refused_with_the_limit() {
        let src = format!(
            "- id: a\n  name: debug/noop\n  config: {}\n",
            "[".repeat(100_000)
        );
        assert_eq!(
            errors(&src),
            ["f.yml:3:266: YAML nesting is deeper than 255 levels"]
        );
    }

    #[test]
    fn config_positions_follow_the_serde_path() {
        let src = "- id: a\n  name: debug/noop\n  config:\n    list:\n      - {name: x}\n      - {name: y, extra: 1}\n    a.b: {c: 2}\n";
        let cfg = parse(src, "f.yml", &no_env).unwrap();
        let e = &cfg.entries[0];
        let at = |path: &str, msg: &str| cfg.config_pos(e, path, msg).to_string();
        assert_eq!(at("list[1].name", "invalid type"), "6:16");
        assert_eq!(
            at("list[1]", "unknown field `extra`, expected `name`"),
            "6:19"
        );
        assert_eq!(at("a.b.c", "x"), "7:14");
        assert_eq!(at("list[7]", "x"), "5:7");
        assert_eq!(at(".", "missing field `x`"), "4:5");
    }
}
