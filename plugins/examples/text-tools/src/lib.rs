//! An example third-party tool plugin: two text tools, built as a `cdylib` against the SDK only.
//!
//! Load it with a cordis.yml entry whose name is the library's path, e.g.
//! `- name: ./libcordis_example_text_tools.so`. The entry's `config` may set `prefix`, which is
//! prepended to both tool names (so one library can back several entries).

use cordis_plugin_sdk::{Tool, ToolPlugin, Value, export_plugin, json};

/// The plugin instance: the tool-name prefix from its config.
pub struct TextTools {
    prefix: String,
}

impl ToolPlugin for TextTools {
    const THREAD_SAFE: bool = true;

    fn create(config: Value) -> Result<Self, String> {
        let prefix = match &config["prefix"] {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => return Err(format!("config.prefix must be a string, found {other}")),
        };
        Ok(TextTools { prefix })
    }

    fn tools(&self) -> Vec<Tool> {
        let text = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        vec![
            Tool::new(
                format!("{}word_count", self.prefix),
                "Counts the words of `text`.",
                text.clone(),
            ),
            Tool::new(
                format!("{}reverse", self.prefix),
                "Reverses `text` character by character.",
                text,
            ),
        ]
    }

    fn invoke(&self, tool: &str, args: Value) -> Result<Value, String> {
        let text = args["text"].as_str().ok_or("`text` must be a string")?;
        match tool.strip_prefix(self.prefix.as_str()) {
            Some("word_count") => Ok(json!({"words": text.split_whitespace().count()})),
            Some("reverse") => Ok(json!(text.chars().rev().collect::<String>())),
            _ => Err(format!("unknown tool \"{tool}\"")),
        }
    }
}

export_plugin!(TextTools);
