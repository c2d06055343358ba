//! The explicit table of built-in plugins: name → plugin.
//!
//! The host finds plugins through this table, never through linker tricks. An application (the
//! root package's `cordis`, or a test) starts from [`Builtins::host`] and [`Builtins::insert`]s the
//! plugin crates it links. The table also holds the [`EntryKind`]s the application registers
//! ([`Builtins::insert_kind`]): the plugin files, beside shared libraries, it can load.
//!
//! # Determinism
//! The table is a `BTreeMap`, so listings and suggestions come out in name order.

use std::collections::BTreeMap;
use std::sync::Arc;

use cordis_runtime::ErasedPlugin;

use crate::config::GROUP_NAMES;
use crate::entry_kind::EntryKind;

/// Built-in plugins by name, and the registered entry kinds.
#[derive(Clone, Default)]
pub struct Builtins {
    plugins: BTreeMap<String, Arc<dyn ErasedPlugin>>,
    /// In registration order: the first that recognizes a name loads it.
    kinds: Vec<Arc<dyn EntryKind>>,
}

impl std::fmt::Debug for Builtins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.plugins.keys()).finish()
    }
}

impl Builtins {
    /// An empty table.
    pub fn new() -> Builtins {
        Builtins::default()
    }

    /// The host's own plugins: `tools`, `system-prompt`, and the debugging plugins
    /// `debug/noop`, `debug/provide`, `debug/fault`, `debug/log`, `debug/echo`. An application adds its plugin crates to it.
    pub fn host() -> Builtins {
        let mut table = Builtins::new();
        table.insert(cordis_tools::ToolsPlugin);
        table.insert(cordis_system_prompt::SystemPromptPlugin);
        table.insert(crate::debug::Noop);
        table.insert(crate::debug::Provide);
        table.insert(crate::debug::Claimer);
        table.insert(crate::fault::Fault);
        table.insert(crate::log_probe::LogProbe);
        table.insert(crate::echo::Echo);
        table
    }

    /// Adds (or replaces) a plugin under its own name.
    pub fn insert(&mut self, plugin: impl ErasedPlugin) -> &mut Self {
        self.insert_arc(Arc::new(plugin))
    }

    /// Adds (or replaces) a shared plugin under its own name.
    pub fn insert_arc(&mut self, plugin: Arc<dyn ErasedPlugin>) -> &mut Self {
        self.plugins.insert(plugin.name().to_owned(), plugin);
        self
    }

    /// Registers (or, for a kind of the same label, replaces) an entry kind: entries whose
    /// name it recognizes load their vetted file through it.
    pub fn insert_kind(&mut self, kind: impl EntryKind + 'static) -> &mut Self {
        let kind: Arc<dyn EntryKind> = Arc::new(kind);
        match self.kinds.iter_mut().find(|k| k.label() == kind.label()) {
            Some(slot) => *slot = kind,
            None => self.kinds.push(kind),
        }
        self
    }

    /// The first registered entry kind that recognizes the entry name `name`.
    pub fn kind_for(&self, name: &str) -> Option<Arc<dyn EntryKind>> {
        self.kinds.iter().find(|k| k.recognizes(name)).cloned()
    }

    /// The plugin called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn ErasedPlugin>> {
        self.plugins.get(name).cloned()
    }

    /// Every name an entry may use (plugins and group names), sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.plugins.keys().cloned().collect();
        names.extend(GROUP_NAMES.iter().map(|s| (*s).to_owned()));
        names.sort();
        names
    }

    /// The known names closest to `name` (by edit distance; ties sorted, at most three).
    pub fn suggest(&self, name: &str) -> Vec<String> {
        let limit = (name.chars().count() / 3).max(2);
        let mut scored: Vec<(usize, String)> = self
            .names()
            .into_iter()
            .map(|n| (strsim::damerau_levenshtein(name, &n), n))
            .filter(|(distance, _)| *distance <= limit)
            .collect();
        scored.sort();
        let best = scored.first().map_or(0, |s| s.0);
        scored
            .into_iter()
            .take_while(|(d, _)| *d == best)
            .take(3)
            .map(|(_, n)| n)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_find_a_typo_and_nothing_for_noise() {
        let table = Builtins::host();
        assert_eq!(table.suggest("debug/noopp")[0], "debug/noop");
        assert_eq!(table.suggest("debug/fualt")[0], "debug/fault");
        assert!(table.suggest("zzzzzz").is_empty());
    }
}
