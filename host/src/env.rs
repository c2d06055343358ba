//! `${{ env.NAME }}` interpolation in config strings.
//!
//! cordis evaluates `${{ … }}` as JavaScript; we evaluate nothing. Exactly two forms are
//! understood, and anything else inside `${{ }}` is an error rather than a guess:
//! - `${{ env.NAME }}`: the variable's value; an error if it is unset;
//! - `${{ env.NAME ?? 'default' }}` (or `"default"`): the value, or the default if unset.
//!
//! A chain (`env.A ?? 'a' ?? 'b'`) is refused: a second `??` would need an expression language.
//! The result is always a string.
//!
//! # Examples
//! ```
//! use cordis_host::env::interpolate;
//! let env = |name: &str| (name == "HOME").then(|| "/home/me".to_owned());
//! assert_eq!(interpolate("${{ env.HOME }}/x", &env).unwrap(), "/home/me/x");
//! assert_eq!(interpolate("${{ env.NOPE ?? 'y' }}", &env).unwrap(), "y");
//! ```

use crate::diagnostic::Problem;

/// Replaces every `${{ env.NAME }}` / `${{ env.NAME ?? 'default' }}` in `s`.
///
/// # Errors
/// [`Problem::UnsetEnv`] for a variable that is unset and has no default;
/// [`Problem::BadExpression`] for anything else inside `${{ }}`.
pub fn interpolate(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Problem> {
    if !s.contains("${{") {
        return Ok(s.to_owned());
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find("${{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 3..];
        let Some(close) = after.find("}}") else {
            return Err(Problem::BadExpression {
                expr: after.to_owned(),
            });
        };
        let expr = &after[..close];
        out.push_str(&evaluate(expr, env)?);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The text a diagnostic should point at for `problem`, as it appears in the source.
pub(crate) fn needle(problem: &Problem) -> String {
    match problem {
        Problem::UnsetEnv { var } => format!("env.{var}"),
        _ => "${{".to_owned(),
    }
}

fn evaluate(expr: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Problem> {
    let bad = || Problem::BadExpression {
        expr: expr.to_owned(),
    };
    let (var, default) = match expr.split_once("??") {
        Some((v, d)) => (v.trim(), Some(quoted(d.trim()).ok_or_else(bad)?)),
        None => (expr.trim(), None),
    };
    let name = var.strip_prefix("env.").ok_or_else(bad)?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(bad());
    }
    match (env(name), default) {
        (Some(v), _) => Ok(v),
        (None, Some(d)) => Ok(d.to_owned()),
        (None, None) => Err(Problem::UnsetEnv {
            var: name.to_owned(),
        }),
    }
}

/// The inside of one quoted string that is the whole of `d`; `None` for anything else
/// (unquoted, unterminated, or followed by more text such as a second `??`).
fn quoted(d: &str) -> Option<&str> {
    let q = d.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &d[1..];
    let end = body.find(q)?;
    (end + 1 == body.len()).then(|| &body[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn env_home(name: &str) -> Option<String> {
        (name == "HOME").then(|| "/home/me".to_owned())
    }

    #[test]
    fn interpolation_replaces_set_variables_and_defaults() {
        assert_eq!(
            interpolate("${{ env.HOME }}/x", &env_home).unwrap(),
            "/home/me/x"
        );
        assert_eq!(
            interpolate("a ${{env.NOPE ?? 'dflt'}} b", &env_home).unwrap(),
            "a dflt b"
        );
        assert_eq!(
            interpolate("${{ env.HOME ?? \"x\" }}", &env_home).unwrap(),
            "/home/me"
        );
        assert_eq!(interpolate("${{ env.NOPE ?? '' }}", &env_home).unwrap(), "");
        assert_eq!(interpolate("plain", &no_env).unwrap(), "plain");
    }

    #[test]
    fn interpolation_rejects_unset_variables_and_code() {
        assert_eq!(
            interpolate("${{ env.NOPE }}", &no_env),
            Err(Problem::UnsetEnv { var: "NOPE".into() })
        );
        for bad in [
            "${{ process.exit() }}",
            "${{ env.X ?? bare }}",
            "${{ env.X",
            "${{ env.X ?? 'a }}",
            "${{ env.X ?? 'a' + 'b' }}",
        ] {
            assert!(
                matches!(
                    interpolate(bad, &no_env),
                    Err(Problem::BadExpression { .. })
                ),
                "{bad}"
            );
        }
    }

    /// Regression (issue 11): `'a' ?? 'b'` was taken as one quoted default, `a' ?? 'b`.
    #[test]
    fn a_chain_of_defaults_is_refused() {
        assert_eq!(
            interpolate("${{ env.X ?? 'a' ?? 'b' }}", &no_env),
            Err(Problem::BadExpression {
                expr: " env.X ?? 'a' ?? 'b' ".into()
            })
        );
        assert!(interpolate("${{ env.HOME ?? \"a\" ?? \"b\" }}", &env_home).is_err());
    }
}
