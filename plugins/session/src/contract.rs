//! The cache-prefix contract: each request's bytes extend the previous request's bytes, unless
//! the log says why.
//!
//! A provider's prompt cache hits only on a byte-identical prefix, so a request that rewrites
//! anything before its new messages (a reordered tool, an edited system prompt, a rewritten
//! message) pays for its whole input again. [`check_contract`] rebuilds every request a log
//! implies and proves that each one extends its predecessor, or that the log explains the
//! break with a `request/header` logged for that request.
//!
//! # The requests a log implies
//! One per `step/start`, numbered from 1 in log order. Its messages are [`derive_messages`] of
//! the events before the `step/start` (a `compaction` restarts them from its summary); its
//! config, system prompt and tools are those of the latest `request/header` logged before the
//! step's first model output: the agent loop logs a step's header right after its
//! `step/start`. The headers between a `step/start` and the step's first other event are the
//! ones *logged for that request*.
//!
//! # The canonical bytes of a request
//! One JSON line per part (compact `serde_json`, each ending in `\n`), in the order sent:
//! ```text
//! {"config":{...}}        the call config
//! {"system":"..."}        the system prompt (no line when there is none)
//! {"tool":{...}}          one line per tool, in order
//! {"message":{...}}       one line per message, in order
//! ```
//!
//! # When a break is explained
//! A request whose bytes do not extend its predecessor's holds the contract only when a
//! `request/header` is logged for it, and every reason logged for it must be true of the log:
//! - `initial`: it is the log's first request;
//! - `resume`: an earlier request exists (a new loop instance picked the log up);
//! - `change`: its header bytes differ from the previous request's;
//! - `compaction`: a `compaction` event lies between the previous request and this one;
//! - `fork`: the session header has `forkedAt` and this is the first request at or after it;
//! - `tool-load`: its header is the previous request's with tools appended, nothing else: the
//!   previous header's bytes are a proper prefix of its header's, and only tool lines follow.
//!
//! A reason that explains nothing is reported as well ([`ContractError::Unexplained`]): a log
//! that claims a compaction it does not hold cannot be trusted to explain a break.
//!
//! # Cost
//! The check is one pass over the events. Between two requests the messages only grow (until a
//! `compaction`), so a request with the previous header and no restart extends its predecessor
//! by construction; bytes are serialized only for headers as they are logged and, once, for the
//! two requests around a break that must be located.
//!
//! # Examples
//!
//! ```
//! use cordis_conversation::CallConfig;
//! use cordis_session::contract::check_contract;
//! use cordis_session::{
//!     HeaderReason, RequestHeader, RequestHeaderData, Session, StepStartData, UserMessageData,
//! };
//!
//! let s = Session::in_memory("s");
//! s.append(&UserMessageData { turn: 1, content: "hi".into(), prompt: None }, None).unwrap();
//! s.append(&StepStartData { turn: 1, step: 1 }, None).unwrap();
//! let header = RequestHeader::new(CallConfig::default(), "sys".into(), Vec::new());
//! s.append(&RequestHeaderData { header, reason: HeaderReason::Initial, changed: Vec::new() }, None).unwrap();
//! let report = check_contract(s.header(), &s.events()).unwrap();
//! assert_eq!(report.requests, 1);
//! ```

use std::fmt;

use cordis_conversation::Message;

use crate::event::{
    HeaderReason, ProjectionError, RequestHeaderData, SessionEvent, SessionHeader, StepStartData,
    kinds,
};
use crate::project::{MessageEffect, derive_messages, event_message};

/// How many bytes of each side an excerpt shows around the first differing byte.
const EXCERPT: usize = 48;

/// Where a request is in its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestAt {
    /// Its number, from 1 in log order.
    pub index: usize,
    /// The seq of its `step/start`.
    pub seq: u64,
    /// Its turn.
    pub turn: u64,
    /// Its step in the turn.
    pub step: u64,
}

impl fmt::Display for RequestAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request {} (step/start seq {}, turn {} step {})",
            self.index, self.seq, self.turn, self.step
        )
    }
}

