//! The plugin, its service (the decision procedure, modes and grants) and its decision event.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use cordis_runtime::{BoxError, Context, Event, Inject, Plugin, Service};
use cordis_tools::{
    ApprovalStage, Clearance, Effect, ScopeKey, ToolCall, ToolDefinition, ToolRegistry,
};
use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::approver::{Answer, ApprovalRequest, ApproverService};
use crate::command::{CommandPattern, Simple, simple_commands};
use crate::grant::Grant;
use crate::policy::{ApprovalsConfig, Mode, Policy};

/// Decisions kept for [`Approvals::take_decision`]; older ones are dropped first.
const KEPT_DECISIONS: usize = 4096;

/// Grants one scope may hold; an "always" beyond it allows the call once.
pub const MAX_GRANTS: usize = 256;

/// Who decided a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedBy {
    /// A per-tool policy, or the tool's effect class (calls that change nothing).
    Policy,
    /// The permission mode (`auto` or `never-ask` on a confined or unconfined call).
    Mode,
    /// A command rule (`commands.allow` / `commands.deny`): an allowed command runs read-only.
    Rule,
    /// A rule that says its calls may write: `commands.write`, or `tools: {NAME: write}`.
    WriteRule,
    /// A grant an earlier "always" answer made in this session.
    Grant,
    /// The approver answered.
    Approver,
    /// The approver answered "always": the call runs and the decision's grants hold from now on
    /// (or, answered "reject always", it does not and its refusals hold).
    ApproverAlways,
    /// A refusal an earlier "reject always" answer made in this session.
    Refusal,
    /// The call would ask and there is no approver: denied.
    NoApprover,
}

impl DecidedBy {
    /// What an allowed call decided this way is cleared for: only a person's answer (or their
    /// up-front `--yes`/`--approve`, which an approver stands for) and a rule that says its
    /// commands may write clear it fully; whatever ran without a question runs read-only.
    pub fn clearance(self) -> Clearance {
        match self {
            DecidedBy::Approver | DecidedBy::ApproverAlways | DecidedBy::WriteRule => {
                Clearance::Full
            }
            DecidedBy::Policy
            | DecidedBy::Mode
            | DecidedBy::Rule
            | DecidedBy::Grant
            | DecidedBy::Refusal
            | DecidedBy::NoApprover => Clearance::ReadOnly,
        }
    }

    /// The name the session log uses: `policy`, `mode`, `rule`, `write-rule`, `grant`,
    /// `approver`, `approver-always`, `refusal`, `no-approver`.
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Policy => "policy",
            DecidedBy::Mode => "mode",
            DecidedBy::Rule => "rule",
            DecidedBy::WriteRule => "write-rule",
            DecidedBy::Grant => "grant",
            DecidedBy::Refusal => "refusal",
            DecidedBy::Approver => "approver",
            DecidedBy::ApproverAlways => "approver-always",
            DecidedBy::NoApprover => "no-approver",
        }
    }
}

/// One approval decision (`approvals/decision`), emitted for every call that reaches the stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecided {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub tool: String,
    /// The scope the call runs in.
    pub scope: Option<ScopeKey>,
    /// What the call would get before anyone is asked: `allow`, `ask` or `deny`.
    pub policy: Policy,
    /// True when the call may run.
    pub allowed: bool,
    /// Who decided.
    pub by: DecidedBy,
    /// Why it was denied (the text the model reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The grants this decision made (an "always" answer).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
    /// The refusals this decision made (a "reject always" answer).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<Grant>,
}

impl Event for ApprovalDecided {
    const NAME: &'static str = "approvals/decision";
    type Output = ();
}

type CallKey = (Option<ScopeKey>, String);

#[derive(Default)]
struct State {
    /// Sessions' chosen modes.
    modes: BTreeMap<ScopeKey, Mode>,
    /// Sessions' grants.
    grants: BTreeMap<Option<ScopeKey>, BTreeSet<Grant>>,
    /// Sessions' refusals ("reject always" answers): what they hold is denied without asking.
    refusals: BTreeMap<Option<ScopeKey>, BTreeSet<Grant>>,
    decisions: BTreeMap<CallKey, ApprovalDecided>,
    order: VecDeque<CallKey>,
}

/// The `approvals` service: the policy in force, sessions' modes and grants, the decisions made.
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

/// What a call gets before anyone is asked.
enum Verdict {
    Allow(Policy, DecidedBy),
    Deny(Policy, DecidedBy, String),
    /// Ask; the grants an "always" answer would make (empty: "always" allows once).
    Ask(Vec<Grant>),
}

/// The simple commands of a call of an `execute` tool with a `command` argument: `None` for
/// other calls, `Some(Err(why))` for a line a rule cannot read.
fn commands_of(call: &ToolCall, effect: Effect) -> Option<Result<Vec<Simple>, String>> {
    if effect != Effect::Execute {
        return None;
    }
    let line = call.arguments.get("command")?.as_str()?;
    Some(simple_commands(line).map_err(|e| e.0))
}

