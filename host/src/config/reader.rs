//! The entry reader: a file's marked tree read into [`RawEntry`]s, every problem collected.
//!
//! One [`Reader`] reads one file. An entry is read in named steps (its keys sorted into
//! [`Fields`], its identity, its checks, its settings, then its group children or its plugin
//! config); an include entry is handed to [`super::include`], which calls back through
//! [`Reading`] for the included file's entries.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::include::{
    self, Entered, Expand, INCLUDE_NAMES, IncludeProblem, IncludedFiles, Reading, Session,
};
use super::json::to_json;
use super::model::{EntryMarks, GROUP_NAMES, RawConfig, RawEntry, Sources};
use super::position::{SourceMap, Text};
use super::yaml::{Kind, NodeId, Tree, duplicate_keys, key_text, kind_of, short};
use crate::diagnostic::{ConfigErrors, Diagnostic, Pos, Problem};
use crate::hidden::hidden_char;

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
pub fn dir_of(file: &str) -> PathBuf {
    match Path::new(file).parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
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

/// [`parse_lenient`], reading included files through `files` (see [`super::include`]).
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

impl IncludedFiles {
    /// Reads every file `source` (the top-level file `file`, in `dir`) includes, transitively,
    /// as a parse would; a later parse of the same `source` with these files does no I/O.
    /// Blocking: call it off the async threads.
    pub fn read_ahead(source: &str, file: &str, dir: impl Into<PathBuf>) -> IncludedFiles {
        let mut files = IncludedFiles::disk(dir);
        // Include paths are literal, so the environment cannot change which files are read.
        let _ = parse_with(source, file, &|_| None, &mut files);
        files
    }
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
        text: Text {
            source: text,
            tree: &tree,
            map: &map,
        },
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

/// Reads the entries of one file of a parse.
struct Reader<'a, 'f> {
    /// What diagnostics print as the file (with its include chain).
    file: String,
    /// Its index among the session's sources.
    index: usize,
    /// Its text and marked tree.
    text: Text<'a>,
    env: &'a dyn Fn(&str) -> Option<String>,
    session: &'a mut Session<'f>,
    /// Ids that patches of the includes around this file disable.
    disable: &'a BTreeSet<String>,
    errors: Vec<Diagnostic>,
    /// Per refused tag: already reported.
    claimed: Vec<bool>,
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

    fn bad(&mut self, value: NodeId, entry: &str, key: &'static str, expected: &'static str) {
        let found = short(self.text.tree, value);
        let pos = self.text.tree.node(value).pos;
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
        let problems = &self.text.tree.tag_problems;
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

    /// Reads a list of entries; `prefix` is the position path of the enclosing group.
    fn list(&mut self, list: NodeId, prefix: &str, disabled: bool) -> Vec<RawEntry> {
        let Kind::Seq(items) = &self.text.tree.node(list).kind else {
            let node = self.text.tree.node(list);
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
            if let Some(entry) = self.entry(
                *item,
                At {
                    group: prefix,
                    index: i,
                },
                disabled,
            ) {
                out.push(entry);
            }
        }
        out
    }

    /// Converts a config value to JSON (see [`to_json`]), reporting its problems on `entry`.
    fn json(&mut self, id: NodeId, entry: &str) -> serde_json::Value {
        let mut problems = Vec::new();
        let value = to_json(self.text, id, self.env, &mut problems);
        for (pos, problem) in problems {
            self.error(pos, Some(entry), problem);
        }
        value
    }
}

/// Where an entry is: its group's position path and its index there (formatted only when
/// needed, for a derived id or a group's children).
#[derive(Clone, Copy)]
struct At<'p> {
    group: &'p str,
    index: usize,
}

impl At<'_> {
    /// The position path: `2` for the third top-level entry, `0.3` inside the first one.
    fn path(self) -> String {
        if self.group.is_empty() {
            self.index.to_string()
        } else {
            format!("{}.{}", self.group, self.index)
        }
    }
}

impl Fields {
    /// Sorts an entry's pairs into its known keys (the first of a repeated key counts; the
    /// repetition is reported as a duplicate) and the unknown keys.
    fn sort(tree: &Tree, pairs: &[(NodeId, NodeId)]) -> (Fields, Vec<NodeId>) {
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
            slot.get_or_insert((k, v));
        }
        (fields, unknown)
    }

    /// Where the values were written.
    fn marks(&self, tree: &Tree) -> EntryMarks {
        let at = |field: Option<(NodeId, NodeId)>| field.map(|(_, v)| tree.node(v).pos);
        EntryMarks {
            id: at(self.id),
            name: at(self.name),
            config: at(self.config),
            sha256: at(self.sha256),
        }
    }
}

