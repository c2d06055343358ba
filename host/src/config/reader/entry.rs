//! Reading one entry: its keys sorted into [`Fields`], its identity, its checks, its settings,
//! then its group children (or included file) or its plugin config.

use super::Reader;
use crate::config::include::{self, INCLUDE_NAMES, IncludeProblem};
use crate::config::model::{EntryMarks, GROUP_NAMES, RawEntry};
use crate::config::yaml::{Kind, NodeId, Tree, duplicate_keys, key_text, kind_of, short};
use crate::diagnostic::{Pos, Problem};
use crate::hidden::hidden_char;

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
    /// Reads a list of entries; `prefix` is the position path of the enclosing group.
    pub(super) fn list(&mut self, list: NodeId, prefix: &str, disabled: bool) -> Vec<RawEntry> {
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
    #[allow(
        clippy::too_many_arguments,
        reason = "one private caller passes the entry's parsed parts; a struct for them would only rename them"
    )]
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
