//! Session events as ACP `session/update`s: one mapping for the live stream and for the replay
//! of `session/load`, so a replayed session shows the same cards as it did live.
//!
//! Tool cards come from the `history` crate's views in both cases: a replay reads the log
//! through the `history` service (one page, every call with its result), and the live stream
//! asks [`cordis_history::views`] about each call (and each result with its call) as they are
//! logged, in the agent's scope. Same events, same views, same mapping: replay equals live by
//! construction.
//!
//! | event | update |
//! | --- | --- |
//! | `user/message` | `user_message_chunk` (replay only: live, the editor shows what it sent); one per block of a prompt logged as sent |
//! | `assistant/chunk` text | `agent_message_chunk` |
//! | `assistant/chunk` reasoning | `agent_thought_chunk` |
//! | `assistant/chunk` usage | `usage_update` against the `llm` entry's `contextWindow` (none without one), with the session's cumulative `cost` in USD when the entry's `prices` price its models |
//! | `tool/call` | `tool_call` (the presenter's title, kind, input, card, locations): `pending` when the composition has an approvals stage (the call awaits its decision and its turn), `in_progress` otherwise |
//! | `approvals/decision` (live, not logged) allowing an announced call | `tool_call_update` `in_progress` (it runs now) |
//! | `tool/result` | `tool_call_update` (`completed` / `failed`, the result's card; an MCP tool's result as its content blocks: see [`crate::session::mcp_content`]) |
//! | `todo_write`'s result | also `plan` (its todos, every entry `medium`) |
//!
//! Everything else (steps, headers, approvals, `run_code` sub-calls) has no update.
//!
//! # Cards
//! A diff card is a `diff` content (`oldText` absent for a new file); a successful mutation
//! sends its diff again in the update, because an update's content replaces the call's. A
//! terminal card follows Zed's `_meta` extension when the client advertised
//! `clientCapabilities._meta.terminal_output`: the call's content is a `terminal` (its id is the
//! call id) with `_meta.terminal_info {terminal_id, cwd}`, and the update carries no content but
//! `_meta.terminal_output {terminal_id, data}` and `_meta.terminal_exit {terminal_id,
//! exit_code, signal}`. Without the capability the call shows the command's description as
//! text and the update the output as a ```` ```console ```` block. Paths in diffs and locations are made absolute against the
//! session's cwd (the workspace root the tools resolve them against), as editors expect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cordis_history::ToolView;
use cordis_llm::Chunk;
use cordis_presenter::{Card, Presentation, Presenters, parse_arguments_text};
use cordis_session::{EventView, SessionEvent};

use crate::session::transcript::Item;
use crate::session::usage::CostMeter;
use cordis_tool_todo::{TODO_WRITE, TodoStatus, TodoWriteArgs};
use cordis_tools::{ScopeKey, ToolRegistry};
use serde::Deserialize;
use serde_json::Value;

use super::protocol::{
    ContentBlock, Cost, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolKind,
};

/// Maps one session's events, in log order, to updates. It remembers each call's name and
/// arguments until its result, because presenters describe a result with its call's arguments.
#[derive(Debug)]
pub struct UpdateMapper {
    cwd: PathBuf,
    /// Calls without a result yet: their event (a live result's view needs it) and arguments.
    pending: BTreeMap<String, (SessionEvent, String, Value)>,
    /// The client renders terminal cards itself (Zed's `_meta` terminal extension).
    terminal_meta: bool,
    /// The model's context window, when configured: each reported usage becomes a
    /// `usage_update` of the latest request against it.
    context_window: Option<u64>,
    /// The session's running cost, when the `llm` entry prices its models: each
    /// `usage_update` carries it.
    costs: Option<CostMeter>,
    /// The session has its title (a first prompt went by): later prompts do not retitle it.
    titled: bool,
    /// Running commands' live output so far (the tail a plain client is shown), and when it
    /// was last sent; with the terminal extension only that output was streamed.
    live: BTreeMap<String, LiveOutput>,
    /// Calls wait for the approvals stage (the live stream of a composition with one): they
    /// are announced `pending` and become `in_progress` when it lets them run.
    decisions: bool,
}

