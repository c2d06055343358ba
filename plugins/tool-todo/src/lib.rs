//! The `tool-todo` plugin: registers `todo_write`, a todo list kept per scope key, so each agent
//! tracks its own plan.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cordis_runtime::{BoxError, Context, Inject, Plugin};
use cordis_tools::{ScopeKey, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};
use serde::{Deserialize, Serialize};

/// The tool name.
pub const TODO_WRITE: &str = "todo_write";

/// One todo item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Todo {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: TodoStatus,
}

/// The state of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    todos: Vec<Todo>,
}

/// Todo lists by scope key (`None` for calls outside any scope).
pub type TodoState = Arc<Mutex<BTreeMap<Option<ScopeKey>, Vec<Todo>>>>;

/// Configuration of `tool-todo` (none; unknown fields rejected).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoConfig {}

/// The `tool-todo` plugin.
///
/// Each apply keeps its own lists, owned by the registered tool, so they go away when the scope
/// is disposed: one plugin value in a host's table serves many runtimes (and reloads) without
/// sharing or keeping state between them.
#[derive(Debug, Clone, Default)]
pub struct TodoPlugin {
    latest: Arc<Mutex<TodoState>>,
}

impl TodoPlugin {
    /// The lists of the most recent apply (for tests and introspection).
    pub fn state(&self) -> TodoState {
        self.latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

const INJECT: &[Inject] = &[Inject::required("tools")];

/// The schema of `todo_write`.
pub fn todo_write_schema() -> ToolSchema {
    ToolSchema {
        name: TODO_WRITE.to_owned(),
        description: "Replace your todo list. Keep exactly one item in_progress while working."
            .to_owned(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["content", "status"]
                    }
                }
            },
            "required": ["todos"]
        }),
    }
}

impl Plugin for TodoPlugin {
    type Config = TodoConfig;

    fn name(&self) -> &str {
        "tool-todo"
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    async fn apply(&self, ctx: Context, _config: &TodoConfig) -> Result<(), BoxError> {
        let registry = ctx.require::<ToolRegistry>()?;
        let state = TodoState::default();
        *self.latest.lock().unwrap_or_else(|e| e.into_inner()) = state.clone();
        let def = ToolDefinition::new(todo_write_schema(), move |args, call| {
            let state = state.clone();
            async move {
                let Args { todos } = serde_json::from_value(args)
                    .map_err(|e| format!("invalid todo_write arguments: {e}"))?;
                let content = serde_json::to_value(&todos).map_err(|e| e.to_string())?;
                state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(call.scope, todos);
                Ok(ToolOutput::new(content))
            }
        });
        ctx.schedule().point("before-register").await;
        ctx.trace("register", TODO_WRITE);
        let _ = registry.register(&ctx, def)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
    use cordis_tools::{ToolCall, ToolsConfig, ToolsPlugin, codes};

    use super::*;

    #[tokio::test]
    async fn todo_write_keeps_one_list_per_scope_and_rejects_bad_arguments() {
        let root = Context::root();
        let plugin = TodoPlugin::default();
        let observer = plugin.clone();
        let todo = root.plugin(plugin, TodoConfig::default());
        root.plugin(ToolsPlugin, ToolsConfig::default());
        root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        root.idle().await;
        let state = observer.state();
        assert_eq!(todo.status(), ScopeStatus::Active);
        let reg = root.get::<ToolRegistry>().unwrap();
        let call = |args: serde_json::Value| ToolCall {
            call_id: "1".into(),
            name: TODO_WRITE.into(),
            arguments: args,
        };
        let args = serde_json::json!({"todos": [{"content": "x", "status": "in_progress"}]});
        let r = reg.execute(call(args.clone()), Some(ScopeKey(7))).await;
        assert!(!r.is_error, "{r:?}");
        assert_eq!(r.content, args["todos"]);
        let bad = reg
            .execute(call(serde_json::json!({"todos": [{"content": "x"}]})), None)
            .await;
        assert_eq!(bad.code.as_deref(), Some(codes::INVALID_ARGUMENTS));
        {
            let lists = state.lock().unwrap();
            assert_eq!(lists.len(), 1);
            assert_eq!(lists[&Some(ScopeKey(7))][0].status, TodoStatus::InProgress);
        }
        todo.dispose();
        assert!(reg.schemas(None).is_empty());
        assert_eq!(
            Arc::strong_count(&state),
            2,
            "only this test and `latest` hold the lists once the tool is gone"
        );
        root.dispose();
        assert!(root.live().is_zero());
    }
}
