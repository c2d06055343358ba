//! The agent's hook points: the moments of a session the `hooks` plugin (or any listener of
//! [`AgentHook`]) may act on, and their runs logged.

use super::*;

impl Agent {
    /// Runs the `agent/hook` waterfall at `moment` when anyone listens; `None` otherwise (or
    /// when a listener panicked: hooks never fail a turn).
    pub(super) async fn hook_point(&self, turn: u64, moment: Moment) -> Option<HookPoint> {
        let ctx = &self.inner.deps.ctx;
        if ctx.waterfall_listener_count::<AgentHook>() == 0 {
            return None;
        }
        let point = HookPoint {
            agent: self.inner.id.clone(),
            scope: self.inner.key,
            session_id: self.inner.session.id().to_owned(),
            turn,
            moment,
            block: None,
            context: Vec::new(),
            runs: Vec::new(),
        };
        match ctx.waterfall::<AgentHook>(point).await {
            Ok(point) => Some(point),
            Err(e) => {
                tracing::warn!(agent = %self.inner.id, "hooks failed: {e}");
                None
            }
        }
    }

    /// Logs hook runs in order (derived from `source`, the call they ran on, if any).
    pub(super) fn log_hook_runs(
        &self,
        runs: Vec<cordis_session::HookRunData>,
        step: u64,
        source: Option<u64>,
    ) -> Result<(), Failure> {
        for run in runs {
            self.log(&run, source.map(|s| vec![s]), step)?;
        }
        Ok(())
    }

    /// `SessionStart` (the first turn of this loop instance) and `UserPromptSubmit` hooks on
    /// the user's `input`: the message to log (the context hooks added follows the prompt), or
    /// the reason a hook blocked the prompt.
    pub(super) async fn prompt_hooks(
        &self,
        turn: u64,
        input: String,
    ) -> Result<Result<String, String>, Failure> {
        let mut context = Vec::new();
        if !self.inner.started.swap(true, Ordering::AcqRel) {
            let source = if turn > 1 { "resume" } else { "startup" };
            let moment = Moment::SessionStart {
                source: source.to_owned(),
            };
            if let Some(point) = self.hook_point(turn, moment).await {
                self.log_hook_runs(point.runs, 0, None)?;
                context.extend(point.context);
            }
        }
        let moment = Moment::UserPromptSubmit {
            prompt: input.clone(),
        };
        if let Some(point) = self.hook_point(turn, moment).await {
            self.log_hook_runs(point.runs, 0, None)?;
            if let Some(reason) = point.block {
                return Ok(Err(format!(
                    "a UserPromptSubmit hook blocked the prompt: {reason}"
                )));
            }
            context.extend(point.context);
        }
        if context.is_empty() {
            return Ok(Ok(input));
        }
        Ok(Ok(format!("{input}\n\n{}", context.join("\n\n"))))
    }

    /// `Stop` hooks once the model answered without tool calls: the reason a hook gives for
    /// going on, if one blocks the stop.
    pub(super) async fn stop_hooks(
        &self,
        turn: u64,
        step: u64,
        stop_hook_active: bool,
    ) -> Result<Option<String>, Failure> {
        let last_message = self
            .inner
            .session
            .messages()
            .iter()
            .filter_map(|m| match m {
                cordis_conversation::Message::Assistant { content, .. } => Some(content.clone()),
                _ => None,
            })
            .last()
            .unwrap_or_default();
        let moment = Moment::Stop {
            stop_hook_active,
            last_message,
        };
        let Some(point) = self.hook_point(turn, moment).await else {
            return Ok(None);
        };
        self.log_hook_runs(point.runs, step, None)?;
        Ok(point.block)
    }

    /// `SessionEnd` hooks, started as a task of the loop's scope and left to finish (not
    /// logged: the session is closing).
    pub(super) fn session_end(&self) {
        let ctx = self.inner.deps.ctx.clone();
        if self.inner.disposed.load(Ordering::Acquire)
            || ctx.waterfall_listener_count::<AgentHook>() == 0
        {
            return;
        }
        let point = HookPoint {
            agent: self.inner.id.clone(),
            scope: self.inner.key,
            session_id: self.inner.session.id().to_owned(),
            turn: 0,
            moment: Moment::SessionEnd {
                reason: "dispose".to_owned(),
            },
            block: None,
            context: Vec::new(),
            runs: Vec::new(),
        };
        // Owned by the loop's scope (it outlives the agent): a composition that unwinds
        // aborts it; each hook is bounded by its own timeout meanwhile.
        let owner = ctx.clone();
        let _ = owner.spawn(async move {
            let _ = ctx.waterfall::<AgentHook>(point).await;
        });
    }
}
