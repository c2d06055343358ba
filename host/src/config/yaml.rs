//! YAML with a mark on every node: the tree [`crate::config`] reads entries from.
//!
//! Why not `serde_yaml_ng::Value`: it has no positions, so diagnostics had to guess lines from
//! the text. We build our own small tree from `saphyr-parser`'s events (the maintained
//! successor of yaml-rust's parser: pure Rust, YAML 1.2, every event carries its span), so every
//! key and value knows where it was written.
//!
//! The tree is also where hostile input stops, before any value is built:
//! - nesting deeper than [`MAX_DEPTH`] is refused as it is read (linear work);
//! - aliases may repeat at most [`alias_budget`] bytes of already-written content in total, so an
//!   anchored megabyte aliased thousands of times is refused at the first alias over budget;
//! - an alias to a node that contains it (a cycle) is refused;
//! - only the core-schema tags `!!str`, `!!int`, `!!float`, `!!bool`, `!!null` (on scalars),
//!   `!!seq` and `!!map` pass; every other tag (`!!js`, `!!binary`, local or verbatim tags) is a
//!   problem at its position.
//!
//! Plain scalars resolve as serde_yaml_ng resolved them (null, booleans, decimal/hex/octal/binary
//! integers, floats), so configs read the same as before.

use std::collections::BTreeSet;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

use crate::diagnostic::{Pos, Problem};

/// The deepest nesting of lists and mappings a config may have.
pub const MAX_DEPTH: usize = 255;

/// The expanded size aliases may add in total for a file of `source_len` bytes: 1 MiB, or the
/// file's own size if that is larger.
pub fn alias_budget(source_len: usize) -> u64 {
    (source_len as u64).max(1 << 20)
}

/// Index of a node in `Tree::nodes`.
pub type NodeId = usize;

/// A parsed YAML document: nodes in an arena, each with its position.
#[derive(Debug, Default)]
pub struct Tree {
    nodes: Vec<Node>,
    /// Every scalar's text, concatenated (nodes hold ranges into it).
    text: String,
    /// The document's root (`None` for an empty file).
    pub root: Option<NodeId>,
    /// Refused tags: where, and what is wrong; in file order.
    pub tag_problems: Vec<(Pos, usize, Problem)>,
}

/// One node.
#[derive(Debug)]
pub struct Node {
    /// What it is.
    pub kind: Kind,
    /// Where it starts (for a tagged node, where its tag starts).
    pub pos: Pos,
    /// Its source range, in characters.
    pub span: (usize, usize),
    /// Its tag was refused (the problem is in [`Tree::tag_problems`]).
    pub refused: bool,
    /// Size of the value once aliases are expanded (nodes plus scalar bytes).
    weight: u64,
    /// Fully read (an alias to an incomplete node would be a cycle).
    complete: bool,
    /// The last node of its subtree as written (ids `self..=last` are its own nodes).
    pub last: NodeId,
}

/// A node's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `~`, `null`, or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// A non-negative integer above `i64::MAX`.
    UInt(u64),
    /// A float.
    Float(f64),
    /// A string: a range of [`Tree`]'s text.
    Str(usize, usize),
    /// A sequence.
    Seq(Vec<NodeId>),
    /// A mapping, in written order.
    Map(Vec<(NodeId, NodeId)>),
}

/// Why reading the tree stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Fatal {
    /// Where.
    pub pos: Pos,
    /// What.
    pub problem: Problem,
}

impl Tree {
    /// The node `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    /// The text of a string node.
    pub fn str(&self, id: NodeId) -> Option<&str> {
        match self.nodes[id].kind {
            Kind::Str(a, b) => Some(&self.text[a..b]),
            _ => None,
        }
    }