/// A log that holds the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractReport {
    /// How many requests the log implies (all checked).
    pub requests: usize,
    /// How many of them broke the prefix with a reason the log gives.
    pub explained: usize,
}

/// The first place a log breaks the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// The request's bytes do not extend the previous request's and no header explains it.
    #[error(
        "{at}: its bytes do not extend request {}'s and no request/header explains it; first differing byte {offset}:\n  before: {previous}\n  now:    {current}",
        at.index - 1
    )]
    NotExtended {
        /// The request.
        at: RequestAt,
        /// The first byte offset (in the canonical bytes) where the two requests differ.
        offset: usize,
        /// An excerpt of the previous request's bytes from shortly before `offset`.
        previous: String,
        /// An excerpt of this request's bytes from the same place.
        current: String,
    },
    /// A reason logged for the request that is not true of the log.
    #[error("{at}: its request/header says `{reason}` but {why}")]
    Unexplained {
        /// The request.
        at: RequestAt,
        /// The reason as logged.
        reason: String,
        /// Why it explains nothing.
        why: String,
    },
    /// No `request/header` precedes the request's first output.
    #[error(
        "{at}: no request/header is logged before it, so its config, system prompt and tools are unknown"
    )]
    NoHeader {
        /// The request.
        at: RequestAt,
    },
    /// An event's payload does not fit its kind.
    #[error(transparent)]
    Projection(#[from] ProjectionError),
}

/// The header part of a request, with its canonical bytes.
#[derive(Debug)]
struct Head {
    bytes: String,
}

/// A request on the way: its `step/start` was read, its header may follow.
struct Pending {
    at: RequestAt,
    index: usize,
    reasons: Vec<HeaderReason>,
}

/// The request checked before the current one.
struct Previous {
    at: RequestAt,
    /// Index of its `step/start` in the events.
    index: usize,
    head: std::rc::Rc<Head>,
}

/// Checks the cache-prefix contract of a log (see the module doc).
///
/// # Errors
/// The first request that breaks it, or the first malformed payload.
pub fn check_contract(
    header: &SessionHeader,
    events: &[SessionEvent],
) -> Result<ContractReport, ContractError> {
    let mut checker = Checker {
        header,
        events,
        head: None,
        previous: None,
        restarted: false,
        report: ContractReport {
            requests: 0,
            explained: 0,
        },
    };
    let mut pending: Option<Pending> = None;
    for (index, e) in events.iter().enumerate() {
        if e.kind == kinds::REQUEST_HEADER {
            let data = e.data_as::<RequestHeaderData>()?;
            checker.head = Some(std::rc::Rc::new(Head {
                bytes: head_bytes(&data),
            }));
            if let Some(p) = &mut pending {
                p.reasons.push(data.reason);
            }
            continue;
        }
        if let Some(p) = pending.take() {
            checker.finish(p)?;
        }
        match e.kind.as_str() {
            kinds::STEP_START => {
                let d = e.data_as::<StepStartData>()?;
                pending = Some(Pending {
                    at: RequestAt {
                        index: checker.report.requests + 1,
                        seq: e.seq,
                        turn: d.turn,
                        step: d.step,
                    },
                    index,
                    reasons: Vec::new(),
                });
            }
            _ => {
                if let MessageEffect::Restart(_) = event_message(e)? {
                    checker.restarted = true;
                }
            }
        }
    }
    if let Some(p) = pending.take() {
        checker.finish(p)?;
    }
    Ok(checker.report)
}

struct Checker<'a> {
    header: &'a SessionHeader,
    events: &'a [SessionEvent],
    /// The latest header logged so far.
    head: Option<std::rc::Rc<Head>>,
    previous: Option<Previous>,
    /// A `compaction` since the previous request.
    restarted: bool,
    report: ContractReport,
}

