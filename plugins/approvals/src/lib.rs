//! The `approvals` plugin: one decision procedure for every tool call, installed as the tool
//! registry's approval stage, so it applies to every caller (the agent loop, `run_code`
//! sub-calls, subagents), not to one front-end.
//!
//! # The decision
//! The stage runs after the call's arguments matched its schema and every guard let it through,
//! so a call its schema refuses never asks anyone. In order:
//! 1. the tool's configured `deny` (`tools: {name: allow | ask | deny}`);
//! 2. for an `execute` tool (`bash`), the command deny rules, matched on each *parsed* simple
//!    command (a per-tool `allow` does not lift them);
//! 3. the session's refusals (an earlier "reject always" answer: the tool, or a command pattern
//!    matched by any command of the line): denied without asking;
//! 4. the tool's configured `allow`;
//! 5. the command allow rules and the session's grants (an earlier "always" answer: a tool, or
//!    a command pattern): a line whose every command one of them covers runs;
//! 6. the tool's configured `ask`;
//! 7. the tool's effect class, from its definition: calls that change nothing run;
//! 8. the permission mode: `ask` asks, `auto` runs calls confined to the workspace and asks
//!    for the rest, `never-ask` runs confined calls and denies the rest.
//!
//! "Asks" means the [`Approver`] service an app provides; without one the call is denied, and the
//! model is told why.
//!
//! # Observing decisions
//! Every decision is emitted as an [`ApprovalDecided`] event and kept, per call, until
//! [`Approvals::take_decision`] collects it (the agent loop logs it next to the call's
//! `tool/result`, in call order, so the log stays independent of completion order).

mod approver;
mod command;
mod grant;
mod plugin;
mod policy;

pub use approver::{AllowAll, AllowListed, Answer, ApprovalRequest, Approver, ApproverService};
pub use command::{CommandPattern, EmptyPattern, Opaque, Simple, simple_commands};
pub use grant::{Always, Grant, grant_from};
pub use plugin::{ApprovalDecided, Approvals, ApprovalsPlugin, DecidedBy, MAX_GRANTS};
pub use policy::{ApprovalsConfig, CommandRules, Mode, Policy, UnknownMode};
