//! `session/set_mode` (and `session/set_config_option` of the mode): a session switches to
//! another preset of the roster.

use cordis_agent_presets::AgentPresets;
use serde_json::{Value, json};

use super::config::options_of;
use super::{Busy, Done, Server, respond_error};
use crate::acp::protocol::{SetSessionConfigOptionResponse, SetSessionModeRequest};
use crate::acp::rpc::{Reply, RpcError};
use crate::acp::session::{internal, invalid_params};

impl<'c> Server<'c> {
    /// `session/set_mode` (`options`: asked as `session/set_config_option`, so answered with
    /// the options): an idle session of a composition with presets switches, asynchronously,
    /// whether or not it has turns.
    pub(super) fn set_mode(&mut self, req: SetSessionModeRequest, options: bool, reply: Reply) {
        let id = req.session_id.clone();
        let mode = req.mode_id.clone();
        let Some(live) = self.sessions.get_mut(&id) else {
            return respond_error(reply, invalid_params(format!("unknown session {id}")));
        };
        let Some(roster) = live.booted.root().get::<AgentPresets>() else {
            return respond_error(
                reply,
                invalid_params("this agent has no modes (its config has no `agent-presets` entry)"),
            );
        };
        if live.busy.is_some() {
            return respond_error(
                reply,
                invalid_params(format!(
                    "session {id} is busy; switch modes between prompts"
                )),
            );
        }
        live.busy = Some(Busy::Switching);
        let agent = live.agent().clone();
        let opening = live.opening;
        self.work.push(Box::pin(async move {
            // Before or after the first turn (the editor's picker stays live): the history
            // stays, the next request carries the new preset's tools and persona (its header
            // logged with reason `change`). The roster refuses an unknown or broken preset.
            let switched = roster
                .switch_any(&agent, &mode)
                .await
                .map(drop)
                .map_err(|e| invalid_params(e.to_string()));
            Done::Switched(id, opening, mode, options, switched, reply)
        }));
    }

    /// A mode switch of session `id` (its `opening`) to `mode` ended: the session is idle
    /// again, runs `mode` if it switched, and the switch answers.
    pub(super) fn switched(
        &mut self,
        id: &str,
        opening: u64,
        mode: String,
        options: bool,
        result: Result<(), RpcError>,
        reply: Reply,
    ) {
        let Some(live) = self
            .sessions
            .get_mut(id)
            .filter(|live| live.opening == opening)
        else {
            // Closed while it switched: nothing of this opening is left to show.
            return reply.send(result.map(|()| switched_elsewhere(options)));
        };
        live.busy = None;
        if result.is_ok()
            && let Some(modes) = &mut live.booted.modes
        {
            modes.current_mode_id = mode;
        }
        let answer = match result {
            Ok(()) if options => serde_json::to_value(SetSessionConfigOptionResponse {
                config_options: options_of(live),
            })
            .map_err(|e| internal(e.to_string())),
            Ok(()) => Ok(json!({})),
            Err(e) => Err(e),
        };
        reply.send(answer);
    }
}

/// The answer to a mode switch whose session is gone: `{}` for `session/set_mode`, no options
/// for `session/set_config_option` (whose answer must carry them).
pub(super) fn switched_elsewhere(options: bool) -> Value {
    if options {
        json!({"configOptions": []})
    } else {
        json!({})
    }
}
