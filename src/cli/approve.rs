//! Who answers a tool's `ask` approval policy in `cordis run`.
//!
//! - `--yes`: every call is allowed.
//! - `--approve TOOL` (repeatable): those tools are allowed up front.
//! - At a terminal, anything else is asked: the call's card (the command, the diff of an edit)
//!   is shown on stderr and the first key pressed *after* it answers (what was typed before the
//!   question is kept as later messages, never taken as the answer): `y` allows once, `a`
//!   grants what the question names for the rest of the session (the tool, or for `bash` the
//!   parsed command's program and subcommand, e.g. `git status`; logged, so `--resume` holds
//!   it again), Enter,
//!   `n` or Esc denies, and any other text denies and tells the model why (`e` starts that
//!   reason on an empty line). With a redirected stdout the same answers are typed as lines.
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
    /// `--approve` tools (grants made by "always" live in the approvals service).
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

/// What the run wires up for approvals: the approver service and the questions it will ask
/// (interactive runs only).
pub(crate) struct Approving {
    pub service: Option<ApproverService>,
    pub asked: Option<mpsc::UnboundedReceiver<Asked>>,
}

/// The approver for a run, and the questions it will ask (interactive runs only).
pub(crate) fn approver_for(yes: bool, approve: &[String], interactive: bool) -> Approving {
    let names: BTreeSet<String> = approve.iter().cloned().collect();
    let (service, asked) = if yes {
        (Some(ApproverService(Arc::new(AllowAll))), None)
    } else if interactive {
        let (ask, asked) = mpsc::unbounded_channel();
        let approver = TerminalApprover {
            allowed: names,
            ask,
        };
        (Some(ApproverService(Arc::new(approver))), Some(asked))
    } else if names.is_empty() {
        (None, None)
    } else {
        (Some(ApproverService(Arc::new(AllowListed(names)))), None)
    };
    Approving { service, asked }
}

/// A typed answer to an approval question: `y`/`yes` once, `a`/`always` for the session,
/// Enter/`n`/`no` no, and any other text no, with that text told to the model.
pub(crate) fn answer_of(line: &str) -> Answer {
    let text = line.trim();
    match text.to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Allow,
        "a" | "always" => Answer::AllowAlways,
        "" | "n" | "no" => Answer::Deny(Some("the user said no".to_owned())),
        _ => Answer::Deny(Some(format!("the user said no: {text}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_once_always_no_or_no_with_a_reason() {
        for yes in ["y", "Y", " yes ", "YES"] {
            assert_eq!(answer_of(yes), Answer::Allow, "{yes}");
        }
        for always in ["a", "A", "always"] {
            assert_eq!(answer_of(always), Answer::AllowAlways, "{always}");
        }
        for no in ["", "  ", "n", "no", "NO"] {
            assert_eq!(
                answer_of(no),
                Answer::Deny(Some("the user said no".to_owned())),
                "{no:?}"
            );
        }
        assert_eq!(
            answer_of(" use rg instead "),
            Answer::Deny(Some("the user said no: use rg instead".to_owned()))
        );
    }

    #[test]
    fn a_piped_run_without_flags_has_no_approver() {
        assert!(approver_for(false, &[], false).service.is_none());
        assert!(approver_for(true, &[], false).service.is_some());
        assert!(
            approver_for(false, &["bash".to_owned()], false)
                .service
                .is_some()
        );
        let approving = approver_for(false, &[], true);
        assert!(approving.service.is_some() && approving.asked.is_some());
    }
}
