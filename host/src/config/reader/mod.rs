//! The entry reader: a file's marked tree read into [`RawEntry`]s, every problem collected.
//!
//! One [`Reader`] reads one file; [`entry`] reads its entries, each in named steps (its keys
//! sorted into fields, its identity, its checks, its settings, then its group children or its
//! plugin config). An include entry is handed to [`super::include`], which calls back through
//! [`Reading`] for the included file's entries.

mod entry;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::include::{Entered, Expand, IncludeProblem, IncludedFiles, Reading, Session};
use super::json::to_json;
use super::model::{RawConfig, RawEntry, Sources};
use super::position::{SourceMap, Text};
use super::yaml::{NodeId, Tree, short};
use crate::diagnostic::{ConfigErrors, Diagnostic, Pos, Problem};

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
