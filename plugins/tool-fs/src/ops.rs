//! The tools as plain functions: arguments in, JSON result or a typed error out.
//!
//! Results and arguments use `snake_case` field names, the model-facing convention of every
//! workspace tool.

use cordis_workspace::{Workspace, WorkspaceError};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::FsConfig;

/// A file tool failed; the message is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The arguments do not match the schema.
    #[error("invalid {tool} arguments: {source}")]
    Args {
        /// The tool.
        tool: &'static str,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// A workspace refusal or I/O error.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The file is not UTF-8 text.
    #[error("\"{path}\" is a binary file ({size} bytes); {tool} works on text only")]
    Binary {
        /// The path as given.
        path: String,
        /// Its size.
        size: usize,
        /// The tool.
        tool: &'static str,
    },
    /// A line range outside the file or reversed.
    #[error("invalid line range for \"{path}\" ({total_lines} lines): {problem}")]
    Range {
        /// The path as given.
        path: String,
        /// Lines in the file.
        total_lines: usize,
        /// What is wrong.
        problem: String,
    },
    /// `old_string` does not occur.
    #[error(
        "old_string was not found in \"{path}\"; read the file and copy the text exactly, including whitespace and indentation"
    )]
    NoMatch {
        /// The path as given.
        path: String,
    },
    /// `old_string` occurs more than once and `replace_all` is off.
    #[error(
        "old_string matches {count} times in \"{path}\" (at lines {}); include more surrounding lines to make it unique, or set replace_all to replace every occurrence",
        join_lines(lines, *count)
    )]
    Ambiguous {
        /// The path as given.
        path: String,
        /// How many matches.
        count: usize,
        /// The 1-based lines of the first matches (at most 20).
        lines: Vec<usize>,
    },
    /// An edit that cannot do anything.
    #[error("{0}")]
    UselessEdit(&'static str),
    /// The file changed between the approval (which showed its diff) and the edit or write.
    #[error(
        "\"{path}\" {change} after the {action} was shown for approval; nothing was written: read the file again and retry"
    )]
    ChangedSinceShown {
        /// The file.
        path: String,
        /// `edit` or `write`.
        action: &'static str,
        /// What happened to it: `changed`, `was created` or `was deleted`.
        change: &'static str,
    },
    /// A write over a file whose plan (what the approval showed it replacing) is gone: pushed
    /// out by newer questions, or its arguments rewritten after it was made.
    #[error(
        "\"{path}\" exists, and what the write would replace is no longer held as shown for approval; nothing was written: retry the write"
    )]
    ShownGone {
        /// The path as given.
        path: String,
    },
    /// A write over a file too large to be shown (or compared) before it is replaced.
    #[error(
        "\"{path}\" is {size} bytes, over the limit of {limit} (`maxFileBytes`): write_file cannot show what it would replace; nothing was written"
    )]
    ReplacesTooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The edited file would exceed `max_file_bytes` (checked before it is built).
    #[error(
        "replacing {count} occurrence(s) in \"{path}\" would make it {size} bytes, over the limit of {limit} (`maxFileBytes`); replace fewer at a time or write the file in parts"
    )]
    EditTooLarge {
        /// The path as given.
        path: String,
        /// How many matches.
        count: usize,
        /// The size the edit would produce.
        size: u128,
        /// The limit.
        limit: u64,
    },
    /// The front end the file went through (an editor) could not read or write it.
    #[error("the editor could not {action} \"{path}\": {message}")]
    Route {
        /// `read` or `write`.
        action: &'static str,
        /// The path as given.
        path: String,
        /// What the editor said.
        message: String,
    },
    /// What the editor holds for a file is larger than the limit.
    #[error(
        "the editor's copy of \"{path}\" is {size} bytes, over the limit of {limit} (`maxFileBytes`)"
    )]
    RouteTooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: u64,
    },
    /// The blocking task of a file operation failed (it panicked).
    #[error("file tool task failed: {0}")]
    Task(String),
    /// A bad glob.
    #[error("invalid glob {pattern:?}: {message}")]
    Glob {
        /// The pattern.
        pattern: String,
        /// The parser's message.
        message: String,
    },
}

/// `lines` joined, with `…` when there were more matches (`count`) than lines listed.
fn join_lines(lines: &[usize], count: usize) -> String {
    let mut text = lines
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if count > lines.len() {
        text.push_str(", …");
    }
    text
}

fn args<T: serde::de::DeserializeOwned>(tool: &'static str, value: Value) -> Result<T, FsError> {
    serde_json::from_value(value).map_err(|source| FsError::Args { tool, source })
}

