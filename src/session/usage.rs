//! Usage accounting: what the model answers of a session reported, what the provider's prompt
//! cache served, how full the context window is, and what it cost.
//!
//! Everything is read from the session's log (the usage of every answer and every compaction
//! summary), so the terminal's footer and `/usage`, ACP's `usage_update` and the page say the
//! same about the same session, live or resumed. One [`UsageSummary`] is the model; the front
//! ends only word it.
//!
//! # Examples
//! `/usage` after three answers on a priced model with a window:
//!
//! ```text
//! session s1: 3600 tokens in, 60 tokens out, over 3 model answers that reported usage;
//! cached input: 2048 of 3600 tokens (56.9%); context: 1400 of 131072 tokens (1.1%); cost: $0.000551
//! ```
//! (one line).

use std::collections::BTreeMap;

use cordis_agent_loop::Agent;
use cordis_agent_loop::budget::{self, dollars};
use cordis_llm::{Llm, Usage};
use cordis_session::{SessionEvent, SessionSource, SessionStore, kinds};
use serde::Serialize;

/// A session's usage from event `from` on, as its log tells it (the page's usage panel reads
/// it as JSON, camelCase).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageSummary {
    /// Model answers (and compaction summaries) that reported usage.
    pub answers: u64,
    /// Input (prompt) tokens over them.
    pub input_tokens: u64,
    /// Of the input tokens, those the provider served from its prompt cache (as far as it
    /// said: an answer without a cached count counts none).
    pub cached_input_tokens: u64,
    /// Some answer said how many input tokens were cached (else the cache is not measured).
    pub cache_reported: bool,
    /// Output tokens over them.
    pub output_tokens: u64,
    /// The input tokens of the latest request, the context the conversation fills; `None`
    /// when no answer reported usage, or a compaction replaced the conversation since.
    pub context_tokens: Option<u64>,
    /// The model's context window (the `llm` entry's `contextWindow`).
    pub context_window: Option<u64>,
    /// What the answers cost in US dollars, when the `llm` entry's `prices` price every model
    /// that answered.
    pub cost_usd: Option<f64>,
}

/// A share as a percentage with one decimal.
fn percent(part: u64, whole: u64) -> String {
    #[expect(
        clippy::cast_precision_loss,
        reason = "a percentage with one decimal of token counts far below 2^52"
    )]
    let share = part as f64 * 100.0 / whole as f64;
    format!("{share:.1}%")
}

impl UsageSummary {
    /// The usage of `events` from `from` on; `model` answered before the first
    /// `request/header`, and `llm` (when given) has the price table and the window.
    pub fn of(events: &[SessionEvent], from: usize, llm: Option<&Llm>, model: &str) -> Self {
        // The model in effect at `from`: the latest header before it.
        let model = events
            .get(..from)
            .unwrap_or(events)
            .iter()
            .rev()
            .find_map(budget::header_model)
            .unwrap_or(model);
        let tail = events.get(from..).unwrap_or_default();
        let mut summary = UsageSummary {
            context_window: llm.and_then(Llm::context_window),
            cost_usd: llm.filter(|l| l.is_priced()).map(|_| 0.0),
            ..UsageSummary::default()
        };
        for (_, model, usage) in budget::usages_by_model(tail, model) {
            summary.answers += 1;
            summary.input_tokens += usage.input_tokens;
            summary.output_tokens += usage.output_tokens;
            if let Some(cached) = usage.cached_input_tokens {
                summary.cache_reported = true;
                summary.cached_input_tokens += cached.min(usage.input_tokens);
            }
            summary.cost_usd = summary
                .cost_usd
                .zip(llm.and_then(|l| l.cost(model, &usage)))
                .map(|(sum, c)| sum + c);
        }
        let latest = events.iter().rev().find_map(|e| match e.kind.as_str() {
            kinds::ASSISTANT_MESSAGE => budget::usages(std::slice::from_ref(e))
                .next()
                .map(|u| Some(u.input_tokens)),
            kinds::COMPACTION => Some(None),
            _ => None,
        });
        summary.context_tokens = latest.flatten();
        summary
    }

    /// The usage of `agent`'s session from event `from` on, priced by the composition's `llm`.
    pub fn of_agent(agent: &Agent, from: usize) -> Self {
        let llm = agent.context().and_then(|c| c.get::<Llm>());
        let model = agent.call_config().model;
        agent
            .session()
            .with_events(|events| UsageSummary::of(events, from, llm.as_deref(), &model))
    }

