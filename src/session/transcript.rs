//! The transcript model: a session's log as the things a person reads (messages, thoughts,
//! tool calls with their cards and results, plans, notices), in log order, one page at a time.
//!
//! Every renderer consumes it: `cordis history` and the "where you left off" view of a resumed
//! run (text, [`crate::cli::transcript`]'s lines), the page's session view (its JSON), and ACP's
//! `session/load` replay (updates). One fold of the log, so a session reads the same wherever
//! it is shown. Bookkeeping (turn and step marks, request headers, streamed chunks, approvals)
//! is folded away: a completed turn shows nothing of its own, a turn that did not complete is a
//! [`Item::Notice`].

use cordis_history::{HistoryEntry, HistoryPage, ViewFor};
use cordis_presenter::{Presentation, Presenters, ResultView, generic, parse_arguments_text};
use cordis_session::{
    EventView, ToolCodeDispatchData, ToolCodeDispatchStartData, ToolResultData, TurnEndReason,
};
use cordis_tool_todo::{TODO_WRITE, Todo, TodoWriteArgs};
use serde::Serialize;
use serde_json::Value;

/// How a compaction is told in one line.
pub fn compaction_line(trigger: cordis_session::CompactionTrigger, messages: u64) -> String {
    let how = match trigger {
        cordis_session::CompactionTrigger::Manual => "/compact",
        cordis_session::CompactionTrigger::Auto => "automatically, near the context window",
    };
    format!("conversation compacted ({how}): {messages} messages replaced by a summary")
}

/// One thing of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Item {
    /// The user's message (the text the model was sent).
    #[serde(rename_all = "camelCase")]
    User {
        /// Its event's seq.
        seq: u64,
        /// The turn it started.
        turn: u64,
        /// The text.
        text: String,
        /// The prompt's blocks as the client sent them, when they were more than text.
        #[serde(skip_serializing_if = "Option::is_none")]
        blocks: Option<Vec<Value>>,
    },
    /// The model's reasoning before an answer.
    Thought {
        /// Its message's seq.
        seq: u64,
        /// The reasoning text.
        text: String,
    },
    /// The model's answer (one step's text; empty steps that only call tools are left out).
    Assistant {
        /// Its event's seq.
        seq: u64,
        /// The text.
        text: String,
    },
    /// What one model answer cost, as its provider reported it.
    #[serde(rename_all = "camelCase")]
    Usage {
        /// The answer's seq.
        seq: u64,
        /// Prompt tokens of the request.
        input_tokens: u64,
        /// Of the prompt tokens, those the provider's prompt cache served, when it said.
        #[serde(skip_serializing_if = "Option::is_none")]
        cached_input_tokens: Option<u64>,
        /// Tokens of the answer.
        output_tokens: u64,
    },
    /// A tool call and, once it came, its result.
    Call(Box<Call>),
    /// The todo list a `todo_write` call set.
    Plan {
        /// The call's result seq.
        seq: u64,
        /// The list.
        todos: Vec<Todo>,
    },
    /// The conversation before it was replaced by a summary (`/compact`, or automatically
    /// near the context window).
    #[serde(rename_all = "camelCase")]
    Compaction {
        /// Its event's seq.
        seq: u64,
        /// `manual` or `auto`.
        trigger: cordis_session::CompactionTrigger,
        /// How many messages the summary replaced.
        messages: u64,
        /// The focus the user asked for.
        #[serde(skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
        /// The summary the conversation goes on from.
        summary: String,
    },
    /// Something about the session itself: a turn that did not complete, a preset switch, a
    /// permission change.
    Notice {
        /// Its event's seq.
        seq: u64,
        /// What happened, as a sentence.
        text: String,
        /// A failure (the turn failed), as opposed to a note.
        failure: bool,
    },
}

