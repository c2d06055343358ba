//! The slash commands, one registry for every front end: a line starting with `/` is a command
//! for cordis, never a message to the model (`//` sends a message that starts with `/`). The
//! terminal completes and runs them all; an editor (ACP) and the page are advertised, and
//! answered ([`answer`]), the ones that mean something there.

/// One slash command: how it is typed, what it does, and whether an editor session (ACP)
/// accepts it (the rest are what an editor does itself: new sessions, history, modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Command {
    /// How it is typed (`/permissions [MODE | revoke N]`).
    pub usage: &'static str,
    /// What it does.
    pub what: &'static str,
    /// `cordis acp` answers it too.
    pub editor: bool,
}

impl Command {
    /// Its name without the slash (`permissions`).
    pub fn name(&self) -> &'static str {
        let word = self.usage.split_whitespace().next().unwrap_or(self.usage);
        word.strip_prefix('/').unwrap_or(word)
    }

    /// What follows the name in its usage (`[MODE | revoke N]`), if anything.
    pub fn input(&self) -> Option<&'static str> {
        self.usage
            .split_once(char::is_whitespace)
            .map(|(_, rest)| rest.trim())
    }
}

/// Every command, as `/help` lists them.
pub(crate) const COMMANDS: &[Command] = &[
    Command {
        usage: "/help",
        what: "list these commands",
        editor: true,
    },
    Command {
        usage: "/preset [ID]",
        what: "show the session's preset and the others; with ID, switch a new session to it",
        editor: false,
    },
    Command {
        usage: "/clear",
        what: "start a new session on the same composition and preset",
        editor: false,
    },
    Command {
        usage: "/resume [ID]",
        what: "list recent sessions; with ID, continue that one instead",
        editor: false,
    },
    Command {
        usage: "/usage",
        what: "tokens the model reported in this session",
        editor: true,
    },
    Command {
        usage: "/expand [N]",
        what: "show call N's whole output (the last call's without N) through a pager",
        editor: false,
    },
    Command {
        usage: "/compact [FOCUS]",
        what: "replace the conversation so far with a summary the model writes (FOCUS: what it must keep)",
        editor: true,
    },
    Command {
        usage: "/permissions [MODE | revoke N]",
        what: "show the permission mode, grants and rules; set the mode (ask, auto, never-ask); revoke grant N",
        editor: true,
    },
    Command {
        usage: "/init",
        what: "write a starter AGENTS.md for this workspace (shown and asked first; never over one)",
        editor: false,
    },
    Command {
        usage: "/quit",
        what: "end the run (the session is saved)",
        editor: false,
    },
];

/// A front end that answers commands through [`answer`] (the terminal runs its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Front {
    /// An editor (`cordis acp`).
    Editor,
    /// The page (`cordis serve`).
    Page,
}

/// The answer to a prompt that is a slash command in an editor or the page, or `None` for a
/// message to the model. A mode set or a grant revoked is logged in the session.
pub(crate) fn answer(
    text: &str,
    agent: &cordis_agent_loop::Agent,
    root: &cordis_runtime::Context,
    front: Front,
) -> Option<Answer> {
    let elsewhere = |editor: &str, page: &str| match front {
        Front::Editor => editor.to_owned(),
        Front::Page => page.to_owned(),
    };
    let answer = match parse(text) {
        Line::Message(_) => return None,
        Line::Help => {
            let mut lines = vec!["Commands (a prompt starting with // is a message):".to_owned()];
            lines.extend(editor_commands().map(|c| format!("- `{}`: {}", c.usage, c.what)));
            lines.join("\n")
        }
        Line::Usage => usage_text(agent),
        Line::Compact(focus) => return Some(Answer::Compact(focus.to_owned())),
        Line::Permissions(rest) => match permissions(agent, root, rest) {
            Ok(lines) => lines.join("\n"),
            Err(why) => why,
        },
        Line::Preset(_) => elsewhere(
            "Switch presets with the editor's mode picker (`session/set_mode`).",
            "Choose a preset when you open a new session (the preset picker beside New session).",
        ),
        Line::Clear => elsewhere(
            "Start a new session from the editor.",
            "Start a new session with New session.",
        ),
        Line::Resume(_) => elsewhere(
            "Open a past session from the editor's history (`session/list`, `session/load`).",
            "Open a past session from the list, then Continue this session here.",
        ),
        Line::Init => elsewhere(
            "Run /init in `cordis run` at a terminal: it writes a starter AGENTS.md there.",
            "Run /init in `cordis run` at a terminal: it writes a starter AGENTS.md there.",
        ),
        Line::Quit => elsewhere(
            "Close the session in the editor.",
            "Close the page; the session is saved.",
        ),
        Line::Unknown(word) => format!(
            "Unknown command {word}; /help lists the commands (// sends a message that starts with /)."
        ),
    };
    Some(Answer::Now(answer))
}

