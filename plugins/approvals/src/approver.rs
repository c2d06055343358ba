//! The service an app provides to answer `ask`.

use std::collections::BTreeSet;
use std::sync::Arc;

use cordis_runtime::Service;
use cordis_tools::{ScopeKey, ToolCall};
use futures_util::future::BoxFuture;

use crate::grant::Grant;
use crate::policy::Policy;

/// A call waiting for a yes or no.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The call, with the arguments it will run with.
    pub call: ToolCall,
    /// The scope it runs in.
    pub scope: Option<ScopeKey>,
    /// The policy that asked (always [`Policy::Ask`] today).
    pub policy: Policy,
    /// What an "always" answer would grant for the rest of the session (a tool, or the command
    /// patterns of a command); empty when "always" can only allow this call once.
    pub grants: Vec<Grant>,
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run it.
    Allow,
    /// Run it, and grant what [`ApprovalRequest::grants`] lists for the rest of the session
    /// (logged with the decision, so a resumed session holds the grants again).
    AllowAlways,
    /// Do not; the reason, if any, reaches the model.
    Deny(Option<String>),
    /// Do not, and refuse what [`ApprovalRequest::grants`] lists for the rest of the session
    /// without asking again (logged with the decision, like grants).
    RejectAlways(Option<String>),
}

/// Answers `ask` (a terminal prompt, `--yes`, an editor's permission dialog).
///
/// # Cancel safety
/// The future may be dropped (the call was cancelled); an implementation must not rely on
/// being polled to completion.
pub trait Approver: Send + Sync + 'static {
    /// Decides `request`.
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer>;
}

/// The `approver` service: published by an app, read by the approvals plugin at call time
/// (never injected, so a composition without one still loads and `ask` means deny).
#[derive(Clone)]
pub struct ApproverService(pub Arc<dyn Approver>);

impl std::fmt::Debug for ApproverService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApproverService")
    }
}

impl Service for ApproverService {
    const NAME: &'static str = "approver";
}

/// Says yes to everything (`--yes`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Approver for AllowAll {
    fn approve(&self, _request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        Box::pin(async { Answer::Allow })
    }
}

/// Says yes to the named tools and no to the rest (`--approve TOOL`, non-interactive).
#[derive(Debug, Clone, Default)]
pub struct AllowListed(pub BTreeSet<String>);

impl Approver for AllowListed {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        let answer = if self.0.contains(&request.call.name) {
            Answer::Allow
        } else {
            Answer::Deny(Some(format!(
                "not approved: only {} may run without asking in this session",
                self.0.iter().cloned().collect::<Vec<_>>().join(", ")
            )))
        };
        Box::pin(async move { answer })
    }
}