    /// The usage of session `id` as `root`'s store has it (open here or on disk), priced by
    /// `root`'s `llm` (its default model answered before any `request/header`); `None` when
    /// there is no store or no such session.
    pub async fn of_stored(root: &cordis_runtime::Context, id: &str) -> Option<Self> {
        let store = root.get::<SessionStore>()?;
        let llm = root.get::<Llm>();
        let model = llm
            .as_deref()
            .and_then(Llm::default_model)
            .unwrap_or_default()
            .to_owned();
        let of = |events: &[SessionEvent]| UsageSummary::of(events, 0, llm.as_deref(), &model);
        Some(match store.source(id).await.ok()? {
            SessionSource::Attached(session) => session.with_events(of),
            SessionSource::Detached(snapshot) => of(snapshot.events()),
        })
    }

    /// The share of the input the cache served (`None` before any input, or when no answer
    /// reported a cached count).
    pub fn hit_ratio(&self) -> Option<String> {
        (self.cache_reported && self.input_tokens > 0)
            .then(|| percent(self.cached_input_tokens, self.input_tokens))
    }

    /// `1400 of 131072 tokens (1.1%)`: the latest request's input against the window, when
    /// both are known.
    pub fn context_text(&self) -> Option<String> {
        let (used, window) = (self.context_tokens?, self.context_window?);
        Some(if window == 0 {
            format!("{used} tokens")
        } else {
            format!("{used} of {window} tokens ({})", percent(used, window))
        })
    }

    /// The cost as a dollar amount, when priced.
    pub fn cost_text(&self) -> Option<String> {
        self.cost_usd.map(dollars)
    }
}

/// The model answers that reported usage in the agent's log from event `from` on, and their
/// input and output tokens.
pub fn usage_since(agent: &Agent, from: usize) -> (u64, u64, u64) {
    let s = UsageSummary::of_agent(agent, from);
    (s.answers, s.input_tokens, s.output_tokens)
}

/// The running cost of a session for ACP's `usage_update` (cumulative, in US dollars): what
/// its log cost when the connection attached, then each usage it sees, priced by the model of
/// the latest `request/header`.
#[derive(Debug, Clone)]
pub struct CostMeter {
    llm: Llm,
    model: String,
    /// The cost so far; `None` once an unpriced model answered.
    total: Option<f64>,
    /// The cost up to and including each usage of the log at attach (a replay's items).
    at_seq: BTreeMap<u64, Option<f64>>,
}

impl CostMeter {
    /// The meter of a session whose log is `events` (its agent on `model`), or `None` when
    /// `llm` prices nothing.
    pub fn of(llm: &Llm, model: &str, events: &[SessionEvent]) -> Option<Self> {
        if !llm.is_priced() {
            return None;
        }
        let mut total = Some(0.0);
        let mut at_seq = BTreeMap::new();
        for (seq, model, usage) in budget::usages_by_model(events, model) {
            total = total.zip(llm.cost(model, &usage)).map(|(t, c)| t + c);
            at_seq.insert(seq, total);
        }
        let model = events
            .iter()
            .rev()
            .find_map(budget::header_model)
            .unwrap_or(model);
        Some(CostMeter {
            llm: llm.clone(),
            model: model.to_owned(),
            total,
            at_seq,
        })
    }

    /// The meter of `agent`'s session, priced by the composition's `llm` (`None` unpriced).
    pub fn of_agent(agent: &Agent) -> Option<Self> {
        let llm = agent.context().and_then(|c| c.get::<Llm>())?;
        let model = agent.call_config().model;
        agent
            .session()
            .with_events(|events| CostMeter::of(&llm, &model, events))
    }

    /// Follows a live event: a `request/header` sets the model, a compaction adds its cost.
    pub fn observe(&mut self, event: &SessionEvent) {
        if let Some(model) = budget::header_model(event) {
            model.clone_into(&mut self.model);
        } else if event.kind == kinds::COMPACTION
            && let Some(usage) = budget::usages(std::slice::from_ref(event)).next()
        {
            self.add(&usage);
        }
    }

    /// Adds a live answer's usage; the session's cost with it.
    pub fn add(&mut self, usage: &Usage) -> Option<f64> {
        let cost = self.llm.cost(&self.model, usage);
        self.total = self.total.zip(cost).map(|(t, c)| t + c);
        self.total
    }

