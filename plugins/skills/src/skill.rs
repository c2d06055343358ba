//! One `SKILL.md`: front matter and body.

use serde::Deserialize;

/// The longest skill name (the common format's bound).
pub const MAX_NAME: usize = 64;
/// The longest description kept (longer ones are cut).
pub const MAX_DESCRIPTION: usize = 1024;

/// The fields of the front matter cordis reads; others (`license`, `allowed-tools`, …) are
/// ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FrontMatter {
    /// The skill's name: lowercase letters, digits and `-`, the folder's name.
    pub name: String,
    /// What it is for and when to use it (the catalog line).
    pub description: String,
}

/// Why a `SKILL.md` is left out: a message and the 1-based line of the file it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct Malformed {
    /// The line in the file.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

fn malformed(line: usize, message: impl Into<String>) -> Malformed {
    Malformed {
        line,
        message: message.into(),
    }
}

/// True for a valid skill name (`^[a-z0-9]+(-[a-z0-9]+)*$`, at most [`MAX_NAME`]).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Splits a `SKILL.md` into its front matter and body, checking the front matter.
///
/// # Errors
/// A [`Malformed`] naming the line: no opening `---`, no closing one, YAML that does not
/// parse or lacks `name` or `description`, or an invalid name.
pub fn parse(text: &str) -> Result<(FrontMatter, String), Malformed> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err(malformed(
            1,
            "no front matter: the file must start with a `---` line",
        ));
    }
    let mut yaml = String::new();
    let mut close = None;
    for (i, line) in lines.by_ref().enumerate() {
        if line.trim_end() == "---" {
            close = Some(i + 2);
            break;
        }
        yaml.push_str(line);
    }
    if close.is_none() {
        return Err(malformed(1, "the front matter has no closing `---` line"));
    }
    let body: String = lines.collect();
    let front: FrontMatter = serde_yaml_ng::from_str(&yaml).map_err(|e| {
        // The YAML starts on the file's second line.
        let line = e.location().map_or(1, |l| l.line() + 1);
        malformed(line, format!("front matter: {e}"))
    })?;
    let line_of = |key: &str| {
        yaml.lines()
            .position(|l| l.starts_with(key))
            .map_or(1, |i| i + 2)
    };
    if !valid_name(&front.name) {
        return Err(malformed(
            line_of("name:"),
            format!(
                "name {:?} must be 1 to {MAX_NAME} lowercase letters, digits and single hyphens",
                front.name
            ),
        ));
    }
    if front.description.trim().is_empty() {
        return Err(malformed(line_of("description:"), "description is empty"));
    }
    Ok((front, body.trim_start_matches(['\r', '\n']).to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skill_parses_into_front_matter_and_body() {
        let (front, body) =
            parse("---\nname: pdf\ndescription: Fill PDF forms.\nlicense: MIT\n---\n\nStep one.\n")
                .unwrap();
        assert_eq!(front.name, "pdf");
        assert_eq!(front.description, "Fill PDF forms.");
        assert_eq!(body, "Step one.\n");
    }

    #[test]
    fn malformed_front_matter_names_the_line() {
        assert_eq!(parse("# no front matter").unwrap_err().line, 1);
        assert_eq!(parse("---\nname: x\n").unwrap_err().line, 1);
        // The bad YAML is on the file's third line.
        let err = parse("---\nname: x\ndescription: [unclosed\n---\nbody").unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        let err = parse("---\nname: x\n---\nbody").unwrap_err();
        assert!(err.message.contains("description"), "{err}");
        let err = parse("---\ndescription: d\nname: Bad_Name\n---\n").unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        assert!(err.message.contains("Bad_Name"), "{err}");
    }

    #[test]
    fn names_follow_the_common_format() {
        for ok in ["a", "pdf-forms", "x1"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
