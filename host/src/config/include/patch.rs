//! Patches: what an include changes in the entries of the file it loads (`disable`, `merge`,
//! `insert`), read from its `patches` list and applied in order.

use super::problem::IncludeProblem;
use crate::config::model::RawEntry;
use crate::config::position::Text;
use crate::config::yaml::{Kind, NodeId, duplicate_keys, key_text, kind_of, short};
use crate::diagnostic::{Pos, Problem};

/// What applying patches needs from the reader of the including file: it reads the entries an
/// `insert` writes and converts a `merge`'s config, with its own environment and error list.
pub(in crate::config) trait Expand {
    /// Reports a problem of the include entry `id` at `pos` in the including file.
    fn report(&mut self, pos: Pos, id: &str, problem: Problem);
    /// A patch's `config` mapping as JSON, interpolated; `None` when it had problems (reported).
    fn config(&mut self, node: NodeId, id: &str) -> Option<serde_json::Value>;
    /// The entries of a list an `insert` writes, read as if written in the including file.
    fn entries(&mut self, list: NodeId, prefix: &str, disabled: bool) -> Vec<RawEntry>;
    /// The including file's index among the parse's sources.
    fn source(&self) -> usize;
}

/// What a patch does.
pub(super) enum PatchVerb {
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
pub(super) struct Patch {
    /// Its index in `patches` (numbers the ids of inserted entries).
    pub index: usize,
    /// The id it names, and where.
    pub target: String,
    pub target_pos: Pos,
    pub verb: PatchVerb,
}

/// Reads an include's `patches` list, adding every malformed patch to `problems`.
pub(super) fn read(
    text: Text<'_>,
    list: Option<NodeId>,
    problems: &mut Vec<(Pos, Problem)>,
) -> Vec<Patch> {
    let tree = text.tree;
    let Some(list) = list.filter(|l| tree.node(*l).kind != Kind::Null) else {
        return Vec::new();
    };
    let bad = |what: String| Problem::Include(IncludeProblem::BadPatch { what });
    let Kind::Seq(items) = &tree.node(list).kind else {
        let what = format!("`patches` must be a list, found {}", short(tree, list));
        problems.push((tree.node(list).pos, bad(what)));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (index, &item) in items.iter().enumerate() {
        let pos = text.item_pos(item);
        let Kind::Map(pairs) = &tree.node(item).kind else {
            let what = format!("patch {index} is {}", kind_of(&tree.node(item).kind));
            problems.push((pos, bad(what)));
            continue;
        };
        if pairs.len() > 1 {
            for k in duplicate_keys(tree, pairs) {
                let key = key_text(tree, k).unwrap_or_default();
                problems.push((tree.node(k).pos, Problem::DuplicateKey { key }));
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
            problems.push((pos, bad(what)));
            continue;
        };
        let allowed: &[&str] = match verb {
            "disable" => &["disable"],
            "merge" => &["merge", "config"],
            _ => &["insert", "before", "after"],
        };
        let mut ok = true;
        for &(k, _) in pairs {
            let key = tree.str(k).map_or_else(|| short(tree, k), str::to_owned);
            if !allowed.contains(&key.as_str()) {
                let what = format!("unknown key \"{key}\" in a `{verb}` patch");
                problems.push((tree.node(k).pos, bad(what)));
                ok = false;
            }
        }
        let target_of = |problems: &mut Vec<(Pos, Problem)>, node: NodeId, what: &str| {
            let text = match &tree.node(node).kind {
                Kind::Str(..) => tree.str(node).map(str::to_owned),
                Kind::Int(_) | Kind::UInt(_) => key_text(tree, node),
                _ => None,
            };
            if text.is_none() {
                let what = format!("{what} takes an entry id, found {}", short(tree, node));
                problems.push((tree.node(node).pos, bad(what)));
            }
            text.map(|t| (t, tree.node(node).pos))
        };
        let (target, verb) = match verb {
            "disable" => {
                let Some(t) = get("disable").and_then(|n| target_of(problems, n, "`disable`"))
                else {
                    continue;
                };
                (t, PatchVerb::Disable)
            }
            "merge" => {
                let target = get("merge").and_then(|n| target_of(problems, n, "`merge`"));
                let config = get("config");
                let Some(config) = config.filter(|c| matches!(tree.node(*c).kind, Kind::Map(_)))
                else {
                    let what = match config {
                        Some(c) => format!(
                            "a `merge` patch's `config` must be a mapping, found {}",
                            short(tree, c)
                        ),
                        None => "a `merge` patch needs `config: {…}`".to_owned(),
                    };
                    let at = config.map_or(pos, |c| tree.node(c).pos);
                    problems.push((at, bad(what)));
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
                        short(tree, entries)
                    );
                    problems.push((tree.node(entries).pos, bad(what)));
                    continue;
                }
                let (before, after) = (get("before"), get("after"));
                let (anchor, before) = match (before, after) {
                    (Some(b), None) => (b, true),
                    (None, Some(a)) => (a, false),
                    _ => {
                        let what =
                            "an `insert` patch needs exactly one of `before: ID` or `after: ID`"
                                .to_owned();
                        problems.push((pos, bad(what)));
                        continue;
                    }
                };
                let side = if before { "`before`" } else { "`after`" };
                let Some(t) = target_of(problems, anchor, side) else {
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
pub(super) fn apply(
    r: &mut impl Expand,
    patches: Vec<Patch>,
    children: &mut Vec<RawEntry>,
    id: &str,
    prefix: &str,
    disabled: bool,
    shown: &str,
) {
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
            r.report(patch.target_pos, id, Problem::Include(problem));
            continue;
        };
        match patch.verb {
            PatchVerb::Disable => disable_tree(entry_at(children, &path)),
            PatchVerb::Merge(node) => {
                let entry = entry_at(children, &path);
                if entry.is_group {
                    let problem = IncludeProblem::MergeIntoGroup { id: patch.target };
                    r.report(patch.target_pos, id, Problem::Include(problem));
                    continue;
                }
                // Like a disabled entry's own config, a patch of one is not interpolated.
                if disabled || entry.disabled {
                    continue;
                }
                let value = r.config(node, id);
                let entry = entry_at(children, &path);
                if let Some(value) = value
                    && let Some(config) = &mut entry.config
                {
                    merge(config, &value);
                    entry.merges.push((r.source(), node));
                }
            }
            PatchVerb::Insert { entries, before } => {
                // Into a disabled group, disabled like the group's own entries (patches
                // disabled their targets while the file was read, so this is final).
                let group_disabled =
                    path.len() > 1 && entry_at(children, &path[..path.len() - 1]).disabled;
                let prefix = format!("{prefix}.p{}", patch.index);
                let new = r.entries(entries, &prefix, disabled || group_disabled);
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

/// The path (indices through `children`) of the first entry called `id`, in file order.
fn find(list: &[RawEntry], id: &str) -> Option<Vec<usize>> {
    for (i, entry) in list.iter().enumerate() {
        if entry.id == id {
            return Some(vec![i]);
        }
        if let Some(mut rest) = find(&entry.children, id) {
            rest.insert(0, i);
            return Some(rest);
        }
    }
    None
}

/// The entry at `path` (from [`find`]).
fn entry_at<'l>(list: &'l mut [RawEntry], path: &[usize]) -> &'l mut RawEntry {
    let (first, rest) = path.split_first().expect("a path from find is never empty");
    rest.iter()
        .fold(&mut list[*first], |entry, i| &mut entry.children[*i])
}

/// The list the entries at `parent` (a path without its last index) hold.
fn list_of<'l>(list: &'l mut Vec<RawEntry>, parent: &[usize]) -> &'l mut Vec<RawEntry> {
    match parent.split_first() {
        None => list,
        Some((first, rest)) => {
            &mut rest
                .iter()
                .fold(&mut list[*first], |entry, i| &mut entry.children[*i])
                .children
        }
    }
}

/// Every id of a tree, in file order.
fn ids(list: &[RawEntry]) -> Vec<String> {
    let mut out = Vec::new();
    for entry in list {
        out.push(entry.id.clone());
        out.extend(ids(&entry.children));
    }
    out
}

/// Disables an entry and everything in it.
fn disable_tree(entry: &mut RawEntry) {
    entry.disabled = true;
    for child in &mut entry.children {
        disable_tree(child);
    }
}

/// RFC 7396 JSON Merge Patch: `patch` merged into `target`.
pub fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}