/// A tool call as the transcript holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    /// The `tool/call` event's seq (a result whose call is on an older page: its own).
    pub seq: u64,
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// The arguments (the logged text parsed; a string when it is not JSON).
    pub arguments: Value,
    /// The call as its presenter shows it (the generic one when the tool presents nothing).
    pub view: Presentation,
    /// The result, once logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CallResult>,
    /// `run_code`'s sub-calls, in the order they started.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sub_calls: Vec<Call>,
}

/// A call's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallResult {
    /// Its event's seq.
    pub seq: u64,
    /// The call failed.
    pub is_error: bool,
    /// The failure's code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The content as logged.
    pub content: Value,
    /// The result as its presenter shows it.
    pub view: Presentation,
}

/// One page of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptPage {
    /// The items, oldest first.
    pub items: Vec<Item>,
    /// Older items exist: ask again with `before` = [`TranscriptPage::first_seq`].
    pub has_more: bool,
    /// The first event's seq of the page (`None`: an empty page).
    pub first_seq: Option<u64>,
    /// The last event's seq of the page.
    pub last_seq: Option<u64>,
}

impl TranscriptPage {
    /// The transcript of a history page (`presenters` show `run_code`'s sub-calls, which have
    /// no views of their own).
    pub fn of(page: &HistoryPage, presenters: Option<&Presenters>) -> TranscriptPage {
        let mut fold = Fold::default();
        for entry in &page.events {
            fold.entry(entry, presenters);
        }
        fold.flush_streamed();
        TranscriptPage {
            items: fold.items,
            has_more: page.has_more,
            first_seq: page.events.first().map(|e| e.event.seq),
            last_seq: page.events.last().map(|e| e.event.seq),
        }
    }

    /// The items from the start of the `turns`-th last turn on (all of them when the page holds
    /// fewer turns), and whether any were left out.
    pub fn last_turns(&self, turns: usize) -> (&[Item], bool) {
        let starts: Vec<usize> = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, item)| matches!(item, Item::User { .. }))
            .map(|(i, _)| i)
            .collect();
        match starts.len().checked_sub(turns) {
            Some(skip) => {
                let from = starts[skip];
                (&self.items[from..], from > 0 || self.has_more)
            }
            None => (&self.items[..], self.has_more),
        }
    }
}

/// The fold of a page's entries into items.
#[derive(Default)]
struct Fold {
    items: Vec<Item>,
    /// The answer streaming since the last logged message: (first seq, text) of its reasoning
    /// and of its text. Its message replaces it; a turn that ends without one (a failed stream)
    /// or a page read mid-answer shows what was streamed.
    streamed: [Option<(u64, String)>; 2],
}

impl Fold {
    /// The open call `call_id` (a top-level call, latest first).
    fn call_mut(&mut self, call_id: &str) -> Option<&mut Call> {
        self.items.iter_mut().rev().find_map(|item| match item {
            Item::Call(call) if call.call_id == call_id => Some(&mut **call),
            _ => None,
        })
    }