    /// The value of `key` in mapping `map` (string keys only).
    pub fn get(&self, map: NodeId, key: &str) -> Option<(NodeId, NodeId)> {
        match &self.nodes[map].kind {
            Kind::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| self.str(*k) == Some(key))
                .copied(),
            _ => None,
        }
    }

    /// Reads `source` into a tree.
    ///
    /// # Errors
    /// The first syntax error or exceeded limit; refused tags are collected instead.
    pub fn parse(source: &str) -> Result<Tree, Fatal> {
        Builder::new(source).run()
    }
}

/// A container being read.
enum Open {
    Seq(NodeId, Vec<NodeId>),
    Map(NodeId, Vec<(NodeId, NodeId)>, Option<NodeId>),
}

struct Builder<'s> {
    source: &'s str,
    tree: Tree,
    stack: Vec<Open>,
    /// Per anchor id: its node.
    anchors: Vec<Option<NodeId>>,
    alias_weight: u64,
    budget: u64,
    documents: usize,
}

fn pos_of(span: &Span) -> Pos {
    Pos {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

fn fatal(span: &Span, problem: Problem) -> Fatal {
    Fatal {
        pos: pos_of(span),
        problem,
    }
}

impl<'s> Builder<'s> {
    fn new(source: &'s str) -> Self {
        Builder {
            source,
            tree: Tree::default(),
            stack: Vec::new(),
            anchors: Vec::new(),
            alias_weight: 0,
            budget: alias_budget(source.len()),
            documents: 0,
        }
    }

    fn run(mut self) -> Result<Tree, Fatal> {
        let mut parser = Parser::new_from_str(self.source);
        while let Some(next) = parser.next_event() {
            let (event, span) = next.map_err(|e| {
                let at = Pos {
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                };
                if e.info() == "recursion limit exceeded" {
                    return Fatal {
                        pos: at,
                        problem: Problem::TooDeep { limit: MAX_DEPTH },
                    };
                }
                // The scanner reports a tab at the token it was scanning; point at the tab.
                if e.info().contains("found a tab")
                    && let Some(tab) = first_tab_from(self.source, at)
                {
                    return Fatal {
                        pos: tab,
                        problem: Problem::Syntax(
                            "a tab character; YAML indents with spaces, not tabs".to_owned(),
                        ),
                    };
                }
                Fatal {
                    pos: at,
                    problem: Problem::Syntax(e.info().to_owned()),
                }
            })?;
            match event {
                Event::DocumentStart(_) => {
                    self.documents += 1;
                    if self.documents > 1 {
                        return Err(fatal(&span, Problem::SecondDocument));
                    }
                }
                Event::Scalar(value, style, anchor, tag) => {
                    let kind = self.scalar(&value, style, tag.as_deref(), &span);
                    let id = self.push(kind, &span, tag.as_deref(), TagUse::Scalar);
                    let weight = 1 + value.len() as u64;
                    self.tree.nodes[id].weight = weight;
                    self.tree.nodes[id].complete = true;
                    self.anchor(anchor, id);
                    self.attach(id);
                }
                Event::SequenceStart(anchor, tag) => {
                    self.depth_check(&span)?;
                    let id = self.push(Kind::Null, &span, tag.as_deref(), TagUse::Seq);
                    self.anchor(anchor, id);
                    self.stack.push(Open::Seq(id, Vec::new()));
                }
                Event::MappingStart(anchor, tag) => {
                    self.depth_check(&span)?;
                    let id = self.push(Kind::Null, &span, tag.as_deref(), TagUse::Map);
                    self.anchor(anchor, id);
                    self.stack.push(Open::Map(id, Vec::new(), None));
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let (id, kind, weight) = match self.stack.pop() {
                        Some(Open::Seq(id, items)) => {
                            let w = items
                                .iter()
                                .fold(1u64, |w, i| w.saturating_add(self.tree.nodes[*i].weight));
                            (id, Kind::Seq(items), w)
                        }
                        Some(Open::Map(id, pairs, _)) => {
                            let w = pairs.iter().fold(1u64, |w, (k, v)| {
                                w.saturating_add(self.tree.nodes[*k].weight)
                                    .saturating_add(self.tree.nodes[*v].weight)
                            });
                            (id, Kind::Map(pairs), w)
                        }
                        None => continue,
                    };
                    let last = self.tree.nodes.len() - 1;
                    let node = &mut self.tree.nodes[id];
                    node.kind = kind;
                    node.weight = weight;
                    node.span.1 = span.end.index();
                    node.complete = true;
                    node.last = last;
                    self.attach(id);
                }
                Event::Alias(anchor) => {
                    let target = match self.anchors.get(anchor).copied().flatten() {
                        Some(target) if self.tree.nodes[target].complete => target,
                        Some(_) => return Err(fatal(&span, Problem::RecursiveAlias)),
                        None => {
                            return Err(fatal(
                                &span,
                                Problem::Syntax("alias to an unknown anchor".into()),
                            ));
                        }
                    };
                    self.alias_weight = self
                        .alias_weight
                        .saturating_add(self.tree.nodes[target].weight);
                    if self.alias_weight > self.budget {
                        return Err(fatal(&span, Problem::AliasExpansion { limit: self.budget }));
                    }
                    self.attach(target);
                }
                Event::StreamEnd => break,
                Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            }
        }
        Ok(self.tree)
    }

    fn depth_check(&self, span: &Span) -> Result<(), Fatal> {
        if self.stack.len() >= MAX_DEPTH {
            Err(fatal(span, Problem::TooDeep { limit: MAX_DEPTH }))
        } else {
            Ok(())
        }
    }

    fn anchor(&mut self, anchor: usize, id: NodeId) {
        if anchor == 0 {
            return;
        }
        if self.anchors.len() <= anchor {
            self.anchors.resize(anchor + 1, None);
        }
        self.anchors[anchor] = Some(id);
    }

    fn push(&mut self, kind: Kind, span: &Span, tag: Option<&Tag>, use_: TagUse) -> NodeId {
        let pos = pos_of(span);
        let refused = match tag.map(|t| check_tag(t, use_)) {
            Some(Err(problem)) => {
                self.tree
                    .tag_problems
                    .push((pos, self.tree.nodes.len(), problem));
                true
            }
            _ => false,
        };
        self.tree.nodes.push(Node {
            kind,
            pos,
            span: (span.start.index(), span.end.index()),
            refused,
            weight: 1,
            complete: false,
            last: self.tree.nodes.len(),
        });
        self.tree.nodes.len() - 1
    }

    fn attach(&mut self, id: NodeId) {
        match self.stack.last_mut() {
            Some(Open::Seq(_, items)) => items.push(id),
            Some(Open::Map(_, pairs, key)) => match key.take() {
                Some(k) => pairs.push((k, id)),
                None => *key = Some(id),
            },
            None => {
                if self.tree.root.is_none() {
                    self.tree.root = Some(id);
                }
            }
        }
    }

    fn string(&mut self, s: &str) -> Kind {
        let start = self.tree.text.len();
        self.tree.text.push_str(s);
        Kind::Str(start, self.tree.text.len())
    }

    fn scalar(&mut self, value: &str, style: ScalarStyle, tag: Option<&Tag>, span: &Span) -> Kind {
        let core = tag.and_then(core_name);
        match core {
            Some("str") => return self.string(value),
            Some(expected @ ("int" | "float" | "bool" | "null")) => {
                let kind = resolve_plain(value);
                let fits = matches!(
                    (expected, &kind),
                    ("int", Kind::Int(_) | Kind::UInt(_))
                        | ("float", Kind::Float(_) | Kind::Int(_) | Kind::UInt(_))
                        | ("bool", Kind::Bool(_))
                        | ("null", Kind::Null)
                );
                if fits {
                    return match (expected, kind) {
                        ("float", Kind::Int(i)) => Kind::Float(i as f64),
                        ("float", Kind::UInt(u)) => Kind::Float(u as f64),
                        (_, kind) => kind,
                    };
                }
                self.tree.tag_problems.push((
                    pos_of(span),
                    self.tree.nodes.len(),
                    Problem::TagMismatch {
                        tag: format!("!!{expected}"),
                        value: value.to_owned(),
                    },
                ));
                return self.string(value);
            }
            _ => {}
        }
        if style != ScalarStyle::Plain {
            return self.string(value);
        }
        match resolve_plain(value) {
            Kind::Str(..) => self.string(value),
            other => other,
        }
    }
}

#[derive(Clone, Copy)]
enum TagUse {
    Scalar,
    Seq,
    Map,
}

const CORE: &str = "tag:yaml.org,2002:";

/// The core-schema name of a tag (`str` for `!!str` or `!<tag:yaml.org,2002:str>`).
fn core_name(tag: &Tag) -> Option<&str> {
    if tag.handle == CORE {
        Some(&tag.suffix)
    } else if tag.handle.is_empty() {
        tag.suffix.strip_prefix(CORE)
    } else {
        None
    }
}

/// How a tag is written, for messages.
fn written(tag: &Tag) -> String {
    match (tag.handle.as_str(), core_name(tag)) {
        (CORE, Some(name)) => format!("!!{name}"),
        ("", _) => format!("!<{}>", tag.suffix),
        ("!", _) => format!("!{}", tag.suffix),
        (handle, _) => format!("{handle}{}", tag.suffix),
    }
}

fn check_tag(tag: &Tag, use_: TagUse) -> Result<(), Problem> {
    let name = core_name(tag);
    let local = (tag.handle == "!").then_some(tag.suffix.as_str());
    let js = |n: &str| n == "js" || n.starts_with("js/") || n.starts_with("js:");
    if name.or(local).is_some_and(js) {
        return Err(Problem::JsTag);
    }
    match (name, use_) {
        (Some("str" | "int" | "float" | "bool" | "null"), TagUse::Scalar)
        | (Some("seq"), TagUse::Seq)
        | (Some("map"), TagUse::Map) => Ok(()),
        _ => Err(Problem::UnsupportedTag { tag: written(tag) }),
    }
}

/// Resolves a plain scalar as serde_yaml_ng did (YAML 1.2 core schema, plus `0x`/`0o`/`0b`).
fn resolve_plain(v: &str) -> Kind {
    match v {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        "true" | "True" | "TRUE" => return Kind::Bool(true),
        "false" | "False" | "FALSE" => return Kind::Bool(false),
        _ => {}
    }
    let first = v.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.')) {
        return Kind::Str(0, 0);
    }
    if let Some(i) = parse_int(v) {
        return i;
    }
    if !digits_but_not_number(v)
        && let Some(f) = parse_float(v)
    {
        return Kind::Float(f);
    }
    Kind::Str(0, 0)
}

fn digits_but_not_number(v: &str) -> bool {
    // Leading zeros followed by digits is a string in YAML 1.2.
    let v = v.strip_prefix(['-', '+']).unwrap_or(v);
    v.len() > 1 && v.starts_with('0') && v[1..].bytes().all(|b| b.is_ascii_digit())
}

fn parse_int(v: &str) -> Option<Kind> {
    let (negative, digits) = match v.as_bytes()[0] {
        b'-' => (true, &v[1..]),
        b'+' => (false, &v[1..]),
        _ => (false, v),
    };
    if digits.starts_with(['+', '-']) {
        return None;
    }
    let (radix, body) = if let Some(r) = digits.strip_prefix("0x") {
        (16, r)
    } else if let Some(r) = digits.strip_prefix("0o") {
        (8, r)
    } else if let Some(r) = digits.strip_prefix("0b") {
        (2, r)
    } else {
        if digits_but_not_number(v) {
            return None;
        }
        (10, digits)
    };
    if body.is_empty() || body.starts_with(['+', '-']) {
        return None;
    }
    let magnitude = u64::from_str_radix(body, radix).ok()?;
    if negative {
        if magnitude <= i64::MAX as u64 + 1 {
            Some(Kind::Int((magnitude as i64).wrapping_neg()))
        } else {
            None
        }
    } else if let Ok(i) = i64::try_from(magnitude) {
        Some(Kind::Int(i))
    } else {
        Some(Kind::UInt(magnitude))
    }
}

fn parse_float(v: &str) -> Option<f64> {
    let unsigned = match v.strip_prefix('+') {
        Some(u) if u.starts_with(['+', '-']) => return None,
        Some(u) => u,
        None => v,
    };
    match unsigned {
        ".inf" | ".Inf" | ".INF" => return Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Some(f64::NAN),
        _ => {}
    }
    unsigned.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// A scalar key as YAML compares it (no allocation).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum KeyId<'a> {
    Null,
    Bool(bool),
    Int(i128),
    Str(&'a str),
}

fn key_id(tree: &Tree, key: NodeId) -> Option<KeyId<'_>> {
    Some(match &tree.node(key).kind {
        Kind::Str(..) => KeyId::Str(tree.str(key).unwrap_or_default()),
        Kind::Int(i) => KeyId::Int(i128::from(*i)),
        Kind::UInt(u) => KeyId::Int(i128::from(*u)),
        Kind::Bool(b) => KeyId::Bool(*b),
        Kind::Null => KeyId::Null,
        _ => return None,
    })
}

/// The keys of a mapping that repeat an earlier key, in written order.
pub(crate) fn duplicate_keys(tree: &Tree, pairs: &[(NodeId, NodeId)]) -> Vec<NodeId> {
    let mut out = Vec::new();
    if pairs.len() <= 16 {
        // Entries have a handful of keys: pairwise comparison beats building a set.
        for (i, (k, _)) in pairs.iter().enumerate() {
            let Some(id) = key_id(tree, *k) else { continue };
            if pairs[..i]
                .iter()
                .any(|(earlier, _)| key_id(tree, *earlier).as_ref() == Some(&id))
            {
                out.push(*k);
            }
        }
        return out;
    }
    let mut seen = BTreeSet::new();
    for (k, _) in pairs {
        if let Some(id) = key_id(tree, *k)
            && !seen.insert(id)
        {
            out.push(*k);
        }
    }
    out
}

/// A key's text as serde sees it (scalars only): for duplicate-key checks and serde paths.
pub(crate) fn key_text(tree: &Tree, key: NodeId) -> Option<String> {
    match tree.node(key).kind {
        Kind::Str(..) => tree.str(key).map(str::to_owned),
        Kind::Int(i) => Some(i.to_string()),
        Kind::UInt(u) => Some(u.to_string()),
        Kind::Bool(b) => Some(b.to_string()),
        Kind::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

/// What kind of value a node is, for messages (`a string`, `a list`, …).
pub(crate) fn kind_of(k: &Kind) -> &'static str {
    match k {
        Kind::Null => "null",
        Kind::Bool(_) => "a boolean",
        Kind::Int(_) | Kind::UInt(_) | Kind::Float(_) => "a number",
        Kind::Str(..) => "a string",
        Kind::Seq(_) => "a list",
        Kind::Map(_) => "a mapping",
    }
}

/// A node as a message shows what was found: a scalar's value, else its kind.
pub(crate) fn short(tree: &Tree, id: NodeId) -> String {
    match &tree.node(id).kind {
        Kind::Str(..) => format!("\"{}\"", tree.str(id).unwrap_or_default()),
        Kind::Int(i) => i.to_string(),
        Kind::UInt(u) => u.to_string(),
        Kind::Float(f) => f.to_string(),
        Kind::Bool(b) => b.to_string(),
        other => kind_of(other).to_owned(),
    }
}

/// The first tab in `source` at or after `from` (1-based line and column, columns counted in
/// characters as the parser counts them).
fn first_tab_from(source: &str, from: Pos) -> Option<Pos> {
    for (n, line) in yaml_lines(source)
        .enumerate()
        .skip(from.line.saturating_sub(1))
    {
        let line_no = n + 1;
        let skip = if line_no == from.line {
            from.column - 1
        } else {
            0
        };
        if let Some(col) = line.chars().skip(skip).position(|c| c == '\t') {
            return Some(Pos {
                line: line_no,
                column: skip + col + 1,
            });
        }
    }
    None
}

/// The lines of `source` as YAML (and every position here) counts them: ended by `\n`, `\r\n`
/// or a lone `\r` (`str::lines` misses the last, and a CR-only file would be one line).
fn yaml_lines(source: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(source);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.find(['\n', '\r']) {
            None => {
                rest = None;
                (!text.is_empty()).then_some(text)
            }
            Some(end) => {
                let next = if text[end..].starts_with("\r\n") {
                    end + 2
                } else {
                    end + 1
                };
                rest = Some(&text[next..]);
                Some(&text[..end])
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(src: &str) -> Kind {
        let t = Tree::parse(src).unwrap();
        t.node(t.root.unwrap()).kind.clone()
    }

    #[test]
    fn plain_scalars_resolve_like_serde_yaml_ng() {
        assert_eq!(kind("~"), Kind::Null);
        assert_eq!(kind("True"), Kind::Bool(true));
        assert_eq!(kind("12"), Kind::Int(12));
        assert_eq!(kind("-0x10"), Kind::Int(-16));
        assert_eq!(kind("0o17"), Kind::Int(15));
        assert_eq!(kind("18446744073709551615"), Kind::UInt(u64::MAX));
        assert_eq!(kind("1.5"), Kind::Float(1.5));
        assert!(matches!(kind("012"), Kind::Str(..)));
        assert!(matches!(kind("inf"), Kind::Str(..)));
        assert!(matches!(kind("'12'"), Kind::Str(..)));
        assert!(matches!(kind("!!str 12"), Kind::Str(..)));
        assert_eq!(kind("!!float 3"), Kind::Float(3.0));
    }

    #[test]
    fn deep_nesting_is_refused_at_the_limit_in_every_style() {
        for src in [
            "[".repeat(100_000),
            "{a: ".repeat(100_000),
            "- ".repeat(100_000),
            "a:\n".to_owned() + &" - ".repeat(50_000),
        ] {
            let err = Tree::parse(&src).unwrap_err();
            assert_eq!(
                err.problem,
                Problem::TooDeep { limit: MAX_DEPTH },
                "{err:?}"
            );
        }
    }

    /// Regression (issue 24, low 17): a tab was reported at the scalar before it (2:9).
    #[test]
    fn a_tab_is_reported_where_it_is() {
        let err = Tree::parse("- id: a\n  name: tool-todo\n\t- bad tab\n").unwrap_err();
        assert_eq!(err.pos, Pos { line: 3, column: 1 });
        assert_eq!(
            err.problem,
            Problem::Syntax("a tab character; YAML indents with spaces, not tabs".into())
        );
    }

    #[test]
    fn a_recursive_alias_is_refused() {
        let err = Tree::parse("&a [*a]").unwrap_err();
        assert_eq!(err.problem, Problem::RecursiveAlias);
    }

    #[test]
    fn nested_aliases_count_their_expanded_size() {
        let mut src = String::from("a: &a [\"xxxxxxxxxxxxxxxx\"]\n");
        let mut prev = 'a';
        for c in 'b'..='k' {
            src.push_str(&format!(
                "{c}: &{c} [{}]\n",
                vec![format!("*{prev}"); 10].join(", ")
            ));
            prev = c;
        }
        let err = Tree::parse(&src).unwrap_err();
        assert!(
            matches!(err.problem, Problem::AliasExpansion { .. }),
            "{err:?}"
        );
    }
}