impl Approvals {
    /// The service for `config`, with no session state.
    pub fn new(config: ApprovalsConfig) -> Self {
        Approvals {
            config,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Only bookkeeping runs under this lock.
        cordis_runtime::lock(&self.state)
    }

    /// The configuration in force.
    pub fn config(&self) -> &ApprovalsConfig {
        &self.config
    }

    /// True when `tool` is denied outright by its configured policy.
    pub fn denies(&self, tool: &str) -> bool {
        self.config.tool_policy(tool) == Some(Policy::Deny)
    }

    /// The mode of `scope`: the one its session chose, else the configured one.
    pub fn mode_for(&self, scope: Option<ScopeKey>) -> Mode {
        scope
            .and_then(|s| self.state().modes.get(&s).copied())
            .unwrap_or(self.config.mode)
    }

    /// The mode of the nearest scope of `chain` (a scope and its parents, nearest first) that
    /// chose one, else the configured one: a subagent runs under its session's choice.
    pub fn mode_along(&self, chain: &[ScopeKey]) -> Mode {
        let state = self.state();
        chain
            .iter()
            .find_map(|s| state.modes.get(s).copied())
            .unwrap_or(self.config.mode)
    }

    /// Sets the mode of `scope` (a session's `--permissions` or `/permissions`).
    pub fn set_mode(&self, scope: ScopeKey, mode: Mode) {
        let _ = self.state().modes.insert(scope, mode);
    }

    /// The grants `scope` holds, sorted.
    pub fn grants(&self, scope: Option<ScopeKey>) -> Vec<Grant> {
        self.state()
            .grants
            .get(&scope)
            .map(|g| g.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds `grant` to `scope` (a resumed session's log); false when `scope` holds
    /// [`MAX_GRANTS`] already.
    pub fn add_grant(&self, scope: Option<ScopeKey>, grant: Grant) -> bool {
        let mut state = self.state();
        let held = state.grants.entry(scope).or_default();
        if held.len() >= MAX_GRANTS && !held.contains(&grant) {
            return false;
        }
        let _ = held.insert(grant);
        true
    }

    /// The refusals `scope` holds, sorted.
    pub fn refusals(&self, scope: Option<ScopeKey>) -> Vec<Grant> {
        self.state()
            .refusals
            .get(&scope)
            .map(|g| g.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds refusal `grant` to `scope` (a "reject always" answer, or a resumed session's log);
    /// false when `scope` holds [`MAX_GRANTS`] refusals already.
    pub fn add_refusal(&self, scope: Option<ScopeKey>, grant: Grant) -> bool {
        let mut state = self.state();
        let held = state.refusals.entry(scope).or_default();
        if held.len() >= MAX_GRANTS && !held.contains(&grant) {
            return false;
        }
        let _ = held.insert(grant);
        true
    }

    /// Removes `grant` from `scope`; false when it did not hold it.
    pub fn revoke(&self, scope: Option<ScopeKey>, grant: &Grant) -> bool {
        let mut state = self.state();
        let removed = state
            .grants
            .get_mut(&scope)
            .is_some_and(|g| g.remove(grant));
        if state.grants.get(&scope).is_some_and(BTreeSet::is_empty) {
            let _ = state.grants.remove(&scope);
        }
        removed
    }

    /// Forgets everything `scope` chose or was granted (its session ended).
    pub fn forget(&self, scope: ScopeKey) {
        let mut state = self.state();
        let _ = state.modes.remove(&scope);
        let _ = state.grants.remove(&Some(scope));
        let _ = state.refusals.remove(&Some(scope));
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

    /// The decision procedure, before anyone is asked: the tool's configured `deny`, then the
    /// command deny rules, then its configured `allow`, then the command allow rules and the
    /// grants, then its configured `ask`, then its effect class, then the mode.
    fn verdict(
        &self,
        call: &ToolCall,
        scope: Option<ScopeKey>,
        chain: &[ScopeKey],
        tool: &ToolDefinition,
    ) -> Verdict {
        let name = &call.name;
        let rules = &self.config.commands;
        let commands = commands_of(call, tool.effect);
        if self.config.tool_policy(name) == Some(Policy::Deny) {
            return Verdict::Deny(
                Policy::Deny,
                DecidedBy::Policy,
                format!(
                    "tool \"{name}\" is denied by the approvals policy (deny); do not call it again"
                ),
            );
        }
        let mut unreadable = None;
        match &commands {
            Some(Ok(cmds)) => {
                for Simple { words, .. } in cmds {
                    if let Some(rule) = rules.deny.iter().find(|r| r.denies(words)) {
                        let key = CommandPattern::key_of(words)
                            .map(|k| k.to_string())
                            .unwrap_or_default();
                        return Verdict::Deny(
                            Policy::Deny,
                            DecidedBy::Rule,
                            format!(
                                "the command `{key}` is denied by the approvals rule \"{rule}\"; do not run it again"
                            ),
                        );
                    }
                }
            }
            Some(Err(why)) => unreadable = Some(why.clone()),
            None => {}
        }
        // The session's own "reject always" answers, before anything that would let it run.
        let refused = self.refusals(scope);
        let refusal = match &commands {
            Some(Ok(cmds)) => refused
                .iter()
                .find(|r| r.tool == *name && r.command.is_none())
                .or_else(|| {
                    cmds.iter()
                        .find_map(|s| refused.iter().find(|r| r.refuses(name, s)))
                }),
            _ => refused
                .iter()
                .find(|r| r.tool == *name && r.command.is_none()),
        };
        if let Some(refusal) = refusal {
            return Verdict::Deny(
                Policy::Ask,
                DecidedBy::Refusal,
                format!(
                    "the user rejected {refusal} for the rest of this session; do not call it again"
                ),
            );
        }
        // After the deny rules: `tools: {bash: allow}` does not lift them.
        match self.config.tool_policy(name) {
            Some(Policy::Allow) => return Verdict::Allow(Policy::Allow, DecidedBy::Policy),
            Some(Policy::Write) => return Verdict::Allow(Policy::Allow, DecidedBy::WriteRule),
            _ => {}
        }
        let held = self.grants(scope);
        match &commands {
            Some(Ok(cmds)) if !cmds.is_empty() => {
                // A rule or grant covers a command's words, never a file it writes.
                let granted = |s: &Simple| held.iter().any(|g| g.covers(name, s));
                let writes =
                    |s: &Simple| !s.beyond_words && rules.write.iter().any(|r| r.allows(&s.words));
                let ruled = |s: &Simple| {
                    writes(s) || (!s.beyond_words && rules.allow.iter().any(|r| r.allows(&s.words)))
                };
                if cmds.iter().all(writes) {
                    return Verdict::Allow(Policy::Allow, DecidedBy::WriteRule);
                }
                if cmds.iter().all(ruled) {
                    return Verdict::Allow(Policy::Allow, DecidedBy::Rule);
                }
                if cmds.iter().all(|w| ruled(w) || granted(w)) {
                    return Verdict::Allow(Policy::Ask, DecidedBy::Grant);
                }
            }
            None if held.iter().any(|g| g.tool == *name && g.command.is_none()) => {
                return Verdict::Allow(Policy::Ask, DecidedBy::Grant);
            }
            _ => {}
        }
        let covered = |s: &Simple| {
            !s.beyond_words
                && (rules
                    .allow
                    .iter()
                    .chain(&rules.write)
                    .any(|r| r.allows(&s.words))
                    || held.iter().any(|g| g.covers(name, s)))
        };
        let grants = || match &commands {
            Some(Ok(cmds)) => cmds
                .iter()
                .filter(|s| !covered(s))
                .map(|s| {
                    // What a command writes cannot be granted for later.
                    let pattern = (!s.beyond_words)
                        .then(|| CommandPattern::grant_for(&s.words))
                        .flatten();
                    pattern.map(|(p, exact)| Grant {
                        tool: name.clone(),
                        command: Some(p),
                        exact,
                    })
                })
                .collect::<Option<BTreeSet<_>>>()
                .map(|g| g.into_iter().collect())
                .unwrap_or_default(),
            Some(Err(_)) => Vec::new(),
            None => vec![Grant {
                tool: name.clone(),
                command: None,
                exact: false,
            }],
        };
        if self.config.tool_policy(name) == Some(Policy::Ask) {
            return Verdict::Ask(grants());
        }
        if tool.effect.is_harmless() {
            return Verdict::Allow(Policy::Allow, DecidedBy::Policy);
        }
        // A deny rule that cannot be checked must not be passed by the mode.
        let confined = tool.confined && (unreadable.is_none() || rules.deny.is_empty());
        match self.mode_along(chain) {
            Mode::Ask => Verdict::Ask(grants()),
            Mode::Auto if confined => Verdict::Allow(Policy::Allow, DecidedBy::Mode),
            Mode::Auto => Verdict::Ask(grants()),
            Mode::NeverAsk if confined => Verdict::Allow(Policy::Allow, DecidedBy::Mode),
            Mode::NeverAsk => Verdict::Deny(
                Policy::Ask,
                DecidedBy::Mode,
                match unreadable {
                    Some(why) if tool.confined => format!(
                        "tool \"{name}\" needs approval: its command cannot be checked against the deny rules ({why}), and the permission mode is never-ask, so it was denied"
                    ),
                    _ => format!(
                        "tool \"{name}\" needs approval (its effects are not confined to the workspace), and the permission mode is never-ask, so it was denied"
                    ),
                },
            ),
        }
    }

    /// Decides `call`, asking the approver when the verdict is to ask.
    async fn decide(
        self: Arc<Self>,
        ctx: Context,
        call: ToolCall,
        scope: Option<ScopeKey>,
        verdict: Verdict,
    ) -> Result<Clearance, String> {
        let name = call.name.clone();
        let mut refusals = Vec::new();
        let (policy, by, reason, grants) = match verdict {
            Verdict::Allow(policy, by) => (policy, by, None, Vec::new()),
            Verdict::Deny(policy, by, reason) => (policy, by, Some(reason), Vec::new()),
            Verdict::Ask(grants) => match ctx.get::<ApproverService>() {
                None => (
                    Policy::Ask,
                    DecidedBy::NoApprover,
                    Some(format!(
                        "tool \"{name}\" needs approval and no approver is available, so it was denied (a non-interactive run denies such calls unless they are approved up front: --yes, --approve {name}, or the approvals config)"
                    )),
                    Vec::new(),
                ),
                Some(approver) => {
                    let request = ApprovalRequest {
                        call: call.clone(),
                        scope,
                        policy: Policy::Ask,
                        grants: grants.clone(),
                    };
                    match approver.0.approve(&request).await {
                        Answer::Allow => (Policy::Ask, DecidedBy::Approver, None, Vec::new()),
                        Answer::AllowAlways => {
                            let made: Vec<Grant> = grants
                                .into_iter()
                                .filter(|g| self.add_grant(scope, g.clone()))
                                .collect();
                            (Policy::Ask, DecidedBy::ApproverAlways, None, made)
                        }
                        Answer::Deny(reason) => (
                            Policy::Ask,
                            DecidedBy::Approver,
                            Some(format!(
                                "the user denied tool \"{name}\"{}",
                                reason.map(|r| format!(": {r}")).unwrap_or_default()
                            )),
                            Vec::new(),
                        ),
                        Answer::RejectAlways(reason) => {
                            refusals = grants
                                .into_iter()
                                .filter(|g| self.add_refusal(scope, g.clone()))
                                .collect();
                            (
                                Policy::Ask,
                                DecidedBy::ApproverAlways,
                                Some(format!(
                                    "the user denied tool \"{name}\" for the rest of this session{}; do not call it again",
                                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                                )),
                                Vec::new(),
                            )
                        }
                    }
                }
            },
        };
        let decision = ApprovalDecided {
            call_id: call.call_id.clone(),
            tool: name,
            scope,
            policy,
            allowed: reason.is_none(),
            by,
            reason: reason.clone(),
            grants,
            refusals,
        };
        self.record(&ctx, decision);
        match reason {
            None => Ok(by.clearance()),
            Some(reason) => Err(reason),
        }
    }

    fn record(&self, ctx: &Context, decision: ApprovalDecided) {
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
                    let _ = state.decisions.remove(&old);
                }
            }
        }
        ctx.emit(decision);
    }
}

/// The registry's approval stage, backed by the service.
struct Stage {
    approvals: Arc<Approvals>,
    ctx: Context,
}

impl ApprovalStage for Stage {
    fn approve(
        &self,
        call: &ToolCall,
        scope: Option<ScopeKey>,
        tool: &ToolDefinition,
    ) -> BoxFuture<'static, Result<Clearance, String>> {
        let chain = match (scope, self.ctx.get::<ToolRegistry>()) {
            (Some(s), Some(registry)) => registry.chain(s),
            (Some(s), None) => vec![s],
            (None, _) => Vec::new(),
        };
        let verdict = self.approvals.verdict(call, scope, &chain, tool);
        Box::pin(
            self.approvals
                .clone()
                .decide(self.ctx.clone(), call.clone(), scope, verdict),
        )
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

    /// The tool registry's one approval stage, which it installs (a second stage is refused,
    /// so who installs first matters to whoever else tries).
    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(vec![cordis_tools::APPROVAL_STAGE])
    }

    fn widens(&self, old: Option<&ApprovalsConfig>, new: Option<&ApprovalsConfig>) -> Vec<String> {
        match (old, new) {
            (Some(old), Some(new)) => old.widened_by(new),
            (Some(_), None) => {
                vec!["without the approvals entry every call runs without a question".to_owned()]
            }
            (None, _) => Vec::new(),
        }
    }

    async fn apply(&self, ctx: Context, config: &ApprovalsConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let approvals = Arc::new(Approvals::new(config.clone()));
        let stage = Stage {
            approvals: approvals.clone(),
            ctx: ctx.clone(),
        };
        let _ = registry.set_approval(&ctx, Arc::new(stage))?;
        let _ = ctx.provide_arc(approvals)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