    fn entry(&mut self, entry: &HistoryEntry, presenters: Option<&Presenters>) {
        let seq = entry.event.seq;
        let view_for = |which: ViewFor| {
            entry
                .view
                .as_ref()
                .filter(|v| v.for_ == which)
                .map(|v| v.view.clone())
        };
        match entry.event.view() {
            EventView::UserMessage(user) => self.items.push(Item::User {
                seq,
                turn: user.turn,
                text: user.content,
                blocks: user.prompt,
            }),
            EventView::AssistantMessage(message) => {
                self.streamed = [None, None];
                if let Some(reasoning) = message.reasoning.filter(|r| !r.is_empty()) {
                    self.items.push(Item::Thought {
                        seq,
                        text: reasoning,
                    });
                }
                if !message.content.is_empty() {
                    self.items.push(Item::Assistant {
                        seq,
                        text: message.content,
                    });
                }
                if let Some(usage) = message.usage {
                    self.items.push(Item::Usage {
                        seq,
                        input_tokens: usage.input_tokens,
                        cached_input_tokens: usage.cached_input_tokens,
                        output_tokens: usage.output_tokens,
                    });
                }
            }
            EventView::ToolCall(call) => {
                let arguments = parse_arguments_text(&call.arguments);
                let view =
                    view_for(ViewFor::Call).unwrap_or_else(|| generic(&call.name, &arguments));
                self.items.push(Item::Call(Box::new(Call {
                    seq,
                    call_id: call.call_id,
                    name: call.name,
                    arguments,
                    view,
                    result: None,
                    sub_calls: Vec::new(),
                })));
            }
            EventView::ToolResult(result) => {
                self.result(seq, result, view_for(ViewFor::Result));
            }
            EventView::ToolCodeDispatchStart(sub) => self.sub_call(seq, sub, presenters),
            EventView::ToolCodeDispatch(sub) => self.sub_result(seq, sub, presenters),
            EventView::TurnEnd(end) => {
                self.flush_streamed();
                if let Some((text, failure)) = turn_notice(end.turn, end.reason) {
                    self.items.push(Item::Notice { seq, text, failure });
                }
            }
            EventView::AgentPresetSelected(switch) => self.items.push(Item::Notice {
                seq,
                text: format!("switched to preset {}", switch.agent_preset),
                failure: false,
            }),
            EventView::PermissionsMode(mode) => self.items.push(Item::Notice {
                seq,
                text: format!("permission mode {}", mode.mode),
                failure: false,
            }),
            EventView::Compaction(c) => self.items.push(Item::Compaction {
                seq,
                trigger: c.trigger,
                messages: c.messages,
                focus: c.focus,
                summary: c.summary,
            }),
            EventView::PermissionsRevoke(revoked) => {
                let grant = &revoked.grant;
                let command = grant
                    .command
                    .as_deref()
                    .map(|c| format!(" `{c}`"))
                    .unwrap_or_default();
                self.items.push(Item::Notice {
                    seq,
                    text: format!("revoked the grant {}{command}", grant.tool),
                    failure: false,
                });
            }
            // Bookkeeping: the loop's marks, the stream (the message holds its text), request
            // headers, approvals; unknown kinds and payloads that do not fit their kind.
            EventView::AssistantChunk(chunk) => {
                let (slot, delta) = match chunk.chunk {
                    cordis_llm::Chunk::Reasoning { delta } => (0, delta),
                    cordis_llm::Chunk::Text { delta } => (1, delta),
                    _ => return,
                };
                self.streamed[slot]
                    .get_or_insert_with(|| (seq, String::new()))
                    .1
                    .push_str(&delta);
            }
            EventView::HookRun(h) if !matches!(h.decision.as_str(), "continue" | "allow") => {
                self.items.push(Item::Notice {
                    seq,
                    failure: matches!(h.decision.as_str(), "error" | "timeout"),
                    text: format!(
                        "{} hook `{}`: {}{}",
                        h.event,
                        h.command,
                        h.decision,
                        h.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                    ),
                })
            }
            EventView::TurnStart(_)
            | EventView::StepStart(_)
            | EventView::RequestHeader(_)
            | EventView::ToolApproval(_)
            | EventView::HookRun(_)
            | EventView::StepEnd(_)
            | EventView::Unknown { .. }
            | EventView::Malformed(_) => {}
        }
    }

    /// What streamed without its message yet, as the answer it was.
    fn flush_streamed(&mut self) {
        let [thought, text] = std::mem::take(&mut self.streamed);
        if let Some((seq, text)) = thought.filter(|(_, t)| !t.is_empty()) {
            self.items.push(Item::Thought { seq, text });
        }
        if let Some((seq, text)) = text.filter(|(_, t)| !t.is_empty()) {
            self.items.push(Item::Assistant { seq, text });
        }
    }

