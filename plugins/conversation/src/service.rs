//! The `llm` service: runs the `llm/request` waterfall, the caller's check, then the adapter.

use std::collections::BTreeMap;
use std::sync::Arc;

use cordis_runtime::{Context, Service, Waterfall};
use serde::{Deserialize, Serialize};

use crate::adapter::{ChunkStream, LlmAdapter, LlmError, Usage};
use crate::request::{FrozenRequest, LlmRequest};

/// The `llm/request` waterfall: listeners see the frozen request just before the adapter and may
/// replace it with a new frozen request (never mutate it).
///
/// A replacement after the agent loop logged the request header is exactly what the
/// reconstructability invariant exists to catch: the check runs after this waterfall.
pub struct LlmRequestHook;

impl Waterfall for LlmRequestHook {
    const NAME: &'static str = "llm/request";
    type Value = FrozenRequest;
}

/// A last check on the final request (after every `llm/request` listener); an `Err` message
/// rejects the call before the adapter sees it.
pub type RequestCheck<'a> = &'a (dyn Fn(&LlmRequest) -> Result<(), String> + Send + Sync);

/// What one model's tokens cost, in US dollars per million tokens (an entry of the `llm`
/// entry's `prices`).
///
/// # Examples
///
/// ```
/// use cordis_conversation::{Price, Usage};
///
/// let price = Price { input: 0.27, cached_input: Some(0.07), output: 1.10 };
/// let usage = Usage { input_tokens: 1_000_000, output_tokens: 0, cached_input_tokens: Some(500_000) };
/// assert!((price.cost(&usage) - 0.17).abs() < 1e-9);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Price {
    /// Input tokens the provider did not serve from its cache.
    pub input: f64,
    /// Input tokens served from the provider's prompt cache (default: `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Output tokens.
    pub output: f64,
}

impl Price {
    /// The cost of `usage` in US dollars: cached input tokens at `cachedInput`, the rest of the
    /// input at `input`, the output at `output`.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage
            .cached_input_tokens
            .unwrap_or(0)
            .min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        #[expect(
            clippy::cast_precision_loss,
            reason = "token counts stay far below 2^52; a cost is an estimate"
        )]
        let dollars = fresh as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + usage.output_tokens as f64 * self.output;
        dollars / 1_000_000.0
    }

    /// The first field that is negative or not a finite number, with its value (`cachedInput`
    /// as spelled in the configuration).
    pub fn invalid_field(&self) -> Option<(&'static str, f64)> {
        [
            ("input", Some(self.input)),
            ("cachedInput", self.cached_input),
            ("output", Some(self.output)),
        ]
        .into_iter()
        .find_map(|(name, v)| v.filter(|v| !v.is_finite() || *v < 0.0).map(|v| (name, v)))
    }
}

/// The model service.
#[derive(Clone)]
pub struct Llm {
    ctx: Context,
    adapter: Arc<dyn LlmAdapter>,
    default_model: Option<String>,
    models: Vec<String>,
    thought_levels: Vec<String>,
    image_input: bool,
    context_window: Option<u64>,
    prices: Arc<BTreeMap<String, Price>>,
}

impl Service for Llm {
    const NAME: &'static str = "llm";
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm")
            .field("adapter", &self.adapter.name())
            .finish_non_exhaustive()
    }
}

impl Llm {
    /// A service whose waterfall runs through `ctx` and whose calls go to `adapter`.
    pub fn new(ctx: Context, adapter: Arc<dyn LlmAdapter>) -> Self {
        Llm {
            ctx,
            adapter,
            default_model: None,
            models: Vec::new(),
            thought_levels: Vec::new(),
            image_input: false,
            context_window: None,
            prices: Arc::default(),
        }
    }

    /// Sets the price table, per model (the `llm` entry's `prices`).
    pub fn with_prices(mut self, prices: BTreeMap<String, Price>) -> Self {
        self.prices = Arc::new(prices);
        self
    }

    /// The price of `model`'s tokens, when the table has it.
    pub fn price_of(&self, model: &str) -> Option<&Price> {
        self.prices.get(model)
    }

    /// True when the configuration gives any price at all.
    pub fn is_priced(&self) -> bool {
        !self.prices.is_empty()
    }

