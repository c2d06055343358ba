//! Budgets: what a session has spent against the agent loop's `budget`.
//!
//! Spending is read from the log, never kept in a counter: every usage the model reported (its
//! answers and its compaction summaries) counts, so a resumed session goes on from what it
//! spent, and a replay decides exactly as the live run did.
//!
//! A budget is checked before each request: once the session has spent `maxTokens` tokens or
//! `maxCostUsd` dollars, the turn ends with `turn/end {kind: budget}` instead of sending another
//! request. A request's cost is only known once it is answered, so the request that reaches the
//! budget is the last one sent.
//!
//! Cost is priced by the `llm` entry's `prices`, per model (the model of the `request/header`
//! in effect when the answer came). A cost budget without a price for a model the loop can run
//! is refused when the loop is applied ([`check`]); a session that still meets an unpriced model
//! (an agent created later on another model) is stopped, since its spending cannot be told.

use cordis_conversation::{Llm, Usage};
use cordis_session::{AssistantMessageData, CompactionData, SessionEvent, kinds};
use serde_json::Value;

use crate::config::{AgentOptions, Budget};

/// The usage one event reports: an answer's, or a compaction summary's.
fn usage_of(e: &SessionEvent) -> Option<Usage> {
    match e.kind.as_str() {
        kinds::ASSISTANT_MESSAGE => e.data_as::<AssistantMessageData>().ok()?.usage,
        kinds::COMPACTION => e.data_as::<CompactionData>().ok()?.usage,
        _ => None,
    }
}

/// Every usage the model reported in `events`: its answers and its compaction summaries.
pub fn usages(events: &[SessionEvent]) -> impl Iterator<Item = Usage> + '_ {
    events.iter().filter_map(usage_of)
}

/// Every usage the model reported in `events`, with the seq of its event and the model that
/// answered: the model of the latest `request/header` before it, `model` before the first.
pub fn usages_by_model<'a>(
    events: &'a [SessionEvent],
    model: &'a str,
) -> impl Iterator<Item = (u64, &'a str, Usage)> + 'a {
    events
        .iter()
        .scan(model, |current, e| {
            if let Some(m) = header_model(e) {
                *current = m;
            }
            Some(usage_of(e).map(|u| (e.seq, *current, u)))
        })
        .flatten()
}

/// The model a `request/header` event names (`None` for any other event).
pub fn header_model(e: &SessionEvent) -> Option<&str> {
    (e.kind == kinds::REQUEST_HEADER)
        .then(|| {
            e.data
                .pointer("/header/config/model")
                .and_then(Value::as_str)
        })
        .flatten()
}

/// What the usages of `events` cost in US dollars, priced by `llm`'s table (`model` answered
/// before the first `request/header`).
///
/// # Errors
/// The first model that answered and has no price.
pub fn cost(llm: &Llm, model: &str, events: &[SessionEvent]) -> Result<f64, String> {
    usages_by_model(events, model).try_fold(0.0, |sum, (_, m, usage)| {
        llm.cost(m, &usage)
            .map(|c| sum + c)
            .ok_or_else(|| m.to_owned())
    })
}

/// A dollar amount as `/usage` and budget messages write it: cents and below to a millionth of
/// a dollar, larger amounts to a hundredth of a cent.
pub fn dollars(amount: f64) -> String {
    if amount != 0.0 && amount.abs() < 0.01 {
        format!("${amount:.6}")
    } else {
        format!("${amount:.4}")
    }
}

/// Why the session may not send another request, when a budget is spent. `model` is the
/// agent's model (it answered before the session's first `request/header`).
pub fn spent(budget: &Budget, llm: &Llm, model: &str, events: &[SessionEvent]) -> Option<String> {
    if let Some(max) = budget.max_tokens {
        let used: u64 = usages(events)
            .map(|u| u.input_tokens + u.output_tokens)
            .sum();
        if used >= max {
            return Some(format!(
                "the session's token budget is spent: {used} tokens used of budget.maxTokens {max}"
            ));
        }
    }
    let max = budget.max_cost_usd?;
    match cost(llm, model, events) {
        Ok(used) if used >= max => Some(format!(
            "the session's cost budget is spent: {} used of budget.maxCostUsd {}",
            dollars(used),
            dollars(max)
        )),
        Ok(_) => None,
        Err(unpriced) => Some(format!(
            "budget.maxCostUsd cannot be kept: the llm entry's prices have no price for model {unpriced}"
        )),
    }
}

/// The loop's `budget` cannot be kept with its `llm` entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    /// `maxCostUsd` is negative or not a finite number.
    #[error(
        "agent-loop: budget.maxCostUsd must be a finite number of US dollars, at least 0, not {0}"
    )]
    BadCost(f64),
    /// `maxCostUsd` with a model the price table does not price.
    #[error(
        "agent-loop: budget.maxCostUsd needs the cost of every model, but the llm entry has no price for model {model}: add prices: {{{model}: {{input, cachedInput, output}}}} (US dollars per million tokens) to the llm entry"
    )]
    Unpriced {
        /// The model.
        model: String,
    },
}

/// Checks at apply that `budget` can be kept: a cost budget is a finite amount, and `llm`
/// prices every model the loop may run (the llm entry's `model` and `models`, and `agents`').
///
/// # Errors
/// [`BudgetError`] naming the bad amount or the first unpriced model.
pub fn check(budget: &Budget, llm: &Llm, agents: &[AgentOptions]) -> Result<(), BudgetError> {
    let Some(max) = budget.max_cost_usd else {
        return Ok(());
    };
    if !max.is_finite() || max < 0.0 {
        return Err(BudgetError::BadCost(max));
    }
    let models = llm.models().into_iter();
    let mut models = models.chain(agents.iter().map(|a| a.model.clone()));
    match models.find(|m| llm.price_of(m).is_none()) {
        Some(model) => Err(BudgetError::Unpriced { model }),
        None => Ok(()),
    }
}
