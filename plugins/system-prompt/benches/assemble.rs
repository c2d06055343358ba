//! `assemble()` with 1,000 tools against the floor: a bare sort + clone of 1,000 schemas.

use cordis_runtime::Context;
use cordis_system_prompt::{
    AssembleContext, SystemPrompt, ToolProviderResult, ToolSchema, compare_utf16,
};

fn main() {
    divan::main();
}

const TOOLS: usize = 1_000;

fn schemas() -> Vec<ToolSchema> {
    // A fixed scramble (multiplication by a unit mod 1000) so the input is not presorted.
    (0..TOOLS)
        .map(|i| ToolSchema {
            name: format!("tool_{:04}", (i * 617) % TOOLS),
            description: "A benchmark tool.".to_owned(),
            parameters:
                serde_json::json!({"type": "object", "properties": {"x": {"type": "string"}}})
                    .into(),
        })
        .collect()
}

#[divan::bench]
fn assemble_1000_tools(bencher: divan::Bencher) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let root = rt.block_on(async { Context::root() });
    let prompt = SystemPrompt::new(root.clone(), None).expect("no toolOrder is valid");
    let all = schemas();
    let _ = prompt
        .tools(&root, move |_| ToolProviderResult {
            schemas: all.clone(),
            known_names: None,
            unavailable: None,
        })
        .expect("root is live");
    bencher.bench_local(|| {
        rt.block_on(prompt.assemble(AssembleContext::global()))
            .expect("assembles")
    });
    root.dispose();
}

#[divan::bench]
fn sort_and_clone_1000_schemas(bencher: divan::Bencher) {
    let all = schemas();
    bencher.bench_local(|| {
        let mut copy = all.clone();
        copy.sort_by(|a, b| compare_utf16(&a.name, &b.name));
        copy
    });
}
