//! Helpers shared by the unit tests.

use cordis_schema::ToolSchema;

use crate::definition::{ToolDefinition, ToolOutput};

/// A tool that answers its own name.
pub(crate) fn tool(name: &str) -> ToolDefinition {
    let answer = name.to_owned();
    ToolDefinition::new(
        ToolSchema {
            name: name.to_owned(),
            description: format!("{name} tool"),
            parameters: serde_json::json!({"type": "object"}).into(),
        },
        move |_, _| {
            let answer = answer.clone();
            async move { Ok(ToolOutput::new(answer)) }
        },
    )
}

/// Names of schemas.
pub(crate) fn names(schemas: &[ToolSchema]) -> Vec<String> {
    schemas.iter().map(|s| s.name.clone()).collect()
}