/// What a running command showed live.
#[derive(Debug, Default)]
struct LiveOutput {
    /// Its latest output, at most [`LIVE_TAIL`] bytes (plain clients).
    tail: String,
    /// When it was last sent (plain clients: at most every `LIVE_EVERY`).
    sent: Option<std::time::Instant>,
}

/// How much of a running command's output a plain client is shown: its tail.
const LIVE_TAIL: usize = 16 * 1024;
/// How often a plain client is sent a running command's output (each update repeats the tail).
const LIVE_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Where the live stream's views come from: the composition's tools and presenters, read in
/// the agent's scope (what a history read of a session with a live agent uses).
pub struct LiveViews {
    /// The agent's registry scope.
    pub scope: ScopeKey,
    /// The tool registry (a tool not visible in the scope gets no view).
    pub tools: Option<std::sync::Arc<ToolRegistry>>,
    /// The presenters.
    pub presenters: Option<std::sync::Arc<Presenters>>,
}

impl UpdateMapper {
    /// A mapper for a session whose workspace root is `cwd`.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        UpdateMapper {
            cwd: cwd.into(),
            pending: BTreeMap::new(),
            terminal_meta: false,
            context_window: None,
            costs: None,
            titled: false,
            live: BTreeMap::new(),
            decisions: false,
        }
    }

    /// Announces calls `pending` until [`UpdateMapper::decided`] says they run (`on`: the
    /// composition has an approvals stage, which decides every call before it runs); else
    /// calls are announced `in_progress`.
    #[must_use]
    pub fn with_decisions(mut self, on: bool) -> Self {
        self.decisions = on;
        self
    }

    /// The update of the approvals stage's decision on an announced call: `in_progress` when
    /// it may run (a refused call's result follows). None for a call this mapper did not
    /// announce, or when calls are not announced `pending`.
    pub fn decided(&mut self, call_id: &str, allowed: bool) -> Option<SessionUpdate> {
        if !self.decisions || !allowed || !self.pending.contains_key(call_id) {
            return None;
        }
        Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: call_id.to_owned(),
            title: None,
            status: Some(ToolCallStatus::InProgress),
            content: None,
            raw_input: None,
            meta: None,
        }))
    }

    /// The update of an MCP server's progress on a running call (`notifications/progress`; not
    /// logged: the result follows): the call's content becomes the progress line, at most every
    /// `LIVE_EVERY`. None for a call this mapper did not announce.
    pub fn mcp_progress(
        &mut self,
        call_id: &str,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Option<SessionUpdate> {
        if !self.pending.contains_key(call_id) {
            return None;
        }
        let live = self.live.entry(call_id.to_owned()).or_default();
        let now = std::time::Instant::now();
        if live
            .sent
            .is_some_and(|at| now.duration_since(at) < LIVE_EVERY)
        {
            return None;
        }
        live.sent = Some(now);
        let mut line = match total {
            Some(total) => format!("progress {progress} of {total}"),
            None => format!("progress {progress}"),
        };
        if let Some(message) = message.filter(|m| !m.is_empty()) {
            line.push_str(": ");
            line.push_str(message);
        }
        Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: call_id.to_owned(),
            title: None,
            status: None,
            content: Some(vec![ToolCallContent::text(line)]),
            raw_input: None,
            meta: None,
        }))
    }

    /// The update of a piece of a running command's output (not logged: the result follows):
    /// Zed's `terminal_output` with the piece, for clients with the terminal extension; else
    /// the output's tail as the call's content, at most every `LIVE_EVERY`. None for a call
    /// this mapper did not announce.
    pub fn live_output(&mut self, call_id: &str, text: &str) -> Option<SessionUpdate> {
        if !self.pending.contains_key(call_id) {
            return None;
        }
        let live = self.live.entry(call_id.to_owned()).or_default();
        if self.terminal_meta {
            return Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                tool_call_id: call_id.to_owned(),
                title: None,
                status: None,
                content: None,
                raw_input: None,
                meta: Some(serde_json::json!({
                    "terminal_output": {"terminal_id": call_id, "data": text},
                })),
            }));
        }
        live.tail.push_str(text);
        if live.tail.len() > LIVE_TAIL {
            let mut cut = live.tail.len() - LIVE_TAIL;
            while !live.tail.is_char_boundary(cut) {
                cut += 1;
            }
            live.tail.drain(..cut);
        }
        let now = std::time::Instant::now();
        if live
            .sent
            .is_some_and(|at| now.duration_since(at) < LIVE_EVERY)
        {
            return None;
        }
        live.sent = Some(now);
        let body = live.tail.trim_end_matches('\n');
        Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: call_id.to_owned(),
            title: None,
            status: None,
            content: Some(vec![ToolCallContent::text(format!(
                "```console\n{body}\n```"
            ))]),
            raw_input: None,
            meta: None,
        }))
    }

    /// For a session whose first prompt this mapper will not see (opened without a replay):
    /// it has its title already.
    #[must_use]
    pub fn titled(mut self, titled: bool) -> Self {
        self.titled = titled;
        self
    }

    /// Sends terminal cards as Zed's `_meta` terminal extension (the client advertised
    /// `clientCapabilities._meta.terminal_output`).
    #[must_use]
    pub fn with_terminal_meta(mut self, on: bool) -> Self {
        self.terminal_meta = on;
        self
    }

    /// Reports usage against a context window of `tokens` (none: no `usage_update`).
    #[must_use]
    pub fn with_context_window(mut self, tokens: Option<u64>) -> Self {
        self.context_window = tokens;
        self
    }

    /// Sets the session's cost meter: `usage_update`s then carry the cumulative `cost`.
    pub fn with_costs(mut self, costs: Option<CostMeter>) -> Self {
        self.costs = costs;
        self
    }

    /// The updates of an event of the live stream, its view asked of [`cordis_history::views`]
    /// as a history read would (a result together with its call).
    pub fn map_live(&mut self, event: &SessionEvent, views: &LiveViews) -> Vec<SessionUpdate> {
        let page: Vec<SessionEvent> = match event.view() {
            EventView::ToolResult(result) => match self.pending.get(&result.call_id) {
                Some((call, _, _)) => vec![call.clone(), event.clone()],
                None => vec![event.clone()],
            },
            EventView::ToolCall(_) => vec![event.clone()],
            // Only calls and results have tool views; `map` decides what the rest shows.
            _ => return self.map(event, None),
        };
        let view = cordis_history::views(
            &page,
            Some(views.scope),
            views.tools.as_deref(),
            views.presenters.as_deref(),
        )
        .pop()
        .flatten();
        self.map(event, view.as_ref())
    }

    /// The updates `event` stands for (often none). `view` is the event's tool view (a
    /// history read's); without one a call is generic (its name as title, kind `other`).
    pub fn map(&mut self, event: &SessionEvent, view: Option<&ToolView>) -> Vec<SessionUpdate> {
        let view = view.map(|v| v.view.clone());
        if let Some(meter) = self.costs.as_mut() {
            meter.observe(event);
        }
        match event.view() {
            EventView::UserMessage(user) => self.user_message(&user.content, user.prompt),
            EventView::AssistantChunk(chunk) => match chunk.chunk {
                Chunk::Text { delta } if !delta.is_empty() => {
                    vec![SessionUpdate::AgentMessageChunk {
                        content: ContentBlock::text(delta),
                    }]
                }
                Chunk::Reasoning { delta } if !delta.is_empty() => {
                    vec![SessionUpdate::AgentThoughtChunk {
                        content: ContentBlock::text(delta),
                    }]
                }
                // What the latest request and its answer hold, not a running total: the
                // next request carries all of it again.
                Chunk::Usage { usage } => {
                    let cost = self.costs.as_mut().and_then(|m| m.add(&usage));
                    match self.context_window {
                        Some(size) => vec![SessionUpdate::UsageUpdate {
                            used: usage.input_tokens.saturating_add(usage.output_tokens),
                            size,
                            cost: cost.map(Cost::usd),
                        }],
                        None => Vec::new(),
                    }
                }
                Chunk::Text { .. }
                | Chunk::Reasoning { .. }
                | Chunk::ToolCall { .. }
                | Chunk::Finish { .. } => Vec::new(),
            },
            EventView::ToolCall(call) => {
                let args = parse_arguments_text(&call.arguments);
                let p = view.unwrap_or_else(|| cordis_presenter::generic(&call.name, &args));
                self.pending.insert(
                    call.call_id.clone(),
                    (event.clone(), call.name.clone(), args),
                );
                vec![SessionUpdate::ToolCall(self.tool_call(&call.call_id, p))]
            }
            EventView::ToolResult(result) => {
                let streamed = self.live.remove(&result.call_id).is_some() && self.terminal_meta;
                let Some((_, name, args)) = self.pending.remove(&result.call_id) else {
                    // A result without its call cannot be shown as an update of it.
                    tracing::debug!(call = %result.call_id, "tool result without a call; not shown");
                    return Vec::new();
                };
                let p = view.unwrap_or_else(|| Presentation {
                    text: Some(content_text(&result.content)),
                    ..cordis_presenter::generic(&name, &args)
                });
                let mut update =
                    self.tool_call_update(&result.call_id, (result.is_error, &result.content), p);
                if streamed && let Some(meta) = update.meta.as_mut().and_then(Value::as_object_mut)
                {
                    // The terminal shows the output streamed while it ran; sent again, it
                    // would show twice.
                    meta.remove("terminal_output");
                }
                let mut updates = vec![SessionUpdate::ToolCallUpdate(update)];
                if name == TODO_WRITE
                    && !result.is_error
                    && let Some(plan) = plan_of(&args)
                {
                    updates.push(SessionUpdate::Plan { entries: plan });
                }
                updates
            }
            EventView::Compaction(c) => vec![SessionUpdate::ToolCall(compaction_call(
                event.seq, c.trigger, c.messages, &c.summary,
            ))],
            // No update (the module's table): steps, headers, approvals, `run_code` sub-calls,
            // turn ends and session settings. Unknown kinds and payloads that do not fit their
            // kind are skipped, as the transcript does (the log is checked elsewhere).
            EventView::TurnStart(_)
            | EventView::StepStart(_)
            | EventView::RequestHeader(_)
            | EventView::AssistantMessage(_)
            | EventView::ToolApproval(_)
            | EventView::HookRun(_)
            | EventView::ToolCodeDispatchStart(_)
            | EventView::ToolCodeDispatch(_)
            | EventView::StepEnd(_)
            | EventView::TurnEnd(_)
            | EventView::AgentPresetSelected(_)
            | EventView::PermissionsMode(_)
            | EventView::PermissionsRevoke(_)
            | EventView::Unknown { .. }
            | EventView::Malformed(_) => Vec::new(),
        }
    }

    /// The user's message: the blocks the client sent, one chunk each (else its text), and the
    /// session's title from the first one (as the sessions index titles it).
    fn user_message(&mut self, text: &str, blocks: Option<Vec<Value>>) -> Vec<SessionUpdate> {
        let title = (!self.titled)
            .then(|| cordis_session::index::title_of(text))
            .flatten();
        self.titled |= title.is_some();
        let mut updates: Vec<SessionUpdate> = match blocks {
            Some(blocks) => blocks
                .into_iter()
                .map(|block| SessionUpdate::UserMessageChunk {
                    content: ContentBlock::Sent(block),
                })
                .collect(),
            None => vec![SessionUpdate::UserMessageChunk {
                content: ContentBlock::text(text.to_owned()),
            }],
        };
        updates.extend(title.map(|title| SessionUpdate::SessionInfoUpdate { title }));
        updates
    }

    /// The updates of one item of the session's transcript (`session/load`'s replay), each with
    /// the seq of the event the live stream sent it for: what the live stream sent, its message
    /// chunks joined into one. A call's result is at its own seq, so a replay sorted by seq
    /// (stable) tells parallel calls as they happened: the calls, then their results.
    pub fn map_item(&mut self, item: &Item) -> Vec<(u64, SessionUpdate)> {
        match item {
            Item::User {
                seq, text, blocks, ..
            } => at(*seq, self.user_message(text, blocks.clone())),
            Item::Thought { seq, text } => vec![(
                *seq,
                SessionUpdate::AgentThoughtChunk {
                    content: ContentBlock::text(text.clone()),
                },
            )],
            Item::Assistant { seq, text } => vec![(
                *seq,
                SessionUpdate::AgentMessageChunk {
                    content: ContentBlock::text(text.clone()),
                },
            )],
            Item::Usage {
                seq,
                input_tokens,
                output_tokens,
                ..
            } => self
                .context_window
                .map(|size| {
                    (
                        *seq,
                        SessionUpdate::UsageUpdate {
                            used: input_tokens.saturating_add(*output_tokens),
                            size,
                            cost: self.costs.as_ref().and_then(|m| m.at(*seq)).map(Cost::usd),
                        },
                    )
                })
                .into_iter()
                .collect(),
            Item::Call(call) => {
                let mut updates = vec![(
                    call.seq,
                    SessionUpdate::ToolCall(self.tool_call(&call.call_id, call.view.clone())),
                )];
                if let Some(result) = &call.result {
                    updates.push((
                        result.seq,
                        SessionUpdate::ToolCallUpdate(self.tool_call_update(
                            &call.call_id,
                            (result.is_error, &result.content),
                            result.view.clone(),
                        )),
                    ));
                }
                updates
            }
            Item::Plan { seq, todos } => vec![(
                *seq,
                SessionUpdate::Plan {
                    entries: todos.iter().cloned().map(plan_entry).collect(),
                },
            )],
            Item::Compaction {
                seq,
                trigger,
                messages,
                summary,
                ..
            } => vec![(
                *seq,
                SessionUpdate::ToolCall(compaction_call(*seq, *trigger, *messages, summary)),
            )],
            // Editors have no place for them; the transcript's other renderers show them.
            Item::Notice { .. } => Vec::new(),
        }
    }

    fn absolute(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_owned()
        } else {
            self.cwd.join(p)
        }
    }

    fn tool_call(&self, call_id: &str, p: Presentation) -> ToolCall {
        let mut content = Vec::new();
        let mut meta = None;
        match &p.card {
            Card::Terminal { .. } if self.terminal_meta => {
                content.push(ToolCallContent::Terminal {
                    terminal_id: call_id.to_owned(),
                });
                meta = Some(serde_json::json!({"terminal_info": {
                    "terminal_id": call_id,
                    "cwd": self.cwd,
                }}));
            }
            Card::Diff {
                path,
                old_text,
                new_text,
                ..
            } => content.push(ToolCallContent::Diff {
                path: self.absolute(path),
                old_text: old_text.clone(),
                new_text: new_text.clone(),
            }),
            Card::Terminal { .. } | Card::Generic => {
                if let Some(text) = p.text.as_ref().filter(|t| !t.is_empty()) {
                    content.push(ToolCallContent::text(text.clone()));
                }
            }
        }
        let locations = p
            .locations
            .iter()
            .map(|l| ToolCallLocation {
                path: self.absolute(&l.path),
                line: l.line.and_then(|n| u32::try_from(n).ok()),
            })
            .collect();
        ToolCall {
            tool_call_id: call_id.to_owned(),
            title: p.title,
            kind: kind(p.kind),
            // Awaiting its decision (an approval, maybe) and its turn, a call is not running.
            status: if self.decisions {
                ToolCallStatus::Pending
            } else {
                ToolCallStatus::InProgress
            },
            content,
            locations,
            raw_input: p.input,
            meta,
        }
    }

    fn tool_call_update(
        &self,
        call_id: &str,
        (is_error, logged): (bool, &Value),
        p: Presentation,
    ) -> ToolCallUpdate {
        let mut content = Vec::new();
        let mut meta = None;
        let mcp = (!is_error
            && matches!(p.card, Card::Generic)
            && p.text.as_ref().is_none_or(|t| *t == content_text(logged)))
        .then(|| crate::session::mcp_content::acp_blocks(logged))
        .flatten();
        match &p.card {
            Card::Terminal { output, exit_code } if self.terminal_meta && !is_error => {
                meta = Some(serde_json::json!({
                    "terminal_output": {"terminal_id": call_id, "data": output},
                    "terminal_exit": {"terminal_id": call_id, "exit_code": exit_code, "signal": null},
                }));
            }
            Card::Diff {
                path,
                old_text,
                new_text,
                ..
            } if !is_error => content.push(ToolCallContent::Diff {
                path: self.absolute(path),
                old_text: old_text.clone(),
                new_text: new_text.clone(),
            }),
            Card::Terminal { output, exit_code } if !is_error => {
                let mut body = output.trim_end_matches('\n').to_owned();
                if let Some(code) = exit_code.filter(|c| *c != 0) {
                    if !body.is_empty() {
                        body.push('\n');
                    }
                    body.push_str(&format!("[exit code {code}]"));
                }
                content.push(ToolCallContent::text(format!("```console\n{body}\n```")));
            }
            // An MCP tool's result, shown as its blocks (links, images, resources) rather than
            // as its JSON, unless a presenter described it.
            Card::Generic if mcp.is_some() => {
                content.extend(
                    mcp.into_iter()
                        .flatten()
                        .map(|block| ToolCallContent::Content {
                            content: ContentBlock::Mcp(block),
                        }),
                );
            }
            _ => {
                let text = p.text.clone().unwrap_or_else(|| content_text(logged));
                if !text.is_empty() {
                    content.push(ToolCallContent::text(text));
                }
            }
        }
        let status = if is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        ToolCallUpdate {
            tool_call_id: call_id.to_owned(),
            title: None,
            status: Some(status),
            // With the terminal extension the output travels in `_meta`, and no content keeps
            // the terminal the call announced.
            content: if meta.is_some() { None } else { Some(content) },
            raw_input: None,
            meta,
        }
    }
}