/// How a front end answers a command: at once, or by compacting (a model call, which the
/// front end runs where it runs turns, then shows [`compact_text`]'s answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// This text.
    Now(String),
    /// `/compact` with this focus (empty: none).
    Compact(String),
}

/// The commands an editor session and the page accept.
pub(crate) fn editor_commands() -> impl Iterator<Item = &'static Command> {
    COMMANDS.iter().filter(|c| c.editor)
}

/// `/compact [FOCUS]`: compacts the agent's conversation and says what it did (or why not).
pub(crate) async fn compact_text(agent: &cordis_agent_loop::Agent, focus: &str) -> String {
    let focus = (!focus.trim().is_empty()).then(|| focus.trim().to_owned());
    match agent.compact(focus).await {
        Ok(done) => format!(
            "{}; the conversation goes on from the summary ({} characters){}.",
            crate::session::transcript::compaction_line(done.trigger, done.messages),
            done.summary.chars().count(),
            if done.dropped_tool_results > 0 {
                format!(
                    ", {} older tool results were cut from the summary request",
                    done.dropped_tool_results
                )
            } else {
                String::new()
            }
        ),
        Err(cordis_agent_loop::CompactError::Turn(cordis_agent_loop::TurnError::Busy(_))) => {
            "a turn is running: /compact when it has ended".to_owned()
        }
        Err(e) => e.to_string(),
    }
}

/// `/usage`: the tokens the model reported in the agent's session, from its log.
pub(crate) fn usage_text(agent: &cordis_agent_loop::Agent) -> String {
    let usage = crate::session::usage::UsageSummary::of_agent(agent, 0);
    let (input, output) = (usage.input_tokens, usage.output_tokens);
    let mut text = format!(
        "session {}: {input} tokens in, {output} tokens out, over {} model answers that reported usage",
        agent.session().id(),
        usage.answers
    );
    match usage.hit_ratio() {
        Some(ratio) => text.push_str(&format!(
            "; cached input: {} of {input} tokens ({ratio})",
            usage.cached_input_tokens
        )),
        None if usage.answers > 0 => text.push_str("; cached input: not reported"),
        None => {}
    }
    if let Some(context) = usage.context_text() {
        text.push_str(&format!("; context: {context}"));
    }
    if let Some(cost) = usage.cost_text() {
        text.push_str(&format!("; cost: {cost}"));
    }
    text
}

/// `/permissions [MODE | revoke N]` of the agent's session: its lines (an indented line is an
/// item of the line before it), or why it could not be done. A mode set or a grant revoked is
/// logged in the session.
pub(crate) fn permissions(
    agent: &cordis_agent_loop::Agent,
    root: &cordis_runtime::Context,
    rest: &str,
) -> Result<Vec<String>, String> {
    use crate::cli::render::safe;
    let (Some(now), Some(approvals)) = (
        agent.permissions(),
        root.get::<cordis_approvals::Approvals>(),
    ) else {
        return Ok(vec![
            "this composition has no `approvals` entry: every tool runs without asking".to_owned(),
        ]);
    };
    let words: Vec<&str> = rest.split_whitespace().collect();
    match words.as_slice() {
        [] => {
            let mut lines = vec![format!("permission mode: {}", now.mode)];
            if now.grants.is_empty() {
                lines.push("no grants in this session".to_owned());
            } else {
                lines.push(
                    "grants of this session (\"always\" answers; they run read-only):".to_owned(),
                );
                for (i, g) in now.grants.iter().enumerate() {
                    lines.push(format!("  {}. {}", i + 1, safe(&g.to_string())));
                }
            }
            if !now.refusals.is_empty() {
                let shown: Vec<String> = now
                    .refusals
                    .iter()
                    .map(|g| safe(&g.to_string()).into_owned())
                    .collect();
                lines.push(format!(
                    "rejected for this session (\"reject always\" answers): {}",
                    shown.join(", ")
                ));
            }
            let rules = &approvals.config().commands;
            for (word, list) in [
                ("allow (read-only)", &rules.allow),
                ("write", &rules.write),
                ("deny", &rules.deny),
            ] {
                if !list.is_empty() {
                    let shown: Vec<String> = list
                        .iter()
                        .map(|p| format!("`{}`", safe(&p.to_string())))
                        .collect();
                    lines.push(format!("commands {word}: {}", shown.join(", ")));
                }
            }
            lines.push(
                "/permissions ask|auto|never-ask sets the mode; /permissions revoke N revokes a grant"
                    .to_owned(),
            );
            Ok(lines)
        }
        ["revoke", n] => match n
            .parse::<usize>()
            .ok()
            .and_then(|n| now.grants.get(n.checked_sub(1)?))
        {
            Some(grant) => agent
                .revoke_grant(grant)
                .map(|()| vec![format!("revoked {}", safe(&grant.to_string()))])
                .map_err(|e| e.to_string()),
            None => Err(format!(
                "no grant {}: the session holds {} (see /permissions)",
                safe(n),
                now.grants.len()
            )),
        },
        [mode] => match mode.parse::<cordis_approvals::Mode>() {
            Ok(mode) => agent
                .set_permission_mode(mode)
                .map(|()| vec![format!("permission mode: {mode}")])
                .map_err(|e| e.to_string()),
            Err(e) => Err(safe(&e.to_string()).into_owned()),
        },
        _ => Err("give /permissions, /permissions MODE or /permissions revoke N".to_owned()),
    }
}

