//! Configuration errors a person reads: `cordis.yml:12:5: entry "todo": unknown plugin …`.
//!
//! Every stage (YAML parsing, the raw entry model, resolution into a load plan) reports problems
//! as [`Diagnostic`]s and keeps going, so one run shows every error of a file at once
//! ([`ConfigErrors`]).

use std::fmt;

use crate::hidden::Shown;

/// A position in a config file, 1-based.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// The keys an entry may have.
pub const ENTRY_KEYS: &[&str] = &[
    "id", "name", "config", "disabled", "inject", "timeout", "sha256",
];

/// What is wrong, without where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// Entries that would wait for each other's services forever.
    #[error("inject cycle: {0}")]
    InjectCycle(String),
    /// The file is not valid YAML.
    #[error("YAML syntax error: {0}")]
    Syntax(String),
    /// Lists and mappings nested deeper than the limit (a hostile or broken file).
    #[error("YAML nesting is deeper than {limit} levels")]
    TooDeep {
        /// The deepest nesting allowed.
        limit: usize,
    },
    /// Aliases would repeat more content than the limit (alias amplification).
    #[error(
        "YAML aliases expand to more than {limit} bytes; refusing to build the value (aliases may repeat at most 1 MiB, or the file's size if larger)"
    )]
    AliasExpansion {
        /// The expanded size allowed.
        limit: u64,
    },
    /// An alias inside the node its anchor names.
    #[error("a YAML alias refers to a node that contains it (a cycle)")]
    RecursiveAlias,
    /// More than one YAML document (`---`).
    #[error("a config file holds one YAML document; found a second one")]
    SecondDocument,
    /// A core-schema tag on a value of another type (`!!int abc`).
    #[error("YAML tag `{tag}` does not fit the value \"{}\"", Shown(value))]
    TagMismatch {
        /// The tag as written.
        tag: String,
        /// The scalar.
        value: String,
    },
    /// A mapping has the same key twice.
    #[error(
        "duplicate key \"{}\" (the first one would be silently replaced)",
        Shown(key)
    )]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// An id or name with a character that would disguise it on a terminal.
    #[error(
        "{key} \"{}\" contains {}, a {kind} character; ids and names may not contain control, bidirectional or zero-width characters",
        Shown(value), codepoint(*ch)
    )]
    HiddenCharacter {
        /// `id` or `name`.
        key: &'static str,
        /// The value (printed escaped).
        value: String,
        /// The first offending character.
        ch: char,
        /// `control`, `bidirectional` or `zero-width`.
        kind: &'static str,
    },
    /// The file (or a group's config) is not a list of entries.
    #[error("expected a list of entries (`- id: …\\n  name: …`), found {found}")]
    NotAList {
        /// What was found instead.
        found: &'static str,
    },
    /// A list item is not a mapping.
    #[error("an entry must be a mapping with keys {}, found {found}", ENTRY_KEYS.join(", "))]
    EntryNotMapping {
        /// What was found instead.
        found: &'static str,
    },
    /// An entry has a key the loader does not know.
    #[error("unknown key \"{}\"; allowed keys: {}", Shown(key), ENTRY_KEYS.join(", "))]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// An entry has no `name`.
    #[error("missing required key \"name\" (the plugin to load)")]
    MissingName,
    /// A known key has a value of the wrong shape.
    #[error("key \"{key}\" must be {expected}, found {}", Shown(found))]
    BadField {
        /// The key.
        key: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// `${{ env.NAME }}` names a variable that is not set and has no default.
    #[error(
        "environment variable \"{var}\" is not set (use `${{{{ env.{var} ?? 'default' }}}}` to give a default)"
    )]
    UnsetEnv {
        /// The variable.
        var: String,
    },
    /// A `${{ … }}` expression that is not `env.NAME` or `env.NAME ?? 'default'`.
    #[error(
        "unsupported expression `${{{{{}}}}}`: only `env.NAME` and `env.NAME ?? 'default'` are allowed",
        Shown(expr)
    )]
    BadExpression {
        /// The expression text.
        expr: String,
    },
    /// cordis's `!!js` tag.
    #[error(
        "the `!!js` tag is not supported (no code is evaluated); use `${{{{ env.NAME }}}}` or `${{{{ env.NAME ?? 'default' }}}}` instead"
    )]
    JsTag,
    /// Any other YAML tag.
    #[error("YAML tag `{}` is not supported", Shown(tag))]
    UnsupportedTag {
        /// The tag.
        tag: String,
    },
    /// A mapping key that is not a string, inside a config value.
    #[error("config keys must be strings, found {}", Shown(found))]
    NonStringKey {
        /// What was found.
        found: String,
    },
    /// No built-in plugin has this name.
    #[error("unknown plugin \"{}\"{}", Shown(name), suggest(suggestions))]
    UnknownPlugin {
        /// The name.
        name: String,
        /// Close known names, best first.
        suggestions: Vec<String>,
    },
    /// A dylib entry's library does not exist.
    #[error(
        "plugin library \"{}\" not found (looked for {})",
        Shown(path),
        Shown(looked)
    )]
    DylibMissing {
        /// The path as written.
        path: String,
        /// Where it was looked for.
        looked: String,
    },
    /// A dylib entry's library lies outside every allowed directory.
    #[error(
        "plugin library \"{}\" resolves to {}, outside the allowed plugin directories ({}); move it there or pass --plugin-dir / CORDIS_PLUGIN_PATH",
        Shown(path),
        Shown(resolved),
        Shown(allowed)
    )]
    DylibOutsideDirs {
        /// The path as written.
        path: String,
        /// The canonical path (symlinks and `..` resolved).
        resolved: String,
        /// The allowed directories.
        allowed: String,
    },
    /// A plugin file of a well-known kind (`.wasm`) no registered entry kind loads.
    #[error(
        "\"{}\" is a {kind} (\"{suffix}\"), but no entry kind for it is registered in this host, so it cannot be loaded; the application must register one (`Builtins::insert_kind`)",
        Shown(name)
    )]
    NoEntryKind {
        /// The name as written.
        name: String,
        /// What the file is (`WebAssembly component`).
        kind: &'static str,
        /// The name suffix that says so (`.wasm`).
        suffix: &'static str,
    },
    /// `sha256` on an entry that is not a dylib.
    #[error(
        "key \"sha256\" pins a plugin library file; \"{}\" is a built-in plugin",
        Shown(name)
    )]
    Sha256OnBuiltin {
        /// The plugin name.
        name: String,
    },
    /// Two entries share an id.
    #[error("duplicate id \"{}\"; first used at {first}", Shown(id))]
    DuplicateId {
        /// The id.
        id: String,
        /// `file:line:column` of the first use.
        first: String,
    },
    /// Two or more entries claim one name (see [`crate::claims`]).
    #[error(
        "{} {} also claimed by {} {}: one name, one owner; remove {} from all but one of the entries, or disable all but one",
        Shown(claims),
        if claims.contains(", ") { "are" } else { "is" },
        if *plural { "entries" } else { "entry" },
        Shown(others),
        if claims.contains(", ") { "them" } else { "it" }
    )]
    Conflict {
        /// The claims, sorted (`tool "echo", section "x"`).
        claims: String,
        /// The other claimants with their positions, in file order.
        others: String,
        /// More than one other claimant.
        plural: bool,
    },
    /// The plugin rejected its config.
    #[error("{}", Shown(&.0.to_string()))]
    Config(cordis_runtime::ConfigError),
    /// An include or one of its patches (see [`crate::include`]).
    #[error("{0}")]
    Include(crate::include::IncludeProblem),
    /// A reload would let something run without a question that did not before.
    #[error(
        "a running session does not take this change: {}; permissions never widen by themselves (restart to use it, or change it back)",
        Shown(what)
    )]
    Widens {
        /// What would widen.
        what: String,
    },
}

