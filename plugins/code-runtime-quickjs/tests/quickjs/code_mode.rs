//! The two Code Mode crates together, the way the registry integration uses them: the SDK
//! declares the scope's tools, the runtime runs the model's program against bindings, and the
//! outcome becomes the one `run_code` result (the reference's golden turn: two sub-calls, then
//! `"captured output\nCODE_ONE+CODE_TWO"`).
//!
//! A module of the engine's test binary, not a binary of `cordis-code-mode`'s own (one binary
//! links faster than two).

use std::sync::{Arc, Mutex};

use cordis_code_mode::{
    Language, RunCodeSchema, SdkTool, render_run_failure, render_run_result, render_sdk,
};
use cordis_code_runtime::{
    BoxFuture, Cancel, CodeRunRequest, CodeRuntime, Concurrency, Limits, SubCall, ToolBindings,
    ToolCallError,
};
use cordis_code_runtime_quickjs::QuickJs;
use serde_json::{Value, json};

/// A `bash` that echoes: the stand-in for the registry's pipeline, recording each sub-call id.
struct Bash {
    calls: Mutex<Vec<String>>,
}

impl ToolBindings for Bash {
    fn names(&self) -> Vec<String> {
        vec!["bash".into()]
    }
    fn concurrency(&self, _: &str) -> Concurrency {
        Concurrency::Mutating
    }
    fn call(&self, call: SubCall) -> BoxFuture<'_, Result<Value, ToolCallError>> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("call-1:code:{}", call.seq));
        Box::pin(async move {
            let command = call.arguments["command"].as_str().unwrap_or_default();
            match command.strip_prefix("echo ") {
                Some(text) => Ok(json!(format!("{text}\n"))),
                None => Err(ToolCallError::new(format!(
                    "bash: {command}: command not found"
                ))),
            }
        })
    }
}

fn bash_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The command line."}},
        "required": ["command"],
        "additionalProperties": false
    })
}

#[tokio::test]
async fn a_program_with_two_sub_calls_becomes_one_result() {
    let runtime = QuickJs::new();
    let schema = RunCodeSchema::for_language(Language::from_runtime(runtime.language()).unwrap());
    assert_eq!(
        schema.parameters["required"],
        json!(["code", "description"])
    );

    let parameters = bash_schema();
    let sdk = render_sdk(&[SdkTool {
        name: "bash",
        description: "Run a shell command.",
        parameters: &parameters,
        output_schema: Some(&json!({"type": "string"})),
    }]);
    assert!(sdk.contains("  /** Run a shell command. */\n  bash: {\n    /** The command line. */\n    command: string;\n  };"));

    let bash = Arc::new(Bash {
        calls: Mutex::new(Vec::new()),
    });
    let program = r#"
        console.log("captured output");
        const one = await tools.bash({command: "echo CODE_ONE"});
        const two = await tools.bash({command: "echo CODE_TWO"});
        return `${one.trim()}+${two.trim()}`;
    "#;
    let outcome = runtime
        .run(CodeRunRequest {
            program: program.into(),
            bindings: bash.clone(),
            limits: Limits::default(),
            cancel: Cancel::never(),
        })
        .await
        .unwrap();
    let value = outcome.result.clone().unwrap();
    assert_eq!(
        render_run_result(&outcome.log_texts(), value.as_ref()),
        "captured output\nCODE_ONE+CODE_TWO"
    );
    assert_eq!(
        *bash.calls.lock().unwrap(),
        ["call-1:code:1", "call-1:code:2"]
    );
    assert_eq!(runtime.live_threads(), 0);
}

#[tokio::test]
async fn a_failed_run_keeps_its_captured_output() {
    let runtime = QuickJs::new();
    let bash = Arc::new(Bash {
        calls: Mutex::new(Vec::new()),
    });
    let outcome = runtime
        .run(CodeRunRequest {
            program: "console.log('before'); await tools.bash({command: 'rm -rf /'});".into(),
            bindings: bash,
            limits: Limits::default(),
            cancel: Cancel::never(),
        })
        .await
        .unwrap();
    let failure = outcome.result.clone().unwrap_err();
    assert_eq!(
        render_run_failure(
            failure.kind.as_str(),
            &failure.message,
            &outcome.log_texts()
        ),
        "code run failed (exception): ToolCallError: bash: rm -rf /: command not found (from tool \"bash\")\nCaptured output:\nbefore"
    );
}