    /// A result: under its call, or (its call on an older page) a call of its own; a
    /// `todo_write`'s list after it.
    fn result(&mut self, seq: u64, result: ToolResultData, view: Option<Presentation>) {
        let fallback = |name: &str, args: &Value| Presentation {
            text: None,
            ..generic(name, args)
        };
        let plan = (result.name == TODO_WRITE && !result.is_error)
            .then(|| {
                self.call_mut(&result.call_id)
                    .and_then(|c| todos_of(&c.arguments))
            })
            .flatten();
        let done = |args: &Value| CallResult {
            seq,
            is_error: result.is_error,
            code: result.code.clone(),
            content: result.content.clone(),
            view: view.clone().unwrap_or_else(|| fallback(&result.name, args)),
        };
        match self.call_mut(&result.call_id) {
            Some(call) => call.result = Some(done(&call.arguments.clone())),
            // Its call is on an older page.
            None => self.items.push(Item::Call(Box::new(Call {
                seq,
                call_id: result.call_id.clone(),
                name: result.name.clone(),
                arguments: Value::Null,
                view: generic(&result.name, &Value::Null),
                result: Some(done(&Value::Null)),
                sub_calls: Vec::new(),
            }))),
        }
        if let Some(todos) = plan {
            self.items.push(Item::Plan { seq, todos });
        }
    }

    /// A `run_code` sub-call started: under its `run_code` call.
    fn sub_call(
        &mut self,
        seq: u64,
        sub: ToolCodeDispatchStartData,
        presenters: Option<&Presenters>,
    ) {
        let view = presenters.map_or_else(
            || generic(&sub.name, &sub.arguments),
            |p| p.present_call(&sub.name, &sub.arguments),
        );
        if let Some(parent) = self.call_mut(&sub.parent_call_id) {
            parent.sub_calls.push(Call {
                seq,
                call_id: sub.sub_call_id,
                name: sub.name,
                arguments: sub.arguments,
                view,
                result: None,
                sub_calls: Vec::new(),
            });
        }
    }

    /// A `run_code` sub-call settled: its result under it.
    fn sub_result(&mut self, seq: u64, sub: ToolCodeDispatchData, presenters: Option<&Presenters>) {
        let view = presenters.map_or_else(
            || Presentation {
                text: None,
                ..generic(&sub.name, &sub.arguments)
            },
            |p| {
                p.present_result(
                    &sub.name,
                    &sub.arguments,
                    ResultView {
                        content: &sub.content,
                        is_error: sub.is_error,
                    },
                )
            },
        );
        if let Some(call) = self.call_mut(&sub.parent_call_id).and_then(|p| {
            p.sub_calls
                .iter_mut()
                .find(|c| c.call_id == sub.sub_call_id)
        }) {
            call.result = Some(CallResult {
                seq,
                is_error: sub.is_error,
                code: None,
                content: sub.content,
                view,
            });
        }
    }
}

/// A `todo_write` call's list.
fn todos_of(arguments: &Value) -> Option<Vec<Todo>> {
    serde_json::from_value::<TodoWriteArgs>(arguments.clone())
        .ok()
        .map(|a| a.todos)
}

/// How a turn that did not complete is told (`None` for a completed one), and whether it
/// failed: a cancelled turn is not a failure.
pub fn turn_notice(turn: u64, reason: TurnEndReason) -> Option<(String, bool)> {
    match reason {
        TurnEndReason::Completed => None,
        TurnEndReason::Error { step, message } => Some((
            format!("turn {turn} failed at step {step}: {message}"),
            true,
        )),
        TurnEndReason::MaxSteps { steps } => Some((
            format!("turn {turn} stopped after {steps} steps (maxSteps)"),
            true,
        )),
        TurnEndReason::Aborted { reason } => Some((
            format!(
                "turn {turn} cancelled{}",
                reason.map(|r| format!(": {r}")).unwrap_or_default()
            ),
            false,
        )),
        TurnEndReason::Disposed => Some((format!("turn {turn} ended: agent disposed"), true)),
        TurnEndReason::Interrupted => {
            Some((format!("turn {turn} interrupted: the process ended"), true))
        }
        TurnEndReason::Budget { message } => {
            Some((format!("turn {turn} stopped: {message}"), true))
        }
    }
}
