//! Commands in the editor's terminal, when it advertises `terminal` and the shell is
//! `full-access` (cordis's sandbox cannot reach into the editor's terminal, so a sandboxed
//! shell keeps running its commands here, streaming their output instead): `terminal/create`,
//! the terminal embedded in the call's card while it runs, `terminal/wait_for_exit` under the
//! call's timeout (`terminal/kill` past it), `terminal/output`, `terminal/release`. A call that
//! is cancelled kills and releases its terminal.

use cordis_tool_shell::{CommandHost, HostFuture, HostedCommand, HostedOutcome};
use serde_json::{Value, json};

use super::protocol::{SessionNotification, SessionUpdate, ToolCallContent, ToolCallUpdate};
use super::rpc::Connection;

/// The editor of one session as the `bash` tool's [`CommandHost`].
pub struct EditorTerminals {
    /// The connection to the editor.
    pub connection: Connection,
    /// The session the commands belong to.
    pub session_id: String,
}

/// Kills (unless it exited) and releases a terminal when dropped: a call that ends any way,
/// cancelled included, leaves no terminal running in the editor.
struct Held {
    connection: Connection,
    params: Value,
    exited: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Sent now; the answers are not awaited (nothing is left to await them).
        if !self.exited {
            drop(
                self.connection
                    .request("terminal/kill", self.params.clone()),
            );
        }
        drop(
            self.connection
                .request("terminal/release", self.params.clone()),
        );
    }
}

impl CommandHost for EditorTerminals {
    fn run(&self, command: HostedCommand) -> HostFuture {
        let connection = self.connection.clone();
        let session_id = self.session_id.clone();
        Box::pin(async move {
            let env: Vec<Value> = command
                .env
                .iter()
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect();
            let created = connection
                .request(
                    "terminal/create",
                    json!({
                        "sessionId": session_id,
                        "command": command.program,
                        "args": command.args,
                        "env": env,
                        "cwd": command.cwd,
                        "outputByteLimit": command.output_limit,
                    }),
                )
                .await
                .map_err(|e| e.to_string())?;
            let Some(terminal_id) = created["terminalId"].as_str().map(str::to_owned) else {
                return Err(format!("terminal/create answered no terminalId: {created}"));
            };
            let params = json!({"sessionId": session_id, "terminalId": terminal_id});
            let mut held = Held {
                connection: connection.clone(),
                params: params.clone(),
                exited: false,
            };
            // The card shows the terminal while the command runs.
            connection.notify(
                "session/update",
                SessionNotification {
                    session_id: session_id.clone(),
                    update: SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                        tool_call_id: command.call_id.clone(),
                        title: None,
                        status: None,
                        content: Some(vec![ToolCallContent::Terminal { terminal_id }]),
                        raw_input: None,
                        meta: None,
                    }),
                },
            );
            let waited = tokio::time::timeout(
                command.timeout,
                connection.request("terminal/wait_for_exit", params.clone()),
            )
            .await;
            let timed_out = match waited {
                Ok(Ok(_)) => false,
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => {
                    connection
                        .request("terminal/kill", params.clone())
                        .await
                        .map_err(|e| e.to_string())?;
                    true
                }
            };
            held.exited = true;
            let output = connection
                .request("terminal/output", params)
                .await
                .map_err(|e| e.to_string())?;
            let status = &output["exitStatus"];
            Ok(HostedOutcome {
                exit_code: status["exitCode"]
                    .as_i64()
                    .and_then(|c| i32::try_from(c).ok()),
                signal: status["signal"].as_str().map(str::to_owned),
                output: output["output"].as_str().unwrap_or_default().to_owned(),
                truncated: output["truncated"] == json!(true),
                timed_out,
            })
        })
    }
}
