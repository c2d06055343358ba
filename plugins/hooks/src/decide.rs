//! What a hook's run decides, as Claude Code reads it.
//!
//! - exit 0: go on. Its stdout, when it is a JSON object, may decide more:
//!   `hookSpecificOutput.permissionDecision` (`allow`, `deny`, `ask`; with
//!   `permissionDecisionReason`) and `updatedInput` for `PreToolUse`; `decision: "block"` with
//!   `reason` (for `PreToolUse` the older `approve`/`block` spelling too);
//!   `hookSpecificOutput.additionalContext`; `continue: false` with `stopReason` (a block).
//!   Plain stdout of `UserPromptSubmit` and `SessionStart` is context for the model.
//! - exit 2: block, with its stderr as the reason.
//! - anything else (another status, a signal, a timeout, a command that could not start): an
//!   error the user is shown; it blocks nothing.

use serde_json::Value;

use crate::config::HookEvent;
use crate::run::Ran;

/// A hook's decision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    /// `continue`, `allow`, `deny`, `ask`, `block`, `error` or `timeout`.
    pub decision: &'static str,
    /// The reason (a block's, told to the model or the user; an error's, told to the user).
    pub reason: Option<String>,
    /// A replacement tool input (`PreToolUse`).
    pub updated_input: Option<Value>,
    /// Context for the model.
    pub context: Option<String>,
}

impl Verdict {
    /// True when it stops what the event would do.
    pub fn blocks(&self) -> bool {
        matches!(self.decision, "block" | "deny")
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The verdict of `ran` on `event`.
pub fn verdict(event: HookEvent, ran: &Ran, timeout_secs: u64) -> Verdict {
    if let Some(why) = &ran.failed {
        return Verdict {
            decision: "error",
            reason: Some(format!("the hook could not start: {why}")),
            ..Verdict::default()
        };
    }
    if ran.timed_out {
        return Verdict {
            decision: "timeout",
            reason: Some(format!(
                "the hook did not finish within {timeout_secs} s; it and everything it started were killed"
            )),
            ..Verdict::default()
        };
    }
    match ran.exit_code {
        Some(0) => on_success(event, ran.stdout.trim()),
        Some(2) => Verdict {
            decision: "block",
            reason: Some(
                text(Some(&Value::String(ran.stderr.clone())))
                    .unwrap_or_else(|| "blocked by a hook (it gave no reason)".to_owned()),
            ),
            ..Verdict::default()
        },
        code => {
            let status = match (code, ran.signal) {
                (Some(c), _) => format!("exited with status {c}"),
                (None, Some(s)) => format!("was killed by signal {s}"),
                (None, None) => "ended without a status".to_owned(),
            };
            let stderr = ran.stderr.trim();
            Verdict {
                decision: "error",
                reason: Some(if stderr.is_empty() {
                    format!("the hook {status}")
                } else {
                    format!("the hook {status}: {stderr}")
                }),
                ..Verdict::default()
            }
        }
    }
}

fn on_success(event: HookEvent, stdout: &str) -> Verdict {
    let plain_context = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart);
    if !stdout.starts_with('{') {
        return Verdict {
            decision: "continue",
            context: (plain_context && !stdout.is_empty()).then(|| stdout.to_owned()),
            ..Verdict::default()
        };
    }
    let json: Value = match serde_json::from_str(stdout) {
        Ok(v) => v,
        Err(e) => {
            return Verdict {
                decision: "error",
                reason: Some(format!("the hook's output is not valid JSON: {e}")),
                ..Verdict::default()
            };
        }
    };
    let specific = json.get("hookSpecificOutput");
    let field = |name: &str| specific.and_then(|s| s.get(name));
    let mut v = Verdict {
        decision: "continue",
        context: text(field("additionalContext")),
        ..Verdict::default()
    };
    if event == HookEvent::PreToolUse {
        v.updated_input = field("updatedInput").filter(|i| i.is_object()).cloned();
        let reason = text(field("permissionDecisionReason")).or_else(|| text(json.get("reason")));
        match field("permissionDecision").and_then(Value::as_str) {
            Some("deny") => return deny(reason, v),
            Some("allow") => v.decision = "allow",
            Some("ask") => v.decision = "ask",
            _ => match json.get("decision").and_then(Value::as_str) {
                Some("block") => return deny(reason, v),
                Some("approve") => v.decision = "allow",
                _ => {}
            },
        }
    } else if json.get("decision").and_then(Value::as_str) == Some("block") {
        v.decision = "block";
        v.reason = Some(
            text(json.get("reason"))
                .unwrap_or_else(|| "blocked by a hook (it gave no reason)".into()),
        );
        return v;
    }
    if json.get("continue").and_then(Value::as_bool) == Some(false) {
        v.decision = "block";
        v.reason = Some(
            text(json.get("stopReason"))
                .unwrap_or_else(|| "a hook asked to stop (continue: false)".into()),
        );
    }
    v
}

fn deny(reason: Option<String>, v: Verdict) -> Verdict {
    Verdict {
        decision: "deny",
        reason: Some(reason.unwrap_or_else(|| "denied by a hook (it gave no reason)".into())),
        ..v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            ..Ran::default()
        }
    }

    #[test]
    fn exit_two_blocks_with_stderr_and_other_statuses_are_errors() {
        let v = verdict(HookEvent::PreToolUse, &ran(2, "", "no rm\n"), 1);
        assert_eq!((v.decision, v.reason.as_deref()), ("block", Some("no rm")));
        assert!(v.blocks());
        let v = verdict(HookEvent::PreToolUse, &ran(1, "", "oops"), 1);
        assert_eq!(v.decision, "error");
        assert!(!v.blocks());
        let timed = Ran {
            timed_out: true,
            ..Ran::default()
        };
        assert_eq!(verdict(HookEvent::Stop, &timed, 3).decision, "timeout");
    }

    #[test]
    fn json_output_decides_as_claude_code_reads_it() {
        let out = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "nope"}}"#;
        let v = verdict(HookEvent::PreToolUse, &ran(0, out, ""), 1);
        assert_eq!((v.decision, v.reason.as_deref()), ("deny", Some("nope")));
        let out = r#"{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}, "additionalContext": "ctx"}}"#;
        let v = verdict(HookEvent::PreToolUse, &ran(0, out, ""), 1);
        assert_eq!(v.decision, "allow");
        assert_eq!(v.updated_input, Some(serde_json::json!({"command": "ls"})));
        assert_eq!(v.context.as_deref(), Some("ctx"));
        let v = verdict(
            HookEvent::Stop,
            &ran(0, r#"{"decision": "block", "reason": "tests fail"}"#, ""),
            1,
        );
        assert_eq!(
            (v.decision, v.reason.as_deref()),
            ("block", Some("tests fail"))
        );
        let v = verdict(
            HookEvent::UserPromptSubmit,
            &ran(0, "the date is fixed\n", ""),
            1,
        );
        assert_eq!(v.context.as_deref(), Some("the date is fixed"));
        assert_eq!(
            verdict(HookEvent::PostToolUse, &ran(0, "plain", ""), 1).context,
            None
        );
        assert_eq!(
            verdict(HookEvent::Stop, &ran(0, "{oops", ""), 1).decision,
            "error"
        );
    }
}
