//! A plugin that misbehaves on request, to prove the SDK turns every panic into a status and the
//! host contains it. Config: `{"panic_in": "create" | "describe"}`; its `boom` tool always
//! panics, its `calm` tool answers `"calm"`.

use cordis_plugin_sdk::{Tool, ToolPlugin, Value, export_plugin, json};

/// The plugin instance: whether `tools` must panic.
pub struct Panicky {
    panic_in_describe: bool,
}

impl ToolPlugin for Panicky {
    fn create(config: Value) -> Result<Self, String> {
        if config["panic_in"] == "create" {
            panic!("panicky: create was told to panic");
        }
        Ok(Panicky {
            panic_in_describe: config["panic_in"] == "describe",
        })
    }

    fn tools(&self) -> Vec<Tool> {
        if self.panic_in_describe {
            panic!("panicky: describe was told to panic");
        }
        let any = json!({"type": "object"});
        vec![
            Tool::new("boom", "Always panics.", any.clone()),
            Tool::new("calm", "Answers \"calm\".", any),
        ]
    }

    fn invoke(&self, tool: &str, _args: Value) -> Result<Value, String> {
        match tool {
            "boom" => panic!("panicky: boom went the tool"),
            _ => Ok(json!("calm")),
        }
    }
}

export_plugin!(Panicky);
