//! Pure projections of an event slice: messages, the request header, the open turn.
//!
//! # Determinism
//! Every function here depends only on the events passed in, never on caches or clocks, so a
//! fresh fold of a log prefix is comparable to what the loop sent.

use std::collections::BTreeMap;

use cordis_conversation::Message;
use serde::{Deserialize, Serialize};

use crate::event::{
    AgentPresetSelectedData, AssistantMessageData, CompactionData, EventData, ProjectionError,
    RequestHeader, RequestHeaderData, SessionEvent, SessionHeader, StepEndData, StepStartData,
    ToolCallData, ToolResultData, TurnEndData, TurnEndReason, TurnStartData, UserMessageData,
    kinds,
};

fn parse<T: EventData>(event: &SessionEvent) -> Result<T, ProjectionError> {
    event.data_as()
}

/// The images of a prompt's blocks as the client sent them (`{"type": "image", "mimeType",
/// "data"}`), in order: the part of a prompt the model sees beside its text.
pub fn images_of(blocks: &[serde_json::Value]) -> Vec<cordis_conversation::ImageInput> {
    blocks
        .iter()
        .filter(|b| b["type"] == "image")
        .filter_map(|b| {
            Some(cordis_conversation::ImageInput {
                mime_type: b["mimeType"].as_str()?.to_owned(),
                data: b["data"].as_str()?.to_owned(),
            })
        })
        .collect()
}

/// What one event does to the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageEffect {
    /// Nothing (bookkeeping, chunks, calls).
    None,
    /// Appends one message.
    Append(Message),
    /// Replaces every message so far with this one (a `compaction`'s summary).
    Restart(Message),
}

impl MessageEffect {
    /// Applies the effect to `messages`.
    pub fn apply(self, messages: &mut cordis_conversation::History) {
        match self {
            MessageEffect::None => {}
            MessageEffect::Append(m) => messages.push(m),
            MessageEffect::Restart(m) => *messages = cordis_conversation::History::from(vec![m]),
        }
    }

    /// Applies the effect to a plain list.
    pub fn apply_to_vec(self, messages: &mut Vec<Message>) {
        match self {
            MessageEffect::None => {}
            MessageEffect::Append(m) => messages.push(m),
            MessageEffect::Restart(m) => {
                messages.clear();
                messages.push(m);
            }
        }
    }
}

/// The user message a compaction's summary becomes: the first message of the conversation
/// after it. Fixed text around the summary, so a replay sends the same bytes.
pub fn compaction_message(summary: &str) -> Message {
    Message::user(format!(
        "The conversation so far was compacted to save context. This summary replaces it; \
         continue from where it leaves off.\n\n{summary}"
    ))
}

/// What one event does to the conversation.
///
/// # Errors
/// A [`ProjectionError`] when the payload does not fit the kind.
pub fn event_message(event: &SessionEvent) -> Result<MessageEffect, ProjectionError> {
    Ok(match event.kind.as_str() {
        kinds::USER_MESSAGE => {
            let d: UserMessageData = parse(event)?;
            MessageEffect::Append(Message::User {
                images: images_of(d.prompt.as_deref().unwrap_or_default()),
                content: d.content,
            })
        }
        kinds::ASSISTANT_MESSAGE => {
            let d: AssistantMessageData = parse(event)?;
            MessageEffect::Append(Message::Assistant {
                content: d.content,
                tool_calls: d.tool_calls,
                reasoning: d.reasoning,
            })
        }
        kinds::TOOL_RESULT => {
            let d: ToolResultData = parse(event)?;
            MessageEffect::Append(Message::Tool {
                call_id: d.call_id,
                name: d.name,
                content: d.content,
                is_error: d.is_error,
            })
        }
        kinds::COMPACTION => {
            let d: CompactionData = parse(event)?;
            MessageEffect::Restart(compaction_message(&d.summary))
        }
        _ => MessageEffect::None,
    })
}

/// The conversation messages of `events`, in log order (from the last `compaction` on).
///
/// # Errors
/// The first malformed payload.
pub fn derive_messages(events: &[SessionEvent]) -> Result<Vec<Message>, ProjectionError> {
    let mut out = Vec::new();
    for e in events {
        event_message(e)?.apply_to_vec(&mut out);
    }
    Ok(out)
}

