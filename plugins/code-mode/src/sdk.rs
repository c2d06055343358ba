//! The `tools:sdk` prompt section: how to write a `run_code` program, and what it can call.

use serde_json::Value;

use crate::run_code::RUN_CODE_NAME;
use crate::schema_ts::{doc_comment, json_schema_to_ts, render_key};
use cordis_schema::compare_utf16;

/// One tool as the SDK declares it; the integrator maps its own schema type onto this.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SdkTool<'a> {
    /// The tool's name, the binding's key in `tools`.
    pub name: &'a str,
    /// The model-facing description; its first-line JSDoc.
    pub description: &'a str,
    /// The JSON Schema of the arguments.
    pub parameters: &'a Value,
    /// The JSON Schema of the result, when the tool declares one (else `JsonValue`).
    pub output_schema: Option<&'a Value>,
}

/// The fixed instructions above the declarations.
///
/// Our wording for the JavaScript runtime; it keeps the reference's statements (both required
/// arguments, the calling forms, canonical JSON results, lossless JSON arguments,
/// `ToolCallError`, the overlap rule, what output comes back, images after the run).
pub const SDK_INSTRUCTIONS: &str = "## Writing code for run_code

`run_code` takes two required arguments: `code` — the body of an async JavaScript function (top-level `await` and `return` work) — and `description`, a short summary of what the program does. The declarations below are TypeScript for reading only: write plain JavaScript, because a type annotation is a syntax error at run time. Inside the program:

- Call tools as `await tools.name(args)` — quoted access for exotic names: `tools[\"my-tool\"](args)`. Every call resolves to the tool's typed canonical JSON value. Tool arguments must be lossless JSON (no `undefined`, functions, `NaN`, BigInt or cycles); a call with other arguments rejects without running.
- A FAILED tool call rejects with `ToolCallError`, whose `toolName` identifies the failed tool and whose `message` is human-readable — `try/catch` it to handle and continue.
- Independent read-only calls MAY overlap under `Promise.all` (read-only calls run concurrently; mutating calls run alone, in submission order). Sequence dependent work with `await`.
- Emit results with `return` and/or `console.log(...)`. Only what you print or return is program output. A successful tool result containing an image is attached after the run so you can inspect it on the next step; every other intermediate result stays out of the conversation, so extract just what you need.
- The program has no timers, modules, network or file access of its own: it reaches the world only through `tools`, within memory, time and output limits.

The available tools:";

const JSON_VALUE_TYPE: &str = "type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }";

const TOOL_CALL_ERROR_DECLARATION: &str = "declare class ToolCallError extends Error {
  readonly name: \"ToolCallError\";
  readonly toolName: ToolName;
}";

const TOOLS_DECLARATION: &str = "declare const tools: {
  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;
}";

