//! Editing a `cordis.yml` as text, so its comments and layout survive: append an entry in the
//! file's own indentation, set an entry's `sha256`, cut an entry out.
//!
//! Positions come from the host's parse (an entry's dash, a value's line and column), never from
//! guessing at YAML: the text around them is only split into lines. Every edit is followed by a
//! parse of the result that must show exactly the intended change (see `super::verify`), so a
//! layout this module does not foresee is refused instead of written.
//!
//! # Determinism
//! Pure functions of the text and the positions: the same file gives the same bytes.

use cordis_host::Pos;

/// Why a file's text cannot be edited here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The top level is not a block list (`- id: …` lines): a flow list, or no list at all.
    #[error(
        "its entries are not a block list (`- id: …` lines), so cordis cannot add to it as text"
    )]
    NotBlockList,
    /// The entry is a flow mapping (`- {id: a, name: b}`): its keys are not lines to edit.
    #[error(
        "entry \"{0}\" is written as a flow mapping (`- {{…}}`), so cordis cannot edit it as text"
    )]
    FlowEntry(String),
    /// A position the parse gave is not in the text (the file changed under us).
    #[error("the file's text does not match its parse at line {0}")]
    Position(usize),
}

/// How a file writes its top-level entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Spaces before each top-level dash.
    pub dash: usize,
    /// Spaces before an entry's keys on the lines after its dash line.
    pub keys: usize,
    /// Whether entries are separated by a blank line.
    pub blank_between: bool,
    /// The line ending (`\n` or `\r\n`).
    pub newline: &'static str,
}

/// The lines of `text`, each with its terminator.
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// Spaces at the start of `line`.
fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The layout of `text`, whose top-level entries start at `dashes` (their positions, file
/// order). A file with no entry gets the plain layout (no indent, keys at 2).
///
/// # Errors
/// [`EditError::NotBlockList`] when the first content line is not a dash.
pub fn layout(text: &str, dashes: &[Pos]) -> Result<Layout, EditError> {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let all = lines(text);
    let first = all.iter().find(|l| {
        let t = l.trim();
        !(t.is_empty() || t.starts_with('#') || t.starts_with('%') || t == "---")
    });
    let Some(first) = first else {
        return Ok(Layout {
            dash: 0,
            keys: 2,
            blank_between: false,
            newline,
        });
    };
    let trimmed = first.trim_start_matches(' ');
    if !(trimmed.starts_with("- ") || trimmed.trim_end() == "-") {
        return Err(EditError::NotBlockList);
    }
    let Some(last) = dashes.last() else {
        return Err(EditError::NotBlockList);
    };
    let line = *all
        .get(last.line - 1)
        .ok_or(EditError::Position(last.line))?;
    let dash = last.column - 1;
    if line.get(dash..dash + 1) != Some("-") {
        return Err(EditError::Position(last.line));
    }
    let after = &line[dash + 1..];
    let keys = if after.trim().is_empty() {
        dash + 2
    } else {
        dash + 1 + indent(after)
    };
    // The style of the last entry: a blank line before its dash (or before the comment lines
    // right above it).
    let above = all[..last.line - 1]
        .iter()
        .rev()
        .find(|l| !l.trim_start().starts_with('#'));
    let blank_between = dashes.len() > 1 && above.is_some_and(|l| l.trim().is_empty());
    Ok(Layout {
        dash,
        keys,
        blank_between,
        newline,
    })
}

/// `text` with `entry` (`(key, value)` pairs, values already YAML scalars) appended as a
/// top-level entry in `layout`.
pub fn append(text: &str, layout: &Layout, entry: &[(&str, &str)]) -> String {
    let nl = layout.newline;
    let mut out = text.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push_str(nl);
    }
    if layout.blank_between {
        out.push_str(nl);
    }
    for (i, (key, value)) in entry.iter().enumerate() {
        if i == 0 {
            out.push_str(&" ".repeat(layout.dash));
            out.push('-');
            out.push_str(&" ".repeat(layout.keys.saturating_sub(layout.dash + 1).max(1)));
        } else {
            out.push_str(&" ".repeat(layout.keys));
        }
        out.push_str(key);
        out.push_str(": ");
        out.push_str(value);
        out.push_str(nl);
    }
    out
}

