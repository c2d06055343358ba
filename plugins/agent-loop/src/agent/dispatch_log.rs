//! What the loop logs around a step's dispatch besides calls and results: `run_code`
//! sub-calls as they pass, and approval decisions in call order.

use super::*;

impl Agent {
    /// Logs the `run_code` sub-calls of this step's calls (`parents`: call id to its
    /// `tool/call` seq) as they pass the dispatch waterfall, until the returned value is
    /// dropped. A start is durable (flushed) before its sub-call runs, as a `tool/call` is
    /// before its tool; a settle is logged when its commit ends. They derive no model message;
    /// only the outer result enters the history.
    ///
    /// # Determinism
    /// The waterfall passes one record at a time in the scheduler's order of decisions (see
    /// `cordis_tools::ToolsCodeDispatch`), never in the order tools happened to finish, and a
    /// `run_code` call runs alone (it is mutating), so what is logged between its `tool/call`
    /// and its `tool/result` is its own records in that order.
    pub(super) fn log_sub_calls(
        &self,
        turn: u64,
        step: u64,
        parents: BTreeMap<String, u64>,
    ) -> SubCalls {
        let key = self.inner.key;
        let failure: Arc<Mutex<Option<Failure>>> = Arc::default();
        let agent = self.clone();
        let failed = failure.clone();
        let parents = Arc::new(parents);
        let handle = self.inner.deps.ctx.on_waterfall::<ToolsCodeDispatch, _, _>(
            Position::Back,
            move |record: CodeDispatch, next| {
                let source = parents.get(&record.parent_call_id).copied();
                let (agent, failed) = (agent.clone(), failed.clone());
                async move {
                    let source = source.filter(|_| record.scope == Some(key));
                    let gave_up = cordis_runtime::lock(&failed).is_some();
                    if let (Some(source), false) = (source, gave_up) {
                        let logged = match agent.log_sub_call(&record, turn, step, source) {
                            Ok(()) if record.outcome.is_none() => agent.flush(step).await,
                            other => other,
                        };
                        if let Err(e) = logged {
                            cordis_runtime::lock(&failed).get_or_insert(e);
                        }
                    }
                    next.run(record).await
                }
            },
        );
        SubCalls {
            failure,
            _listener: StopListening(handle),
        }
    }

    pub(super) fn log_sub_call(
        &self,
        record: &CodeDispatch,
        turn: u64,
        step: u64,
        source: u64,
    ) -> Result<(), Failure> {
        let logged = match &record.outcome {
            None => self.log(
                &ToolCodeDispatchStartData {
                    turn,
                    step,
                    parent_call_id: record.parent_call_id.clone(),
                    sub_call_id: record.sub_call_id.clone(),
                    name: record.name.clone(),
                    arguments: record.arguments.clone(),
                },
                Some(vec![source]),
                step,
            ),
            Some(outcome) => self
                .log_approval(&record.sub_call_id, &record.name, turn, step, source)
                .and_then(|()| {
                    self.log(
                        &ToolCodeDispatchData {
                            turn,
                            step,
                            parent_call_id: record.parent_call_id.clone(),
                            sub_call_id: record.sub_call_id.clone(),
                            name: record.name.clone(),
                            arguments: record.arguments.clone(),
                            is_error: outcome.is_error,
                            content: outcome.content.clone(),
                        },
                        Some(vec![source]),
                        step,
                    )
                }),
        };
        logged.map(drop)
    }
}

impl Agent {
    /// Logs the approval decision on call `call_id` (an outer call or a sub-call) when its
    /// tool's policy is not `allow`, derived from the event `source`. Decisions are logged here,
    /// in call order, not when the guard made them (that order is the tools' completion order).
    pub(super) fn log_approval(
        &self,
        call_id: &str,
        name: &str,
        turn: u64,
        step: u64,
        source: u64,
    ) -> Result<(), Failure> {
        let Some(decision) = self
            .inner
            .deps
            .ctx
            .get::<Approvals>()
            .and_then(|a| a.take_decision(Some(self.inner.key), call_id))
            .filter(|d| d.policy != ApprovalPolicy::Allow)
        else {
            return Ok(());
        };
        let data = ToolApprovalData {
            turn,
            step,
            call_id: call_id.to_owned(),
            name: name.to_owned(),
            policy: decision.policy.to_string(),
            allowed: decision.allowed,
            by: decision.by.as_str().to_owned(),
            reason: decision.reason,
            grants: decision
                .grants
                .iter()
                .map(crate::permissions::grant_data)
                .collect(),
            refusals: decision
                .refusals
                .iter()
                .map(crate::permissions::grant_data)
                .collect(),
        };
        self.log(&data, Some(vec![source]), step).map(drop)
    }
}

/// The logging of one step's `run_code` sub-calls, while it lasts.
pub(super) struct SubCalls {
    /// The first record that could not be logged (later ones are not tried).
    failure: Arc<Mutex<Option<Failure>>>,
    _listener: StopListening,
}

impl SubCalls {
    /// The failure to log a sub-call record, if there was one.
    pub(super) fn check(&self) -> Result<(), Failure> {
        match cordis_runtime::lock(&self.failure).take() {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }
}

/// Removes a listener when dropped (on every way out of a step's dispatch).
struct StopListening(cordis_runtime::EffectHandle);

impl Drop for StopListening {
    fn drop(&mut self) {
        self.0.dispose();
    }
}
