//! The `tool-todo` plugin: registers `todo_write`, a todo list kept per scope key, so each agent
//! tracks its own plan.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cordis_tools::{ScopeKey, ToolDefinition, ToolSet, ToolSetPlugin};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tool name: the one whose last successful result the session log projects as `todos`
/// (the session owns that fact; the tool takes its name from it).
pub const TODO_WRITE: &str = cordis_session::TODO_WRITE_TOOL;

// The schema is what the model reads, so doc comments are kept out of it
// (`description = ""`): they are for Rust readers. `additionalProperties: false` comes from
// schemars alone, not serde: the registry validates arguments against the schema before the tool
// runs, and readers of a logged list tolerate a field a newer writer added.

/// The arguments of `todo_write`, as its `tool/call` event logs them: the whole new list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields, description = "")]
pub struct TodoWriteArgs {
    /// The list, in order.
    #[schemars(description = "")]
    pub todos: Vec<Todo>,
}

/// One item of a todo list. `todo_write`'s successful result is the list it set (`[Todo]`), the
/// value of the session's `todos` projection.
///
/// # Examples
///
/// ```
/// use cordis_tool_todo::{Todo, TodoStatus};
///
/// let list: Vec<Todo> =
///     serde_json::from_str(r#"[{"content": "write tests", "status": "in_progress"}]"#).unwrap();
/// assert_eq!(list[0].status, TodoStatus::InProgress);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields, description = "")]
pub struct Todo {
    /// What to do.
    #[schemars(description = "")]
    pub content: String,
    /// Where it stands.
    #[schemars(description = "")]
    pub status: TodoStatus,
}

/// Where a todo stands (`pending`, `in_progress`, `completed` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (the model keeps exactly one).
    InProgress,
    /// Done.
    Completed,
}

impl TodoStatus {
    /// Every status, in the order the schema lists them (a status missing here is one the
    /// model cannot send).
    pub const ALL: [TodoStatus; 3] = [
        TodoStatus::Pending,
        TodoStatus::InProgress,
        TodoStatus::Completed,
    ];
}

// By hand because derived, the variants' doc comments would turn the schema's plain string `enum`
// into a `oneOf` with descriptions; the names still come from serde, so they cannot drift.
impl JsonSchema for TodoStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TodoStatus".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<serde_json::Value> = TodoStatus::ALL
            .iter()
            .map(|s| serde_json::to_value(s).unwrap_or_default())
            .collect();
        schemars::json_schema!({"type": "string", "enum": names})
    }
}

// Lists by scope key (`None` for calls outside any scope), owned by one registered tool.
type Lists = Arc<Mutex<BTreeMap<Option<ScopeKey>, Vec<Todo>>>>;

fn todo_write(lists: Lists) -> ToolDefinition {
    let description = "Replace your todo list. Keep exactly one item in_progress while working.";
    ToolDefinition::typed(
        TODO_WRITE,
        description,
        move |TodoWriteArgs { todos }, call| {
            let mut lists = lists.lock().unwrap_or_else(|e| e.into_inner());
            lists.insert(call.scope, todos.clone());
            async move { Ok(todos) }
        },
    )
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
        // Refused by the schema the registry checks (serde alone would take it).
        let extra = json!({"todos": [{"content": "y", "status": "pending", "priority": "high"}]});
        let extra = call(&reg, extra, 7).await;
        assert_eq!(extra.code.as_deref(), Some(codes::INVALID_ARGUMENTS));
        {
            let lists = lists.lock().unwrap();
            assert_eq!(lists.len(), 2);
            assert_eq!(lists[&Some(ScopeKey(7))][0].status, TodoStatus::InProgress);
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

    #[test]
    fn a_logged_list_reads_as_todos_even_with_a_field_the_schema_refuses() {
        // The model cannot send `priority` (the schema refuses it), but a reader of a log
        // written by a newer tool still gets the list.
        let logged = json!([{"content": "a", "status": "completed", "priority": "high"}]);
        let list: Vec<Todo> = serde_json::from_value(logged).unwrap();
        assert_eq!(
            list,
            [Todo {
                content: "a".into(),
                status: TodoStatus::Completed
            }]
        );
    }
}
