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
pub(super) fn command_answer(text: &str, live: &Live) -> Option<String> {
    use crate::session::commands::{Line, editor_commands, parse};
    let answer = match parse(text) {
        Line::Message(_) => return None,
        Line::Help => {
            let mut lines = vec!["Commands (a prompt starting with // is a message):".to_owned()];
            lines.extend(editor_commands().map(|c| format!("- `{}`: {}", c.usage, c.what)));
            lines.join("\n")
        }
        Line::Usage => crate::session::commands::usage_text(live.agent()),
        Line::Permissions(rest) => {
            match crate::session::commands::permissions(live.agent(), live.booted.root(), rest) {
                Ok(lines) => lines.join("\n"),
                Err(why) => why,
            }
        }
        Line::Preset(_) => {
            "Switch presets with the editor's mode picker (`session/set_mode`).".to_owned()
        }
        Line::Clear => "Start a new session from the editor.".to_owned(),
        Line::Resume(_) => {
            "Open a past session from the editor's history (`session/list`, `session/load`)."
                .to_owned()
        }
        Line::Quit => "Close the session in the editor.".to_owned(),
        Line::Unknown(word) => format!(
            "Unknown command {word}; /help lists the commands (// sends a message that starts with /)."
        ),
    };
    Some(answer)
}
