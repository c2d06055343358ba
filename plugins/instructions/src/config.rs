//! The `instructions` entry's configuration.

use serde::Deserialize;

/// The default bound on one file's bytes (32 KiB).
pub const DEFAULT_MAX_BYTES: usize = 32 << 10;

/// Configuration of `instructions`; unknown fields are rejected.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstructionsConfig {
    /// The file names read in each directory, in this order (`[AGENTS.md, CLAUDE.md]`).
    #[serde(default = "default_files")]
    pub files: Vec<String>,
    /// At most this many bytes of one file reach the prompt; a longer file is cut at a
    /// character boundary, with a line saying so.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
    /// Whether the user's own files (`$XDG_CONFIG_HOME/cordis/`) are read.
    #[serde(default = "yes")]
    pub user: bool,
}

fn default_files() -> Vec<String> {
    vec!["AGENTS.md".to_owned()]
}

fn default_max_bytes() -> usize {
    DEFAULT_MAX_BYTES
}

fn yes() -> bool {
    true
}

impl Default for InstructionsConfig {
    fn default() -> Self {
        InstructionsConfig {
            files: default_files(),
            max_bytes: DEFAULT_MAX_BYTES,
            user: true,
        }
    }
}

impl InstructionsConfig {
    /// The configured names, in order, without repeats.
    ///
    /// # Errors
    /// A name that is not a plain file name (empty, `.`, `..`, or holding a `/`).
    pub fn file_names(&self) -> Result<Vec<String>, String> {
        self.check_names()?;
        let mut names: Vec<String> = Vec::new();
        for name in &self.files {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        Ok(names)
    }

    /// [`InstructionsConfig::file_names`]'s check alone (nothing is allocated when it passes).
    ///
    /// # Errors
    /// The first name that is not a plain file name.
    pub(crate) fn check_names(&self) -> Result<(), String> {
        match self
            .files
            .iter()
            .find(|name| name.is_empty() || *name == "." || *name == ".." || name.contains('/'))
        {
            Some(name) => Err(format!(
                "instructions: files: {name:?} is not a plain file name"
            )),
            None => Ok(()),
        }
    }
}