    /// What `usage` of `model` cost in US dollars, when the table prices `model`.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price_of(model).map(|p| p.cost(usage))
    }

    /// Says whether the model takes images in user messages (the `llm` entry's `imageInput`).
    pub fn with_image_input(mut self, on: bool) -> Self {
        self.image_input = on;
        self
    }

    /// True when the model takes images in user messages.
    pub fn accepts_images(&self) -> bool {
        self.image_input
    }

    /// Sets the other models a session may switch to (the `llm` entry's `models`).
    pub fn with_models(mut self, models: Vec<String>) -> Self {
        self.models = models;
        self
    }

    /// The models a session may run on: the default first, then the others as configured
    /// (each once).
    pub fn models(&self) -> Vec<String> {
        let mut all: Vec<String> = self.default_model.iter().cloned().collect();
        for m in &self.models {
            if !all.contains(m) {
                all.push(m.clone());
            }
        }
        all
    }

    /// Sets the reasoning efforts a session may choose (the `llm` entry's `thoughtLevels`).
    pub fn with_thought_levels(mut self, levels: Vec<String>) -> Self {
        self.thought_levels = levels;
        self
    }

    /// The reasoning efforts a session may choose, as configured (none: the model has no
    /// thought level to choose).
    pub fn thought_levels(&self) -> &[String] {
        &self.thought_levels
    }

    /// Sets the model's context window in tokens (the `llm` entry's `contextWindow`).
    pub fn with_context_window(mut self, tokens: Option<u64>) -> Self {
        self.context_window = tokens;
        self
    }

    /// The model's context window in tokens, when the configuration states it.
    pub fn context_window(&self) -> Option<u64> {
        self.context_window
    }

    /// Sets the model agents use when they name none.
    pub fn with_default_model(mut self, model: Option<String>) -> Self {
        self.default_model = model;
        self
    }

    /// The model agents use when they name none (the plugin's `model`).
    pub fn default_model(&self) -> Option<&str> {
        self.default_model.as_deref()
    }

    /// The adapter.
    pub fn adapter(&self) -> &Arc<dyn LlmAdapter> {
        &self.adapter
    }

    /// Starts a call: `llm/request` waterfall, then `check` on the final request, then the
    /// adapter. Returns the request actually sent with its stream.
    ///
    /// # Errors
    /// [`LlmError::Hook`] when a listener panicked, [`LlmError::Rejected`] when `check` failed.
    ///
    /// # Cancel safety
    /// Cancel safe before the adapter is called; dropping the returned stream cancels the call.
    pub async fn stream(
        &self,
        request: FrozenRequest,
        check: Option<RequestCheck<'_>>,
    ) -> Result<(FrozenRequest, ChunkStream), LlmError> {
        let request = if self.ctx.waterfall_listener_count::<LlmRequestHook>() == 0 {
            request
        } else {
            self.ctx
                .waterfall::<LlmRequestHook>(request)
                .await
                .map_err(|e| LlmError::Hook(e.to_string()))?
        };
        if let Some(check) = check {
            check(&request).map_err(LlmError::Rejected)?;
        }
        let stream = self.adapter.stream(request.clone());
        Ok((request, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: Option<u64>, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
        }
    }

    const PRICE: Price = Price {
        input: 2.0,
        cached_input: Some(0.5),
        output: 8.0,
    };

    #[test]
    fn cached_input_tokens_are_priced_at_cached_input_and_the_rest_at_input() {
        // 600k fresh × $2 + 400k cached × $0.5 + 100k out × $8 = 1.2 + 0.2 + 0.8.
        let cost = PRICE.cost(&usage(1_000_000, Some(400_000), 100_000));
        assert!((cost - 2.2).abs() < 1e-9, "{cost}");
        // Nothing reported as cached: all of the input at `input`.
        let cost = PRICE.cost(&usage(1_000_000, None, 0));
        assert!((cost - 2.0).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn cached_input_defaults_to_the_input_price() {
        let price = Price {
            input: 1.0,
            cached_input: None,
            output: 0.0,
        };
        let cost = price.cost(&usage(1_000_000, Some(1_000_000), 0));
        assert!((cost - 1.0).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn a_cached_count_above_the_input_is_capped_at_the_input() {
        let cost = PRICE.cost(&usage(1_000_000, Some(5_000_000), 0));
        assert!((cost - 0.5).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn a_negative_or_infinite_price_names_its_field() {
        let bad = |input, cached, output| {
            Price {
                input,
                cached_input: cached,
                output,
            }
            .invalid_field()
        };
        assert_eq!(bad(1.0, Some(-0.5), 1.0), Some(("cachedInput", -0.5)));
        assert_eq!(
            bad(1.0, None, f64::INFINITY),
            Some(("output", f64::INFINITY))
        );
        assert!(bad(f64::NAN, None, 1.0).is_some_and(|(f, _)| f == "input"));
        assert_eq!(bad(0.0, Some(0.0), 0.0), None);
    }

    #[test]
    fn a_price_reads_camel_case_and_refuses_unknown_keys() {
        let p: Price =
            serde_json::from_str(r#"{"input": 0.27, "cachedInput": 0.07, "output": 1.1}"#).unwrap();
        assert_eq!(p.cached_input, Some(0.07));
        assert!(
            serde_json::from_str::<Price>(r#"{"input": 1, "output": 1, "cached": 1}"#).is_err()
        );
    }
}
