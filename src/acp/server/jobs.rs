//! Reading a message into the request it makes of the server ([`Job`]).

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::respond_error;
use crate::acp::protocol::{
    CancelNotification, CloseSessionRequest, DeleteSessionRequest, InitializeRequest,
    ListSessionsRequest, LoadSessionRequest, NewSessionRequest, PromptRequest,
    SetSessionConfigOptionRequest, SetSessionModeRequest, SetSessionModelRequest,
};
use crate::acp::rpc::{Incoming, Reply, RpcError};
use crate::acp::session::invalid_params;

/// A request that needs the server's state, its params read.
pub(super) enum Job {
    Initialize(InitializeRequest, Reply),
    New(NewSessionRequest, Reply),
    /// `session/load` (with `true`: replay the log) and `session/resume` (`false`).
    Load(LoadSessionRequest, bool, Reply),
    Close(CloseSessionRequest, Reply),
    Delete(DeleteSessionRequest, Reply),
    /// `session/fork` (its params are `session/resume`'s).
    Fork(LoadSessionRequest, Reply),
    List(ListSessionsRequest, Reply),
    Prompt(PromptRequest, Reply),
    Cancel(CancelNotification),
    /// `$/cancel_request`: the id of the request to cancel.
    CancelRequest(Value),
    /// `session/set_mode`, or `session/set_config_option` of the mode (`true`: answer with the
    /// options).
    SetMode(SetSessionModeRequest, bool, Reply),
    SetConfig(SetSessionConfigOptionRequest, Reply),
    /// `session/set_model` (answered `{}`).
    SetModel(SetSessionModelRequest, Reply),
}

/// A request's params as `T`; `-32602` naming what does not fit.
fn params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| invalid_params(format!("Invalid params: {e}")))
}

/// A request whose params were read, waiting for its reply handle.
type Pending = Box<dyn FnOnce(Reply) -> Job>;

/// Reads a message's params; answers what needs no session state (`initialize`,
/// `authenticate`, unknown methods, bad params) at once.
pub(super) fn job_of(message: Incoming) -> Option<Job> {
    match message {
        Incoming::Request {
            method,
            params: raw,
            reply,
        } => {
            let job = match method.as_str() {
                "initialize" => params(raw)
                    .map(|r| -> Pending { Box::new(move |reply| Job::Initialize(r, reply)) }),
                "authenticate" => {
                    // No authentication methods are advertised (`authMethods` is empty), so
                    // every method id is one this agent never offered.
                    let method = raw.get("methodId").and_then(Value::as_str).unwrap_or("");
                    reply.send::<Value>(Err(invalid_params(format!(
                            "unknown authentication method \"{method}\": this agent offers none (it needs no login)"
                        ))));
                    return None;
                }
                "session/new" => {
                    params(raw).map(|r| -> Pending { Box::new(move |reply| Job::New(r, reply)) })
                }
                "session/load" => params(raw)
                    .map(|r| -> Pending { Box::new(move |reply| Job::Load(r, true, reply)) }),
                "session/resume" => params(raw)
                    .map(|r| -> Pending { Box::new(move |reply| Job::Load(r, false, reply)) }),
                "session/list" => {
                    params(raw).map(|r| -> Pending { Box::new(move |reply| Job::List(r, reply)) })
                }
                "session/fork" => {
                    params(raw).map(|r| -> Pending { Box::new(move |reply| Job::Fork(r, reply)) })
                }
                "session/close" => {
                    params(raw).map(|r| -> Pending { Box::new(move |reply| Job::Close(r, reply)) })
                }
                "session/delete" => {
                    params(raw).map(|r| -> Pending { Box::new(move |reply| Job::Delete(r, reply)) })
                }
                "session/prompt" => {
                    params(raw).map(|r| -> Pending { Box::new(move |reply| Job::Prompt(r, reply)) })
                }
                "session/set_mode" => params(raw)
                    .map(|r| -> Pending { Box::new(move |reply| Job::SetMode(r, false, reply)) }),
                "session/set_model" => params(raw)
                    .map(|r| -> Pending { Box::new(move |reply| Job::SetModel(r, reply)) }),
                "session/set_config_option" => params(raw)
                    .map(|r| -> Pending { Box::new(move |reply| Job::SetConfig(r, reply)) }),
                other => Err(RpcError::method_not_found(other)),
            };
            match job {
                Ok(job) => Some(job(reply)),
                Err(e) => {
                    respond_error(reply, e);
                    None
                }
            }
        }
        Incoming::Notification {
            method,
            params: raw,
        } => match method.as_str() {
            "session/cancel" => match params::<CancelNotification>(raw) {
                Ok(note) => Some(Job::Cancel(note)),
                Err(e) => {
                    tracing::debug!("cordis acp: a session/cancel without a session: {e}");
                    None
                }
            },
            "$/cancel_request" => match raw.get("requestId") {
                Some(id) if !id.is_null() => Some(Job::CancelRequest(id.clone())),
                _ => {
                    tracing::debug!("cordis acp: a $/cancel_request without a requestId");
                    None
                }
            },
            // Other notifications (extensions) ask nothing of this agent.
            _ => None,
        },
    }
}
