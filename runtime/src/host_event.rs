//! Events a host emits on the root scope about its configuration, for plugins to observe.
//!
//! They live here, not in the host crate, because plugins depend on the runtime and never on
//! the host.

use crate::event::Event;

/// A configuration reload finished: the live entries now match the file.
///
/// Entry ids in each list are sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigReloaded {
    /// The reload's number (1 for the first reload after boot).
    pub number: u64,
    /// Entries loaded that were absent or disabled before.
    pub added: Vec<String>,
    /// Entries disposed because they were removed or disabled.
    pub removed: Vec<String>,
    /// Entries whose definition changed, disposed and loaded again with the new definition.
    pub restarted: Vec<String>,
    /// Enabled entries that are not active after the reload (failed, or pending on a service).
    pub failed: Vec<String>,
}

impl Event for ConfigReloaded {
    const NAME: &'static str = "config/reloaded";
    type Output = ();
}
