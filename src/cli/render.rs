//! Text rendering for people: the entry table, a boot report with what is wrong with it (used
//! by `check` and `check --watch`), the diff of two boot outcomes, and escaping untrusted text.

use std::collections::BTreeMap;

use serde_json::Value;

use cordis_host::loader::{BootReport, EntryStatus};

use super::{CheckArgs, EXIT_FAILURE, EXIT_OK, Io, replay_command};

/// Whether printing `c` raw could mislead a person at a terminal: control characters (escape
/// sequences, carriage returns), bidirectional overrides and isolates, and zero-width or
/// invisible characters.
fn is_unsafe_char(c: char, keep_newlines: bool) -> bool {
    match c {
        '\n' | '\t' if keep_newlines => false,
        c if c.is_control() => true,
        '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}'
        | '\u{061C}'
        | '\u{00AD}' => true,
        _ => false,
    }
}

/// `text` made safe for a terminal: every character that could mislead (see
/// [`is_unsafe_char`]) is shown as a `\u{…}` escape; newlines and tabs are escaped too.
pub(crate) fn safe(text: &str) -> std::borrow::Cow<'_, str> {
    escape(text, false)
}

/// Like [`safe`], but keeps newlines and tabs: for multi-line text such as the transcript.
pub(crate) fn safe_lines(text: &str) -> std::borrow::Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, keep_newlines: bool) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe_char(c, keep_newlines)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe_char(c, keep_newlines) {
            out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `cell` padded with spaces to `width` characters (no formatter width: it is limited to
/// `u16::MAX` and panics beyond, and ids have no length limit).
fn pad(cell: &str, width: usize) -> String {
    let mut s = String::with_capacity(width.max(cell.len()));
    s.push_str(cell);
    for _ in cell.chars().count()..width {
        s.push(' ');
    }
    s
}

/// The entry table, one line per entry, aligned columns; every cell made [`safe`].
pub(crate) fn entry_table(report: &BootReport) -> String {
    let header = ["ID", "NAME", "STATUS", "LOAD MS", "ERROR"];
    let rows: Vec<[String; 5]> = report
        .entries
        .iter()
        .map(|e| {
            [
                safe(&e.id).into_owned(),
                safe(&e.name).into_owned(),
                e.status.to_string(),
                e.load_ms.map_or("-".to_owned(), |ms| ms.to_string()),
                safe(e.error.as_deref().unwrap_or_default()).into_owned(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == 4 {
                s.push_str(cell);
            } else {
                s.push_str(&pad(cell, widths[i]));
                s.push_str("  ");
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = line(header);
    out.push('\n');
    for row in &rows {
        out.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
        out.push('\n');
    }
    out
}

/// Flattens JSON into `path → value` lines; arrays of scalars become set members.
fn flatten(value: &Value, path: &str, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(v, &p, out);
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            for item in items {
                out.insert(format!("{path} contains {item}"), "yes".to_owned());
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten(item, &format!("{path}[{i}]"), out);
            }
        }
        scalar => {
            out.insert(path.to_owned(), scalar.to_string());
        }
    }
}

/// A readable diff of two outcomes, one line per differing path.
pub(crate) fn diff(a: &Value, seed_a: u64, b: &Value, seed_b: u64) -> String {
    let mut fa = BTreeMap::new();
    let mut fb = BTreeMap::new();
    flatten(a, "", &mut fa);
    flatten(b, "", &mut fb);
    let mut keys: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::new();
    for key in keys {
        let (va, vb) = (fa.get(key), fb.get(key));
        if va != vb {
            let show = |v: Option<&String>| v.map_or("(absent)".to_owned(), Clone::clone);
            out.push_str(&format!(
                "  {}:\n    seed {seed_a}: {}\n    seed {seed_b}: {}\n",
                safe(key),
                safe(&show(va)),
                safe(&show(vb))
            ));
        }
    }
    out
}

/// The assembly part of `check`'s text output: sections (name, order) and tools in order.
pub(crate) fn assembly_text(report: &BootReport) -> String {
    let mut out = String::new();
    let Some(assembly) = report.assembly.as_object() else {
        if report.assembly_error.is_some() {
            out.push_str("assembly: failed (see the error below)\n");
        } else {
            out.push_str(
                "assembly: none (no system-prompt entry); digest covers the service names\n",
            );
        }
        return out;
    };
    out.push_str("sections (render order):\n");
    for s in assembly["sections"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {:>6}  {}\n",
            s["order"],
            safe(s["name"].as_str().unwrap_or(""))
        ));
    }
    let tools: Vec<&str> = assembly["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    out.push_str(&format!("tools (canonical order, {}):\n", tools.len()));
    for (i, t) in tools.iter().enumerate() {
        out.push_str(&format!("  {:>3}. {}\n", i + 1, safe(t)));
    }
    let deferred: Vec<&str> = assembly
        .get("deferred")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !deferred.is_empty() {
        out.push_str(&format!(
            "deferred (loaded by tool_search, canonical order, {}):\n",
            deferred.len()
        ));
        for t in deferred {
            out.push_str(&format!("       {}\n", safe(t)));
        }
    }
    out
}

/// Whether a failed boot's seed is worth replaying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeedHint {
    /// Print the replay command; whether the failure depends on the schedule is not known
    /// (one other sample cannot prove it does not).
    Replay,
    /// Another seed gave a different outcome: the failure depends on the schedule.
    Differs(u64),
    /// Entries claim one name: a decision of the configuration, the same in every order.
    Conflict,
    /// Nothing failed, or nothing to say.
    None,
}

/// Prints a boot report (table or JSON) and what is wrong with it; returns the exit code.
pub(crate) fn print_report(
    report: &BootReport,
    args: &CheckArgs,
    seed: u64,
    seed_hint: SeedHint,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let policy = args.policy();
    if args.json {
        writeln!(
            io.out,
            "{}",
            serde_json::to_string_pretty(&report.to_json())?
        )?;
    } else {
        write!(io.out, "{}", entry_table(report))?;
        writeln!(io.out)?;
        write!(io.out, "{}", assembly_text(report))?;
        for incident in &report.incidents {
            writeln!(io.out, "incident: {}", safe(&incident.to_string()))?;
        }
        writeln!(io.out, "digest: {}", report.digest)?;
        // What the entries offer beside the request (MCP prompts and resources), when any does.
        if let Some(catalog) = &report.catalog {
            writeln!(io.out, "catalog: {catalog}")?;
        }
    }
    let mut code = EXIT_OK;
    let replay = match seed_hint {
        SeedHint::Replay => format!(
            " (seed {seed}, schedule {policy}); replay: {}",
            replay_command(&args.config.file, seed, policy)
        ),
        SeedHint::Differs(other) => format!(
            " (seed {seed}, schedule {policy}); it depends on the schedule: seed {other} boots differently; replay: {}",
            replay_command(&args.config.file, seed, policy)
        ),
        SeedHint::Conflict => {
            "; entries claim one name (a conflict, the same in every load order): give it to one of them"
                .to_owned()
        }
        SeedHint::None => String::new(),
    };
    // A deferred entry (an MCP server down with `failOnStartupError: false`) is what its
    // config asked for: said loudly, but not a failed check.
    for e in report.entries.iter().filter(|e| e.retrying) {
        writeln!(
            io.err,
            "cordis: warning: entry \"{}\" is pending and retries by itself: {}",
            safe(&e.id),
            safe(e.error.as_deref().unwrap_or_default())
        )?;
    }
    let bad: Vec<String> = report
        .entries
        .iter()
        .filter(|e| e.fails_check())
        .map(|e| safe(&e.id).into_owned())
        .collect();
    if !bad.is_empty() {
        writeln!(
            io.err,
            "cordis: {} entr{} not active: {}{replay}",
            bad.len(),
            if bad.len() == 1 { "y is" } else { "ies are" },
            bad.join(", ")
        )?;
        code = EXIT_FAILURE;
    }
    // Each conflict once (every claimant reports the same text).
    let mut conflicts: Vec<&str> = report
        .entries
        .iter()
        .filter(|e| e.status == EntryStatus::Conflict)
        .filter_map(|e| e.error.as_deref())
        .collect();
    conflicts.sort_unstable();
    conflicts.dedup();
    for conflict in conflicts {
        writeln!(io.err, "cordis: conflict: {}", safe(conflict))?;
    }
    if let Some(error) = &report.assembly_error {
        writeln!(
            io.err,
            "cordis: assembling the request failed: {}{replay}",
            safe(error)
        )?;
        code = EXIT_FAILURE;
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_bidi_and_zero_width_characters_are_escaped() {
        assert_eq!(safe("plain id"), "plain id");
        assert_eq!(safe("a\u{1b}[31mred"), "a\\u{001B}[31mred");
        assert_eq!(safe("evil\u{202E}txt"), "evil\\u{202E}txt");
        assert_eq!(safe("zero\u{200B}width"), "zero\\u{200B}width");
        assert_eq!(safe("two\nlines"), "two\\u{000A}lines");
        assert_eq!(safe_lines("two\nlines\r"), "two\nlines\\u{000D}");
    }

    #[test]
    fn a_cell_wider_than_a_formatter_width_is_padded_without_panicking() {
        let long = "x".repeat(70_000);
        assert_eq!(pad(&long, 70_001).chars().count(), 70_001);
        assert_eq!(pad("ab", 4), "ab  ");
    }
}
