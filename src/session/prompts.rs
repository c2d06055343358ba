//! MCP prompts and skills as slash commands: each skill is `/<name> [ARGS]` (its `SKILL.md`
//! body is the message; see `cordis_skills`), and each prompt of a connected server is
//! `/mcp__<server>__<prompt> [ARGS]` (the tools' naming, as Claude Code names prompt
//! commands), in the terminal and in editors (ACP `available_commands_update`). Running one
//! asks the server for the prompt (`prompts/get`) and sends what it returns as the user's
//! message.
//!
//! Arguments are `name=value` words, or plain words filling the prompt's arguments in order;
//! a prompt with one argument takes the whole rest of the line. A missing required argument
//! is named with the usage, and nothing is sent.

use std::collections::BTreeMap;

use cordis_mcp::{McpServer, PromptInfo, PromptMessages};
use cordis_runtime::Context;
use serde_json::Value;

/// The most text a prompt's rendering may put in one message (the rest is cut, saying so).
pub(crate) const MAX_PROMPT_TEXT: usize = 256 << 10;

/// One prompt as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PromptCommand {
    /// Its name without the slash (`mcp__fx__greeting`).
    pub name: String,
    /// What it does (the prompt's description or title).
    pub what: String,
    /// Its arguments as typed (`name=… [tone=…]`), if it takes any.
    pub input: Option<String>,
}

fn usage_of(prompt: &PromptInfo) -> Option<String> {
    let words: Vec<String> = prompt
        .arguments
        .iter()
        .map(|a| {
            if a.required {
                format!("{}=…", a.name)
            } else {
                format!("[{}=…]", a.name)
            }
        })
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The prompt commands of the servers under `scope`, by name (servers and their prompts are
/// each sorted: the list does not depend on which server answered first).
pub(crate) fn prompt_commands(scope: &Context) -> Vec<PromptCommand> {
    let mut commands: Vec<PromptCommand> = cordis_mcp::servers(scope)
        .iter()
        .flat_map(|server| {
            server.prompts().into_iter().map(|p| PromptCommand {
                name: cordis_mcp::prompt_command(server.name(), &p.name),
                what: p
                    .description
                    .clone()
                    .or_else(|| p.title.clone())
                    .unwrap_or_else(|| format!("the prompt {} of {}", p.name, server.name())),
                input: usage_of(&p),
            })
        })
        .collect();
    // Skills after the built-in commands' names: a skill named `help` is left out.
    let builtin = |name: &str| {
        crate::session::commands::COMMANDS
            .iter()
            .any(|c| c.name() == name)
    };
    commands.extend(
        cordis_skills::skill_commands(scope)
            .into_iter()
            .filter(|s| !builtin(&s.name) && !s.name.starts_with("mcp__"))
            .map(|s| PromptCommand {
                name: s.name,
                what: s.what,
                input: s.input,
            }),
    );
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    commands
}

/// The skill a command word names (`/review`), if one does and no built-in command has its name.
fn skill_named(scope: &Context, word: &str) -> Option<String> {
    let name = word.strip_prefix('/')?;
    if name.is_empty()
        || crate::session::commands::COMMANDS
            .iter()
            .any(|c| c.name() == name)
    {
        return None;
    }
    cordis_skills::skill_commands(scope)
        .into_iter()
        .any(|s| s.name == name)
        .then(|| name.to_owned())
}

/// The server and prompt a command word names, if it names one.
fn find(scope: &Context, word: &str) -> Option<(McpServer, PromptInfo)> {
    let name = word.strip_prefix('/').unwrap_or(word);
    cordis_mcp::servers(scope).into_iter().find_map(|server| {
        let prefix = format!("mcp__{}__", server.name());
        let prompt = name.strip_prefix(&prefix)?;
        let info = server.prompts().into_iter().find(|p| p.name == prompt)?;
        Some((server, info))
    })
}

/// Whether `line` runs a prompt of a server under `scope`.
pub(crate) fn names_prompt(scope: &Context, line: &str) -> bool {
    let word = line.split_whitespace().next().unwrap_or_default();
    (word.starts_with("/mcp__") && find(scope, word).is_some())
        || skill_named(scope, word).is_some()
}

/// The arguments of `prompt` from what followed the command.
fn arguments(prompt: &PromptInfo, rest: &str) -> Result<BTreeMap<String, String>, String> {
    let mut args = BTreeMap::new();
    let rest = rest.trim();
    if prompt.arguments.len() == 1 && !rest.is_empty() {
        let only = &prompt.arguments[0].name;
        let value = rest
            .strip_prefix(&format!("{only}="))
            .unwrap_or(rest)
            .to_owned();
        args.insert(only.clone(), value);
    } else {
        let mut positional = prompt.arguments.iter();
        for word in rest.split_whitespace() {
            match word.split_once('=') {
                Some((name, value)) if prompt.arguments.iter().any(|a| a.name == name) => {
                    args.insert(name.to_owned(), value.to_owned());
                }
                _ => {
                    let Some(next) = positional.find(|a| !args.contains_key(&a.name)) else {
                        return Err(format!(
                            "too many arguments: {} takes {}",
                            prompt.name,
                            usage_of(prompt).unwrap_or_else(|| "none".to_owned())
                        ));
                    };
                    args.insert(next.name.clone(), word.to_owned());
                }
            }
        }
    }
    let missing: Vec<&str> = prompt
        .arguments
        .iter()
        .filter(|a| a.required && !args.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the prompt {} needs {} (usage: /… {})",
            prompt.name,
            missing.join(", "),
            usage_of(prompt).unwrap_or_default()
        ));
    }
    Ok(args)
}

