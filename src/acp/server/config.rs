//! A session's configuration options (`session/set_config_option`, `session/set_model`):
//! its mode, its model and its thought level.

use serde_json::json;

use super::{Live, Server, respond_error};
use crate::acp::protocol::{
    DEFAULT_THOUGHT, MODE_OPTION, MODEL_OPTION, SessionConfigOption, SessionConfigSelectOption,
    SessionModeState, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModelRequest, THOUGHT_OPTION,
};
use crate::acp::rpc::{Reply, RpcError};
use crate::acp::session::invalid_params;
use cordis_llm::Llm;

impl<'c> Server<'c> {
    /// `session/set_model`: the model of an idle session, answered `{}`.
    pub(super) fn set_model(&mut self, req: SetSessionModelRequest, reply: Reply) {
        let result = self.set_call_option(&req.session_id, MODEL_OPTION, &req.model_id);
        reply.send(result.map(|_| json!({})));
    }

    /// `session/set_config_option`: the model or thought level at once; the mode as
    /// `session/set_mode` switches it, answered with the options.
    pub(super) fn set_config_option(&mut self, req: SetSessionConfigOptionRequest, reply: Reply) {
        if !self.sessions.contains_key(&req.session_id) {
            return respond_error(
                reply,
                invalid_params(format!("unknown session {}", req.session_id)),
            );
        }
        let Some(value) = req.value.as_str() else {
            return respond_error(
                reply,
                invalid_params(format!(
                    "the value of \"{}\" is one of its options' values (a string), not {}",
                    req.config_id, req.value
                )),
            );
        };
        let offered = |id: &str| {
            self.sessions
                .get(&req.session_id)
                .is_some_and(|live| options_of(live).iter().any(|o| o.id == id))
        };
        if (req.config_id == MODEL_OPTION || req.config_id == THOUGHT_OPTION)
            && offered(&req.config_id)
        {
            let result = self.set_call_option(&req.session_id, &req.config_id, value);
            return reply.send(
                result.map(|config_options| SetSessionConfigOptionResponse { config_options }),
            );
        }
        if req.config_id != MODE_OPTION {
            let known = self
                .sessions
                .get(&req.session_id)
                .map(|live| {
                    options_of(live)
                        .iter()
                        .map(|o| format!("\"{}\"", o.id))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            return respond_error(
                reply,
                invalid_params(format!(
                    "unknown config option \"{}\"; this session has {}",
                    req.config_id,
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known
                    }
                )),
            );
        }
        let mode = value;
        let mode = SetSessionModeRequest {
            session_id: req.session_id,
            mode_id: mode.to_owned(),
        };
        self.set_mode(mode, true, reply);
    }

    /// Switches the model or the thought level of an idle session (from its next request
    /// on); returns the options as they are then.
    fn set_call_option(
        &self,
        id: &str,
        option: &str,
        value: &str,
    ) -> Result<Vec<SessionConfigOption>, RpcError> {
        let live = self
            .sessions
            .get(id)
            .ok_or_else(|| invalid_params(format!("unknown session {id}")))?;
        if live.busy.is_some() {
            return Err(invalid_params(format!(
                "session {id} is busy; switch between prompts"
            )));
        }
        let llm = live
            .booted
            .root()
            .get::<Llm>()
            .ok_or_else(|| invalid_params("this agent has no `llm` entry"))?;
        let mut config = live.agent().call_config();
        if option == MODEL_OPTION {
            let models = llm.models();
            if !models.iter().any(|m| m == value) {
                return Err(invalid_params(format!(
                    "unknown model \"{value}\"; this agent offers {} (the `llm` entry's `model` and `models`)",
                    quoted(&models)
                )));
            }
            config.model = value.to_owned();
        } else {
            let levels = llm.thought_levels();
            config.reasoning_effort = if value == DEFAULT_THOUGHT {
                None
            } else if levels.iter().any(|l| l == value) {
                Some(value.to_owned())
            } else {
                return Err(invalid_params(format!(
                    "unknown thought level \"{value}\"; this agent offers \"{DEFAULT_THOUGHT}\"{}",
                    if levels.is_empty() {
                        " only (the `llm` entry sets `thoughtLevels`)".to_owned()
                    } else {
                        format!(", {}", quoted(levels))
                    }
                )));
            };
        }
        live.agent()
            .set_call_config(config)
            .map_err(|e| invalid_params(e.to_string()))?;
        Ok(options_of(live))
    }
}

/// `names` as `"a", "b"`.
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A session's configuration options: the mode (its presets), the model when the `llm` entry
/// offers several, the thought level when it offers any; each with its value now.
pub(super) fn options_of(live: &Live) -> Vec<SessionConfigOption> {
    let mut options = live
        .booted
        .modes
        .as_ref()
        .map(SessionModeState::as_config_options)
        .unwrap_or_default();
    let Some(llm) = live.booted.root().get::<Llm>() else {
        return options;
    };
    let config = live.agent().call_config();
    let select = |id: &str, name: &str, category: &str, current: String, values: Vec<String>| {
        SessionConfigOption {
            id: id.to_owned(),
            name: name.to_owned(),
            category: category.to_owned(),
            kind: "select".to_owned(),
            current_value: current,
            options: values
                .into_iter()
                .map(|v| SessionConfigSelectOption {
                    name: v.clone(),
                    value: v,
                })
                .collect(),
        }
    };
    let models = llm.models();
    if models.len() > 1 {
        options.push(select(MODEL_OPTION, "Model", "model", config.model, models));
    }
    if !llm.thought_levels().is_empty() {
        let mut levels = vec![DEFAULT_THOUGHT.to_owned()];
        levels.extend(llm.thought_levels().iter().cloned());
        let current = config
            .reasoning_effort
            .unwrap_or_else(|| DEFAULT_THOUGHT.to_owned());
        options.push(select(
            THOUGHT_OPTION,
            "Thought level",
            "thought_level",
            current,
            levels,
        ));
    }
    options
}
