//! Slash commands in an editor session: which it accepts, and the answers of those cordis
//! answers itself.

use super::Live;
use crate::acp::protocol::{AvailableCommand, CommandInput};

/// The slash commands an editor session accepts: the terminal's, where they mean something in
/// an editor, then the prompts of the MCP servers of its composition (`scope`).
pub(super) fn available_commands(scope: &cordis_runtime::Context) -> Vec<AvailableCommand> {
    let prompts = crate::session::prompts::prompt_commands(scope)
        .into_iter()
        .map(|p| AvailableCommand {
            name: p.name,
            description: p.what,
            input: p.input.map(|hint| CommandInput { hint }),
        });
    crate::session::commands::editor_commands()
        .map(|c| AvailableCommand {
            name: c.name().to_owned(),
            description: c.what.to_owned(),
            input: c.input().map(|hint| CommandInput {
                hint: hint.to_owned(),
            }),
        })
        .chain(prompts)
        .collect()
}

/// The answer to a prompt that is a slash command, or `None` for a message to the model.
pub(super) fn command_answer(text: &str, live: &Live) -> Option<crate::session::commands::Answer> {
    crate::session::commands::answer(
        text,
        live.agent(),
        live.booted.root(),
        crate::session::commands::Front::Editor,
    )
}
