//! The `approvals` plugin: one policy per tool — `allow`, `ask` or `deny` — enforced as a
//! global tool-registry guard, so it applies to every caller (the agent loop, `run_code`
//! sub-calls, subagents), not to one front-end.
//!
//! # How `ask` works
//! A guard is synchronous, but asking a person is not. So the plugin works in two steps:
//! 1. its `tools/pre-execute` listener (last in the chain at the time it registers) asks the
//!    [`Approver`] service, if an app provides one, and on "allow" records a one-shot *grant*
//!    for exactly that call (scope, id, name, arguments);
//! 2. its guard, which runs after argument checking, lets an `ask` call through only by
//!    consuming a matching grant. No approver, a refusal, or arguments rewritten after the
//!    approval all end in a denial — a `DENIED` result the model reads, never a crash.
//!
//! # Observing decisions
//! Every decision is emitted as an [`ApprovalDecided`] event and kept, per call, until
//! [`Approvals::take_decision`] collects it (the agent loop can log it next to the call's
//! `tool/result`, in call order, so the log stays independent of completion order).

mod approver;
mod plugin;
mod policy;

pub use approver::{AllowAll, AllowListed, Answer, ApprovalRequest, Approver, ApproverService};
pub use plugin::{ApprovalDecided, Approvals, ApprovalsPlugin, DecidedBy};
pub use policy::{ApprovalsConfig, DISPATCHING_TOOLS, Policy, READ_ONLY_TOOLS};