impl Checker<'_> {
    /// Checks the request `p` once its headers are all read.
    fn finish(&mut self, p: Pending) -> Result<(), ContractError> {
        let at = p.at;
        let Some(head) = self.head.clone() else {
            return Err(ContractError::NoHeader { at });
        };
        for reason in &p.reasons {
            if let Some(why) = self.unexplained(*reason, &p, &head) {
                return Err(ContractError::Unexplained {
                    at,
                    reason: reason_name(*reason),
                    why,
                });
            }
        }
        if let Some(prev) = &self.previous {
            let same_head = std::rc::Rc::ptr_eq(&prev.head, &head) || prev.head.bytes == head.bytes;
            if !same_head || self.restarted {
                if p.reasons.is_empty() {
                    if let Some((offset, previous, current)) = self.locate(prev, &head, p.index)? {
                        return Err(ContractError::NotExtended {
                            at,
                            offset,
                            previous,
                            current,
                        });
                    }
                } else {
                    self.report.explained += 1;
                }
            }
        }
        self.report.requests += 1;
        self.restarted = false;
        self.previous = Some(Previous {
            at,
            index: p.index,
            head,
        });
        Ok(())
    }

    /// Why `reason`, logged for `p`, is not true of the log (`None`: it is).
    fn unexplained(&self, reason: HeaderReason, p: &Pending, head: &Head) -> Option<String> {
        let prev = self.previous.as_ref();
        match reason {
            HeaderReason::Initial => {
                prev.map(|prev| format!("request {} came before it", prev.at.index))
            }
            HeaderReason::Resume => prev
                .is_none()
                .then(|| "it is the log's first request: there is nothing to resume".into()),
            HeaderReason::Change => match prev {
                None => Some("it is the log's first request: there is nothing to change".into()),
                Some(prev) if prev.head.bytes == head.bytes => Some(format!(
                    "its config, system prompt and tools are request {}'s, byte for byte",
                    prev.at.index
                )),
                Some(_) => None,
            },
            HeaderReason::Compaction => (!self.restarted).then(|| match prev {
                Some(prev) => format!(
                    "no compaction event lies between request {} and it",
                    prev.at.index
                ),
                None => "no compaction event precedes it".into(),
            }),
            HeaderReason::ToolLoad => match prev {
                None => Some("it is the log's first request: there is nothing to append to".into()),
                // Appended tools do not explain messages a compaction rewrote.
                Some(prev) if self.restarted && !p.reasons.contains(&HeaderReason::Compaction) => {
                    Some(format!(
                        "a compaction lies between request {} and it: only a `compaction` \
                         header explains that",
                        prev.at.index
                    ))
                }
                Some(prev) => appended_tools(&prev.head.bytes, &head.bytes)
                    .err()
                    .map(|what| {
                        format!(
                            "its header is not request {}'s with tools appended: {what}",
                            prev.at.index
                        )
                    }),
            },
            HeaderReason::Fork => match self.header.forked_at {
                None => Some("the session header has no `forkedAt`: it is not a fork".into()),
                Some(at) if p.at.seq < at => Some(format!(
                    "it lies in the events copied from the parent (the fork starts at seq {at})"
                )),
                Some(at) => prev.filter(|prev| prev.at.seq >= at).map(|prev| {
                    format!(
                        "request {} was the fork's first request (the fork starts at seq {at})",
                        prev.at.index
                    )
                }),
            },
        }
    }

    /// The first byte where the request at `index` (with `head`) stops extending `prev`, with
    /// excerpts of both sides; `None` when it does extend it.
    fn locate(
        &self,
        prev: &Previous,
        head: &Head,
        index: usize,
    ) -> Result<Option<(usize, String, String)>, ContractError> {
        let before = request_bytes(&prev.head, &derive_messages(&self.events[..prev.index])?);
        let now = request_bytes(head, &derive_messages(&self.events[..index])?);
        if now.as_bytes().starts_with(before.as_bytes()) {
            return Ok(None);
        }
        let offset = before
            .bytes()
            .zip(now.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| before.len().min(now.len()));
        Ok(Some((
            offset,
            excerpt(&before, offset),
            excerpt(&now, offset),
        )))
    }
}