/// The lines (0-based, inclusive) an entry whose dash is at `dash` spans: from its dash line to
/// its last line of content (a line indented past the dash), comments and blank lines after
/// that left out.
fn span(all: &[&str], dash: Pos) -> Result<(usize, usize), EditError> {
    let start = dash
        .line
        .checked_sub(1)
        .ok_or(EditError::Position(dash.line))?;
    let line = all.get(start).ok_or(EditError::Position(dash.line))?;
    let col = dash.column - 1;
    if line.get(col..col + 1) != Some("-") {
        return Err(EditError::Position(dash.line));
    }
    let mut end = start;
    for (i, l) in all.iter().enumerate().skip(start + 1) {
        if l.trim().is_empty() {
            continue;
        }
        if indent(l) <= col {
            if l.trim_start().starts_with('#') {
                continue;
            }
            break;
        }
        end = i;
    }
    Ok((start, end))
}

/// `text` without the entry whose dash is at `dash`: its lines, and the blank line before it
/// when a blank line (or the end of the file) follows it, so separators do not double.
///
/// # Errors
/// [`EditError::Position`] when `dash` is not a dash of `text`.
pub fn remove(text: &str, dash: Pos) -> Result<String, EditError> {
    let all = lines(text);
    let (mut start, end) = span(&all, dash)?;
    let follows_blank = all.get(end + 1).is_none_or(|l| l.trim().is_empty());
    if start > 0 && all[start - 1].trim().is_empty() && follows_blank {
        start -= 1;
    }
    let mut out = String::with_capacity(text.len());
    for (i, l) in all.iter().enumerate() {
        if i < start || i > end {
            out.push_str(l);
        }
    }
    Ok(out)
}

/// `text` with the `sha256` of the entry `id` (dash at `dash`) set to `hex`: its value replaced
/// where `value` says it is written, else a `sha256:` line added after the `name` line (at
/// `name`), indented as the entry's keys are.
///
/// # Errors
/// [`EditError::FlowEntry`] for an entry written as a flow mapping; [`EditError::Position`]
/// when a position is not in `text`.
pub fn set_pin(
    text: &str,
    id: &str,
    dash: Pos,
    name: Pos,
    value: Option<Pos>,
    hex: &str,
) -> Result<String, EditError> {
    let all = lines(text);
    let (start, _) = span(&all, dash)?;
    let col = dash.column - 1;
    let after = &all[start][col + 1..];
    if after.trim_start().starts_with('{') {
        return Err(EditError::FlowEntry(id.to_owned()));
    }
    let mut out: Vec<String> = all.iter().map(|l| (*l).to_owned()).collect();
    if let Some(value) = value {
        let at = value.line - 1;
        let line = all.get(at).ok_or(EditError::Position(value.line))?;
        let from = byte_at(line, value.column).ok_or(EditError::Position(value.line))?;
        let rest = &line[from..];
        let len = scalar_len(rest);
        out[at] = format!("{}{hex}{}", &line[..from], &rest[len..]);
        return Ok(out.concat());
    }
    let at = name.line - 1;
    let line = all.get(at).ok_or(EditError::Position(name.line))?;
    let keys = if at == start {
        col + 1 + indent(after)
    } else {
        indent(line)
    };
    let nl = if line.ends_with("\r\n") { "\r\n" } else { "\n" };
    if !line.ends_with('\n') {
        out[at].push_str(nl);
    }
    out.insert(at + 1, format!("{}sha256: {hex}{nl}", " ".repeat(keys)));
    Ok(out.concat())
}

