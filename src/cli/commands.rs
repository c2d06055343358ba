//! The slash commands of `cordis run`: a line starting with `/` is a command for cordis, never
//! a message to the model (`//` sends a message that starts with `/`).

/// Each command and what it does, as `/help` lists them.
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    ("/help", "list these commands"),
    (
        "/preset [ID]",
        "show the session's preset and the others; with ID, switch a new session to it",
    ),
    (
        "/clear",
        "start a new session on the same composition and preset",
    ),
    (
        "/resume [ID]",
        "list recent sessions; with ID, continue that one instead",
    ),
    ("/usage", "tokens the model reported in this session"),
    (
        "/permissions [MODE | revoke N]",
        "show the permission mode, grants and rules; set the mode (ask, auto, never-ask); revoke grant N",
    ),
    ("/quit", "end the run (the session is saved)"),
];

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
    /// `/permissions [MODE | revoke N]` (the rest, empty without one).
    Permissions(&'a str),
    /// `/clear`.
    Clear,
    /// `/resume [ID]` (the id, empty without one).
    Resume(&'a str),
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
        "permissions" => Line::Permissions(rest),
        "clear" | "new" => Line::Clear,
        "resume" => Line::Resume(rest),
        "quit" | "exit" => Line::Quit,
        _ => Line::Unknown(trimmed.split_whitespace().next().unwrap_or(trimmed)),
    }
}

/// The `/help` text.
pub(crate) fn help() -> String {
    let width = COMMANDS.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut text = String::from("cordis: commands (a line starting with // is a message):\n");
    for (command, what) in COMMANDS {
        text.push_str(&format!("  {command:<width$}  {what}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_commands_or_messages() {
        assert_eq!(parse("/preset code"), Line::Preset("code"));
        assert_eq!(parse("  /preset   minimal  "), Line::Preset("minimal"));
        assert_eq!(parse("/preset"), Line::Preset(""));
        assert_eq!(parse("/help"), Line::Help);
        assert_eq!(parse("/quit"), Line::Quit);
        assert_eq!(parse("/usage"), Line::Usage);
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