/// The text of one content block of a prompt message.
fn block_text(block: &Value) -> String {
    match block["type"].as_str() {
        Some("text") => block["text"].as_str().unwrap_or_default().to_owned(),
        Some("resource") => {
            let r = &block["resource"];
            let uri = r["uri"].as_str().unwrap_or_default();
            match r["text"].as_str() {
                Some(text) => format!("[resource uri={uri}]\n{text}\n[/resource]"),
                None => format!("[resource uri={uri}: binary, not included]"),
            }
        }
        Some("resource_link") => format!(
            "[resource_link uri={}]",
            block["uri"].as_str().unwrap_or_default()
        ),
        Some(other) => format!("[{other} content, not included]"),
        None => String::new(),
    }
}

/// The user message a prompt's messages make: their texts in order, an assistant's marked.
pub(crate) fn flatten(rendered: &PromptMessages) -> String {
    let mut parts: Vec<String> = Vec::new();
    for m in &rendered.messages {
        let text = match &m["content"] {
            Value::Array(blocks) => blocks.iter().map(block_text).collect::<Vec<_>>().join("\n"),
            block => block_text(block),
        };
        if m["role"] == "assistant" {
            parts.push(format!("Assistant: {text}"));
        } else {
            parts.push(text);
        }
    }
    let mut text = parts.join("\n\n");
    if text.len() > MAX_PROMPT_TEXT {
        let mut cut = MAX_PROMPT_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[the prompt was cut here: it is longer than 256 KiB]");
    }
    text
}

/// When `line` runs a skill (`/<name> ARGS`) or a prompt of a server under `scope`
/// (`/mcp__<server>__<prompt> ARGS`): the message it makes, or why none. `None`: the line names
/// neither.
pub(crate) async fn expand(scope: &Context, line: &str) -> Option<Result<String, String>> {
    let trimmed = line.trim();
    let (word, rest) = trimmed
        .split_once(char::is_whitespace)
        .unwrap_or((trimmed, ""));
    if !word.starts_with("/mcp__")
        && let Some(skill) = skill_named(scope, word)
    {
        // A skill's body is read from its file: off the async threads.
        let (scope, rest) = (scope.clone(), rest.to_owned());
        let read =
            tokio::task::spawn_blocking(move || cordis_skills::expand(&scope, &skill, &rest)).await;
        return Some(match read {
            Ok(Some(text)) => Ok(text),
            Ok(None) => Err(format!("the skill {word} is gone")),
            Err(e) => Err(format!("reading the skill {word} failed: {e}")),
        });
    }
    let (server, prompt) = find(scope, word)?;
    let args = match arguments(&prompt, rest) {
        Ok(args) => args,
        Err(why) => return Some(Err(why)),
    };
    Some(match server.get_prompt(&prompt.name, args).await {
        Ok(rendered) => {
            let text = flatten(&rendered);
            if text.trim().is_empty() {
                Err(format!("the prompt {} came back empty", prompt.name))
            } else {
                Ok(text)
            }
        }
        Err(e) => Err(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordis_mcp::PromptArgumentInfo;
    use serde_json::json;

    fn prompt(args: &[(&str, bool)]) -> PromptInfo {
        PromptInfo {
            name: "review".into(),
            title: None,
            description: None,
            arguments: args
                .iter()
                .map(|(n, r)| PromptArgumentInfo {
                    name: (*n).into(),
                    description: None,
                    required: *r,
                })
                .collect(),
        }
    }

    #[test]
    fn arguments_are_named_or_in_order_and_required_ones_are_named_when_missing() {
        let p = prompt(&[("file", true), ("tone", false)]);
        let got = arguments(&p, "src/a.rs tone=kind").unwrap();
        assert_eq!(got["file"], "src/a.rs");
        assert_eq!(got["tone"], "kind");
        let got = arguments(&p, "tone=kind src/a.rs").unwrap();
        assert_eq!(got["file"], "src/a.rs");
        let e = arguments(&p, "tone=kind").unwrap_err();
        assert_eq!(
            e,
            "the prompt review needs file (usage: /… file=… [tone=…])"
        );
        assert!(
            arguments(&p, "a b c")
                .unwrap_err()
                .starts_with("too many arguments")
        );
        // One argument takes the whole line.
        let one = prompt(&[("topic", true)]);
        assert_eq!(
            arguments(&one, "the borrow checker").unwrap()["topic"],
            "the borrow checker"
        );
        assert_eq!(arguments(&one, "topic=x y").unwrap()["topic"], "x y");
    }

    #[test]
    fn a_rendering_becomes_one_message_with_resources_inlined() {
        let rendered = PromptMessages {
            description: None,
            messages: vec![
                json!({"role": "user", "content": {"type": "text", "text": "Review this:"}}),
                json!({"role": "user", "content": {"type": "resource", "resource": {"uri": "mem://a", "text": "fn a() {}"}}}),
                json!({"role": "assistant", "content": {"type": "text", "text": "Sure."}}),
                json!({"role": "user", "content": {"type": "image", "data": "", "mimeType": "image/png"}}),
            ],
        };
        assert_eq!(
            flatten(&rendered),
            "Review this:\n\n[resource uri=mem://a]\nfn a() {}\n[/resource]\n\nAssistant: Sure.\n\n[image content, not included]"
        );
    }
}
