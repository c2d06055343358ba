//! A server's prompts as commands: the claims on their command names, and `prompts/get`.

use std::collections::BTreeMap;

use cordis_runtime::EffectHandle;
use rmcp::model::{ClientRequest, GetPromptRequestParams, ServerResult};
use serde_json::Value;

use super::{Link, MAX_ANSWER_ITEMS};
use crate::catalog::{PromptMessages, to_values};
use crate::claims::prompt_command_claim;
use crate::error::McpError;
use crate::lock;

impl Link {
    /// Claims the command name of each listed prompt ([`prompt_command_claim`]) in place of the
    /// previous list's: two entries whose prompts make one command name both report the
    /// conflict, and neither offers that command ([`crate::McpServer::prompts`]).
    pub(crate) fn claim_prompt_commands(&self) {
        let names: Vec<String> = lock(&self.catalog)
            .prompts
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let parent = self.ctx.parent_id();
        let fresh: Vec<EffectHandle> = names
            .iter()
            .map(|name| {
                self.ctx
                    .claim(prompt_command_claim(&self.server, name, parent))
            })
            .collect();
        let old = std::mem::replace(&mut *lock(&self.prompt_claims), fresh);
        for handle in old {
            handle.dispose();
        }
    }

    /// Whether the command of prompt `name` is contested (another entry's prompt makes the
    /// same command name).
    pub(crate) fn prompt_contested(&self, name: &str) -> bool {
        self.ctx.is_contested(&prompt_command_claim(
            &self.server,
            name,
            self.ctx.parent_id(),
        ))
    }

    /// `prompts/get` of a listed prompt.
    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<PromptMessages, McpError> {
        let error = |reason: String| McpError::Request {
            server: self.server.clone(),
            method: "prompts/get",
            reason,
        };
        let prompt = lock(&self.catalog)
            .prompts
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .ok_or_else(|| error(format!("the server lists no prompt {name:?}")))?;
        if let Some(missing) = prompt
            .arguments
            .iter()
            .find(|a| a.required && !arguments.contains_key(&a.name))
        {
            return Err(error(format!(
                "prompt {name:?} needs argument {:?}",
                missing.name
            )));
        }
        let peer = self.connected().map_err(error)?;
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = Some(
            arguments
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        );
        let request = ClientRequest::GetPromptRequest(rmcp::model::GetPromptRequest::new(params));
        let ServerResult::GetPromptResult(result) =
            self.request(&peer, request, None).await.map_err(error)?
        else {
            return Err(error(
                "the server answered with another kind of result".into(),
            ));
        };
        if result.messages.len() > MAX_ANSWER_ITEMS {
            return Err(error(format!(
                "{} messages, over the {MAX_ANSWER_ITEMS}-message limit",
                result.messages.len()
            )));
        }
        Ok(PromptMessages {
            description: result.description,
            messages: to_values(&result.messages),
        })
    }
}
