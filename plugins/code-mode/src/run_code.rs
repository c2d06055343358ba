//! `run_code`'s own definition, the code-only rule, and the refusal of a collapsed call.

use serde_json::{Value, json};

/// The model-facing name of the Code Mode tool; reserved everywhere.
pub const RUN_CODE_NAME: &str = "run_code";

/// The name of the SDK prompt section.
pub const SDK_SECTION: &str = "tools:sdk";
/// The SDK section's order: inside the tool-guidance band, after per-tool guidance (100).
pub const SDK_SECTION_ORDER: i64 = 150;
/// The name of the code-only rule section.
pub const CODE_ONLY_SECTION: &str = "tools:code-only";
/// The code-only rule's order: before per-tool guidance (100), so the model reads which tools it
/// may call before what each is for.
pub const CODE_ONLY_SECTION_ORDER: i64 = 99;

/// The `tools:code-only` section's text for a scope presented as `code` (the reference's exact
/// text). A `both` or `native` scope gets no such section.
pub const CODE_ONLY_RULE: &str = "`run_code` is the only tool you can call directly — a tool call naming any other tool fails. Reach every tool the SDK declares below from inside the program.";

/// The refusal of a direct call to a tool that a `code` scope collapses into `run_code` (the
/// reference's exact text, which the registry reports as an unknown tool).
pub fn collapsed_call_message(name: &str) -> String {
    format!(
        "unknown tool \"{name}\": only `run_code` is callable directly — call `{name}` from inside a `run_code` program instead"
    )
}

/// The language a `run_code` program is written in; its schema is worded for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Language {
    /// Plain JavaScript (the QuickJS runtime).
    JavaScript,
    /// TypeScript with erasable syntax only (the reference's texts, byte for byte).
    TypeScript,
}

/// A runtime language no `run_code` flavor is registered for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLanguage(pub String);

impl std::fmt::Display for UnknownLanguage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no run_code schema flavor registered for runtime language {} (known: \"javascript\", \"typescript\")",
            Value::from(self.0.as_str())
        )
    }
}

impl std::error::Error for UnknownLanguage {}

impl Language {
    /// The language a runtime names (`CodeRuntime::language`).
    ///
    /// # Errors
    /// [`UnknownLanguage`] for any name but `javascript` and `typescript`.
    pub fn from_runtime(name: &str) -> Result<Self, UnknownLanguage> {
        match name {
            "javascript" => Ok(Self::JavaScript),
            "typescript" => Ok(Self::TypeScript),
            other => Err(UnknownLanguage(other.to_owned())),
        }
    }
}

/// The `description` parameter's description (the reference's exact text, every language).
const DESCRIPTION_PARAMETER: &str = "Clear, concise description of what this program does in active voice, 5-10 words (shown in the UI). Examples: \"Count TODO markers across packages\"; \"Read failing test and its fixture\"; \"Rename config key in every cordis.yml\".";

const TYPESCRIPT_DESCRIPTION: &str = "Execute a TypeScript program against the available tools. Takes two required arguments: `code`, the BODY of an async function (erasable syntax only; top-level `await` and `return` work), and `description`, a short summary of what the program does. Call tools as `await tools.name(args)` per the declarations in the system prompt. Only what you print or return is program output — curate it. Image-bearing subtool results are attached after the run.";
const TYPESCRIPT_CODE: &str = "The program: the body of an async TypeScript function.";

/// The JavaScript flavor: the TypeScript texts with the language named truly (no erasable
/// syntax: a type annotation does not parse).
const JAVASCRIPT_DESCRIPTION: &str = "Execute a JavaScript program against the available tools. Takes two required arguments: `code`, the BODY of an async function (plain JavaScript, no type annotations; top-level `await` and `return` work), and `description`, a short summary of what the program does. Call tools as `await tools.name(args)` per the declarations in the system prompt. Only what you print or return is program output — curate it. Image-bearing subtool results are attached after the run.";
const JAVASCRIPT_CODE: &str = "The program: the body of an async JavaScript function.";

/// `run_code`'s model-facing definition for one language.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCodeSchema {
    /// The tool description.
    pub description: &'static str,
    /// The parameters: required strings `code` and `description`.
    pub parameters: Value,
    /// The result: `{logs: string[], result?: JSON}`.
    pub output_schema: Value,
}

impl RunCodeSchema {
    /// The definition worded for `language`.
    pub fn for_language(language: Language) -> Self {
        let (description, code) = match language {
            Language::JavaScript => (JAVASCRIPT_DESCRIPTION, JAVASCRIPT_CODE),
            Language::TypeScript => (TYPESCRIPT_DESCRIPTION, TYPESCRIPT_CODE),
        };
        Self {
            description,
            parameters: json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": code},
                    "description": {"type": "string", "description": DESCRIPTION_PARAMETER}
                },
                "required": ["code", "description"]
            }),
            output_schema: json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "logs": {"type": "array", "items": {"type": "string"}},
                    "result": {}
                },
                "required": ["logs"]
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typescript_flavor_keeps_the_reference_texts() {
        let schema = RunCodeSchema::for_language(Language::TypeScript);
        assert_eq!(
            schema.parameters["properties"]["code"]["description"],
            TYPESCRIPT_CODE
        );
        assert_eq!(
            schema.parameters["required"],
            json!(["code", "description"])
        );
        assert!(
            schema
                .description
                .starts_with("Execute a TypeScript program against the available tools.")
        );
    }

    #[test]
    fn the_javascript_flavor_names_its_language() {
        let schema = RunCodeSchema::for_language(Language::from_runtime("javascript").unwrap());
        assert_eq!(
            schema.parameters["properties"]["code"]["description"],
            "The program: the body of an async JavaScript function."
        );
        assert!(!schema.description.contains("TypeScript"));
        assert_eq!(
            schema.parameters["properties"]["description"]["description"],
            DESCRIPTION_PARAMETER
        );
    }

    #[test]
    fn an_unknown_language_is_named_in_the_error() {
        let err = Language::from_runtime("python").unwrap_err();
        assert_eq!(
            err.to_string(),
            "no run_code schema flavor registered for runtime language \"python\" (known: \"javascript\", \"typescript\")"
        );
    }

    #[test]
    fn the_collapse_refusal_names_the_tool_twice() {
        assert_eq!(
            collapsed_call_message("read"),
            "unknown tool \"read\": only `run_code` is callable directly — call `read` from inside a `run_code` program instead"
        );
    }
}