/// Checks that header bytes `now` are `before` with tool lines appended (at least one).
fn appended_tools(before: &str, now: &str) -> Result<(), &'static str> {
    let Some(rest) = now.strip_prefix(before) else {
        return Err("its config, system prompt or earlier tools differ");
    };
    if rest.is_empty() {
        return Err("no tool was appended");
    }
    if rest.lines().all(|l| l.starts_with("{\"tool\":")) {
        Ok(())
    } else {
        Err("more than tools was added")
    }
}

fn reason_name(reason: HeaderReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{reason:?}"))
}

/// One canonical line: `{"<key>":<value>}\n`.
fn line(out: &mut String, key: &str, value: &impl serde::Serialize) {
    out.push_str("{\"");
    out.push_str(key);
    out.push_str("\":");
    // These types serialize to JSON without fail (string keys only); `null` would still show.
    out.push_str(&serde_json::to_string(value).unwrap_or_else(|_| "null".into()));
    out.push_str("}\n");
}

/// The canonical bytes of a header's parts: config, system prompt, tools.
fn head_bytes(data: &RequestHeaderData) -> String {
    let mut out = String::new();
    line(&mut out, "config", &data.header.config);
    if let Some(system) = &data.header.system {
        line(&mut out, "system", system);
    }
    for tool in data.header.tools.iter().flatten() {
        line(&mut out, "tool", tool);
    }
    out
}

/// The canonical bytes of a whole request.
fn request_bytes(head: &Head, messages: &[Message]) -> String {
    let mut out = head.bytes.clone();
    for m in messages {
        line(&mut out, "message", m);
    }
    out
}

/// The bytes of `text` around `offset` (from a little before it), escaped for one line.
fn excerpt(text: &str, offset: usize) -> String {
    let mut start = offset.saturating_sub(EXCERPT / 3).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + EXCERPT).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let mut shown = format!("{:?}", &text[start..end]);
    if start > 0 {
        shown.insert(0, '…');
    }
    if end < text.len() {
        shown.push('…');
    }
    if end == start {
        shown = "(ends here)".into();
    }
    shown
}

#[cfg(test)]
mod tests {
    use cordis_conversation::CallConfig;
    use cordis_schema::ToolSchema;

    use super::*;
    use crate::event::{
        AssistantMessageData, CompactionData, CompactionTrigger, EventData, RequestHeader,
        StepEndData, TurnEndData, TurnEndReason, TurnStartData, UserMessageData,
    };