/// A diff card as the `diff` content an editor shows (its path made absolute against `cwd`);
/// `None` for other cards. An approval question carries it (see `approver`): what the call
/// replaces, worked out by the tool before it was asked.
pub(crate) fn diff_content(cwd: &Path, card: &Card) -> Option<ToolCallContent> {
    let Card::Diff {
        path,
        old_text,
        new_text,
        ..
    } = card
    else {
        return None;
    };
    let p = Path::new(path);
    Some(ToolCallContent::Diff {
        path: if p.is_absolute() {
            p.to_owned()
        } else {
            cwd.join(p)
        },
        old_text: old_text.clone(),
        new_text: new_text.clone(),
    })
}

/// A result's text: a string as is, anything else as compact JSON.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn kind(kind: cordis_presenter::ToolKind) -> ToolKind {
    use cordis_presenter::ToolKind as K;
    match kind {
        K::Read => ToolKind::Read,
        K::Edit => ToolKind::Edit,
        K::Execute => ToolKind::Execute,
        K::Search => ToolKind::Search,
        K::Other => ToolKind::Other,
    }
}

/// The plan a `todo_write` call sets: its todos in order, status one to one; `None` when its
/// arguments are not a todo list.
fn plan_of(args: &Value) -> Option<Vec<PlanEntry>> {
    let TodoWriteArgs { todos } = TodoWriteArgs::deserialize(args).ok()?;
    Some(todos.into_iter().map(plan_entry).collect())
}

