//! Tool views of a page: each call and result through its tool's presenter.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cordis_presenter::{PresentError, Presentation, Presenters, ResultView, ToolPresenter};
use cordis_schema::ScopeKey;
use cordis_session::{SessionEvent, ToolCallData, ToolResultData};
use cordis_tools::ToolRegistry;
use serde_json::Value;

use crate::service::{ToolView, ViewFor};

/// The view of each event of `page` (same length and order): a `tool/call` gets its tool's
/// presentation, a `tool/result` one when its call is on `page` (a pair split across pages
/// gets none); every other event none.
///
/// A tool presents when a presenter is registered for it and, with a registry, it is visible
/// in `scope` (`None`: the global layer). Arguments that are not JSON, and a presenter that
/// fails or panics, give no view and a warning.
pub fn views(
    page: &[SessionEvent],
    scope: Option<ScopeKey>,
    tools: Option<&ToolRegistry>,
    presenters: Option<&Presenters>,
) -> Vec<Option<ToolView>> {
    let Some(presenters) = presenters else {
        return vec![None; page.len()];
    };
    let presenter_for = |name: &str| -> Option<std::sync::Arc<dyn ToolPresenter>> {
        if tools.is_some_and(|t| t.get(name, scope).is_none()) {
            return None;
        }
        presenters.get(name)
    };
    page.iter()
        .enumerate()
        .map(|(i, event)| {
            if let Ok(call) = event.data_as::<ToolCallData>() {
                let presenter = presenter_for(&call.name)?;
                let args = arguments(event, &call.arguments)?;
                let view = guarded(event, &call.name, || presenter.present_call(&args))?;
                return Some(ToolView {
                    for_: ViewFor::Call,
                    view,
                });
            }
            let result = event.data_as::<ToolResultData>().ok()?;
            let (call_event, call) = page[..i].iter().rev().find_map(|e| {
                e.data_as::<ToolCallData>()
                    .ok()
                    .filter(|c| c.call_id == result.call_id)
                    .map(|c| (e, c))
            })?;
            let presenter = presenter_for(&call.name)?;
            let args = arguments(call_event, &call.arguments)?;
            let view = guarded(event, &call.name, || {
                presenter.present_result(
                    &args,
                    ResultView {
                        content: &result.content,
                        is_error: result.is_error,
                    },
                )
            })?;
            Some(ToolView {
                for_: ViewFor::Result,
                view,
            })
        })
        .collect()
}

/// The logged arguments text as JSON; `None` (logged) when it is not JSON.
fn arguments(event: &SessionEvent, text: &str) -> Option<Value> {
    match serde_json::from_str(text) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(
                seq = event.seq,
                "history: the arguments of the call are not JSON ({e}); shipped without a view"
            );
            None
        }
    }
}

/// Runs a presenter; a failure or a panic is logged and gives no view.
fn guarded(
    event: &SessionEvent,
    tool: &str,
    present: impl FnOnce() -> Result<Presentation, PresentError>,
) -> Option<Presentation> {
    match catch_unwind(AssertUnwindSafe(present)) {
        Ok(Ok(p)) => Some(p),
        Ok(Err(e)) => {
            tracing::warn!(seq = event.seq, kind = %event.kind, tool, "history: presenter failed ({e}); shipped without a view");
            None
        }
        Err(_) => {
            tracing::warn!(seq = event.seq, kind = %event.kind, tool, "history: presenter panicked; shipped without a view");
            None
        }
    }
}