pub(crate) fn text(tool: &'static str, path: &str, bytes: Vec<u8>) -> Result<String, FsError> {
    // A NUL byte marks binary even when it happens to be valid UTF-8.
    if bytes.contains(&0) {
        return Err(FsError::Binary {
            path: path.to_owned(),
            size: bytes.len(),
            tool,
        });
    }
    String::from_utf8(bytes).map_err(|e| FsError::Binary {
        path: path.to_owned(),
        size: e.as_bytes().len(),
        tool,
    })
}

/// `read_file` arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    path: String,
    start_line: Option<usize>,
    end_line: Option<usize>,
}

/// `read_file`: numbered lines of a text file, optionally a 1-based inclusive range, capped.
///
/// # Errors
/// Bad arguments, escapes, binary files, files over `max_file_bytes`, bad ranges.
pub fn read_file(ws: &Workspace, config: &FsConfig, arguments: Value) -> Result<Value, FsError> {
    let (a, path) = read_request(ws, arguments)?;
    let bytes = ws.read_limited(&path, config.max_file_bytes)?;
    let content = text(crate::READ_FILE, &a.path, bytes)?;
    read_file_of(config, &a, &path, &content)
}

/// A `read_file` call's arguments and the path they name (resolved, not opened).
///
/// # Errors
/// Bad arguments, an escaping path.
pub(crate) fn read_request(
    ws: &Workspace,
    arguments: Value,
) -> Result<(ReadArgs, cordis_workspace::WorkspacePath), FsError> {
    let a: ReadArgs = args(crate::READ_FILE, arguments)?;
    let path = ws.resolve(&a.path)?;
    Ok((a, path))
}

/// A `read_file` result of `content`, the text of `path`.
///
/// # Errors
/// Bad ranges.
pub(crate) fn read_file_of(
    config: &FsConfig,
    a: &ReadArgs,
    path: &cordis_workspace::WorkspacePath,
    content: &str,
) -> Result<Value, FsError> {
    let size = content.len();
    let lines: Vec<&str> = content.split_inclusive('\n').collect();
    let total = lines.len();
    let range_err = |problem: String| FsError::Range {
        path: a.path.clone(),
        total_lines: total,
        problem,
    };
    let start = a.start_line.unwrap_or(1);
    if start == 0 {
        return Err(range_err("start_line is 1-based".into()));
    }
    if start > total.max(1) {
        return Err(range_err(format!("start_line {start} is past the end")));
    }
    let end = a.end_line.unwrap_or(total).min(total);
    if a.end_line.is_some_and(|e| e < start) {
        return Err(range_err(format!(
            "end_line {} is before start_line {start}",
            a.end_line.unwrap_or_default()
        )));
    }
    let mut out = String::new();
    let mut last = start.saturating_sub(1);
    let mut truncated = false;
    for (i, line) in lines.iter().enumerate().take(end).skip(start - 1) {
        let line = line.trim_end_matches(['\n', '\r']);
        let numbered = match line.char_indices().nth(config.max_line_chars) {
            // A minified file's one huge line must not make every read come back empty.
            Some((cut, _)) => format!(
                "{:>6}\t{} [… line cut at {} of {} characters]",
                i + 1,
                &line[..cut],
                config.max_line_chars,
                line.chars().count()
            ),
            None => format!("{:>6}\t{line}", i + 1),
        };
        let first = last + 1 == start;
        if last + 1 - start >= config.max_read_lines
            || (!first && out.len() + numbered.len() + 1 > config.max_read_bytes)
        {
            truncated = true;
            break;
        }
        out.push_str(&numbered);
        out.push('\n');
        last = i + 1;
    }
    let mut result = json!({
        "path": path.to_string(),
        "size": size,
        "total_lines": total,
        "start_line": start,
        "end_line": last,
        "content": out,
    });
    if truncated {
        result["truncated"] = json!(true);
        result["note"] = json!(format!(
            "truncated at line {last} of {total} (limits: {} lines, {} bytes per read); use start_line={} to read on, or a narrower range",
            config.max_read_lines,
            config.max_read_bytes,
            last + 1
        ));
    }
    Ok(result)
}

/// `write_file` arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    pub(crate) path: String,
    pub(crate) content: String,
}

/// A `write_file` call's arguments and the path they name (resolved, not opened).
///
/// # Errors
/// Bad arguments, an escaping path.
pub(crate) fn write_request(
    ws: &Workspace,
    arguments: Value,
) -> Result<(WriteArgs, cordis_workspace::WorkspacePath), FsError> {
    let a: WriteArgs = args(crate::WRITE_FILE, arguments)?;
    let path = ws.resolve(&a.path)?;
    Ok((a, path))
}