    fn tool(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: format!("the {name} tool"),
            parameters: std::sync::Arc::new(serde_json::json!({"type": "object"})),
        }
    }

    fn header(tools: &[&str]) -> RequestHeader {
        RequestHeader::new(
            CallConfig::default(),
            "be brief".into(),
            tools.iter().map(|t| tool(t)).collect(),
        )
    }

    /// A log built event by event.
    #[derive(Default)]
    struct Log {
        events: Vec<SessionEvent>,
    }

    impl Log {
        fn push<D: EventData>(&mut self, data: &D) -> &mut Self {
            self.events.push(SessionEvent {
                kind: D::KIND.into(),
                seq: self.events.len() as u64,
                time: 0,
                data: serde_json::to_value(data).unwrap(),
                source_event_seqs: None,
            });
            self
        }

        /// One turn of one step: user message, step/start, optional header, answer.
        fn turn(&mut self, turn: u64, header: Option<(RequestHeader, HeaderReason)>) -> &mut Self {
            self.push(&TurnStartData { turn });
            self.push(&UserMessageData {
                turn,
                content: format!("question {turn}"),
                prompt: None,
            });
            self.push(&StepStartData { turn, step: 1 });
            if let Some((header, reason)) = header {
                self.push(&RequestHeaderData {
                    header,
                    reason,
                    changed: Vec::new(),
                });
            }
            self.push(&AssistantMessageData {
                turn,
                step: 1,
                content: format!("answer {turn}"),
                tool_calls: Vec::new(),
                usage: None,
                reasoning: None,
            });
            self.push(&StepEndData { turn, step: 1 });
            self.push(&TurnEndData {
                turn,
                reason: TurnEndReason::Completed,
            })
        }

        fn compaction(&mut self) -> &mut Self {
            self.push(&CompactionData {
                summary: "we talked".into(),
                trigger: CompactionTrigger::Manual,
                focus: None,
                through_seq: self.events.len() as u64 - 1,
                messages: 2,
                dropped_tool_results: 0,
                input_tokens: None,
                usage: None,
            })
        }
    }

    fn plain() -> SessionHeader {
        SessionHeader {
            kind: "session".into(),
            version: 0,
            id: "s".into(),
            created_at: 0,
            cwd: None,
            parent_session: None,
            forked_at: None,
            agent_preset: None,
        }
    }

    #[test]
    fn a_clean_log_holds_and_counts_every_request() {
        let mut log = Log::default();
        log.turn(1, Some((header(&["a", "b"]), HeaderReason::Initial)));
        for turn in 2..=5 {
            log.turn(turn, None);
        }
        let report = check_contract(&plain(), &log.events).unwrap();
        assert_eq!(
            report,
            ContractReport {
                requests: 5,
                explained: 0
            }
        );
    }

    #[test]
    fn a_tool_reordered_without_a_header_for_its_request_fails_naming_it() {
        let mut log = Log::default();
        log.turn(1, Some((header(&["a", "b"]), HeaderReason::Initial)));
        // The reordered header replaces request 1's `step/end`: logged, but not for request 2.
        let step_end = log.events.len() - 2;
        log.events[step_end] = SessionEvent {
            kind: kinds::REQUEST_HEADER.into(),
            seq: step_end as u64,
            time: 0,
            data: serde_json::to_value(RequestHeaderData {
                header: header(&["b", "a"]),
                reason: HeaderReason::Change,
                changed: Vec::new(),
            })
            .unwrap(),
            source_event_seqs: None,
        };
        log.turn(2, None);
        let err = check_contract(&plain(), &log.events).unwrap_err();
        let ContractError::NotExtended { at, offset, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!((at.index, at.turn, at.step), (2, 2, 1));
        assert_eq!(at.seq, 9);
        let config = head_bytes(&RequestHeaderData {
            header: header(&[]),
            reason: HeaderReason::Initial,
            changed: Vec::new(),
        });
        // The config and system lines agree; the first tool line differs inside its name.
        assert_eq!(*offset, config.len() + r#"{"tool":{"name":""#.len());
        let text = err.to_string();
        assert!(
            text.starts_with(
                "request 2 (step/start seq 9, turn 2 step 1): its bytes do not extend request 1's"
            ),
            "{text}"
        );
        // With the header logged for request 2, the same break is explained.
        let mut fixed = Log::default();
        fixed.turn(1, Some((header(&["a", "b"]), HeaderReason::Initial)));
        fixed.turn(2, Some((header(&["b", "a"]), HeaderReason::Change)));
        let report = check_contract(&plain(), &fixed.events).unwrap();
        assert_eq!((report.requests, report.explained), (2, 1));
    }

    #[test]
    fn a_message_rewritten_between_two_requests_fails_naming_the_request() {
        let mut log = Log::default();
        log.turn(1, Some((header(&["a"]), HeaderReason::Initial)));
        log.turn(2, None);
        // A compaction with no header logged for the next request rewrites the messages.
        log.compaction();
        log.turn(3, None);
        let err = check_contract(&plain(), &log.events).unwrap_err();
        let ContractError::NotExtended {
            at,
            previous,
            current,
            ..
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!((at.index, at.turn), (3, 3));
        assert!(previous.contains("question 1"), "{previous} / {current}");
        assert!(current.contains("The conversation so far"), "{current}");
    }

    #[test]
    fn a_compaction_with_its_header_is_explained_and_one_without_the_event_is_reported() {
        let mut log = Log::default();
        log.turn(1, Some((header(&["a"]), HeaderReason::Initial)));
        log.compaction();
        log.turn(2, Some((header(&["a"]), HeaderReason::Compaction)));
        log.turn(3, None);
        let report = check_contract(&plain(), &log.events).unwrap();
        assert_eq!((report.requests, report.explained), (3, 1));

        let mut claimed = Log::default();
        claimed.turn(1, Some((header(&["a"]), HeaderReason::Initial)));
        claimed.turn(2, Some((header(&["a"]), HeaderReason::Compaction)));
        let err = check_contract(&plain(), &claimed.events).unwrap_err();
        assert!(
            matches!(&err, ContractError::Unexplained { at, reason, .. } if at.index == 2 && reason == "compaction"),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("no compaction event lies between request 1 and it"),
            "{err}"
        );
    }

    #[test]
    fn a_fork_is_explained_from_its_fork_point_only() {
        let mut log = Log::default();
        log.turn(1, Some((header(&["a"]), HeaderReason::Initial)));
        log.turn(2, None);
        let forked_at = log.events.len() as u64;
        log.turn(3, Some((header(&["a"]), HeaderReason::Fork)));
        log.turn(4, None);
        let fork = SessionHeader {
            parent_session: Some("parent".into()),
            forked_at: Some(forked_at),
            ..plain()
        };
        let report = check_contract(&fork, &log.events).unwrap();
        assert_eq!(report.requests, 4);
        // The same log without `forkedAt` claims a fork it is not.
        let err = check_contract(&plain(), &log.events).unwrap_err();
        assert!(
            matches!(&err, ContractError::Unexplained { at, .. } if at.index == 3),
            "{err}"
        );
    }

    #[test]
    fn a_tool_load_is_explained_only_when_tools_are_appended_after_the_previous_ones() {
        let mut log = Log::default();
        log.turn(
            1,
            Some((header(&["m", "tool_search"]), HeaderReason::Initial)),
        );
        log.turn(
            2,
            Some((header(&["m", "tool_search", "x"]), HeaderReason::ToolLoad)),
        );
        // A second load appends after the first, whatever the names' order.
        log.turn(
            3,
            Some((
                header(&["m", "tool_search", "x", "c"]),
                HeaderReason::ToolLoad,
            )),
        );
        let report = check_contract(&plain(), &log.events).unwrap();
        assert_eq!((report.requests, report.explained), (3, 2));

        // A load inserted before an earlier tool is not an append: the cache of request 2's
        // tools would not survive, and the log must say `change` instead.
        let mut inserted = Log::default();
        inserted.turn(1, Some((header(&["m", "x"]), HeaderReason::Initial)));
        inserted.turn(2, Some((header(&["c", "m", "x"]), HeaderReason::ToolLoad)));
        let err = check_contract(&plain(), &inserted.events).unwrap_err();
        assert_eq!(
            err.to_string(),
            "request 2 (step/start seq 9, turn 2 step 1): its request/header says `tool-load` but \
             its header is not request 1's with tools appended: its config, system prompt or \
             earlier tools differ"
        );
        let mut same = Log::default();
        same.turn(1, Some((header(&["m"]), HeaderReason::Initial)));
        same.turn(2, Some((header(&["m"]), HeaderReason::ToolLoad)));
        let err = check_contract(&plain(), &same.events).unwrap_err();
        assert!(err.to_string().ends_with("no tool was appended"), "{err}");
        // A load after a compaction does not explain the rewritten messages.
        let mut compacted = Log::default();
        compacted.turn(1, Some((header(&["m"]), HeaderReason::Initial)));
        compacted.compaction();
        compacted.turn(2, Some((header(&["m", "x"]), HeaderReason::ToolLoad)));
        let err = check_contract(&plain(), &compacted.events).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("a compaction lies between request 1 and it: only a `compaction` header explains that"),
            "{err}"
        );
        let mut first = Log::default();
        first.turn(1, Some((header(&["m"]), HeaderReason::ToolLoad)));
        assert!(matches!(
            check_contract(&plain(), &first.events),
            Err(ContractError::Unexplained { .. })
        ));
    }

    #[test]
    fn a_request_without_any_header_is_reported() {
        let mut log = Log::default();
        log.turn(1, None);
        let err = check_contract(&plain(), &log.events).unwrap_err();
        assert!(
            matches!(err, ContractError::NoHeader { at } if at.index == 1 && at.seq == 2),
            "{err}"
        );
    }
}
