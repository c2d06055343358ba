//! `run_code` through the tool registry on the real engine: output and sub-call bounds from the
//! `tools` entry, and sub-calls that go through the whole pipeline.

use std::sync::Arc;

use cordis_code_runtime::CodeRuntimeService;
use cordis_code_runtime_quickjs::QuickJs;
use cordis_runtime::prelude::*;
use cordis_system_prompt::{SystemPromptConfig, SystemPromptPlugin};
use cordis_tools::{
    CodeDispatch, PostExecute, PresentationMode, RUN_CODE, ScopeKey, ToolCall, ToolDefinition,
    ToolOutput, ToolRegistry, ToolSchema, ToolsCodeDispatch, ToolsConfig, ToolsPlugin,
    ToolsPostExecute,
};

/// A tool that answers its own name.
fn tool(name: &str) -> ToolDefinition {
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

/// The system prompt, a `tools` entry in `mode`, the QuickJS runtime and two tools.
async fn boot(mode: PresentationMode) -> Context {
    let root = Context::root();
    let _ = root.plugin(
        SystemPromptPlugin,
        SystemPromptConfig {
            persona: Some("Persona.".into()),
            tool_order: None,
        },
    );
    let config = ToolsConfig {
        mode,
        ..ToolsConfig::default()
    };
    let _ = root.plugin(ToolsPlugin, config);
    root.idle().await;
    let reg = registry(&root);
    let _ = root
        .provide(CodeRuntimeService(Arc::new(QuickJs::new())))
        .unwrap();
    for n in ["zulu", "alpha"] {
        let _ = reg.register(&root, tool(n)).unwrap();
    }
    root
}

fn registry(root: &Context) -> Arc<ToolRegistry> {
    root.get::<ToolRegistry>().unwrap()
}

/// Regression (issue 24, medium 4 and high 2): `run_code` output up to the engine's 64 MiB
/// became one tool result, and a loop of allowed calls had no bound on their number.
#[tokio::test]
async fn run_code_output_and_tool_calls_are_bounded_by_the_tools_entry() {
    let root = boot(PresentationMode::Code).await;
    let reg = registry(&root);
    let run = |code: &str| {
        let reg = reg.clone();
        let code = code.to_owned();
        async move {
            reg.execute(
                ToolCall {
                    call_id: "c".into(),
                    name: RUN_CODE.into(),
                    arguments: serde_json::json!({"code": code, "description": "Loop"}),
                },
                None,
            )
            .await
        }
    };
    let r = run("for (;;) console.log('x'.repeat(1024));").await;
    assert!(r.is_error, "{r:?}");
    let text = r.content.as_str().unwrap().to_owned();
    assert!(
        text.contains("outer output exceeded 262144 bytes"),
        "{text}"
    );
    assert!(
        text.len() < 300 << 10,
        "the result stays near the cap: {}",
        text.len()
    );
    let r = run("for (let i = 0; ; i++) await tools.alpha({});").await;
    assert!(r.is_error, "{r:?}");
    assert!(
        r.content
            .as_str()
            .unwrap()
            .contains("more than 1000 tool calls"),
        "{r:?}"
    );
    root.dispose();
}

#[tokio::test]
async fn run_code_runs_a_program_whose_sub_calls_go_through_the_pipeline() {
    let root = boot(PresentationMode::Native).await;
    let reg = registry(&root);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let _ =
        root.on_waterfall::<ToolsPostExecute, _, _>(Position::Back, move |v: PostExecute, next| {
            log.lock().unwrap().push(v.call.call_id.clone());
            next.run(v)
        });
    let dispatches = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = dispatches.clone();
    let _ = root.on_waterfall::<ToolsCodeDispatch, _, _>(
        Position::Back,
        move |v: CodeDispatch, next| {
            let phase = match &v.outcome {
                None => "start".to_owned(),
                Some(o) => format!("done {} {}", o.is_error, o.content),
            };
            record.lock().unwrap().push(format!(
                "{} {} {} {phase}",
                v.parent_call_id, v.sub_call_id, v.name
            ));
            next.run(v)
        },
    );
    let code = Some(ScopeKey(21));
    let _ = reg.present_as(&root, code, PresentationMode::Code).unwrap();
    let program = "const a = await tools.alpha({}); console.log('got ' + a); \
                   const z = await tools.zulu({}); return a + '+' + z;";
    let r = reg
        .execute(
            ToolCall {
                call_id: "c9".into(),
                name: RUN_CODE.into(),
                arguments: serde_json::json!({"code": program, "description": "Call two tools"}),
            },
            code,
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.content, "got alpha\nalpha+zulu");
    assert_eq!(*seen.lock().unwrap(), ["c9:code:1", "c9:code:2", "c9"]);
    assert_eq!(
        *dispatches.lock().unwrap(),
        [
            "c9 c9:code:1 alpha start",
            "c9 c9:code:1 alpha done false \"alpha\"",
            "c9 c9:code:2 zulu start",
            "c9 c9:code:2 zulu done false \"zulu\"",
        ]
    );
    let r = reg
        .execute(
            ToolCall {
                call_id: "c10".into(),
                name: RUN_CODE.into(),
                arguments: serde_json::json!({"code": "throw new Error('boom')", "description": "Fail"}),
            },
            code,
        )
        .await;
    assert!(r.is_error);
    assert!(
        r.content
            .as_str()
            .unwrap()
            .starts_with("code run failed (exception): "),
        "{r:?}"
    );
    root.dispose();
}