/// `write_file`: creates or replaces a file atomically, creating parent directories.
///
/// # Errors
/// Bad arguments, escapes, a directory or symlink at the target, I/O failures.
pub fn write_file(ws: &Workspace, arguments: Value) -> Result<Value, FsError> {
    let a: WriteArgs = args(crate::WRITE_FILE, arguments)?;
    let path = ws.resolve(&a.path)?;
    let outcome = ws.write_atomic(&path, a.content.as_bytes())?;
    Ok(json!({
        "path": path.to_string(),
        "bytes": outcome.bytes,
        "created": outcome.created,
    }))
}

/// What a file held when a write was worked out (and must still hold when it applies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// No file at the path.
    Absent,
    /// A text file, as read (through the editor when it has the file).
    Text(String),
    /// A file that is not text: its bytes.
    Bytes(Vec<u8>),
}

impl Before {
    /// Bytes held.
    pub fn len(&self) -> usize {
        match self {
            Before::Absent => 0,
            Before::Text(t) => t.len(),
            Before::Bytes(b) => b.len(),
        }
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How `now` differs from `self`, in words (`None`: it does not).
    pub fn change_to(&self, now: &Before) -> Option<&'static str> {
        match (self, now) {
            _ if self == now => None,
            (Before::Absent, _) => Some("was created"),
            (_, Before::Absent) => Some("was deleted"),
            _ => Some("changed"),
        }
    }
}

/// `bytes` as text when they are text (as [`text`] decides), else as bytes.
pub(crate) fn before_of(bytes: Vec<u8>) -> Before {
    if bytes.contains(&0) {
        return Before::Bytes(bytes);
    }
    match String::from_utf8(bytes) {
        Ok(t) => Before::Text(t),
        Err(e) => Before::Bytes(e.into_bytes()),
    }
}

/// A `write_file` call worked out without writing: the file as it is and as it would be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePlan {
    /// The file.
    pub path: cordis_workspace::WorkspacePath,
    /// What it holds now.
    pub before: Before,
    /// Its content after the write.
    pub after: String,
}

/// What the file at `path` holds now: absent, text or bytes, within `max_file_bytes`.
///
/// # Errors
/// Escapes, something other than a regular file, a file over the limit
/// ([`FsError::ReplacesTooLarge`]), I/O failures.
pub(crate) fn read_before(
    ws: &Workspace,
    config: &FsConfig,
    path: &cordis_workspace::WorkspacePath,
) -> Result<Before, FsError> {
    match ws.read_limited(path, config.max_file_bytes) {
        Ok(bytes) => Ok(before_of(bytes)),
        Err(WorkspaceError::NotFound { .. }) => Ok(Before::Absent),
        Err(WorkspaceError::TooLarge { path, size, limit }) => {
            Err(FsError::ReplacesTooLarge { path, size, limit })
        }
        Err(e) => Err(e.into()),
    }
}

/// `edit_file` arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// An `edit_file` call worked out without writing: the file as it is and as it would be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPlan {
    /// The file.
    pub path: cordis_workspace::WorkspacePath,
    /// Its content now.
    pub before: String,
    /// Its content after the edit.
    pub after: String,
    /// How many occurrences are replaced.
    pub replacements: usize,
    /// The lines of the first matches (at most 20).
    pub lines: Vec<usize>,
}

/// Works out an `edit_file` call (every check it makes, nothing written): what an approval
/// shows, so an edit that cannot apply fails before anyone is asked.
///
/// # Errors
/// Bad arguments, escapes, binary files, zero or (without `replace_all`) several matches, a
/// result over the size limit.
pub fn plan_edit(ws: &Workspace, config: &FsConfig, arguments: Value) -> Result<EditPlan, FsError> {
    let (a, path) = edit_request(ws, arguments)?;
    let bytes = ws.read_limited(&path, config.max_file_bytes)?;
    let content = text(crate::EDIT_FILE, &a.path, bytes)?;
    plan_edit_of(config, a, path, content)
}

/// An `edit_file` call's arguments (checked for edits that cannot do anything) and the path
/// they name (resolved, not opened).
///
/// # Errors
/// Bad or useless arguments, an escaping path.
pub(crate) fn edit_request(
    ws: &Workspace,
    arguments: Value,
) -> Result<(EditArgs, cordis_workspace::WorkspacePath), FsError> {
    let a: EditArgs = args(crate::EDIT_FILE, arguments)?;
    if a.old_string.is_empty() {
        return Err(FsError::UselessEdit(
            "old_string is empty; to create or overwrite a file use write_file",
        ));
    }
    if a.old_string == a.new_string {
        return Err(FsError::UselessEdit(
            "old_string and new_string are identical; nothing to change",
        ));
    }
    let path = ws.resolve(&a.path)?;
    Ok((a, path))
}