/// Why the next request must log its `request/header` even when it is unchanged: a
/// `compaction` after the last header logged (the messages restarted), or a fork that has
/// logged no header of its own yet. `None` otherwise.
pub fn header_reason_due(
    header: &SessionHeader,
    events: &[SessionEvent],
) -> Option<crate::event::HeaderReason> {
    use crate::event::HeaderReason;
    for e in events.iter().rev() {
        match e.kind.as_str() {
            kinds::COMPACTION => return Some(HeaderReason::Compaction),
            kinds::REQUEST_HEADER => {
                let own = header.forked_at.is_none_or(|at| e.seq >= at);
                return (!own).then_some(HeaderReason::Fork);
            }
            _ => {}
        }
    }
    header.forked_at.map(|_| HeaderReason::Fork)
}

/// The latest `request/header` snapshot of `events` (full snapshots only: a legacy
/// `request/header-delta` is refused).
///
/// # Errors
/// A malformed header, or a delta event.
pub fn fold_request_header(
    events: &[SessionEvent],
) -> Result<Option<RequestHeader>, ProjectionError> {
    for e in events.iter().rev() {
        match e.kind.as_str() {
            kinds::REQUEST_HEADER => return Ok(Some(parse::<RequestHeaderData>(e)?.header)),
            "request/header-delta" => {
                return Err(ProjectionError {
                    kind: e.kind.clone(),
                    seq: e.seq,
                    message: "header deltas are not supported (full snapshots only): corrupt log"
                        .into(),
                });
            }
            _ => {}
        }
    }
    Ok(None)
}

/// The number of the last turn started in `events` (0 when none).
///
/// # Errors
/// A malformed `turn/start`.
pub fn last_turn(events: &[SessionEvent]) -> Result<u64, ProjectionError> {
    for e in events.iter().rev() {
        if e.kind == kinds::TURN_START {
            return Ok(parse::<TurnStartData>(e)?.turn);
        }
    }
    Ok(0)
}