/// The byte offset of 1-based character column `column` in `line`.
fn byte_at(line: &str, column: usize) -> Option<usize> {
    line.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(line.len()))
        .nth(column - 1)
}

/// The length of the scalar `rest` starts with: a quoted one to its closing quote, a plain one
/// to the first space, `#`, `,`, `}` or the line's end.
fn scalar_len(rest: &str) -> usize {
    let mut chars = rest.char_indices();
    match chars.next() {
        Some((_, q @ ('"' | '\''))) => chars
            .find(|&(_, c)| c == q)
            .map_or(rest.trim_end().len(), |(i, _)| i + 1),
        _ => rest
            .find(|c: char| c.is_whitespace() || matches!(c, '#' | ',' | '}'))
            .unwrap_or(rest.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: usize, column: usize) -> Pos {
        Pos { line, column }
    }

    #[test]
    fn an_entry_is_appended_in_the_files_indentation_and_separation() {
        let text = "# top\n  - id: a\n    name: x\n\n  # about b\n  - id: b\n    name: y\n";
        let layout = layout(text, &[pos(2, 3), pos(6, 3)]).unwrap();
        assert_eq!(
            layout,
            Layout {
                dash: 2,
                keys: 4,
                blank_between: true,
                newline: "\n"
            }
        );
        let out = append(text, &layout, &[("id", "c"), ("name", "./p/c.wasm")]);
        assert_eq!(
            out,
            "# top\n  - id: a\n    name: x\n\n  # about b\n  - id: b\n    name: y\n\n  - id: c\n    name: ./p/c.wasm\n"
        );
    }

    #[test]
    fn a_flow_list_is_refused() {
        assert_eq!(
            layout("[{id: a, name: b}]\n", &[pos(1, 2)]),
            Err(EditError::NotBlockList)
        );
    }

    #[test]
    fn removing_an_appended_entry_gives_back_the_original_bytes() {
        let text = "- id: a\n  name: x\n# trailing comment\n\n- id: b\n  name: y\n";
        let layout = layout(text, &[pos(1, 1), pos(5, 1)]).unwrap();
        let out = append(text, &layout, &[("id", "c"), ("name", "./c.wasm")]);
        assert_eq!(remove(&out, pos(8, 1)).unwrap(), text);
    }

    #[test]
    fn removing_a_middle_entry_keeps_its_neighbours_and_their_comments() {
        let text = "- id: a\n  name: x\n\n# about b\n- id: b\n  config:\n    k: 1\n  # inner\n\n- id: c\n  name: z\n";
        assert_eq!(
            remove(text, pos(5, 1)).unwrap(),
            "- id: a\n  name: x\n\n# about b\n\n- id: c\n  name: z\n"
        );
    }

    #[test]
    fn a_pin_is_replaced_in_place_or_added_after_the_name() {
        let text = "- id: a\n  name: ./a.wasm\n  sha256: 'old'  # pinned\n- id: b\n  name: ./b.wasm\n  config: {}\n";
        assert_eq!(
            set_pin(text, "a", pos(1, 1), pos(2, 9), Some(pos(3, 11)), "new").unwrap(),
            "- id: a\n  name: ./a.wasm\n  sha256: new  # pinned\n- id: b\n  name: ./b.wasm\n  config: {}\n"
        );
        assert_eq!(
            set_pin(text, "b", pos(4, 1), pos(5, 9), None, "new").unwrap(),
            "- id: a\n  name: ./a.wasm\n  sha256: 'old'  # pinned\n- id: b\n  name: ./b.wasm\n  sha256: new\n  config: {}\n"
        );
        assert_eq!(
            set_pin(
                "- {id: c, name: ./c.wasm}\n",
                "c",
                pos(1, 1),
                pos(1, 16),
                None,
                "new"
            ),
            Err(EditError::FlowEntry("c".into()))
        );
    }
}
