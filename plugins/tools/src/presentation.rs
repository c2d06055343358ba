//! How a scope's tools reach the model: natively, collapsed into one `run_code` program tool
//! (Code Mode), or both.
//!
//! # Why presentation is scope state
//! The registry stays one host-plane service; the presentation is one cell on a scope's layer,
//! beside its tools, restrictions and guards. [`ToolRegistry::present_as`] writes that cell as an
//! effect of the calling scope, so it unwinds with it, and [`ToolRegistry::mode_for`] reads the
//! nearest declaration on the scope chain (a standing scope declares once; agents bound under it
//! with [`ToolRegistry::bind_parent`] inherit), else the `tools` entry's `mode`.
//!
//! # What each mode changes
//! | | `native` | `code` | `both` |
//! |---|---|---|---|
//! | view (dispatch table, catalog) | visible tools | + `run_code` | + `run_code` |
//! | what the assembly receives | visible tools | only `run_code` | visible tools + `run_code` |
//! | `tools:code-only` section | — | the rule | — |
//! | `tools:sdk` section | — | the SDK | the SDK |
//! | direct call of another tool | runs | refused before pre-execute | runs |
//!
//! [`ToolRegistry::schemas`] and [`ToolRegistry::get`] are the capability catalog and are never
//! collapsed. A native scope never finds `run_code`, whatever other scopes present.
//!
//! # Determinism
//! The SDK declares the scope's tools sorted by name in UTF-16 code-unit order (the catalog's
//! order), so its text depends on what is registered, never on registration order.

use std::fmt;

use cordis_code_mode::{
    CODE_ONLY_RULE, CODE_ONLY_SECTION, CODE_ONLY_SECTION_ORDER, SDK_SECTION, SDK_SECTION_ORDER,
    SdkTool, render_sdk,
};
use cordis_runtime::{Context, EffectHandle};
use cordis_schema::ScopeKey;
use cordis_system_prompt::{AssembleContext, Section};
use serde::{Deserialize, Serialize};

use crate::error::RegisterError;
use crate::registry::{RUN_CODE, ToolRegistry};

/// How a scope's tools are presented to the model.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum PresentationMode {
    /// Every visible tool is a model-facing tool (the default).
    #[default]
    Native,
    /// Only `run_code` is model-facing; the other tools are reached from inside its programs.
    Code,
    /// Every visible tool plus `run_code`.
    Both,
}

impl PresentationMode {
    /// The config spelling: `native`, `code` or `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Code => "code",
            Self::Both => "both",
        }
    }
}

impl fmt::Display for PresentationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The default of `maxParallelSubCalls`: read-only sub-calls of one run that may overlap.
pub const DEFAULT_MAX_PARALLEL_SUB_CALLS: usize = 10;

/// The registry-wide presentation settings (the `tools` entry's `mode` and
/// `maxParallelSubCalls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Presentation {
    /// The mode of every scope that declares none.
    pub mode: PresentationMode,
    /// How many read-only sub-calls of one `run_code` run may overlap (≥ 1).
    pub max_parallel_sub_calls: usize,
    /// How many tool calls one `run_code` run may make in all (≥ 1).
    pub max_sub_calls: u64,
    /// Bytes of output (logs and result) one `run_code` run may produce, the one tool result
    /// the model reads and the log keeps (≥ 4).
    pub max_output_bytes: usize,
}

/// The default of `maxOutputBytes`: 256 KiB of `run_code` output, a tool result a model can
/// still read (the engine's own ceiling is 64 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 256 << 10;

