//! A line diff (longest common subsequence), for two request headers side by side.

use serde::Serialize;

/// The most lines either side may have (the table is their product: 8 MB at most).
pub const MAX_LINES: usize = 2000;

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    /// `=` in both, `-` only in the first, `+` only in the second.
    pub op: &'static str,
    /// The line.
    pub text: String,
}

/// The lines of `a` and `b` as kept, removed and added.
///
/// # Errors
/// Either text has more than [`MAX_LINES`] lines.
pub fn lines(a: &str, b: &str) -> Result<Vec<Line>, String> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    if a.len() > MAX_LINES || b.len() > MAX_LINES {
        return Err(format!(
            "{} and {} lines: at most {MAX_LINES} lines a side",
            a.len(),
            b.len()
        ));
    }
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0u16; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    let line = |op, text: &str| Line {
        op,
        text: text.to_owned(),
    };
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push(line("=", a[i]));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(line("-", a[i]));
            i += 1;
        } else {
            out.push(line("+", b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|t| line("-", t)));
    out.extend(b[j..].iter().map(|t| line("+", t)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_is_one_removed_and_one_added_between_kept_ones() {
        let d = lines("a\nb\nc", "a\nB\nc\nd").unwrap();
        let ops: Vec<(&str, &str)> = d.iter().map(|l| (l.op, l.text.as_str())).collect();
        assert_eq!(
            ops,
            [("=", "a"), ("-", "b"), ("+", "B"), ("=", "c"), ("+", "d")]
        );
        assert!(lines(&"x\n".repeat(MAX_LINES + 1), "").is_err());
    }
}