/// Renders the `tools:sdk` section: [`SDK_INSTRUCTIONS`], then a `ts` fence declaring
/// `JsonValue`, `ToolArgsMap`, `ToolOutputMap`, `ToolName`, `ToolCallError` and `tools`.
///
/// `run_code` itself is never declared (a program cannot call it), whatever the input holds.
///
/// # Determinism
/// The text depends only on the set of tools: they are sorted by name in UTF-16 code-unit order
/// ([`compare_utf16`]); two entries with one name are ordered by their content, and exact
/// duplicates are declared once. Names are expected to be unique; a repeated name with different
/// content is declared twice (visible, rather than silently dropped).
pub fn render_sdk(tools: &[SdkTool<'_>]) -> String {
    let mut sorted: Vec<&SdkTool<'_>> = tools
        .iter()
        .filter(|tool| tool.name != RUN_CODE_NAME)
        .collect();
    sorted.sort_by(|a, b| {
        compare_utf16(a.name, b.name)
            .then_with(|| a.description.cmp(b.description))
            .then_with(|| a.parameters.to_string().cmp(&b.parameters.to_string()))
            .then_with(|| {
                let output = |tool: &SdkTool<'_>| tool.output_schema.map(Value::to_string);
                output(a).cmp(&output(b))
            })
    });
    sorted.dedup_by(|a, b| a == b);

    let mut args_members = String::new();
    let mut output_members = String::new();
    for tool in sorted {
        let key = render_key(tool.name);
        if let Some(doc) = doc_comment(Some(&Value::from(tool.description))) {
            args_members.push_str(&format!("  {doc}\n"));
        }
        args_members.push_str(&format!(
            "  {key}: {};\n",
            json_schema_to_ts(tool.parameters, 1)
        ));
        let output = tool.output_schema.map_or_else(
            || "JsonValue".to_owned(),
            |schema| json_schema_to_ts(schema, 1),
        );
        output_members.push_str(&format!("  {key}: {output};\n"));
    }
    let map = |name: &str, members: &str| {
        if members.is_empty() {
            format!("interface {name} {{}}")
        } else {
            format!("interface {name} {{\n{members}}}")
        }
    };
    let declarations = [
        map("ToolArgsMap", &args_members),
        map("ToolOutputMap", &output_members),
        "type ToolName = keyof ToolOutputMap".to_owned(),
        TOOL_CALL_ERROR_DECLARATION.to_owned(),
        TOOLS_DECLARATION.to_owned(),
    ]
    .join("\n\n");
    format!("{SDK_INSTRUCTIONS}\n\n```ts\n{JSON_VALUE_TYPE}\n\n{declarations}\n```")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn an_empty_scope_declares_empty_maps() {
        let sdk = render_sdk(&[]);
        let expected_tail = "```ts
type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }

interface ToolArgsMap {}

interface ToolOutputMap {}

type ToolName = keyof ToolOutputMap

declare class ToolCallError extends Error {
  readonly name: \"ToolCallError\";
  readonly toolName: ToolName;
}

declare const tools: {
  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;
}
```";
        assert_eq!(sdk, format!("{SDK_INSTRUCTIONS}\n\n{expected_tail}"));
    }

    #[test]
    fn the_instructions_state_the_contract() {
        for needle in [
            "`code`",
            "`description`",
            "`await tools.name(args)`",
            "`tools[\"my-tool\"](args)`",
            "canonical JSON value",
            "lossless JSON",
            "`ToolCallError`",
            "`toolName`",
            "`message`",
            "`Promise.all`",
            "mutating calls run alone, in submission order",
            "`return` and/or `console.log(...)`",
            "image is attached after the run",
        ] {
            assert!(SDK_INSTRUCTIONS.contains(needle), "missing {needle}");
        }
        assert!(SDK_INSTRUCTIONS.starts_with("## Writing code for run_code\n\n"));
        assert!(SDK_INSTRUCTIONS.ends_with("The available tools:"));
    }

    #[test]
    fn tools_are_declared_sorted_with_docs_and_quoted_exotic_names() {
        let read = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false});
        let empty = json!({"type": "object"});
        let output = json!({"type": "string"});
        let tools = [
            SdkTool {
                name: "read",
                description: "Read a\n   file. */",
                parameters: &read,
                output_schema: Some(&output),
            },
            SdkTool {
                name: "my-mcp.tool",
                description: "",
                parameters: &empty,
                output_schema: None,
            },
            SdkTool {
                name: "run_code",
                description: "never declared",
                parameters: &empty,
                output_schema: None,
            },
            SdkTool {
                name: "Zed",
                description: "Capital first.",
                parameters: &empty,
                output_schema: None,
            },
        ];
        let sdk = render_sdk(&tools);
        let args = "interface ToolArgsMap {
  /** Capital first. */
  Zed: Record<string, JsonValue>;
  \"my-mcp.tool\": Record<string, JsonValue>;
  /** Read a file. *\\/ */
  read: {
    path: string;
  };
}";
        let outputs = "interface ToolOutputMap {
  Zed: JsonValue;
  \"my-mcp.tool\": JsonValue;
  read: string;
}";
        assert!(sdk.contains(args), "{sdk}");
        assert!(sdk.contains(outputs), "{sdk}");
        assert!(!sdk.contains("never declared"));
    }

    #[test]
    fn names_sort_by_utf16_code_units() {
        let schema = json!({});
        let tools = [
            SdkTool {
                name: "\u{E000}",
                description: "",
                parameters: &schema,
                output_schema: None,
            },
            SdkTool {
                name: "\u{1F600}",
                description: "",
                parameters: &schema,
                output_schema: None,
            },
        ];
        let sdk = render_sdk(&tools);
        let astral = sdk.find("\"\u{1F600}\": JsonValue").expect("declared");
        let private = sdk.find("\"\u{E000}\": JsonValue").expect("declared");
        assert!(astral < private);
    }

    fn tool_strategy() -> impl Strategy<Value = (String, String, Value)> {
        let name = prop_oneof![
            "[a-z]{1,6}",
            "[a-z]{1,3}-[a-z]{1,3}",
            "[\u{E000}\u{1F600}a]{1,3}"
        ];
        let params = prop_oneof![
            Just(json!({"type": "object"})),
            Just(json!({"type": "object", "properties": {"x": {"type": "string"}}})),
            Just(
                json!({"type": "object", "properties": {"y": {"enum": [1, 2]}}, "required": ["y"]})
            ),
        ];
        (name, "[a-z ]{0,10}", params)
    }

    proptest! {
        #[test]
        fn the_sdk_text_does_not_depend_on_input_order(
            tools in proptest::collection::vec(tool_strategy(), 0..8),
            seed in any::<u64>(),
        ) {
            let as_sdk = |list: &[(String, String, Value)]| -> String {
                let sdk: Vec<SdkTool<'_>> = list
                    .iter()
                    .map(|(name, description, parameters)| SdkTool { name, description, parameters, output_schema: None })
                    .collect();
                render_sdk(&sdk)
            };
            let mut shuffled = tools.clone();
            // A seeded Fisher-Yates shuffle; proptest shrinks the seed with the list.
            let mut state = seed | 1;
            for i in (1..shuffled.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let j = (state % (i as u64 + 1)) as usize;
                shuffled.swap(i, j);
            }
            let mut reversed = tools.clone();
            reversed.reverse();
            let expected = as_sdk(&tools);
            prop_assert_eq!(&as_sdk(&shuffled), &expected);
            prop_assert_eq!(&as_sdk(&reversed), &expected);
        }
    }
}
