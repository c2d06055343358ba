//! Configuration errors a person reads: `cordis.yml:12:5: entry "todo": unknown plugin …`.
//!
//! Every stage (YAML parsing, the raw entry model, resolution into a load plan) reports problems
//! as [`Diagnostic`]s and keeps going, so one run shows every error of a file at once
//! ([`ConfigErrors`]).

use std::fmt;

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
    /// The file is not valid YAML.
    #[error("YAML syntax error: {0}")]
    Syntax(String),
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
    #[error("unknown key \"{key}\"; allowed keys: {}", ENTRY_KEYS.join(", "))]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// An entry has no `name`.
    #[error("missing required key \"name\" (the plugin to load)")]
    MissingName,
    /// A known key has a value of the wrong shape.
    #[error("key \"{key}\" must be {expected}, found {found}")]
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
        "unsupported expression `${{{{{expr}}}}}`: only `env.NAME` and `env.NAME ?? 'default'` are allowed"
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
    #[error("YAML tag `{tag}` is not supported")]
    UnsupportedTag {
        /// The tag.
        tag: String,
    },
    /// A mapping key that is not a string, inside a config value.
    #[error("config keys must be strings, found {found}")]
    NonStringKey {
        /// What was found.
        found: String,
    },
    /// No built-in plugin has this name.
    #[error("unknown plugin \"{name}\"{}", suggest(suggestions))]
    UnknownPlugin {
        /// The name.
        name: String,
        /// Close known names, best first.
        suggestions: Vec<String>,
    },
    /// A dylib entry's library does not exist.
    #[error("plugin library \"{path}\" not found (looked for {looked})")]
    DylibMissing {
        /// The path as written.
        path: String,
        /// Where it was looked for.
        looked: String,
    },
    /// A dylib entry's library lies outside every allowed directory.
    #[error(
        "plugin library \"{path}\" resolves to {resolved}, outside the allowed plugin directories ({allowed}); move it there or pass --plugin-dir / CORDIS_PLUGIN_PATH"
    )]
    DylibOutsideDirs {
        /// The path as written.
        path: String,
        /// The canonical path (symlinks and `..` resolved).
        resolved: String,
        /// The allowed directories.
        allowed: String,
    },
    /// `sha256` on an entry that is not a dylib.
    #[error("key \"sha256\" pins a plugin library file; \"{name}\" is a built-in plugin")]
    Sha256OnBuiltin {
        /// The plugin name.
        name: String,
    },
    /// Two entries share an id.
    #[error("duplicate id \"{id}\"; first used at {first}")]
    DuplicateId {
        /// The id.
        id: String,
        /// `file:line:column` of the first use.
        first: String,
    },
    /// The plugin rejected its config.
    #[error("{0}")]
    Config(cordis_runtime::ConfigError),
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
        write!(f, "{}:{}: ", self.file, self.pos)?;
        if let Some(entry) = &self.entry {
            write!(f, "entry \"{entry}\": ")?;
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
