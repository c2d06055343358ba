//! The plugin, its service and its decision event.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use cordis_runtime::{BoxError, Context, Event, Inject, Plugin, Position, Service};
use cordis_tools::{Decision, ScopeKey, ToolCall, ToolRegistry, ToolsPostExecute, ToolsPreExecute};
use serde::Serialize;

use crate::approver::{Answer, ApprovalRequest, ApproverService};
use crate::policy::{ApprovalsConfig, Policy};

/// Decisions kept for [`Approvals::take_decision`]; older ones are dropped first.
const KEPT_DECISIONS: usize = 4096;

/// Who decided a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DecidedBy {
    /// The policy alone (`allow` or `deny`).
    Policy,
    /// The approver service answered `ask`.
    Approver,
    /// The approver answered `ask` with "always for this tool in this session".
    ApproverAlways,
    /// `ask` with no approver to answer: denied.
    NoApprover,
    /// Approved, but a later `tools/pre-execute` listener changed the call: denied.
    ChangedAfterApproval,
}

impl DecidedBy {
    /// The name the session log uses: `policy`, `approver`, `approver-always`, `no-approver`,
    /// `changed-after-approval`.
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Policy => "policy",
            DecidedBy::Approver => "approver",
            DecidedBy::ApproverAlways => "approver-always",
            DecidedBy::NoApprover => "no-approver",
            DecidedBy::ChangedAfterApproval => "changed-after-approval",
        }
    }
}

/// One approval decision (`approvals/decision`), emitted for every call that reaches the
/// guard and for calls the approver refuses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecided {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub tool: String,
    /// The scope the call runs in.
    pub scope: Option<ScopeKey>,
    /// The tool's policy.
    pub policy: Policy,
    /// True when the call may run.
    pub allowed: bool,
    /// Who decided.
    pub by: DecidedBy,
    /// Why it was denied (the text the model reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Event for ApprovalDecided {
    const NAME: &'static str = "approvals/decision";
    type Output = ();
}

type CallKey = (Option<ScopeKey>, String);

#[derive(Default)]
struct State {
    /// One-shot grants: the exact call an approver allowed, and how.
    grants: BTreeMap<CallKey, Vec<(ToolCall, DecidedBy)>>,
    decisions: BTreeMap<CallKey, ApprovalDecided>,
    order: VecDeque<CallKey>,
}

/// The `approvals` service: the policy in force and the decisions made.
pub struct Approvals {
    config: ApprovalsConfig,
    state: Mutex<State>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Service for Approvals {
    const NAME: &'static str = "approvals";
}

enum Grant {
    Matched(DecidedBy),
    Changed,
    Missing,
}

impl Approvals {
    fn new(config: ApprovalsConfig) -> Self {
        Approvals {
            config,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Only bookkeeping runs under this lock.
        cordis_runtime::lock(&self.state)
    }

    /// The policy for `tool`.
    pub fn policy_for(&self, tool: &str) -> Policy {
        self.config.policy_for(tool)
    }

    /// Removes and returns the decision made for call `call_id` in `scope`, if any.
    pub fn take_decision(&self, scope: Option<ScopeKey>, call_id: &str) -> Option<ApprovalDecided> {
        let mut state = self.state();
        let key = (scope, call_id.to_owned());
        let found = state.decisions.remove(&key);
        if found.is_some() {
            state.order.retain(|k| k != &key);
        }
        found
    }

    fn grant(&self, scope: Option<ScopeKey>, call: ToolCall, by: DecidedBy) {
        self.state()
            .grants
            .entry((scope, call.call_id.clone()))
            .or_default()
            .push((call, by));
    }

    fn revoke(&self, scope: Option<ScopeKey>, call_id: &str) {
        self.state().grants.remove(&(scope, call_id.to_owned()));
    }

    fn consume(&self, scope: Option<ScopeKey>, call: &ToolCall) -> Grant {
        let mut state = self.state();
        let key = (scope, call.call_id.clone());
        let Some(grants) = state.grants.get_mut(&key) else {
            return Grant::Missing;
        };
        let found = grants.iter().position(|(g, _)| g == call);
        let outcome = match found {
            Some(i) => Grant::Matched(grants.remove(i).1),
            None => {
                grants.pop();
                Grant::Changed
            }
        };
        if grants.is_empty() {
            state.grants.remove(&key);
        }
        outcome
    }

    fn decide(&self, ctx: &Context, decision: ApprovalDecided) {
        {
            let mut state = self.state();
            let key = (decision.scope, decision.call_id.clone());
            if state
                .decisions
                .insert(key.clone(), decision.clone())
                .is_none()
            {
                state.order.push_back(key);
            }
            while state.order.len() > KEPT_DECISIONS {
                if let Some(old) = state.order.pop_front() {
                    state.decisions.remove(&old);
                }
            }
        }
        ctx.emit(decision);
    }

    /// The guard's verdict on `call`: `Some(reason)` denies.
    fn check(&self, ctx: &Context, call: &ToolCall, scope: Option<ScopeKey>) -> Option<String> {
        let policy = self.policy_for(&call.name);
        let name = &call.name;
        let (by, reason) = match policy {
            Policy::Allow => (DecidedBy::Policy, None),
            Policy::Deny => (
                DecidedBy::Policy,
                Some(format!(
                    "tool \"{name}\" is denied by the approvals policy (deny); do not call it again"
                )),
            ),
            Policy::Ask => match self.consume(scope, call) {
                Grant::Matched(by) => (by, None),
                Grant::Changed => (
                    DecidedBy::ChangedAfterApproval,
                    Some(format!(
                        "tool \"{name}\" was approved, but its call was changed after the approval; denied"
                    )),
                ),
                Grant::Missing => (
                    DecidedBy::NoApprover,
                    Some(format!(
                        "tool \"{name}\" needs approval (policy ask) and no approver is available, so it was denied (a non-interactive run denies ask tools unless they are approved up front)"
                    )),
                ),
            },
        };
        self.decide(
            ctx,
            ApprovalDecided {
                call_id: call.call_id.clone(),
                tool: call.name.clone(),
                scope,
                policy,
                allowed: reason.is_none(),
                by,
                reason: reason.clone(),
            },
        );
        reason
    }
}

/// The `approvals` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApprovalsPlugin;

const INJECT: &[Inject] = ToolRegistry::INJECT;

impl Plugin for ApprovalsPlugin {
    type Config = ApprovalsConfig;

