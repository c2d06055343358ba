//! Compaction of an agent's conversation: by hand (`/compact`) and before a request near the
//! context window.

use super::*;

/// Why [`Agent::compact`] did not compact.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// Busy or disposed.
    #[error(transparent)]
    Turn(#[from] TurnError),
    /// The model could not summarize; the conversation is unchanged.
    #[error("the compaction failed, the conversation is unchanged: {0}")]
    Failed(String),
    /// Cancelled ([`Agent::cancel`]) or disposed while the summary was asked for.
    #[error("the compaction was cancelled; the conversation is unchanged")]
    Cancelled,
}

impl Agent {
    /// Compacts the conversation now (`/compact [FOCUS]`): the model summarizes it, and a
    /// `compaction` event makes the summary the conversation's new start. Between turns only.
    ///
    /// # Errors
    /// [`CompactError`]: busy, disposed, cancelled, or the summary failed (the log is then
    /// unchanged).
    ///
    /// # Cancel safety
    /// Not cancel safe: use [`Agent::cancel`], which leaves the log unchanged.
    pub async fn compact(&self, focus: Option<String>) -> Result<CompactionData, CompactError> {
        let inner = &self.inner;
        if inner.disposed.load(Ordering::Acquire) {
            return Err(TurnError::Disposed(inner.id.clone()).into());
        }
        if inner.busy.swap(true, Ordering::AcqRel) {
            return Err(TurnError::Busy(inner.id.clone()).into());
        }
        if !inner.disposed.load(Ordering::Acquire) {
            inner.stop.send_replace(None);
        }
        self.signal_state(true);
        let mut stop_rx = inner.stop.subscribe();
        let outcome = tokio::select! {
            biased;
            _ = stop_rx.wait_for(Option::is_some) => Err(CompactError::Cancelled),
            result = self.compact_now(CompactionTrigger::Manual, focus) => {
                result.map_err(CompactError::Failed)
            }
        };
        inner.busy.store(false, Ordering::Release);
        self.signal_state(false);
        outcome
    }

    /// Compacts before the next request when the last one reached the threshold of the
    /// context window; a failure is told ([`AgentNotice`]) and the turn goes on.
    pub(super) async fn compact_if_due(&self, step: u64) -> Result<(), Failure> {
        let inner = &self.inner;
        let settings = inner.settings.compaction;
        let window = inner.deps.llm.context_window();
        if !settings.auto
            || !inner
                .session
                .with_events(|e| compaction::due(e, window, settings.threshold))
        {
            return Ok(());
        }
        if let Err(message) = self.compact_now(CompactionTrigger::Auto, None).await {
            let message = format!("automatic compaction failed, going on without it: {message}");
            tracing::warn!(agent = %inner.id, step, "{message}");
            inner.deps.ctx.emit(AgentNotice {
                agent: inner.id.clone(),
                message,
            });
        }
        Ok(())
    }

    /// Asks the model for the summary and logs the `compaction` (durable on return).
    pub(super) async fn compact_now(
        &self,
        trigger: CompactionTrigger,
        focus: Option<String>,
    ) -> Result<CompactionData, String> {
        let inner = &self.inner;
        let session = &inner.session;
        let messages = session.messages();
        if messages.is_empty() {
            return Err("there is no conversation to compact yet".into());
        }
        let moment = Moment::PreCompact {
            trigger: match trigger {
                CompactionTrigger::Manual => "manual",
                CompactionTrigger::Auto => "auto",
            }
            .to_owned(),
            focus: focus.clone(),
        };
        if let Some(point) = self.hook_point(0, moment).await {
            self.log_hook_runs(point.runs, 0, None)
                .map_err(|f| f.message)?;
            if let Some(reason) = point.block {
                return Err(format!("a PreCompact hook blocked it: {reason}"));
            }
        }
        let (request, dropped) = compaction::summary_request(
            self.call_config(),
            &messages,
            inner.settings.compaction.keep_tool_results,
            focus.as_deref(),
            session.id(),
        );
        let (_sent, mut stream) = inner
            .deps
            .llm
            .stream(FrozenRequest::new(request), None)
            .await
            .map_err(|e| e.to_string())?;
        let (mut summary, mut usage) = (String::new(), None);
        while let Some(chunk) = stream.next().await {
            match chunk.map_err(|e| e.to_string())? {
                Chunk::Text { delta } => summary.push_str(&delta),
                Chunk::Usage { usage: u } => usage = Some(u),
                Chunk::Finish {
                    reason: FinishReason::Error { message },
                } => return Err(message),
                Chunk::Finish {
                    reason: FinishReason::Aborted,
                } => return Err("the model call was aborted".into()),
                Chunk::Reasoning { .. } | Chunk::ToolCall { .. } | Chunk::Finish { .. } => {}
            }
        }
        if summary.trim().is_empty() {
            return Err("the model answered with an empty summary".into());
        }
        let summary = compaction::bounded_summary(summary);
        let data = session.with_events(|events| {
            compaction::record(
                summary,
                trigger,
                focus,
                events,
                messages.len(),
                dropped,
                usage,
            )
        });
        self.log(&data, None, 0).map_err(|f| f.message)?;
        self.flush(0).await.map_err(|f| f.message)?;
        Ok(data)
    }
}
