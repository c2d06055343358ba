//! Inline scripted responses shared by the boots of one configuration.
//!
//! A process that boots one plan many times (`cordis stress`, `permute`, benchmarks) applies
//! the `llm` entry with the same inline `responses` each time; copying them (every text delta,
//! every tool call's JSON arguments) cost more than the rest of the apply. The adapter holds
//! them behind an `Arc` instead, and [`shared`] hands out the one a recent apply on this thread
//! built from responses exactly equal to the configured ones. "Exactly": compared as
//! [`same_response`] does, which tells `0.0` from `-0.0` (the derived `PartialEq` does not,
//! and the two are written differently into a tool call's arguments), so the responses served
//! are always the ones configured.

use std::cell::RefCell;
use std::sync::Arc;

use crate::scripted::{ScriptedResponse, ScriptedToolCall};

/// How many distinct response lists one thread keeps.
const KEPT: usize = 4;

thread_local! {
    static KEPT_LISTS: RefCell<Vec<Arc<[ScriptedResponse]>>> = const { RefCell::new(Vec::new()) };
}

/// `responses`, shared with an earlier call on this thread given exactly the same responses.
pub(crate) fn shared(responses: &[ScriptedResponse]) -> Arc<[ScriptedResponse]> {
    if responses.is_empty() {
        return Arc::from(Vec::new());
    }
    KEPT_LISTS.with(|kept| {
        let mut kept = kept.borrow_mut();
        if let Some(list) = kept.iter().find(|l| same_responses(l, responses)) {
            return list.clone();
        }
        let list: Arc<[ScriptedResponse]> = responses.into();
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push(list.clone());
        list
    })
}

fn same_responses(a: &[ScriptedResponse], b: &[ScriptedResponse]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_response(a, b))
}

/// Equal in every field (destructured, so a field added later must be compared here too).
fn same_response(a: &ScriptedResponse, b: &ScriptedResponse) -> bool {
    let ScriptedResponse {
        reasoning,
        text,
        tool_calls,
        usage,
        delay_ms,
        error,
        finish,
    } = a;
    *reasoning == b.reasoning
        && *text == b.text
        && *usage == b.usage
        && *delay_ms == b.delay_ms
        && *error == b.error
        && *finish == b.finish
        && tool_calls.len() == b.tool_calls.len()
        && tool_calls
            .iter()
            .zip(&b.tool_calls)
            .all(|(a, b)| same_call(a, b))
}

fn same_call(a: &ScriptedToolCall, b: &ScriptedToolCall) -> bool {
    let ScriptedToolCall {
        id,
        name,
        arguments,
    } = a;
    *id == b.id
        && *name == b.name
        && match (arguments, &b.arguments) {
            (None, None) => true,
            (Some(a), Some(b)) => cordis_schema::same_json(a, b),
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn calling(arguments: serde_json::Value) -> Vec<ScriptedResponse> {
        vec![ScriptedResponse {
            tool_calls: vec![ScriptedToolCall {
                id: None,
                name: "write_file".into(),
                arguments: Some(arguments),
            }],
            ..ScriptedResponse::text("hi")
        }]
    }

    #[test]
    fn equal_responses_share_one_list_and_any_difference_gets_its_own() {
        let a = calling(json!({"path": "a", "n": [1, 2.5, {"x": 0.0}]}));
        let first = shared(&a);
        assert_eq!(&*first, &a[..]);
        assert!(Arc::ptr_eq(&first, &shared(&a.clone())), "equal: shared");
        for other in [
            calling(json!({"path": "a", "n": [1, 2.5, {"x": -0.0}]})),
            calling(json!({"path": "a", "n": [1.0, 2.5, {"x": 0.0}]})),
            calling(json!({"path": "b", "n": [1, 2.5, {"x": 0.0}]})),
            calling(json!({"path": "a", "n": [1, 2.5, {"y": 0.0}]})),
            vec![ScriptedResponse::text("hi")],
        ] {
            let got = shared(&other);
            assert!(!Arc::ptr_eq(&first, &got), "{other:?}");
            // The list served is the one asked for, written the same way.
            assert_eq!(
                serde_json::to_string(&got[0].tool_calls.first().map(|c| &c.arguments)).unwrap(),
                serde_json::to_string(&other[0].tool_calls.first().map(|c| &c.arguments)).unwrap()
            );
        }
        assert!(shared(&[]).is_empty());
    }
}