/// A typed line, read as a command or a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A message for the model.
    Message(&'a str),
    /// `/help`.
    Help,
    /// `/preset [ID]` (the id, empty without one).
    Preset(&'a str),
    /// `/usage`.
    Usage,
    /// `/compact [FOCUS]` (the focus, empty without one).
    Compact(&'a str),
    /// `/permissions [MODE | revoke N]` (the rest, empty without one).
    Permissions(&'a str),
    /// `/clear`.
    Clear,
    /// `/resume [ID]` (the id, empty without one).
    Resume(&'a str),
    /// `/init`.
    Init,
    /// `/quit` (or `/exit`).
    Quit,
    /// A command nobody knows: the word as typed.
    Unknown(&'a str),
}

/// Reads one typed line.
pub(crate) fn parse(line: &str) -> Line<'_> {
    let trimmed = line.trim();
    if trimmed.starts_with("//") {
        return Line::Message(&trimmed[1..]);
    }
    let Some(command) = trimmed.strip_prefix('/') else {
        return Line::Message(line);
    };
    let (word, rest) = command
        .split_once(char::is_whitespace)
        .map_or((command, ""), |(w, r)| (w, r.trim()));
    match word {
        "help" | "?" => Line::Help,
        "preset" => Line::Preset(rest),
        "usage" => Line::Usage,
        "compact" => Line::Compact(rest),
        "permissions" => Line::Permissions(rest),
        "clear" | "new" => Line::Clear,
        "resume" => Line::Resume(rest),
        "init" => Line::Init,
        "quit" | "exit" => Line::Quit,
        _ => Line::Unknown(trimmed.split_whitespace().next().unwrap_or(trimmed)),
    }
}

/// The `/help` text.
pub(crate) fn help() -> String {
    let width = COMMANDS.iter().map(|c| c.usage.len()).max().unwrap_or(0);
    let mut text = String::from("cordis: commands (a line starting with // is a message):\n");
    for c in COMMANDS {
        text.push_str(&format!("  {:<width$}  {}\n", c.usage, c.what));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_names_itself_and_its_input() {
        let permissions = COMMANDS.iter().find(|c| c.name() == "permissions").unwrap();
        assert_eq!(permissions.input(), Some("[MODE | revoke N]"));
        let usage = COMMANDS.iter().find(|c| c.name() == "usage").unwrap();
        assert_eq!(usage.input(), None);
        let names: Vec<&str> = editor_commands().map(Command::name).collect();
        assert_eq!(names, ["help", "usage", "compact", "permissions"]);
    }

    #[test]
    fn lines_are_commands_or_messages() {
        assert_eq!(parse("/preset code"), Line::Preset("code"));
        assert_eq!(parse("  /preset   minimal  "), Line::Preset("minimal"));
        assert_eq!(parse("/preset"), Line::Preset(""));
        assert_eq!(parse("/help"), Line::Help);
        assert_eq!(parse("/quit"), Line::Quit);
        assert_eq!(parse("/usage"), Line::Usage);
        assert_eq!(parse("/compact"), Line::Compact(""));
        assert_eq!(
            parse("/compact  keep the tests "),
            Line::Compact("keep the tests")
        );
        assert_eq!(parse("/permissions"), Line::Permissions(""));
        assert_eq!(
            parse("/permissions revoke 2"),
            Line::Permissions("revoke 2")
        );
        assert_eq!(parse("/clear"), Line::Clear);
        assert_eq!(parse("/resume"), Line::Resume(""));
        assert_eq!(parse("/resume 20261202-1"), Line::Resume("20261202-1"));
        assert_eq!(parse("/presets"), Line::Unknown("/presets"));
        assert_eq!(parse("/etc/hosts is odd"), Line::Unknown("/etc/hosts"));
        assert_eq!(
            parse("//etc/hosts is odd"),
            Line::Message("/etc/hosts is odd")
        );
        assert_eq!(parse("use /preset code"), Line::Message("use /preset code"));
        assert!(
            help().contains("  /usage                          tokens"),
            "{}",
            help()
        );
    }
}