    /// The session's cost up to the answer at `seq` of the log at attach (a replay).
    pub fn at(&self, seq: u64) -> Option<f64> {
        self.at_seq.get(&seq).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use cordis_llm::ScriptedAdapter;
    use serde_json::{Value, json};

    use super::*;

    fn event(seq: u64, kind: &str, data: Value) -> SessionEvent {
        serde_json::from_value(json!({"type": kind, "seq": seq, "time": 0, "data": data})).unwrap()
    }

    fn header(seq: u64, model: &str) -> SessionEvent {
        event(
            seq,
            kinds::REQUEST_HEADER,
            json!({"header": {"config": {"model": model}}, "reason": "initial"}),
        )
    }

    fn answer(seq: u64, input: u64, cached: Option<u64>, output: u64) -> SessionEvent {
        let mut usage = json!({"inputTokens": input, "outputTokens": output});
        if let Some(c) = cached {
            usage["cachedInputTokens"] = json!(c);
        }
        event(
            seq,
            kinds::ASSISTANT_MESSAGE,
            json!({"turn": 1, "step": 1, "content": "x", "usage": usage}),
        )
    }

    fn compaction(seq: u64, input: u64, output: u64) -> SessionEvent {
        event(
            seq,
            kinds::COMPACTION,
            json!({"summary": "s", "trigger": "auto", "throughSeq": seq - 1, "messages": 2,
                   "usage": {"inputTokens": input, "outputTokens": output}}),
        )
    }

    /// An `llm` pricing `cheap` at $1 per million tokens of any kind (`dear` at $10), with a
    /// 1000-token window.
    fn llm() -> Llm {
        let price = |p: f64| cordis_llm::Price {
            input: p,
            cached_input: None,
            output: p,
        };
        Llm::new(
            cordis_runtime::Context::root(),
            Arc::new(ScriptedAdapter::new(Vec::new())),
        )
        .with_context_window(Some(1000))
        .with_prices(BTreeMap::from([
            ("cheap".to_owned(), price(1.0)),
            ("dear".to_owned(), price(10.0)),
        ]))
    }

    #[tokio::test]
    async fn each_answer_is_priced_by_the_model_of_the_header_before_it() {
        let llm = llm();
        let events = [
            answer(0, 100, None, 0),
            header(1, "dear"),
            answer(2, 100, Some(50), 0),
            header(3, "cheap"),
            answer(4, 100, None, 0),
        ];
        // Before any header the agent's model answered.
        let s = UsageSummary::of(&events, 0, Some(&llm), "cheap");
        assert!((s.cost_usd.unwrap() - 0.0012).abs() < 1e-12, "{s:?}");
        assert_eq!((s.cached_input_tokens, s.cache_reported), (50, true));
        assert_eq!(s.hit_ratio().as_deref(), Some("16.7%"));
        // From seq 3 on, the header before it still decides.
        let s = UsageSummary::of(&events, 2, Some(&llm), "cheap");
        assert!((s.cost_usd.unwrap() - 0.0011).abs() < 1e-12, "{s:?}");
        // An unpriced model that answered leaves the cost unknown, not low.
        let s = UsageSummary::of(&events, 0, Some(&llm), "free");
        assert_eq!(s.cost_usd, None);
        let meter = CostMeter::of(&llm, "free", &events).unwrap();
        assert_eq!(meter.at(4), None);
    }

    #[tokio::test]
    async fn compaction_usage_counts_and_the_context_waits_for_the_next_answer() {
        let llm = llm();
        let mut events = vec![
            header(0, "cheap"),
            answer(1, 900, Some(800), 10),
            compaction(2, 950, 40),
        ];
        let s = UsageSummary::of(&events, 0, Some(&llm), "cheap");
        assert_eq!((s.answers, s.input_tokens, s.output_tokens), (2, 1850, 50));
        assert_eq!(s.context_tokens, None);
        assert_eq!(s.context_text(), None);
        events.push(answer(3, 120, None, 5));
        let s = UsageSummary::of(&events, 0, Some(&llm), "cheap");
        assert_eq!(
            s.context_text().as_deref(),
            Some("120 of 1000 tokens (12.0%)")
        );
        // The meter replays the same running total, and goes on live from the log's end.
        let mut meter = CostMeter::of(&llm, "x", &events).unwrap();
        assert!((meter.at(2).unwrap() - 0.0019).abs() < 1e-12);
        let usage = Usage {
            input_tokens: 1000,
            output_tokens: 0,
            cached_input_tokens: None,
        };
        let total = meter.add(&usage).unwrap();
        assert!((total - (0.002_025 + 0.001)).abs() < 1e-12, "{total}");
        meter.observe(&header(5, "dear"));
        let total = meter.add(&usage).unwrap();
        assert!((total - (0.003_025 + 0.01)).abs() < 1e-12, "{total}");
    }

    #[test]
    fn without_usage_nothing_is_claimed() {
        let s = UsageSummary::of(&[], 0, None, "m");
        assert_eq!(s, UsageSummary::default());
        assert_eq!(
            (s.hit_ratio(), s.context_text(), s.cost_text()),
            (None, None, None)
        );
    }
}
