//! The `tool-todo` plugin: registers `todo_write`, a todo list kept per scope key, so each agent
//! tracks its own plan.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cordis_tools::{ScopeKey, ToolDefinition, ToolSet, ToolSetPlugin};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tool name.
pub const TODO_WRITE: &str = "todo_write";

// The argument types are commented with `//`: doc comments would become schema descriptions.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    todos: Vec<Todo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Todo {
    content: String,
    status: Status,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Status {
    Pending,
    InProgress,
    Completed,
}

// Lists by scope key (`None` for calls outside any scope), owned by one registered tool.
type Lists = Arc<Mutex<BTreeMap<Option<ScopeKey>, Vec<Todo>>>>;

fn todo_write(lists: Lists) -> ToolDefinition {
    let description = "Replace your todo list. Keep exactly one item in_progress while working.";
    ToolDefinition::typed(TODO_WRITE, description, move |Args { todos }, call| {
        let mut lists = lists.lock().unwrap_or_else(|e| e.into_inner());
        lists.insert(call.scope, todos.clone());
        async move { Ok(todos) }
    })
    .with_effect(cordis_tools::Effect::State)
}

/// The tools of `tool-todo`. Each apply gets a tool with lists of its own, which go away with the
/// scope: one plugin value in a host's table serves many runtimes without sharing state.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoTools;

impl ToolSet for TodoTools {
    const NAME: &'static str = "tool-todo";

    fn tools(&self) -> Vec<ToolDefinition> {
        vec![todo_write(Lists::default())]
    }
}

/// The `tool-todo` plugin.
pub type TodoPlugin = ToolSetPlugin<TodoTools>;

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
    use cordis_tools::{
        NoConfig, ToolCall, ToolRegistry, ToolResult, ToolsConfig, ToolsPlugin, codes,
    };
    use serde_json::json;

    use super::*;

    async fn call(reg: &ToolRegistry, args: serde_json::Value, scope: u64) -> ToolResult {
        let call = ToolCall {
            call_id: "1".into(),
            name: TODO_WRITE.into(),
            arguments: args,
        };
        reg.execute(call, Some(ScopeKey(scope))).await
    }

    #[tokio::test]
    async fn todo_write_keeps_one_list_per_scope_and_drops_them_with_the_tool() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let lists = Lists::default();
        let tool = reg.register(&root, todo_write(lists.clone())).unwrap();
        let seven = json!({"todos": [{"content": "x", "status": "in_progress"}]});
        let r = call(&reg, seven.clone(), 7).await;
        assert_eq!((r.is_error, &r.content), (false, &seven["todos"]));
        let _ = call(&reg, json!({"todos": []}), 8).await;
        let bad = call(&reg, json!({"todos": [{"content": "y"}]}), 7).await;
        assert_eq!(bad.code.as_deref(), Some(codes::INVALID_ARGUMENTS));
        {
            let lists = lists.lock().unwrap();
            assert_eq!(lists.len(), 2);
            assert_eq!(lists[&Some(ScopeKey(7))][0].status, Status::InProgress);
            assert!(lists[&Some(ScopeKey(8))].is_empty());
        }
        tool.dispose();
        assert_eq!(
            Arc::strong_count(&lists),
            1,
            "only the test holds the lists"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn the_plugin_registers_the_schema_the_model_sees_and_unwinds_it() {
        let root = Context::root();
        let todo = root.plugin(TodoPlugin::default(), NoConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.idle().await;
        assert_eq!(todo.status(), ScopeStatus::Active);
        let reg = root.get::<ToolRegistry>().unwrap();
        let item = json!({
            "type": "object",
            "properties": {
                "content": {"type": "string"},
                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
            },
            "required": ["content", "status"],
            "additionalProperties": false
        });
        let params = json!({
            "type": "object",
            "properties": {"todos": {"type": "array", "items": item}},
            "required": ["todos"],
            "additionalProperties": false
        });
        assert_eq!(reg.get(TODO_WRITE, None).unwrap().parameters, params.into());
        todo.dispose();
        assert!(reg.schemas(None).is_empty());
        root.dispose();
        assert!(root.live().is_zero());
    }
}
