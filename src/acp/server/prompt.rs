//! `session/prompt`: a slash command answered at once, or a turn of the session's agent,
//! answered when it ends (so `session/cancel` and permission answers keep flowing meanwhile).

use cordis_agent_loop::{Agent, TurnError};
use cordis_llm::{Chunk, FinishReason, Llm};
use cordis_runtime::Context;
use cordis_session::{AssistantChunkData, SessionEvent, TurnEndReason};
use serde_json::Value;
use tokio::sync::watch;

use super::commands::command_answer;
use super::prompt_content::{check_images, prompt_text};
use super::{Busy, Done, Server, respond_error};
use crate::acp::protocol::{
    ContentBlock, PromptRequest, PromptResponse, SessionNotification, SessionUpdate, StopReason,
};
use crate::acp::rpc::{Connection, Reply, RpcError};
use crate::acp::session::{internal, invalid_params};
use crate::session::commands::Answer;

/// A prompt accepted for a turn: what the turn needs once it runs.
struct Turn {
    /// The session, and which opening of it.
    id: String,
    opening: u64,
    agent: Agent,
    /// The session's composition (an MCP server's prompt is expanded in it).
    root: Context,
    /// The user message (or the MCP prompt's command line, with `runs_prompt`).
    text: String,
    /// The prompt's blocks as sent, when they are more than text (logged for replays).
    sent: Option<Vec<Value>>,
    /// `text` names a prompt of one of the session's MCP servers, to expand and run.
    runs_prompt: bool,
    connection: Connection,
}

impl<'c> Server<'c> {
    /// `session/prompt`: refused while the session is busy or the content is not what the
    /// agent takes; a slash command is answered at once; anything else starts a turn.
    pub(super) fn prompt(&mut self, req: PromptRequest, reply: Reply) {
        let id = req.session_id.clone();
        let Some(live) = self.sessions.get_mut(&id) else {
            return respond_error(reply, invalid_params(format!("unknown session {id}")));
        };
        match live.busy {
            Some(Busy::Prompt(..)) => {
                return respond_error(
                    reply,
                    invalid_params(format!("a prompt is already in flight in session {id}")),
                );
            }
            Some(Busy::Switching) => {
                return respond_error(
                    reply,
                    invalid_params(format!(
                        "session {id} is switching modes; prompt when set_mode has answered"
                    )),
                );
            }
            None => {}
        }
        let text = match prompt_text(&req.prompt) {
            Ok(t) => t,
            Err(e) => return respond_error(reply, e),
        };
        let accepts = live
            .booted
            .root()
            .get::<Llm>()
            .is_some_and(|llm| llm.accepts_images());
        if let Err(e) = check_images(&req.prompt, accepts) {
            return respond_error(reply, e);
        }
        // A slash command is cordis's, never the model's: answered here, not logged
        // (what it changes, a permission mode or a revoked grant, is).
        let one_text = matches!(req.prompt.as_slice(),
            [only] if only.get("type").and_then(Value::as_str) == Some("text"));
        // A prompt of one of the session's MCP servers is run, not answered here.
        let root = live.booted.root().clone();
        let runs_prompt = one_text && crate::session::prompts::names_prompt(&root, &text);
        if one_text
            && !runs_prompt
            && let Some(answer) = command_answer(&text, live)
        {
            let focus = match answer {
                Answer::Now(answer) => {
                    say(&self.connection, &id, answer);
                    return reply.send(Ok(PromptResponse {
                        stop_reason: StopReason::EndTurn,
                    }));
                }
                Answer::Compact(focus) => focus,
            };
            // A compaction is a model call: the session is busy with it as with a turn, and
            // `session/cancel` cancels it.
            let (cancel, cancelled) = watch::channel(false);
            live.busy = Some(Busy::Prompt(cancel, reply.id().clone()));
            let (agent, opening, connection) =
                (live.agent().clone(), live.opening, self.connection.clone());
            self.work.push(Box::pin(async move {
                let text = compact(&agent, &focus, cancelled).await;
                say(&connection, &id, text);
                let ended = Ok(PromptResponse {
                    stop_reason: StopReason::EndTurn,
                });
                Done::Prompted(id, opening, ended, reply)
            }));
            return;
        }
        // `//…` is a message starting with `/`.
        let text = match crate::session::commands::parse(&text) {
            crate::session::commands::Line::Message(m) if one_text => m.to_owned(),
            _ => text,
        };
        // A prompt of more than text is logged as sent, so `session/load` replays it.
        let sent = req
            .prompt
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) != Some("text"))
            .then(|| req.prompt.clone());
        let (cancel, cancelled) = watch::channel(false);
        live.busy = Some(Busy::Prompt(cancel, reply.id().clone()));
        let turn = Turn {
            id,
            opening: live.opening,
            agent: live.agent().clone(),
            root,
            text,
            sent,
            runs_prompt,
            connection: self.connection.clone(),
        };
        self.work.push(Box::pin(turn.run(cancelled, reply)));
    }

    /// A prompt of session `id` (its `opening`) ended: the session is idle again, and the
    /// prompt answers.
    pub(super) fn prompted(
        &mut self,
        id: &str,
        opening: u64,
        result: Result<PromptResponse, RpcError>,
        reply: Reply,
    ) {
        if let Some(live) = self.sessions.get_mut(id)
            && live.opening == opening
        {
            live.busy = None;
        }
        reply.send(result);
    }
}

