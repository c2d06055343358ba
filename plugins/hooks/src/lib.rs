//! The `hooks` plugin: commands the user configures on agent events, in the Claude Code
//! settings shape (`config: {hooks: {PreToolUse: [{matcher, hooks: [{type: command, command,
//! timeout}]}]}}`), for `PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop`,
//! `SessionStart`, `SessionEnd` and `PreCompact`.
//!
//! # A hook's run
//! The event arrives as JSON on stdin (Claude Code's field names: `session_id`, `cwd`,
//! `hook_event_name`, `tool_name`, `tool_input`, `tool_use_id`, `tool_response`, `prompt`,
//! `stop_hook_active`, `last_assistant_message`, `trigger`, `custom_instructions`, `source`,
//! `reason`). The command runs with `<shell> -c` in the workspace root, in the command sandbox
//! (read-only unless the entry's `sandbox` grants writes; no network unless `network`), with a
//! timeout (its process group killed) and a bound on what it prints. [`decide`] reads its exit
//! status and output as Claude Code does: 0 goes on, 2 blocks with its stderr, anything else is
//! an error shown to the user that blocks nothing.
//!
//! # What a decision does
//! - `PreToolUse` hooks run on `tools/pre-execute`, before the approval stage: a block or
//!   `deny` refuses the call (the reason is the result the model reads); `updatedInput`
//!   replaces the arguments (later hooks see the new input); `allow` and `ask` go on to the
//!   approvals as any call does (a hook's word never lowers the caution a call needs).
//! - `PostToolUse` hooks run on `tools/post-execute` for calls that succeeded; a block's reason
//!   and every `additionalContext` (of the call's `PreToolUse` hooks too) are appended to the
//!   result's content, so they reach the model inside the logged `tool/result`.
//! - `UserPromptSubmit` and `SessionStart` context joins the turn's logged `user/message`; a
//!   blocked prompt ends the turn before its message (`aborted`, with the reason).
//! - A blocked `Stop` makes the model go on: the reason is logged as a `user/message`
//!   (`Stop hook feedback: …`) and the step loop continues (bounded by `maxSteps`).
//! - A blocked `PreCompact` refuses the compaction. `SessionEnd` runs on dispose, unlogged.
//!
//! # Determinism
//! The hooks of one event run in the order of their entries in the plan, then in their order
//! within the entry (matcher groups, then hooks), never by load time: listeners are ordered by
//! their entry's place. The first hook that blocks ends the event's run. Each run is a
//! `hook/run` event, logged where its moment is (tool hooks next to the call's result, in call
//! order), so a replay explains every decision.
//!
//! # Trust
//! See [`trust`]: hooks from a file inside the workspace run only in a trusted workspace.

mod config;
pub mod decide;
mod plugin;
mod run;
pub mod trust;

pub use config::{Hook, HookEvent, HookKind, HookTable, HooksConfig, Matcher, MatcherGroup};
pub use plugin::HooksPlugin;
pub use run::{Ran, run_hook};
pub use trust::{Trust, trust_workspace_for_run};
