//! A server's `instructions` (from its `initialize` answer) as a section of the system prompt,
//! one per entry, as VS Code and Claude Code put them in theirs.
//!
//! The section is named `mcp:<entry id>` and every such section has the same order
//! ([`INSTRUCTIONS_ORDER`]), so the prompt holds them by entry id (the system prompt sorts
//! ties by name), never by which server connected first. The text is the server's, cut to
//! [`MAX_INSTRUCTIONS_BYTES`] with a note saying so, under a heading naming the server; it
//! reaches the prompt through a variable, so a `{{…}}` in it is text, not a reference. A
//! server without instructions adds nothing (not even the section's name).

use std::sync::Arc;

use cordis_runtime::{BoxError, Context};
use cordis_system_prompt::{Section, SystemPrompt};
use sha2::{Digest, Sha256};

use crate::link::Link;
use crate::lock;

/// Where the servers' instructions go in the system prompt: after the instructions files
/// (10) and the skills catalog (20).
pub const INSTRUCTIONS_ORDER: f64 = 30.0;

/// The most bytes of one server's instructions in the prompt; the rest is cut with a note.
pub const MAX_INSTRUCTIONS_BYTES: usize = 4 * 1024;

/// The server's instructions as the prompt holds them: a heading naming the server, the text
/// cut to [`MAX_INSTRUCTIONS_BYTES`] (at a character boundary) with a note; `None` for none.
pub(crate) fn bounded(server: &str, instructions: Option<&str>) -> Option<String> {
    let text = instructions.map(str::trim).filter(|t| !t.is_empty())?;
    let mut body = text.to_owned();
    if body.len() > MAX_INSTRUCTIONS_BYTES {
        let mut end = MAX_INSTRUCTIONS_BYTES;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        body.push_str(&format!(
            "\n[cut by cordis: the server's instructions are {} bytes; the first {end} are shown]",
            text.len()
        ));
    }
    Some(format!(
        "## Instructions of MCP server \"{server}\"\n\n{body}"
    ))
}

/// The variable carrying entry `entry`'s instructions: `mcp_instructions_` and 12 hex digits
/// of its id's sha256 (variable names are `[a-z][a-z0-9_]*`; entry ids are not).
fn variable_name(entry: &str) -> String {
    let digest = Sha256::digest(entry.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("mcp_instructions_{hex}")
}

/// Registers the section and variable of the entry at `ctx` (labelled with its entry id;
/// else the server's name) showing `link`'s instructions, when there is a system prompt.
///
/// # Errors
/// The section or variable cannot be registered (a name already held by this entry).
pub(crate) fn register(ctx: &Context, link: &Arc<Link>) -> Result<(), BoxError> {
    let Some(prompt) = ctx.get::<SystemPrompt>() else {
        return Ok(());
    };
    let entry = ctx.label().unwrap_or(&link.server).to_owned();
    let variable = variable_name(&entry);
    let reference = format!("{{{{{variable}}}}}");
    let shown = link.clone();
    let _ = prompt.section(
        ctx,
        Section::dynamic(format!("mcp:{entry}"), INSTRUCTIONS_ORDER, move |_| {
            if lock(&shown.instructions).is_some() {
                reference.clone()
            } else {
                String::new()
            }
        }),
    )?;
    let shown = link.clone();
    let _ = prompt.variable(ctx, &variable, move |_| {
        Some(lock(&shown.instructions).clone().unwrap_or_default())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_headed_and_cut_at_a_character_boundary_with_a_note() {
        assert_eq!(bounded("s", None), None);
        assert_eq!(bounded("s", Some("  \n")), None);
        assert_eq!(
            bounded("s", Some("Use x.\n")).unwrap(),
            "## Instructions of MCP server \"s\"\n\nUse x."
        );
        let long = "é".repeat(MAX_INSTRUCTIONS_BYTES);
        let cut = bounded("s", Some(&long)).unwrap();
        assert!(
            cut.ends_with(&format!(
                "\n[cut by cordis: the server's instructions are {} bytes; the first {MAX_INSTRUCTIONS_BYTES} are shown]",
                long.len()
            )),
            "{}",
            &cut[cut.len() - 120..]
        );
        assert!(cut.len() < MAX_INSTRUCTIONS_BYTES + 200);
        let name = variable_name("a-b.c");
        assert!(cordis_system_prompt::is_variable_name(&name), "{name}");
        assert_ne!(name, variable_name("a_b.c"));
    }
}