impl Turn {
    /// Runs the turn (after expanding an MCP prompt) until it ends or `cancelled` ends it;
    /// the prompt's answer is why it ended.
    async fn run(self, mut cancelled: watch::Receiver<bool>, reply: Reply) -> Done {
        let Turn {
            id,
            opening,
            agent,
            root,
            text,
            sent,
            runs_prompt,
            connection,
        } = self;
        let text = if runs_prompt {
            match crate::session::prompts::expand(&root, &text).await {
                Some(Ok(rendered)) => rendered,
                Some(Err(why)) => {
                    // Told like a command's answer; nothing reaches the model.
                    say(&connection, &id, why);
                    let done = Ok(PromptResponse {
                        stop_reason: StopReason::EndTurn,
                    });
                    return Done::Prompted(id, opening, done, reply);
                }
                None => text,
            }
        } else {
            text
        };
        let from = agent.session().len();
        let ended = {
            let turn = agent.run_prompt(text, sent);
            tokio::pin!(turn);
            let mut asked = false;
            loop {
                tokio::select! {
                    // The turn first: its first poll marks the agent busy, so a
                    // cancel that came before the turn started still reaches it.
                    biased;
                    ended = &mut turn => break ended,
                    changed = cancelled.changed(), if !asked => {
                        asked = true;
                        if changed.is_ok() {
                            agent.cancel(Some("cancelled by the client".to_owned()));
                        }
                    }
                }
            }
        };
        let result = agent
            .session()
            .with_events(|events| stop_reason(ended, events.get(from..).unwrap_or_default()));
        Done::Prompted(id, opening, result, reply)
    }
}

/// Shows `text` in session `id` as the agent's message, outside any turn.
fn say(connection: &Connection, id: &str, text: String) {
    connection.notify(
        "session/update",
        SessionNotification {
            session_id: id.to_owned(),
            update: SessionUpdate::AgentMessageChunk {
                content: ContentBlock::text(text),
            },
        },
    );
}

/// `/compact FOCUS` on `agent`, cancelled when `cancelled` turns true: the answer to show.
async fn compact(agent: &Agent, focus: &str, mut cancelled: watch::Receiver<bool>) -> String {
    let run = crate::session::commands::compact_text(agent, focus);
    tokio::pin!(run);
    loop {
        tokio::select! {
            text = &mut run => return text,
            changed = cancelled.changed() => {
                if changed.is_err() || *cancelled.borrow() {
                    agent.cancel(Some("cancelled by the client".into()));
                    return run.await;
                }
            }
        }
    }
}

/// Why a turn ended, as a prompt's answer.
fn stop_reason(
    ended: Result<TurnEndReason, TurnError>,
    events: &[SessionEvent],
) -> Result<PromptResponse, RpcError> {
    let reason = match ended {
        Ok(TurnEndReason::Completed) => {
            // The model's last finish of the turn says whether it ran out of tokens.
            let last_finish = events.iter().rev().find_map(|e| {
                e.data_as::<AssistantChunkData>()
                    .ok()
                    .and_then(|c| match c.chunk {
                        Chunk::Finish { reason } => Some(reason),
                        _ => None,
                    })
            });
            if last_finish == Some(FinishReason::Length) {
                StopReason::MaxTokens
            } else {
                StopReason::EndTurn
            }
        }
        Ok(TurnEndReason::MaxSteps { .. }) => StopReason::MaxTurnRequests,
        // A spent session budget: the protocol's nearest reason (a limit, not a failure).
        Ok(TurnEndReason::Budget { .. }) => StopReason::MaxTokens,
        Ok(
            TurnEndReason::Aborted { .. } | TurnEndReason::Disposed | TurnEndReason::Interrupted,
        ) => StopReason::Cancelled,
        Ok(TurnEndReason::Error { message, .. }) => {
            return Err(internal(format!("turn failed: {message}")));
        }
        Err(TurnError::Disposed(_)) => StopReason::Cancelled,
        Err(e @ TurnError::Busy(_)) => return Err(invalid_params(e.to_string())),
    };
    Ok(PromptResponse {
        stop_reason: reason,
    })
}