/// Each of `updates` at `seq`.
fn at(seq: u64, updates: Vec<SessionUpdate>) -> Vec<(u64, SessionUpdate)> {
    updates.into_iter().map(|u| (seq, u)).collect()
}

/// A todo as a plan entry (every entry `medium`).
fn plan_entry(todo: cordis_tool_todo::Todo) -> PlanEntry {
    PlanEntry {
        content: todo.content,
        priority: PlanEntryPriority::Medium,
        status: match todo.status {
            TodoStatus::Pending => PlanEntryStatus::Pending,
            TodoStatus::InProgress => PlanEntryStatus::InProgress,
            TodoStatus::Completed => PlanEntryStatus::Completed,
        },
    }
}

/// A compaction as one finished item an editor shows: its line as the title, the summary
/// as its content (live and replayed alike).
fn compaction_call(
    seq: u64,
    trigger: cordis_session::CompactionTrigger,
    messages: u64,
    summary: &str,
) -> ToolCall {
    ToolCall {
        tool_call_id: format!("compaction-{seq}"),
        title: crate::session::transcript::compaction_line(trigger, messages),
        kind: crate::acp::protocol::ToolKind::Other,
        status: ToolCallStatus::Completed,
        content: vec![ToolCallContent::text(summary.to_owned())],
        locations: Vec::new(),
        raw_input: Value::Null,
        meta: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, data: Value) -> SessionEvent {
        SessionEvent {
            kind: kind.to_owned(),
            seq: 0,
            time: 0,
            data,
            source_event_seqs: None,
        }
    }

    fn wire(update: &SessionUpdate) -> Value {
        serde_json::to_value(update).unwrap()
    }

    #[test]
    fn an_edit_is_a_diff_on_the_call_and_again_on_its_successful_update() {
        let mut m = UpdateMapper::new("/w");
        let views = LiveViews {
            scope: ScopeKey(0),
            tools: None,
            presenters: Some(std::sync::Arc::new(Presenters::standard())),
        };
        let call = event(
            "tool/call",
            json!({"turn": 1, "step": 1, "callId": "c1", "name": "edit_file",
                   "arguments": "{\"path\":\"a.txt\",\"old_string\":\"x\",\"new_string\":\"y\"}"}),
        );
        let [u] = &m.map_live(&call, &views)[..] else {
            panic!()
        };
        let u = wire(u);
        assert_eq!(u["sessionUpdate"], "tool_call");
        assert_eq!(u["kind"], "edit");
        assert_eq!(
            u["content"][0],
            json!({"type": "diff", "path": "/w/a.txt", "oldText": "x", "newText": "y"})
        );
        let result = event(
            "tool/result",
            json!({"turn": 1, "step": 1, "callId": "c1", "name": "edit_file",
                   "content": "edited a.txt", "isError": false}),
        );
        let [u] = &m.map_live(&result, &views)[..] else {
            panic!()
        };
        let u = wire(u);
        assert_eq!(u["status"], "completed");
        assert_eq!(u["content"][0]["type"], "diff");
    }

    #[test]
    fn a_result_without_its_call_makes_no_update() {
        let mut m = UpdateMapper::new("/w");
        let result = event(
            "tool/result",
            json!({"turn": 1, "step": 1, "callId": "nope", "name": "x",
                   "content": "?", "isError": false}),
        );
        assert!(m.map(&result, None).is_empty());
    }

    #[test]
    fn todo_write_sets_the_plan_after_its_update() {
        let mut m = UpdateMapper::new("/w");
        let args = json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]});
        m.map(
            &event(
                "tool/call",
                json!({"turn": 1, "step": 1, "callId": "t", "name": "todo_write", "arguments": args.to_string()}),
            ),
            None,
        );
        let ups = m.map(
            &event(
                "tool/result",
                json!({"turn": 1, "step": 1, "callId": "t", "name": "todo_write", "content": "ok", "isError": false}),
            ),
            None,
        );
        assert_eq!(ups.len(), 2);
        assert_eq!(
            wire(&ups[1]),
            json!({"sessionUpdate": "plan", "entries": [
                {"content": "a", "priority": "medium", "status": "in_progress"},
                {"content": "b", "priority": "medium", "status": "pending"}]})
        );
    }
}