/// Works out the edit `a` of `content`, the text of `path`.
///
/// # Errors
/// Zero or (without `replace_all`) several matches, a result over the size limit.
pub(crate) fn plan_edit_of(
    config: &FsConfig,
    a: EditArgs,
    path: cordis_workspace::WorkspacePath,
    content: String,
) -> Result<EditPlan, FsError> {
    let offsets: Vec<usize> = content
        .match_indices(&a.old_string)
        .map(|(i, _)| i)
        .collect();
    // The lines of the first matches, counted in one pass (a short old_string can match a
    // million times in a large file; neither the count nor the error may grow with that).
    let mut lines: Vec<usize> = Vec::with_capacity(offsets.len().min(MAX_LISTED_LINES));
    let (mut line, mut counted) = (1, 0);
    for &i in offsets.iter().take(MAX_LISTED_LINES) {
        line += content.as_bytes()[counted..i]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        counted = i;
        lines.push(line);
    }
    match offsets.len() {
        0 => return Err(FsError::NoMatch { path: a.path }),
        1 => {}
        count if !a.replace_all => {
            return Err(FsError::Ambiguous {
                path: a.path,
                count,
                lines,
            });
        }
        _ => {}
    }
    // Sized before it is built: a short old_string matching a million times with a long
    // new_string would otherwise allocate gigabytes.
    let size = content.len() as u128 - (offsets.len() * a.old_string.len()) as u128
        + (offsets.len() as u128) * (a.new_string.len() as u128);
    if size > u128::from(config.max_file_bytes) {
        return Err(FsError::EditTooLarge {
            path: a.path,
            count: offsets.len(),
            size,
            limit: config.max_file_bytes,
        });
    }
    let after = content.replace(&a.old_string, &a.new_string);
    Ok(EditPlan {
        path,
        before: content,
        after,
        replacements: offsets.len(),
        lines,
    })
}

/// `edit_file`: replaces `old_string` by `new_string`; it must occur exactly once unless
/// `replace_all`.
///
/// # Errors
/// As [`plan_edit`], and a failed write.
pub fn edit_file(ws: &Workspace, config: &FsConfig, arguments: Value) -> Result<Value, FsError> {
    apply_edit(ws, &plan_edit(ws, config, arguments)?)
}

/// The text of the file at `path` now, read as an edit reads it.
///
/// # Errors
/// Escapes, an unreadable, binary or too large file.
pub fn read_text(
    ws: &Workspace,
    config: &FsConfig,
    path: &cordis_workspace::WorkspacePath,
) -> Result<String, FsError> {
    let bytes = ws.read_limited(path, config.max_file_bytes)?;
    text(crate::EDIT_FILE, path.given(), bytes)
}

/// Writes a planned edit.
///
/// # Errors
/// The write fails.
pub fn apply_edit(ws: &Workspace, plan: &EditPlan) -> Result<Value, FsError> {
    ws.write_atomic(&plan.path, plan.after.as_bytes())?;
    Ok(json!({
        "path": plan.path.to_string(),
        "replacements": plan.replacements,
        "lines": plan.lines,
    }))
}

/// How many match lines an edit reports (the count is always exact).
const MAX_LISTED_LINES: usize = 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    path: Option<String>,
}

/// `list_files`: files under `path` (default the root) matching a glob, honouring `.gitignore`.
///
/// A pattern without `/` matches file names (`*.rs`); one with `/` matches the path relative to
/// the root (`src/**/*.rs`).
///
/// # Errors
/// Bad arguments or glob, an escaping or missing directory.
pub fn list_files(ws: &Workspace, config: &FsConfig, arguments: Value) -> Result<Value, FsError> {
    let a: ListArgs = args(crate::LIST_FILES, arguments)?;
    let matcher = match &a.pattern {
        None => None,
        Some(p) => Some(
            globset::GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map_err(|e| FsError::Glob {
                    pattern: p.clone(),
                    message: e.kind().to_string(),
                })?
                .compile_matcher(),
        ),
    };
    let by_name = a.pattern.as_deref().is_some_and(|p| !p.contains('/'));
    let dir = ws.resolve(a.path.as_deref().unwrap_or("."))?;
    let listing = ws.files(&dir, config.max_list_entries, |rel| match &matcher {
        None => true,
        Some(m) if by_name => m.is_match(rel.rsplit('/').next().unwrap_or(rel)),
        Some(m) => m.is_match(rel),
    })?;
    let files: Vec<String> = listing.files.iter().map(ToString::to_string).collect();
    let mut result = json!({ "files": files, "count": files.len() });
    if listing.truncated {
        result["truncated"] = json!(true);
        result["note"] = json!(format!(
            "only the first {} paths are listed; narrow the pattern or path",
            config.max_list_entries
        ));
    }
    Ok(result)
}

#[cfg(test)]
mod tests;