fn codepoint(c: char) -> String {
    format!("U+{:04X}", c as u32)
}

fn suggest(suggestions: &[String]) -> String {
    match suggestions {
        [] => String::new(),
        [one] => format!("; did you mean \"{one}\"?"),
        many => format!(
            "; did you mean one of {}?",
            many.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One problem in a config file, with where it is and which entry it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostic {
    /// The file, as the user named it.
    pub file: String,
    /// Where.
    pub pos: Pos,
    /// The entry id (given or derived), if the problem belongs to one.
    pub entry: Option<String>,
    /// What.
    pub problem: Problem,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", Shown(&self.file), self.pos)?;
        if let Some(entry) = &self.entry {
            write!(f, "entry \"{}\": ", Shown(entry))?;
        }
        write!(f, "{}", self.problem)
    }
}

/// Every problem found in one config file, in file order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<Diagnostic>);

impl ConfigErrors {
    /// The diagnostics.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.0
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 11: untrusted text from the file reaches the terminal only escaped.
    #[test]
    fn no_message_carries_a_raw_hidden_character() {
        let evil = "a\u{202e}b\u{1b}[2J";
        let problems = [
            Problem::UnknownKey { key: evil.into() },
            Problem::BadField {
                key: "timeout",
                expected: "a number",
                found: format!("\"{evil}\""),
            },
            Problem::BadExpression { expr: evil.into() },
            Problem::UnsupportedTag { tag: evil.into() },
            Problem::Config(cordis_runtime::ConfigError {
                path: "mode".into(),
                message: format!("unknown variant `{evil}`"),
            }),
        ];
        for problem in problems {
            let text = Diagnostic {
                file: "f.yml".into(),
                pos: Pos { line: 1, column: 1 },
                entry: Some(evil.into()),
                problem,
            }
            .to_string();
            assert!(
                !text.contains('\u{202e}') && !text.contains('\u{1b}'),
                "{text}"
            );
            assert!(text.contains("a\\u{202e}b\\u{1b}[2J"), "{text}");
        }
    }
}