/// An entry's settings besides its identity and config.
struct Settings {
    inject: Vec<String>,
    timeout_ms: Option<u64>,
    sha256: Option<String>,
}

/// What a group entry holds: its config (always `null`), its children and, for an include,
/// the file it included.
struct Group {
    children: Vec<RawEntry>,
    included: Option<String>,
}

impl Reader<'_, '_> {
    /// Reads one entry at `at`, inside a group that is disabled when `parent_disabled`.
    fn entry(&mut self, item: NodeId, at: At<'_>, parent_disabled: bool) -> Option<RawEntry> {
        let tree = self.text.tree;
        let node = tree.node(item);
        let pos = self.text.item_pos(item);
        let Kind::Map(pairs) = &node.kind else {
            self.claim(item, node.last, None);
            let found = kind_of(&node.kind);
            self.error(pos, None, Problem::EntryNotMapping { found });
            return None;
        };
        let (fields, unknown) = Fields::sort(tree, pairs);
        let name = fields
            .name
            .and_then(|(_, v)| tree.str(v))
            .map(str::to_owned);
        let (id, explicit_id) = self.id_of(&fields, name.as_deref(), at);
        self.check_keys(pairs, unknown, &id);
        self.check_identity(&fields, &id, explicit_id, name.as_ref(), pos);
        let own_disabled = self.own_disabled(&fields, &id);
        // An entry a patch disables is disabled before its config is read, so its variables
        // need not be set.
        let disabled = parent_disabled || own_disabled || self.disable.contains(&id);
        let settings = self.settings(&fields, &id);
        let is_include = name.as_deref().is_some_and(|n| INCLUDE_NAMES.contains(&n));
        let is_group = is_include || name.as_deref().is_some_and(|n| GROUP_NAMES.contains(&n));
        let config_node = fields.config.map(|(_, v)| v);
        let (config, group) = if is_group {
            let group = self.group(item, &fields, &id, at, pos, is_include, disabled);
            (Some(serde_json::Value::Null), group)
        } else {
            let config = self.plugin_config(item, config_node, &id, disabled);
            let group = Group {
                children: Vec::new(),
                included: None,
            };
            (config, group)
        };
        Some(RawEntry {
            id,
            explicit_id,
            name,
            config,
            disabled,
            inject: settings.inject,
            timeout_ms: settings.timeout_ms,
            sha256: settings.sha256,
            children: group.children,
            is_group,
            included: group.included,
            pos,
            marks: fields.marks(tree),
            config_node,
            source: self.index,
            merges: Vec::new(),
        })
    }

    /// The entry's id: as written (a string or a number), else derived from its name and
    /// position; and whether it was written.
    fn id_of(&self, fields: &Fields, name: Option<&str>, at: At<'_>) -> (String, bool) {
        let tree = self.text.tree;
        match fields.id.map(|(_, v)| (v, &tree.node(v).kind)) {
            Some((v, Kind::Str(..))) => (tree.str(v).unwrap_or_default().to_owned(), true),
            Some((_, Kind::Int(i))) => (i.to_string(), true),
            Some((_, Kind::UInt(u))) => (u.to_string(), true),
            Some((_, Kind::Float(f))) => (f.to_string(), true),
            _ => (format!("{}#{}", name.unwrap_or("entry"), at.path()), false),
        }
    }

