//! Skills as slash commands: `/<name> [args]` sends the skill's body as the user's message,
//! like MCP prompts (`src/session/prompts.rs` in the application).

use cordis_runtime::Context;

use crate::plugin::Skills;

/// One skill as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillCommand {
    /// Its name without the slash (the skill's name).
    pub name: String,
    /// What it does (the skill's description).
    pub what: String,
    /// What it takes, as typed: always the optional free text `[ARGS]`.
    pub input: Option<String>,
}

/// The skill commands of the composition `scope` belongs to, sorted by name; empty without a
/// `skills` entry. Blocks on a few file system calls (see [`crate::Library::scan`]).
pub fn skill_commands(scope: &Context) -> Vec<SkillCommand> {
    let Some(skills) = scope.get::<Skills>() else {
        return Vec::new();
    };
    skills
        .library()
        .scan()
        .iter()
        .map(|s| SkillCommand {
            name: s.name.clone(),
            what: s.description.clone(),
            input: Some("[ARGS]".to_owned()),
        })
        .collect()
}

/// The message `/<name> args` sends the model: the skill's body, `$ARGUMENTS` in it replaced
/// by `args`, or `args` appended under an `ARGUMENTS:` line when the body does not use it.
/// `None` when no skill has that name (`name` may carry the leading `/`). Blocks like
/// [`skill_commands`].
pub fn expand(scope: &Context, name: &str, args: &str) -> Option<String> {
    let name = name.strip_prefix('/').unwrap_or(name);
    let skill = scope.get::<Skills>()?.library().get(name)?;
    let args = args.trim();
    let body = skill.body.trim_end();
    let text = if body.contains("$ARGUMENTS") {
        body.replace("$ARGUMENTS", args)
    } else if args.is_empty() {
        body.to_owned()
    } else {
        format!("{body}\n\nARGUMENTS: {args}")
    };
    Some(format!(
        "Skill `{}` ({}):\n\n{text}",
        skill.name, skill.shown
    ))
}
