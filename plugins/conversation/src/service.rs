//! The `llm` service: runs the `llm/request` waterfall, the caller's check, then the adapter.

use std::sync::Arc;

use cordis_runtime::{Context, Service, Waterfall};

use crate::adapter::{ChunkStream, LlmAdapter, LlmError};
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
        }
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