/// The turn left open at the end of `events`: `(turn, open step)`, if any.
///
/// # Errors
/// A malformed turn or step event.
pub fn open_turn(events: &[SessionEvent]) -> Result<Option<(u64, Option<u64>)>, ProjectionError> {
    let mut step = None;
    for e in events.iter().rev() {
        match e.kind.as_str() {
            kinds::TURN_END => return Ok(None),
            kinds::STEP_END if step.is_none() => step = Some(None),
            kinds::STEP_START if step.is_none() => {
                step = Some(Some(parse::<StepStartData>(e)?.step));
            }
            kinds::TURN_START => {
                let turn = parse::<TurnStartData>(e)?.turn;
                return Ok(Some((turn, step.flatten())));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// One event [`closing_events`] wants appended.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosingEvent {
    /// The kind.
    pub kind: &'static str,
    /// The payload.
    pub data: serde_json::Value,
    /// Its sources.
    pub sources: Option<Vec<u64>>,
}

fn closing<D: EventData>(data: &D, sources: Option<Vec<u64>>) -> ClosingEvent {
    ClosingEvent {
        kind: D::KIND,
        data: serde_json::to_value(data).unwrap_or_default(),
        sources,
    }
}

/// What closes the turn left open at the end of `events`, balanced: an error `tool/result`
/// (with `code`) for every call of the open step that has none, `step/end`, `turn/end {reason}`.
/// Empty when no turn is open.
///
/// # Errors
/// A malformed event of the open turn.
pub fn closing_events(
    events: &[SessionEvent],
    reason: TurnEndReason,
    code: &str,
) -> Result<Vec<ClosingEvent>, ProjectionError> {
    let Some((turn, step)) = open_turn(events)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    if let Some(step) = step {
        let start = events
            .iter()
            .rposition(|e| e.kind == kinds::STEP_START)
            .unwrap_or(0);
        // Calls in announcement order: the assistant message's list, then any extra tool/call.
        let mut calls: Vec<(String, String, Option<u64>)> = Vec::new();
        let mut answered = Vec::new();
        for e in &events[start..] {
            match e.kind.as_str() {
                kinds::ASSISTANT_MESSAGE => {
                    let d: AssistantMessageData = parse(e)?;
                    for c in d.tool_calls {
                        if !calls.iter().any(|(id, _, _)| *id == c.id) {
                            calls.push((c.id, c.name, None));
                        }
                    }
                }
                kinds::TOOL_CALL => {
                    let d: ToolCallData = parse(e)?;
                    match calls.iter_mut().find(|(id, _, _)| *id == d.call_id) {
                        Some(entry) => entry.2 = Some(e.seq),
                        None => calls.push((d.call_id, d.name, Some(e.seq))),
                    }
                }
                kinds::TOOL_RESULT => answered.push(parse::<ToolResultData>(e)?.call_id),
                _ => {}
            }
        }
        let message = match &reason {
            TurnEndReason::Interrupted => "interrupted: the session ended before the tool finished",
            TurnEndReason::Aborted { .. } => {
                "aborted: the turn was cancelled before the tool finished"
            }
            TurnEndReason::Disposed => "disposed: the agent was disposed before the tool finished",
            _ => "the turn failed before the tool finished",
        };
        for (call_id, name, seq) in calls {
            if answered.contains(&call_id) {
                continue;
            }
            let data = ToolResultData {
                turn,
                step,
                call_id,
                name,
                content: serde_json::Value::String(message.to_owned()),
                is_error: true,
                code: Some(code.to_owned()),
            };
            out.push(closing(&data, seq.map(|s| vec![s])));
        }
        out.push(closing(&StepEndData { turn, step }, None));
    }
    out.push(closing(&TurnEndData { turn, reason }, None));
    Ok(out)
}

/// The page size of a history read that names none.
pub const DEFAULT_MAX_MESSAGES: usize = 50;

/// The tool whose last successful result is the `todos` projection (the `tool-todo` list).
pub const TODO_WRITE_TOOL: &str = "todo_write";

/// Where one history page lies in a log: `events[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageBounds {
    /// Index (= seq) of the page's first event.
    pub start: usize,
    /// One past the page's last event: the window end (`before_seq`, or the log's length).
    pub end: usize,
    /// True when older events exist before `start`.
    pub has_more: bool,
}

/// Message-boundary pagination: the window is `events` with `seq < before_seq` (all of them
/// without `before_seq`); walking back from its end, `user/message` and `assistant/message`
/// events are counted, and at the `max_messages`-th (0 counts as 1) the page starts at the
/// smallest of its seq and its `sourceEventSeqs`, so a message never loses its chunks. With
/// fewer messages the page is the whole window. `has_more` is `start > 0`.
///
/// `events` must be a log (seq equal to index), as every session's events are.
pub fn page_bounds(
    events: &[SessionEvent],
    before_seq: Option<u64>,
    max_messages: usize,
) -> PageBounds {
    let end = before_seq.map_or(events.len(), |b| {
        usize::try_from(b).map_or(events.len(), |b| b.min(events.len()))
    });
    let max = max_messages.max(1);
    let mut count = 0;
    let mut start = 0;
    for e in events[..end].iter().rev() {
        if e.kind != kinds::USER_MESSAGE && e.kind != kinds::ASSISTANT_MESSAGE {
            continue;
        }
        count += 1;
        if count >= max {
            let group = e
                .source_event_seqs
                .iter()
                .flatten()
                .fold(e.seq, |low, s| low.min(*s));
            start = usize::try_from(group).map_or(end, |g| g.min(end));
            break;
        }
    }
    PageBounds {
        start,
        end,
        has_more: start > 0,
    }
}

/// The projection baseline of a cut: values folded from exactly the events served with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Projections {
    /// The seq of the last event the values include: the last event of the page it came with
    /// (`None` for a log without events; the values then come from the header alone).
    pub as_of_seq: Option<u64>,
    /// The values by name, sorted (see [`projection_values`] for the names).
    pub values: BTreeMap<String, serde_json::Value>,
}

/// Where the events the projections read are: the last valid `agent-preset/selected` and the
/// last successful `todo_write` result. A live session keeps these up to date on append, so
/// its cut folds in O(1) under the lock; a frozen log scans for them once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    preset: Option<usize>,
    todos: Option<usize>,
}

impl Marks {
    /// Notes `event`, the log's `index`-th.
    pub(crate) fn note(&mut self, index: usize, event: &SessionEvent) {
        match event.kind.as_str() {
            kinds::AGENT_PRESET_SELECTED if event.data_as::<AgentPresetSelectedData>().is_ok() => {
                self.preset = Some(index);
            }
            kinds::TOOL_RESULT => {
                if let Ok(r) = event.data_as::<ToolResultData>()
                    && r.name == TODO_WRITE_TOOL
                    && !r.is_error
                {
                    self.todos = Some(index);
                }
            }
            _ => {}
        }
    }

    /// The marks of `events`.
    pub(crate) fn scan(events: &[SessionEvent]) -> Marks {
        let mut marks = Marks::default();
        for (i, e) in events.iter().enumerate() {
            marks.note(i, e);
        }
        marks
    }
}

/// The values of `events` whose marks are `marks`.
pub(crate) fn values_at(
    header: &SessionHeader,
    events: &[SessionEvent],
    marks: Marks,
) -> BTreeMap<String, serde_json::Value> {
    let mut values = BTreeMap::new();
    let preset = marks
        .preset
        .and_then(|i| events.get(i))
        .and_then(|e| e.data_as::<AgentPresetSelectedData>().ok())
        .map(|d| d.agent_preset)
        .or_else(|| header.agent_preset.clone());
    if let Some(preset) = preset {
        values.insert("agentPreset".to_owned(), serde_json::Value::String(preset));
    }
    if let Some(r) = marks
        .todos
        .and_then(|i| events.get(i))
        .and_then(|e| e.data_as::<ToolResultData>().ok())
    {
        values.insert("todos".to_owned(), r.content);
    }
    values
}

