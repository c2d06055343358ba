//! Positions: where a value, a list item or a place inside a scalar was written.
//!
//! The marked tree ([`super::yaml`]) gives every node a line and column; this module answers
//! the finer questions diagnostics ask: where a list item's dash is, where a needle sits inside
//! a multi-line scalar, and which value a serde path inside `config` names (following the
//! patches that wrote it).

use std::sync::OnceLock;

use super::model::{RawConfig, RawEntry};
use super::yaml::{Kind, NodeId, Tree, key_text};
use crate::diagnostic::Pos;

impl RawConfig {
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

/// Character index → byte offset, for pointing inside a scalar (built only when needed).
#[derive(Default)]
pub(super) struct SourceMap {
    ascii: bool,
    offsets: OnceLock<Vec<usize>>,
}

impl SourceMap {
    pub(super) fn new(source: &str) -> SourceMap {
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

/// One file's text with its marked tree, for positions finer than a node's own.
#[derive(Clone, Copy)]
pub(super) struct Text<'a> {
    /// The file's text.
    pub source: &'a str,
    /// Its marked tree.
    pub tree: &'a Tree,
    /// Character index → byte offset in `source`.
    pub map: &'a SourceMap,
}

impl Text<'_> {
    /// Where a list item starts: its dash when it has one on its line, else the node itself.
    pub(super) fn item_pos(&self, id: NodeId) -> Pos {
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

    /// The position of the first `needle` in a scalar's source text; the scalar's own
    /// position if it is not there verbatim (an escape sequence, say).
    pub(super) fn find_in(&self, id: NodeId, needle: &str) -> Pos {
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
