//! Tools a session loaded with `tool_search`: read back from its log (the one place the fact
//! lives, so a resumed or compacted session sends what it sent before) and appended after the
//! assembly's prefix.
//!
//! # Determinism
//! Each load's tools are appended in the deferred list's canonical order, loads in the order
//! the log records them, each tool once: a function of the log and the composition, never of
//! registration or listing order. Appending by load (rather than re-sorting all loaded tools)
//! keeps every earlier request's tools a prefix of the next request's.

use std::collections::BTreeSet;

use cordis_conversation::LlmRequest;
use cordis_session::{RequestHeader, SessionEvent, ToolResultData, kinds};
use cordis_system_prompt::{TOOL_SEARCH, ToolSchema};

/// The names each successful `tool_search` result of `events` loaded, in log order.
pub(crate) fn loads(events: &[SessionEvent]) -> Vec<Vec<String>> {
    events
        .iter()
        .filter(|e| {
            e.kind == kinds::TOOL_RESULT
                && e.data.get("name").and_then(|n| n.as_str()) == Some(TOOL_SEARCH)
        })
        .filter_map(|e| e.data_as::<ToolResultData>().ok())
        .filter(|d| !d.is_error)
        .filter_map(|d| {
            let names = d.content.get("loaded")?.as_array()?;
            Some(
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect(),
            )
        })
        .collect()
}

/// `prefix` followed by the tools of `deferred` that `loads` name (see the module doc); names
/// no longer deferred are skipped. Returns the tools and the names appended.
pub(crate) fn with_loaded(
    mut prefix: Vec<ToolSchema>,
    deferred: &[ToolSchema],
    loads: &[Vec<String>],
) -> (Vec<ToolSchema>, BTreeSet<String>) {
    let mut appended = BTreeSet::new();
    for load in loads {
        // `deferred` is in canonical order and names each tool once.
        for tool in deferred.iter().filter(|t| load.contains(&t.name)) {
            if appended.insert(tool.name.clone()) {
                prefix.push(tool.clone());
            }
        }
    }
    (prefix, appended)
}

/// When `header` is `last` with only loaded tools appended: their names, in order.
pub(crate) fn tool_load(
    last: &LlmRequest,
    header: &RequestHeader,
    loaded: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let tools = header.tools.as_deref().unwrap_or_default();
    let extra = tools.strip_prefix(last.tools.as_slice())?;
    let pure = last.config == header.config
        && last.system == header.system
        && !extra.is_empty()
        && extra.iter().all(|t| loaded.contains(&t.name));
    pure.then(|| extra.iter().map(|t| t.name.clone()).collect())
}