    /// Reports unknown and repeated keys.
    fn check_keys(&mut self, pairs: &[(NodeId, NodeId)], unknown: Vec<NodeId>, id: &str) {
        let tree = self.text.tree;
        for k in unknown {
            let key = match tree.str(k) {
                Some(s) => s.to_owned(),
                None => short(tree, k),
            };
            self.error(tree.node(k).pos, Some(id), Problem::UnknownKey { key });
        }
        if pairs.len() > 1 {
            for k in duplicate_keys(tree, pairs) {
                let key = key_text(tree, k).unwrap_or_default();
                self.error(tree.node(k).pos, Some(id), Problem::DuplicateKey { key });
            }
        }
    }

    /// Reports an id or name of the wrong type, a missing name, and hidden characters in
    /// either (they would disguise what a terminal shows).
    fn check_identity(
        &mut self,
        fields: &Fields,
        id: &String,
        explicit_id: bool,
        name: Option<&String>,
        pos: Pos,
    ) {
        let tree = self.text.tree;
        if let Some((_, v)) = fields.id
            && !explicit_id
        {
            self.bad(v, id, "id", "a string");
        }
        match fields.name {
            Some((_, v)) if name.is_none() => self.bad(v, id, "name", "a string"),
            Some(_) => {}
            None => self.error(pos, Some(id), Problem::MissingName),
        }
        for (key, value, at) in [
            ("id", explicit_id.then_some(id), fields.id),
            ("name", name, fields.name),
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
                self.error(tree.node(v).pos, Some(id), problem);
            }
        }
    }

    /// `disabled: true` written on the entry itself.
    fn own_disabled(&mut self, fields: &Fields, id: &str) -> bool {
        let tree = self.text.tree;
        match fields.disabled.map(|(_, v)| (v, &tree.node(v).kind)) {
            None | Some((_, Kind::Null)) => false,
            Some((_, Kind::Bool(b))) => *b,
            Some((v, _)) => {
                self.bad(v, id, "disabled", "true or false");
                false
            }
        }
    }

    /// `inject`, `timeout` and `sha256`, each checked.
    fn settings(&mut self, fields: &Fields, id: &str) -> Settings {
        let tree = self.text.tree;
        let inject = match fields.inject.map(|(_, v)| (v, &tree.node(v).kind)) {
            None | Some((_, Kind::Null)) => Vec::new(),
            Some((v, Kind::Str(..))) => vec![tree.str(v).unwrap_or_default().to_owned()],
            Some((_, Kind::Seq(items))) if items.iter().all(|i| tree.str(*i).is_some()) => items
                .iter()
                .filter_map(|i| tree.str(*i).map(str::to_owned))
                .collect(),
            Some((v, _)) => {
                self.bad(v, id, "inject", "a list of service names");
                Vec::new()
            }
        };
        let timeout_ms = match fields.timeout.map(|(_, v)| (v, &tree.node(v).kind)) {
            None | Some((_, Kind::Null)) => None,
            Some((_, Kind::Int(t))) if *t > 0 => Some(*t as u64),
            Some((_, Kind::UInt(t))) => Some(*t),
            Some((v, _)) => {
                self.bad(v, id, "timeout", "a positive number of milliseconds");
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
                self.bad(v, id, "sha256", "a SHA-256 hash as 64 hex digits");
                None
            }
        };
        Settings {
            inject,
            timeout_ms,
            sha256,
        }
    }

    /// A group's (or include's) children; `inject` and `timeout` belong on its entries.
    #[allow(clippy::too_many_arguments)]
    fn group(
        &mut self,
        item: NodeId,
        fields: &Fields,
        id: &str,
        at: At<'_>,
        pos: Pos,
        is_include: bool,
        disabled: bool,
    ) -> Group {
        let tree = self.text.tree;
        for (key, field) in [("inject", fields.inject), ("timeout", fields.timeout)] {
            if let Some((k, v)) = field
                && tree.node(v).kind != Kind::Null
            {
                self.error(
                    tree.node(k).pos,
                    Some(id),
                    Problem::BadField {
                        key,
                        expected: "absent on a group (set it on the group's entries)",
                        found: "a value".to_owned(),
                    },
                );
            }
        }
        let config_node = fields.config.map(|(_, v)| v);
        let mut group = Group {
            children: Vec::new(),
            included: None,
        };
        // The position path counts the groups and includes around the entries: each level
        // is a recursion of the reader (and of resolution). One file cannot nest this deep
        // (YAML nesting is capped); includes must not stack files up beyond it.
        let path = at.path();
        if path.split('.').count() >= include::MAX_NESTING {
            let limit = include::MAX_NESTING;
            let problem = Problem::Include(IncludeProblem::NestedTooDeep { limit });
            self.error(pos, Some(id), problem);
        } else if is_include {
            let text = self.text;
            (group.children, group.included) =
                include::read(self, text, config_node, id, &path, pos, disabled);
        } else if let Some(list) = config_node
            && tree.node(list).kind != Kind::Null
        {
            group.children = self.list(list, &path, disabled);
        }
        self.claim(item, tree.node(item).last, Some(id));
        group
    }

    /// A plugin entry's config as JSON: `null` when absent or when the entry is disabled (its
    /// variables need not be set); `None` when it had problems.
    fn plugin_config(
        &mut self,
        item: NodeId,
        config: Option<NodeId>,
        id: &str,
        disabled: bool,
    ) -> Option<serde_json::Value> {
        if self.claim(item, self.text.tree.node(item).last, Some(id)) {
            None
        } else if disabled {
            Some(serde_json::Value::Null)
        } else {
            match config {
                None => Some(serde_json::Value::Null),
                Some(c) => {
                    let before = self.errors.len();
                    let value = self.json(c, id);
                    (self.errors.len() == before).then_some(value)
                }
            }
        }
    }
}

