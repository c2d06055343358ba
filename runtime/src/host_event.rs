//! Events a host emits on the root scope about its configuration, for plugins to observe.
//!
//! They live here, not in the host crate, because plugins depend on the runtime and never on
//! the host.

use std::collections::BTreeMap;

use crate::event::Event;
use crate::waterfall::Waterfall;

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

/// What entries offer people beside the model's request (an MCP server's prompts and
/// resources), gathered when a host reports on a boot: each listener adds its own entries under
/// its own keys (`mcp/<server>`) as canonical JSON text and passes the map on.
///
/// # Determinism
/// The map is keyed, so the order listeners run in (their registration order) cannot show;
/// a listener must write canonically ordered text and never read other keys.
pub struct Offered;

impl Waterfall for Offered {
    const NAME: &'static str = "host/offered";
    type Value = BTreeMap<String, String>;
}