/// The projection values of a log, a pure fold: `agentPreset` (the preset the session runs,
/// as [`crate::resolve_session_preset`]) and `todos` (the content of the last successful
/// `todo_write` result: the agent's plan). A key is absent when it has no value. There is no
/// projection registry in this project: these are the two values a client opening a session
/// cannot get from the page itself.
pub fn projection_values(
    header: &SessionHeader,
    events: &[SessionEvent],
) -> BTreeMap<String, serde_json::Value> {
    values_at(header, events, Marks::scan(events))
}

/// One history read of a log: a page and, for a tail page, the baseline of the same moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    /// The page's events, in log order.
    pub events: Vec<SessionEvent>,
    /// True when older events exist before the page.
    pub has_more: bool,
    /// The baseline, on tail pages only (a read without `before_seq`); its `as_of_seq` is the
    /// seq of the page's last event.
    pub projections: Option<Projections>,
}

/// The cut of `events` (with the marks of the whole slice): the page and, without
/// `before_seq`, the baseline folded from the same slice.
pub(crate) fn cut_of(
    header: &SessionHeader,
    events: &[SessionEvent],
    marks: Marks,
    before_seq: Option<u64>,
    max_messages: usize,
) -> Cut {
    let page = page_bounds(events, before_seq, max_messages);
    let projections = before_seq.is_none().then(|| Projections {
        as_of_seq: page.end.checked_sub(1).map(|i| i as u64),
        values: values_at(header, &events[..page.end], marks),
    });
    Cut {
        events: events[page.start..page.end].to_vec(),
        has_more: page.has_more,
        projections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, kind: &str, data: serde_json::Value) -> SessionEvent {
        SessionEvent {
            kind: kind.into(),
            seq,
            time: 0,
            data,
            source_event_seqs: None,
        }
    }

    #[test]
    fn an_open_step_with_unanswered_calls_closes_with_error_results_in_call_order() {
        let events = vec![
            ev(0, kinds::TURN_START, serde_json::json!({"turn": 1})),
            ev(
                1,
                kinds::USER_MESSAGE,
                serde_json::json!({"turn": 1, "content": "hi"}),
            ),
            ev(
                2,
                kinds::STEP_START,
                serde_json::json!({"turn": 1, "step": 1}),
            ),
            ev(
                3,
                kinds::ASSISTANT_MESSAGE,
                serde_json::json!({"turn": 1, "step": 1, "content": "",
                "toolCalls": [{"id": "a", "name": "x", "arguments": "{}"}, {"id": "b", "name": "y", "arguments": "{}"}]}),
            ),
            ev(
                4,
                kinds::TOOL_CALL,
                serde_json::json!({"turn": 1, "step": 1, "callId": "a", "name": "x", "arguments": "{}"}),
            ),
            ev(
                5,
                kinds::TOOL_RESULT,
                serde_json::json!({"turn": 1, "step": 1, "callId": "a", "name": "x", "content": 1, "isError": false}),
            ),
        ];
        let out = closing_events(&events, TurnEndReason::Interrupted, "INTERRUPTED").unwrap();
        let kinds: Vec<&str> = out.iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [kinds::TOOL_RESULT, kinds::STEP_END, kinds::TURN_END]
        );
        assert_eq!(out[0].data["callId"], "b");
        assert_eq!(out[0].data["code"], "INTERRUPTED");
        assert_eq!(
            out[2].data["reason"],
            serde_json::json!({"kind": "interrupted"})
        );
        let messages = derive_messages(&events).unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(open_turn(&events).unwrap(), Some((1, Some(1))));
        assert_eq!(last_turn(&events).unwrap(), 1);
    }

    #[test]
    fn a_closed_turn_needs_nothing_and_a_delta_is_refused() {
        let events = vec![
            ev(0, kinds::TURN_START, serde_json::json!({"turn": 1})),
            ev(
                1,
                kinds::TURN_END,
                serde_json::json!({"turn": 1, "reason": {"kind": "completed"}}),
            ),
        ];
        assert!(
            closing_events(&events, TurnEndReason::Interrupted, "X")
                .unwrap()
                .is_empty()
        );
        let delta = vec![ev(0, "request/header-delta", serde_json::json!({}))];
        let err = fold_request_header(&delta).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("request/header-delta at seq 0: header deltas are not supported"),
            "{err}"
        );
    }
}