impl Expand for Reader<'_, '_> {
    fn report(&mut self, pos: Pos, id: &str, problem: Problem) {
        self.error(pos, Some(id), problem);
    }

    fn config(&mut self, node: NodeId, id: &str) -> Option<serde_json::Value> {
        let before = self.errors.len();
        let value = self.json(node, id);
        (self.errors.len() == before).then_some(value)
    }

    fn entries(&mut self, list: NodeId, prefix: &str, disabled: bool) -> Vec<RawEntry> {
        self.list(list, prefix, disabled)
    }

    fn source(&self) -> usize {
        self.index
    }
}

impl Reading for Reader<'_, '_> {
    fn enter(&mut self, at: Pos, written: &str) -> Result<Entered, IncludeProblem> {
        self.session.enter(self.index, at, written)
    }

    fn leave(&mut self) {
        self.session.leave();
    }

    fn read_file(
        &mut self,
        file: &Entered,
        prefix: &str,
        disabled: bool,
        disable: &BTreeSet<String>,
    ) -> (Vec<RawEntry>, Vec<Diagnostic>) {
        read_file(
            &file.text,
            file.index,
            prefix,
            disabled,
            self.env,
            self.session,
            disable,
        )
    }

    fn extend(&mut self, errors: Vec<Diagnostic>) {
        self.errors.extend(errors);
    }

    fn disabled_ids(&self) -> &BTreeSet<String> {
        self.disable
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

    /// Regression (issue 27): with CR-only line endings the tab was reported at the scalar
    /// before it (2:9): the tab scan split lines with `str::lines`, which does not end a line at
    /// a lone `\r`, so it never reached line 3.
    #[test]
    fn a_tab_is_reported_on_its_own_line_whatever_the_line_endings() {
        for end in ["\n", "\r\n", "\r"] {
            let src = ["- id: a", "  name: tool-todo", "\t- bad tab"].join(end);
            assert_eq!(
                errors(&src),
                [
                    "f.yml:3:1: YAML syntax error: a tab character; YAML indents with spaces, not tabs"
                ],
                "line ending {end:?}"
            );
        }
    }
}
