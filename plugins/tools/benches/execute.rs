//! One `execute` of a todo-shaped tool: with the argument check against its schema, and through
//! a tool whose schema is `{"type": "object"}` (the check is then one type test), as the floor.

use cordis_runtime::Context;
use cordis_tools::{ToolCall, ToolDefinition, ToolOutput, ToolRegistry, ToolSchema};

fn main() {
    divan::main();
}

fn tool(name: &str, parameters: serde_json::Value) -> ToolDefinition {
    let schema = ToolSchema {
        name: name.to_owned(),
        description: "A benchmark tool.".to_owned(),
        parameters: parameters.into(),
    };
    ToolDefinition::new(schema, |_, _| async { Ok(ToolOutput::new(true)) })
}

fn run(name: &str, bencher: divan::Bencher) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime");
    let _entered = rt.enter();
    let root = Context::root();
    let reg = ToolRegistry::new(root.clone());
    let item = serde_json::json!({
        "type": "object",
        "properties": {
            "content": {"type": "string"},
            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
        },
        "required": ["content", "status"],
        "additionalProperties": false
    });
    let todo = serde_json::json!({
        "type": "object",
        "properties": {"todos": {"type": "array", "items": item}},
        "required": ["todos"],
        "additionalProperties": false
    });
    let _ = reg
        .register(&root, tool("checked", todo))
        .expect("registers");
    let _ = reg
        .register(&root, tool("floor", serde_json::json!({"type": "object"})))
        .expect("registers");
    let todos: Vec<_> = (0..10)
        .map(|i| serde_json::json!({"content": format!("step {i}"), "status": "pending"}))
        .collect();
    let call = ToolCall {
        call_id: "c".to_owned(),
        name: name.to_owned(),
        arguments: serde_json::json!({ "todos": todos }),
    };
    bencher.bench_local(|| rt.block_on(reg.execute(call.clone(), None)));
    root.dispose();
}

#[divan::bench]
fn execute_checked_10_todos(bencher: divan::Bencher) {
    run("checked", bencher);
}

#[divan::bench]
fn execute_floor(bencher: divan::Bencher) {
    run("floor", bencher);
}