    fn name(&self) -> &str {
        "approvals"
    }

    fn provides(&self, _config: &Self::Config) -> Vec<String> {
        vec![<Approvals as cordis_runtime::Service>::NAME.to_owned()]
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    async fn apply(&self, ctx: Context, config: &ApprovalsConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let approvals = Arc::new(Approvals::new(config.clone()));
        let (a, c) = (approvals.clone(), ctx.clone());
        let _ = ctx.on_waterfall::<ToolsPreExecute, _, _>(Position::Back, move |mut v, next| {
            let (a, c) = (a.clone(), c.clone());
            async move {
                let (scope, call_id) = (v.scope, v.call.call_id.clone());
                let asks = v.decision == Decision::Allow
                    && a.policy_for(&v.call.name) == Policy::Ask
                    && c.get::<ToolRegistry>()
                        .is_some_and(|r| r.get(&v.call.name, scope).is_some());
                // With no approver the guard denies; nobody is asked about unknown tools.
                if let Some(approver) = asks.then(|| c.get::<ApproverService>()).flatten() {
                    let request = ApprovalRequest {
                        call: v.call.clone(),
                        scope,
                        policy: Policy::Ask,
                    };
                    match approver.0.approve(&request).await {
                        Answer::Allow => a.grant(scope, v.call.clone(), DecidedBy::Approver),
                        Answer::AllowAlways => {
                            a.grant(scope, v.call.clone(), DecidedBy::ApproverAlways);
                        }
                        Answer::Deny(reason) => {
                            let reason = format!(
                                "the user denied tool \"{}\"{}",
                                v.call.name,
                                reason.map(|r| format!(": {r}")).unwrap_or_default()
                            );
                            a.decide(
                                &c,
                                ApprovalDecided {
                                    call_id: call_id.clone(),
                                    tool: v.call.name.clone(),
                                    scope,
                                    policy: Policy::Ask,
                                    allowed: false,
                                    by: DecidedBy::Approver,
                                    reason: Some(reason.clone()),
                                },
                            );
                            v.decision = Decision::Deny(reason);
                        }
                    }
                }
                let out = next.run(v).await;
                if out.decision != Decision::Allow {
                    // A later listener denied: the grant must not outlive this call.
                    a.revoke(scope, &call_id);
                }
                out
            }
        });
        let a = approvals.clone();
        // A call stopped before the guard (bad arguments, unknown tool) leaves its grant here.
        let _ = ctx.on_waterfall::<ToolsPostExecute, _, _>(Position::Front, move |v, next| {
            a.revoke(v.scope, &v.call.call_id);
            next.run(v)
        });
        let (a, c) = (approvals.clone(), ctx.clone());
        let _ = registry.guard(&ctx, None, move |call, scope| a.check(&c, call, scope))?;
        let _ = ctx.provide_arc(approvals)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
