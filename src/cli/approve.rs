//! Who answers a tool's `ask` approval policy in `cordis run`.
//!
//! - `--yes`: every call is allowed.
//! - `--approve TOOL` (repeatable): those tools are allowed up front.
//! - At a terminal, anything else is asked: the call's card (the command, the diff of an edit)
//!   is shown on stderr and the next line you type answers (`y` or `yes` allows; anything else,
//!   or end of input, denies).
//! - Not at a terminal, with neither flag: `ask` means deny, and the model is told why.

use std::collections::BTreeSet;
use std::sync::Arc;

use cordis_approvals::{AllowAll, AllowListed, Answer, ApprovalRequest, Approver, ApproverService};
use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

/// A question for the person at the terminal, with where to send the answer.
pub(crate) struct Asked {
    /// The call to decide.
    pub request: ApprovalRequest,
    /// The answer goes here.
    pub reply: oneshot::Sender<Answer>,
}

/// Asks the conversation (which owns the terminal) about every call not allowed up front.
struct TerminalApprover {
    allowed: BTreeSet<String>,
    ask: mpsc::UnboundedSender<Asked>,
}

impl Approver for TerminalApprover {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, Answer> {
        if self.allowed.contains(&request.call.name) {
            return Box::pin(async { Answer::Allow });
        }
        let (reply, answer) = oneshot::channel();
        let sent = self.ask.send(Asked {
            request: request.clone(),
            reply,
        });
        Box::pin(async move {
            if sent.is_err() {
                return Answer::Deny(Some("nobody is at the terminal to approve it".to_owned()));
            }
            answer.await.unwrap_or(Answer::Deny(Some(
                "the question was not answered".to_owned(),
            )))
        })
    }
}

/// The approver for a run, and the questions it will ask (interactive runs only).
pub(crate) fn approver_for(
    yes: bool,
    approve: &[String],
    interactive: bool,
) -> (
    Option<ApproverService>,
    Option<mpsc::UnboundedReceiver<Asked>>,
) {
    let allowed: BTreeSet<String> = approve.iter().cloned().collect();
    if yes {
        return (Some(ApproverService(Arc::new(AllowAll))), None);
    }
    if interactive {
        let (ask, asked) = mpsc::unbounded_channel();
        let approver = TerminalApprover { allowed, ask };
        return (Some(ApproverService(Arc::new(approver))), Some(asked));
    }
    if allowed.is_empty() {
        (None, None)
    } else {
        (Some(ApproverService(Arc::new(AllowListed(allowed)))), None)
    }
}

/// Whether a typed answer allows.
pub(crate) fn allows(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_y_or_yes_allows() {
        for yes in ["y", "Y", " yes ", "YES"] {
            assert!(allows(yes), "{yes}");
        }
        for no in ["", "n", "no", "yep", "sure"] {
            assert!(!allows(no), "{no}");
        }
    }

    #[test]
    fn a_piped_run_without_flags_has_no_approver() {
        assert!(approver_for(false, &[], false).0.is_none());
        assert!(approver_for(true, &[], false).0.is_some());
        assert!(approver_for(false, &["bash".to_owned()], false).0.is_some());
        let (approver, asked) = approver_for(false, &[], true);
        assert!(approver.is_some() && asked.is_some());
    }
}