impl Default for Presentation {
    fn default() -> Self {
        Presentation {
            mode: PresentationMode::Native,
            max_parallel_sub_calls: DEFAULT_MAX_PARALLEL_SUB_CALLS,
            max_sub_calls: cordis_code_runtime::DEFAULT_MAX_SUB_CALLS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

impl ToolRegistry {
    /// Declares how `scope`'s tools (and those of every scope bound under it that declares
    /// nothing) are presented, as an effect of `ctx`'s scope.
    ///
    /// # Errors
    /// [`RegisterError::PresentUnscoped`] for `scope: None` (the registry-wide default is the
    /// `tools` entry's `mode`), [`RegisterError::PresentConflict`] when `scope` already declared
    /// one, [`RegisterError::ScopeGone`] for a dead `ctx`.
    pub fn present_as(
        &self,
        ctx: &Context,
        scope: Option<ScopeKey>,
        mode: PresentationMode,
    ) -> Result<EffectHandle, RegisterError> {
        let Some(key) = scope else {
            return Err(RegisterError::PresentUnscoped);
        };
        self.write(
            ctx,
            Some(key),
            "tools presentation",
            true,
            move |store| {
                let id = store.next_id();
                let layer = store.layer_mut(Some(key));
                if let Some((_, old)) = layer.mode {
                    return Err(RegisterError::PresentConflict { new: mode, old });
                }
                layer.mode = Some((id, mode));
                Ok(id)
            },
            move |store, id| {
                if let Some(layer) = store.layer_mut_existing(Some(key))
                    && layer.mode.is_some_and(|(i, _)| i == id)
                {
                    layer.mode = None;
                }
            },
        )
    }

    /// The mode of `scope`: the nearest declaration on its chain, else the registry default.
    pub fn mode_for(&self, scope: Option<ScopeKey>) -> PresentationMode {
        self.inner.mode_for(scope)
    }

    /// The registry-wide settings (default mode, sub-call parallelism).
    pub fn presentation(&self) -> Presentation {
        self.inner.presentation
    }

    /// The concurrency class of the tool `name` visible in `scope`, if there is one.
    pub fn concurrency(&self, name: &str, scope: Option<ScopeKey>) -> Option<crate::Concurrency> {
        self.inner
            .visible_tool(scope, name)
            .map(|r| r.def.concurrency)
    }

    /// The `tools:sdk` section text for `scope`: empty for a native scope, else the SDK
    /// declaring the scope's tools (sorted by UTF-16 code units, `run_code` excluded).
    pub fn sdk_text(&self, scope: Option<ScopeKey>) -> String {
        self.inner.sdk_text(scope)
    }

    /// The two Code Mode sections (`tools:code-only`, `tools:sdk`); each renders empty — and
    /// is dropped from the assembly — for a scope whose mode does not call for it.
    pub(crate) fn sections(&self) -> [Section; 2] {
        let weak = std::sync::Arc::downgrade(&self.inner);
        let rule = Section::dynamic(
            CODE_ONLY_SECTION,
            CODE_ONLY_SECTION_ORDER as f64,
            move |cx: &AssembleContext| match weak.upgrade() {
                Some(inner) if inner.mode_for(cx.scope) == PresentationMode::Code => {
                    CODE_ONLY_RULE.to_owned()
                }
                _ => String::new(),
            },
        );
        let weak = std::sync::Arc::downgrade(&self.inner);
        let sdk = Section::dynamic(
            SDK_SECTION,
            SDK_SECTION_ORDER as f64,
            move |cx: &AssembleContext| {
                weak.upgrade()
                    .map(|inner| inner.sdk_text(cx.scope))
                    .unwrap_or_default()
            },
        );
        [rule, sdk]
    }
}

impl crate::registry::Inner {
    pub(crate) fn sdk_text(&self, scope: Option<ScopeKey>) -> String {
        // A native scope's SDK is empty: its view is not built (the mode read here is as good
        // a snapshot as the one `view_and_mode` would take).
        if self.mode_for(scope) == PresentationMode::Native {
            return String::new();
        }
        let (view, mode) = self.view_and_mode(scope);
        if mode == PresentationMode::Native {
            return String::new();
        }
        // `visible` is a BTreeMap; render_sdk sorts by UTF-16 code units itself.
        let tools: Vec<SdkTool<'_>> = view
            .visible
            .iter()
            .filter(|(name, _)| name.as_str() != RUN_CODE)
            .map(|(_, r)| SdkTool {
                name: &r.def.schema.name,
                description: &r.def.schema.description,
                parameters: &r.def.schema.parameters,
                output_schema: r.def.output_schema.as_ref(),
            })
            .collect();
        render_sdk(&tools)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use cordis_code_mode::collapsed_call_message;
    use cordis_code_runtime::CodeRuntimeService;
    use cordis_runtime::prelude::*;
    use cordis_system_prompt::{SystemPrompt, SystemPromptConfig, SystemPromptPlugin, ToolOrder};

    use super::*;
    use crate::definition::{ToolCall, codes};
    use crate::execute::{PreExecute, ToolsPreExecute};
    use crate::plugin::{ToolPresentationConfig, ToolPresentationPlugin, ToolsConfig, ToolsPlugin};
    use crate::test_support::{names, tool};

    /// A JavaScript runtime that runs nothing: these tests need one to exist (the mode and the
    /// SDK depend on its language), not to run programs. Programs run through the registry on
    /// the real engine in `cordis-code-runtime-quickjs`'s tests, so this crate never builds it.
    struct StubRuntime;

    impl cordis_code_runtime::CodeRuntime for StubRuntime {
        fn language(&self) -> &str {
            "javascript"
        }
        fn isolation(&self) -> &str {
            "test-stub"
        }
        fn run(
            &self,
            _request: cordis_code_runtime::CodeRunRequest,
        ) -> cordis_code_runtime::BoxFuture<
            'static,
            Result<cordis_code_runtime::CodeRunOutcome, cordis_code_runtime::CodeRuntimeError>,
        > {
            unreachable!("the stub runtime is never asked to run a program")
        }
    }

    fn stub_runtime() -> CodeRuntimeService {
        CodeRuntimeService(Arc::new(StubRuntime))
    }

    async fn boot(mode: PresentationMode, tool_order: Option<Vec<&str>>) -> Context {
        let root = Context::root();
        let _ = root.plugin(
            SystemPromptPlugin,
            SystemPromptConfig {
                persona: Some("Persona.".into()),
                tool_order: tool_order
                    .map(|o| ToolOrder::new(o.into_iter().map(String::from).collect()).unwrap()),
            },
        );
        let config = ToolsConfig {
            mode,
            ..ToolsConfig::default()
        };
        let _ = root.plugin(ToolsPlugin, config);
        root.idle().await;
        let reg = root.get::<ToolRegistry>().expect("tools active");
        let _ = root.provide(stub_runtime()).unwrap();
        for n in ["zulu", "alpha", "\u{1F600}_smile", "\u{FF5E}_wave"] {
            let _ = reg.register(&root, tool(n)).unwrap();
        }
        root
    }

    fn registry(root: &Context) -> Arc<ToolRegistry> {
        root.get::<ToolRegistry>().unwrap()
    }

    async fn assemble(
        root: &Context,
        scope: Option<ScopeKey>,
    ) -> cordis_system_prompt::PromptAssembly {
        let sp = root.get::<SystemPrompt>().unwrap();
        let cx = match scope {
            Some(s) => AssembleContext::scoped(s),
            None => AssembleContext::global(),
        };
        sp.assemble(cx).await.unwrap()
    }

    fn section_names(a: &cordis_system_prompt::PromptAssembly) -> Vec<String> {
        a.sections
            .iter()
            .filter(|s| !s.text.is_empty())
            .map(|s| s.name.clone())
            .collect()
    }

    fn call(name: &str) -> ToolCall {
        ToolCall {
            call_id: "c1".into(),
            name: name.into(),
            arguments: serde_json::json!({}),
        }
    }

    #[tokio::test]
    async fn each_mode_gives_the_assembly_its_own_tools_and_sections() {
        let root = boot(PresentationMode::Native, None).await;
        let reg = registry(&root);
        let (code, both, native) = (ScopeKey(901), ScopeKey(902), ScopeKey(903));
        let _ = reg
            .present_as(&root, Some(code), PresentationMode::Code)
            .unwrap();
        let _ = reg
            .present_as(&root, Some(both), PresentationMode::Both)
            .unwrap();

        let a = assemble(&root, Some(native)).await;
        assert_eq!(
            names(&a.tools),
            ["alpha", "zulu", "\u{1F600}_smile", "\u{FF5E}_wave"]
        );
        assert_eq!(section_names(&a), ["deployment:persona"]);

        let a = assemble(&root, Some(code)).await;
        assert_eq!(names(&a.tools), [RUN_CODE]);
        assert_eq!(
            section_names(&a),
            ["deployment:persona", CODE_ONLY_SECTION, SDK_SECTION],
            "the code-only rule precedes the SDK"
        );
        let sdk = &a
            .sections
            .iter()
            .find(|s| s.name == SDK_SECTION)
            .unwrap()
            .text;
        for n in ["zulu", "alpha", "\"\u{FF5E}_wave\""] {
            assert!(
                sdk.contains(&format!("  {n}: ")),
                "{n} not declared:\n{sdk}"
            );
        }
        assert!(
            !sdk.contains("run_code:"),
            "run_code is never its own binding"
        );

        let a = assemble(&root, Some(both)).await;
        assert_eq!(
            names(&a.tools),
            [
                "alpha",
                RUN_CODE,
                "zulu",
                "\u{1F600}_smile",
                "\u{FF5E}_wave"
            ]
        );
        assert_eq!(section_names(&a), ["deployment:persona", SDK_SECTION]);
        // The capability catalog is not collapsed.
        assert_eq!(reg.schemas(Some(code)).len(), 5);
        assert!(reg.get("alpha", Some(code)).is_some());
        root.dispose();
        assert!(root.live().is_zero(), "{:?}", root.live());
    }

    #[tokio::test]
    async fn run_code_stays_out_of_a_native_scopes_dispatch_table() {
        let root = boot(PresentationMode::Native, None).await;
        let reg = registry(&root);
        let _ = reg
            .present_as(&root, Some(ScopeKey(1)), PresentationMode::Code)
            .unwrap();
        let native = Some(ScopeKey(2));
        assert!(reg.get(RUN_CODE, native).is_none());
        assert!(reg.get(RUN_CODE, None).is_none());
        assert!(reg.get(RUN_CODE, Some(ScopeKey(1))).is_some());
        let r = reg.execute(call(RUN_CODE), native).await;
        assert_eq!(r.code.as_deref(), Some(codes::UNKNOWN_TOOL));
        assert_eq!(r.content, "unknown tool \"run_code\"");
        root.dispose();
    }

    #[tokio::test]
    async fn a_parented_scope_inherits_its_parents_mode_and_a_sibling_stays_native() {
        let root = boot(PresentationMode::Native, None).await;
        let reg = registry(&root);
        let (standing, joined, sibling) = (ScopeKey(10), ScopeKey(11), ScopeKey(12));
        let _ = reg.bind_parent(&root, joined, standing).unwrap();
        let _ = reg
            .present_as(&root, Some(standing), PresentationMode::Code)
            .unwrap();
        assert_eq!(reg.mode_for(Some(joined)), PresentationMode::Code);
        assert_eq!(reg.mode_for(Some(sibling)), PresentationMode::Native);
        assert_eq!(
            names(&assemble(&root, Some(joined)).await.tools),
            [RUN_CODE]
        );
        assert_eq!(assemble(&root, Some(sibling)).await.tools.len(), 4);
        // The nearest declaration wins: the joined scope opts out.
        let _ = reg
            .present_as(&root, Some(joined), PresentationMode::Native)
            .unwrap();
        assert_eq!(reg.mode_for(Some(joined)), PresentationMode::Native);
        root.dispose();
    }

    #[tokio::test]
    async fn an_opt_out_of_a_code_deployment_gets_no_sdk() {
        let root = boot(PresentationMode::Code, None).await;
        let reg = registry(&root);
        let out = ScopeKey(5);
        let _ = reg
            .present_as(&root, Some(out), PresentationMode::Native)
            .unwrap();
        let a = assemble(&root, Some(out)).await;
        assert_eq!(a.tools.len(), 4);
        assert_eq!(section_names(&a), ["deployment:persona"]);
        assert!(!a.render().unwrap().contains("run_code"));
        let global = assemble(&root, None).await;
        assert_eq!(names(&global.tools), [RUN_CODE]);
        root.dispose();
    }

    #[tokio::test]
    async fn disposing_the_declaring_scope_restores_the_default() {
        let root = boot(PresentationMode::Native, None).await;
        let reg = registry(&root);
        let agent = root.child_scope("agent");
        let actx = agent.context().unwrap();
        let a = ScopeKey::from(agent.id());
        let _ = reg
            .present_as(&actx, Some(a), PresentationMode::Code)
            .unwrap();
        assert!(reg.has_layer(a), "a layer holding only a mode is kept");
        assert_eq!(names(&assemble(&root, Some(a)).await.tools), [RUN_CODE]);
        agent.dispose();
        assert_eq!(reg.mode_for(Some(a)), PresentationMode::Native);
        assert!(!reg.has_layer(a), "the emptied layer is dropped");
        assert_eq!(assemble(&root, Some(a)).await.tools.len(), 4);
        assert!(reg.get(RUN_CODE, Some(a)).is_none());
        root.dispose();
        assert!(root.live().is_zero(), "{:?}", root.live());
    }

    #[tokio::test]
    async fn a_non_native_assembly_without_a_code_runtime_fails_naming_the_mode() {
        let root = Context::root();
        let _ = root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        let _ = root.plugin(ToolsPlugin, ToolsConfig::default());
        root.idle().await;
        let reg = registry(&root);
        let _ = reg.register(&root, tool("alpha")).unwrap();
        let both = Some(ScopeKey(6));
        let _ = reg.present_as(&root, both, PresentationMode::Both).unwrap();
        let sp = root.get::<SystemPrompt>().unwrap();
        let err = sp
            .assemble(AssembleContext::scoped(ScopeKey(6)))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "tools: mode \"both\" requires a code runtime: load the `code-runtime` plugin or present this scope as \"native\""
        );
        // A native assembly needs none.
        assert_eq!(assemble(&root, None).await.tools.len(), 1);
        root.dispose();
    }

    #[tokio::test]
    async fn a_second_declaration_and_an_unscoped_one_are_refused() {
        let root = boot(PresentationMode::Native, None).await;
        let reg = registry(&root);
        let _ = reg
            .present_as(&root, Some(ScopeKey(3)), PresentationMode::Code)
            .unwrap();
        let err = reg
            .present_as(&root, Some(ScopeKey(3)), PresentationMode::Both)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "tools.present_as(\"both\") conflicts with \"code\" already declared for this scope; one composition selects one presentation"
        );
        let err = reg
            .present_as(&root, None, PresentationMode::Code)
            .unwrap_err();
        assert_eq!(err, RegisterError::PresentUnscoped);
        assert!(
            err.to_string()
                .contains("the `mode` field of the tools entry"),
            "{err}"
        );
        assert_eq!(reg.mode_for(None), PresentationMode::Native);
        root.dispose();
    }

    #[tokio::test]
    async fn a_direct_call_under_code_is_refused_before_pre_execute_and_guards() {
        let root = boot(PresentationMode::Native, None).await;
        let reg = registry(&root);
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let _ = root.on_waterfall::<ToolsPreExecute, _, _>(
            Position::Back,
            move |v: PreExecute, next| {
                counter.fetch_add(1, Ordering::SeqCst);
                next.run(v)
            },
        );
        let guarded = seen.clone();
        let _ = reg
            .guard(&root, None, move |_, _| {
                guarded.fetch_add(100, Ordering::SeqCst);
                None
            })
            .unwrap();
        let code = Some(ScopeKey(7));
        let _ = reg.present_as(&root, code, PresentationMode::Code).unwrap();
        let r = reg.execute(call("alpha"), code).await;
        assert_eq!(r.code.as_deref(), Some(codes::UNKNOWN_TOOL));
        assert_eq!(
            r.content,
            "unknown tool \"alpha\": only `run_code` is callable directly — call `alpha` from inside a `run_code` program instead"
        );
        assert_eq!(r.content, collapsed_call_message("alpha"));
        assert_eq!(
            seen.load(Ordering::SeqCst),
            0,
            "nothing ran before the refusal"
        );
        // An unknown name keeps the plain text; `both` does not collapse.
        let r = reg.execute(call("ghost"), code).await;
        assert_eq!(r.content, "unknown tool \"ghost\"");
        let both = Some(ScopeKey(8));
        let _ = reg.present_as(&root, both, PresentationMode::Both).unwrap();
        assert!(!reg.execute(call("alpha"), both).await.is_error);
        root.dispose();
    }

    #[tokio::test]
    async fn a_tool_order_naming_a_native_tool_fails_the_assembly_under_code() {
        let root = boot(
            PresentationMode::Native,
            Some(vec!["alpha", "<unlisted-tools>"]),
        )
        .await;
        let reg = registry(&root);
        let code = ScopeKey(4);
        let sp = root.get::<SystemPrompt>().unwrap();
        assert!(
            sp.assemble(AssembleContext::scoped(ScopeKey(99)))
                .await
                .is_ok()
        );
        let _ = reg
            .present_as(&root, Some(code), PresentationMode::Code)
            .unwrap();
        let err = sp
            .assemble(AssembleContext::scoped(code))
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("toolOrder lists unregistered tool \"alpha\""),
            "{err}"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn the_sdk_text_is_byte_identical_across_assemblies() {
        let first = {
            let root = boot(PresentationMode::Code, None).await;
            let a = assemble(&root, None).await.render().unwrap();
            let b = assemble(&root, None).await.render().unwrap();
            assert_eq!(a, b);
            root.dispose();
            a
        };
        // Another process registering the same tools in another order.
        let root = Context::root();
        let _ = root.plugin(
            SystemPromptPlugin,
            SystemPromptConfig {
                persona: Some("Persona.".into()),
                tool_order: None,
            },
        );
        let config = ToolsConfig {
            mode: PresentationMode::Code,
            ..ToolsConfig::default()
        };
        let _ = root.plugin(ToolsPlugin, config);
        root.idle().await;
        let reg = registry(&root);
        let _ = root.provide(stub_runtime()).unwrap();
        for n in ["\u{FF5E}_wave", "\u{1F600}_smile", "alpha", "zulu"] {
            let _ = reg.register(&root, tool(n)).unwrap();
        }
        assert_eq!(assemble(&root, None).await.render().unwrap(), first);
        assert!(first.contains("declare const tools"), "{first}");
        root.dispose();
    }

    #[tokio::test]
    async fn the_presentation_plugin_waits_for_a_code_runtime_and_unwinds_with_its_scope() {
        let root = Context::root();
        let _ = root.plugin(SystemPromptPlugin, SystemPromptConfig::default());
        let _ = root.plugin(ToolsPlugin, ToolsConfig::default());
        root.idle().await;
        let reg = registry(&root);
        let entry = root.plugin(
            ToolPresentationPlugin,
            ToolPresentationConfig {
                mode: PresentationMode::Code,
            },
        );
        root.idle().await;
        let key = ScopeKey::from(entry.id());
        assert_eq!(reg.mode_for(Some(key)), PresentationMode::Native, "pending");
        let runtime = root.provide(stub_runtime()).unwrap();
        root.idle().await;
        assert_eq!(reg.mode_for(Some(key)), PresentationMode::Code);
        runtime.dispose();
        assert_eq!(reg.mode_for(Some(key)), PresentationMode::Native);
        root.dispose();
        assert!(root.live().is_zero(), "{:?}", root.live());
    }
}

#[cfg(test)]
mod proptests {
    use cordis_runtime::Context;
    use proptest::prelude::*;

    use super::*;
    use crate::test_support::tool;

    const NAMES: [&str; 7] = [
        "zulu",
        "alpha",
        "\u{1F600}_smile",
        "\u{FF5E}_wave",
        "my-tool",
        "Echelle",
        "__proto__",
    ];

    fn sdk_after_registering(order: &[usize]) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let root = Context::root();
        let reg = ToolRegistry::with_presentation(
            root.clone(),
            Presentation {
                mode: PresentationMode::Code,
                ..Presentation::default()
            },
        );
        for &i in order {
            let mut def = tool(NAMES[i]);
            def.schema.parameters = serde_json::json!({
                "type": "object",
                "properties": {"n": {"type": "integer", "description": format!("n of {i}")}}
            })
            .into();
            let _ = reg.register(&root, def).unwrap();
        }
        let text = reg.sdk_text(None);
        root.dispose();
        text
    }

    proptest! {
        #[test]
        fn the_sdk_text_does_not_depend_on_registration_order(
            order in Just((0..NAMES.len()).collect::<Vec<_>>()).prop_shuffle()
        ) {
            let sorted: Vec<usize> = (0..NAMES.len()).collect();
            prop_assert_eq!(sdk_after_registering(&order), sdk_after_registering(&sorted));
        }
    }
}
