//! Strict `{{name}}` interpolation and the final join.
//!
//! The rules are the reference's: a reference is a complete simple `{{name}}` group; a lone `{{`
//! with no later `}}` is literal text; substituted values are never re-scanned (a value containing
//! `{{x}}` stays as is); empty sections are dropped; the rest are joined with a blank line.

use std::collections::BTreeMap;

use crate::error::RenderError;

/// True for names matching `^[a-z][a-z0-9_]*$`.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
}

/// Interpolates the variables into one section's text.
///
/// # Errors
/// A [`RenderError`] naming the section and the offending reference.
pub fn interpolate(
    text: &str,
    section: &str,
    variables: &BTreeMap<String, Option<String>>,
) -> Result<String, RenderError> {
    let mut out = String::with_capacity(text.len());
    interpolate_into(&mut out, text, section, variables)?;
    Ok(out)
}

/// [`interpolate`], appending to `out` (on an error, `out` holds part of the text).
pub(crate) fn interpolate_into(
    out: &mut String,
    text: &str,
    section: &str,
    variables: &BTreeMap<String, Option<String>>,
) -> Result<(), RenderError> {
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let group = &rest[open..];
        let after = &group[2..];
        let Some(close) = after.find("}}") else {
            // A `{{` with no `}}` anywhere after it cannot be a reference: literal text.
            out.push_str(group);
            return Ok(());
        };
        let inner = &after[..close];
        if inner.contains('{') || inner.contains('}') {
            return Err(RenderError::MalformedGroup {
                excerpt: group.chars().take(16).collect(),
                section: section.to_owned(),
            });
        }
        if !is_variable_name(inner) {
            return Err(RenderError::MalformedName {
                reference: inner.to_owned(),
                section: section.to_owned(),
            });
        }
        match variables.get(inner) {
            None => {
                return Err(RenderError::UnknownVariable {
                    name: inner.to_owned(),
                    section: section.to_owned(),
                    registered: variables.keys().cloned().collect(),
                });
            }
            Some(None) => {
                return Err(RenderError::NoValue {
                    name: inner.to_owned(),
                    section: section.to_owned(),
                });
            }
            Some(Some(value)) => out.push_str(value),
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn references_are_replaced_and_values_are_not_rescanned() {
        let v = vars(&[("model", Some("{{cwd}}")), ("cwd", Some("/tmp"))]);
        assert_eq!(
            interpolate("model {{model}} in {{cwd}}", "s", &v).unwrap(),
            "model {{cwd}} in /tmp"
        );
    }

    #[test]
    fn a_lone_opening_without_a_closing_is_literal() {
        assert_eq!(interpolate("a {{ b", "s", &vars(&[])).unwrap(), "a {{ b");
        assert_eq!(
            interpolate("}} then {{", "s", &vars(&[])).unwrap(),
            "}} then {{"
        );
    }

    #[test]
    fn an_incomplete_group_before_a_closing_is_malformed() {
        let err = interpolate(
            "x {{a {{model}} y",
            "persona",
            &vars(&[("model", Some("m"))]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed prompt variable reference at \"{{a {{model}} y…\" in section \"persona\" (references are complete simple {{name}} groups)"
        );
    }

    #[test]
    fn an_invalid_name_in_a_complete_group_is_malformed() {
        let err = interpolate("{{Model}}", "persona", &vars(&[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed prompt variable reference \"{{Model}}\" in section \"persona\" (variable names match /^[a-z][a-z0-9_]*$/)"
        );
        assert!(matches!(
            interpolate("{{ model }}", "s", &vars(&[])),
            Err(RenderError::MalformedName { .. })
        ));
    }

    #[test]
    fn an_unknown_variable_lists_the_registered_ones() {
        let err = interpolate(
            "{{constructor}}",
            "p",
            &vars(&[("b", None), ("a", Some("x"))]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown prompt variable \"{{constructor}}\" in section \"p\"; registered variables: a, b"
        );
        let err = interpolate("{{x}}", "p", &vars(&[])).unwrap_err();
        assert!(
            err.to_string().ends_with("registered variables: (none)"),
            "{err}"
        );
    }

    #[test]
    fn a_variable_without_a_value_is_an_error() {
        let err = interpolate("{{cwd}}", "p", &vars(&[("cwd", None)])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "prompt variable \"{{cwd}}\" has no value for this assembly (section \"p\")"
        );
    }

    #[test]
    fn variable_names_follow_the_reference_pattern() {
        assert!(is_variable_name("model"));
        assert!(is_variable_name("a1_b"));
        assert!(!is_variable_name(""));
        assert!(!is_variable_name("1a"));
        assert!(!is_variable_name("_a"));
        assert!(!is_variable_name("aB"));
    }
}
