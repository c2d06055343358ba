//! The include entry: its `{path, patches}` config read, its file entered and read as a group's
//! entries, its patches applied.

use std::collections::BTreeSet;

use super::files::Entered;
use super::patch::{self, Expand, PatchVerb};
use super::problem::IncludeProblem;
use crate::config::model::RawEntry;
use crate::config::position::Text;
use crate::config::yaml::{Kind, NodeId, duplicate_keys, key_text, short};
use crate::diagnostic::{Diagnostic, Pos, Problem};

/// What an include needs from the reader of the including file, besides what its patches need
/// ([`Expand`]): the reader enters the included file through its parse's session and reads its
/// entries. (The reader implements this; this module never names the reader.)
pub(in crate::config) trait Reading: Expand {
    /// Enters the file `written` names, from the include entry at `at` (see
    /// [`Session::enter`](super::files::Session::enter)).
    fn enter(&mut self, at: Pos, written: &str) -> Result<Entered, IncludeProblem>;
    /// Leaves the file entered last.
    fn leave(&mut self);
    /// Reads the entries of an entered file, with the ids in `disable` disabled.
    fn read_file(
        &mut self,
        file: &Entered,
        prefix: &str,
        disabled: bool,
        disable: &BTreeSet<String>,
    ) -> (Vec<RawEntry>, Vec<Diagnostic>);
    /// Adds the diagnostics of an included file.
    fn extend(&mut self, errors: Vec<Diagnostic>);
    /// The ids that patches of the includes around the including file disable.
    fn disabled_ids(&self) -> &BTreeSet<String>;
}

/// Reads an include entry (`id`, at `at`, whose `config` is `config`, in the file whose
/// text is `text`): the included file's entries with the patches applied, and the file's
/// name.
pub(in crate::config) fn read(
    r: &mut impl Reading,
    text: Text<'_>,
    config: Option<NodeId>,
    id: &str,
    prefix: &str,
    at: Pos,
    disabled: bool,
) -> (Vec<RawEntry>, Option<String>) {
    let tree = text.tree;
    let problem = |p: IncludeProblem| Problem::Include(p);
    let Some(config) = config.filter(|c| tree.node(*c).kind != Kind::Null) else {
        r.report(at, id, problem(IncludeProblem::MissingPath));
        return (Vec::new(), None);
    };
    let Kind::Map(pairs) = &tree.node(config).kind else {
        let found = short(tree, config);
        let pos = tree.node(config).pos;
        r.report(pos, id, problem(IncludeProblem::NotAMapping { found }));
        return (Vec::new(), None);
    };
    if pairs.len() > 1 {
        for k in duplicate_keys(tree, pairs) {
            let key = key_text(tree, k).unwrap_or_default();
            r.report(tree.node(k).pos, id, Problem::DuplicateKey { key });
        }
    }
    let (mut path, mut patches) = (None, None);
    for &(k, v) in pairs {
        match tree.str(k) {
            Some("path") => _ = path.get_or_insert(v),
            Some("patches") => _ = patches.get_or_insert(v),
            _ => {
                let key = tree.str(k).map_or_else(|| short(tree, k), str::to_owned);
                let pos = tree.node(k).pos;
                r.report(pos, id, problem(IncludeProblem::UnknownKey { key }));
            }
        }
    }
    let mut problems = Vec::new();
    let patches = patch::read(text, patches, &mut problems);
    for (pos, p) in problems {
        r.report(pos, id, p);
    }
    let Some(path) = path else {
        let pos = tree.node(config).pos;
        r.report(pos, id, problem(IncludeProblem::MissingPath));
        return (Vec::new(), None);
    };
    let path_pos = tree.node(path).pos;
    let written = match tree.str(path) {
        Some(w) if !w.is_empty() => w,
        _ => {
            let problem = Problem::BadField {
                key: "path",
                expected: "a file path relative to this file",
                found: short(tree, path),
            };
            r.report(path_pos, id, problem);
            return (Vec::new(), None);
        }
    };
    if written.contains("${{") {
        r.report(path_pos, id, problem(IncludeProblem::InterpolatedPath));
        return (Vec::new(), None);
    }
    let entered = match r.enter(at, written) {
        Ok(entered) => entered,
        Err(p) => {
            r.report(path_pos, id, problem(p));
            return (Vec::new(), None);
        }
    };
    let mut disable = r.disabled_ids().clone();
    for patch in &patches {
        if let PatchVerb::Disable = patch.verb {
            disable.insert(patch.target.clone());
        }
    }
    let (mut children, errors) = r.read_file(&entered, prefix, disabled, &disable);
    r.leave();
    // A file none of whose entries could be read (a syntax error, say) has its own errors;
    // its patches would only add "no such entry" for each.
    let unreadable = children.is_empty() && !errors.is_empty();
    r.extend(errors);
    if !unreadable {
        patch::apply(
            r,
            patches,
            &mut children,
            id,
            prefix,
            disabled,
            &entered.shown,
        );
    }
    (children, Some(entered.shown))
}
