//! Executing a call: `tools/pre-execute` (may deny) → resolve → argument check → guards (may
//! deny) → the approval stage (may ask someone, may deny) → dispatch (timeout, panic
//! containment) → `tools/post-execute`. Each stage is its own function, so a new stage (a
//! presentation transport) slots in between two others.
//!
//! Every failure becomes an error [`ToolResult`]; `execute` never panics and never returns `Err`,
//! because the agent loop must always be able to hand the model a result for each call.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cordis_runtime::Waterfall;
use cordis_schema::ScopeKey;
use futures_util::FutureExt;

use crate::definition::{Clearance, ToolCall, ToolCallContext, ToolResult, codes};
use crate::presentation::PresentationMode;
use crate::registry::{RUN_CODE, Registered, ToolRegistry};

/// What a `tools/pre-execute` listener decides.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Decision {
    /// Go on.
    #[default]
    Allow,
    /// Stop with this reason.
    Deny(String),
}

/// The `tools/pre-execute` waterfall: listeners may rewrite the call or deny it.
pub struct ToolsPreExecute;

/// The value flowing through [`ToolsPreExecute`].
#[derive(Debug, Clone, PartialEq)]
pub struct PreExecute {
    /// The call (listeners may rewrite its arguments).
    pub call: ToolCall,
    /// The scope it runs in.
    pub scope: Option<ScopeKey>,
    /// Allow or deny.
    pub decision: Decision,
}

impl Waterfall for ToolsPreExecute {
    const NAME: &'static str = "tools/pre-execute";
    type Value = PreExecute;
}

/// The `tools/post-execute` waterfall: listeners see (and may change) the result.
pub struct ToolsPostExecute;

/// The value flowing through [`ToolsPostExecute`].
#[derive(Debug, Clone, PartialEq)]
pub struct PostExecute {
    /// The call as dispatched.
    pub call: ToolCall,
    /// The scope it ran in.
    pub scope: Option<ScopeKey>,
    /// The result so far.
    pub result: ToolResult,
}

impl Waterfall for ToolsPostExecute {
    const NAME: &'static str = "tools/post-execute";
    type Value = PostExecute;
}

use cordis_runtime::panic_message as panic_text;

/// How far a call got before `tools/post-execute`.
pub(crate) enum Dispatched {
    /// Refused before it could run (collapsed or denied by pre-execute): its final result.
    Refused(ToolResult),
    /// It went through admission (and ran, unless refused there): the call as dispatched and
    /// its result, for post-execute.
    Ran(ToolCall, ToolResult),
}

impl ToolRegistry {
    /// Executes `call` as seen from `scope`.
    ///
    /// The pipeline, in order: `tools/pre-execute` (may rewrite or deny) → resolve the visible
    /// tool (`UNKNOWN_TOOL`) → check the arguments against its schema (`INVALID_ARGUMENTS`) →
    /// guards (`DENIED`) → run the handler (`TOOL_ERROR`, `TOOL_PANICKED`, `TOOL_TIMEOUT`) →
    /// `tools/post-execute`. Guards see only calls that could run, with checked arguments.
    ///
    /// # Cancel safety
    /// Dropping the future drops the running handler future.
    ///
    /// Under a `code` presentation, a direct call of any visible tool but `run_code` is refused
    /// first, before pre-execute, guards and approval (`UNKNOWN_TOOL`, with a message telling the
    /// model to call it from inside `run_code`).
    pub async fn execute(&self, call: ToolCall, scope: Option<ScopeKey>) -> ToolResult {
        match self.dispatch(call, scope, None).await {
            Dispatched::Refused(result) => result,
            Dispatched::Ran(call, result) => self.post_execute(call, scope, result).await,
        }
    }

    /// Every stage before `tools/post-execute`. `parent` is the id of the `run_code` call a
    /// sub-call belongs to: a sub-call is exempt from the collapse.
    pub(crate) async fn dispatch(
        &self,
        call: ToolCall,
        scope: Option<ScopeKey>,
        parent: Option<&str>,
    ) -> Dispatched {
        if parent.is_none()
            && call.name != RUN_CODE
            && let (view, PresentationMode::Code) = self.inner.view_and_mode(scope)
            && view.visible.contains_key(&call.name)
        {
            let message = cordis_code_mode::collapsed_call_message(&call.name);
            return Dispatched::Refused(ToolResult::error(&call, codes::UNKNOWN_TOOL, message));
        }
        let call = match self.pre_execute(call, scope).await {
            Ok(call) => call,
            Err(result) => return Dispatched::Refused(result),
        };
        let result = match self.admit(&call, scope) {
            Ok(tool) => match self.approve(&call, scope, &tool).await {
                Ok(clearance) => run(&tool, &call, scope, clearance).await,
                Err(result) => result,
            },
            Err(result) => result,
        };
        Dispatched::Ran(call, result)
    }

    /// `tools/post-execute`: the result as listeners leave it.
    pub(crate) async fn post_execute(
        &self,
        call: ToolCall,
        scope: Option<ScopeKey>,
        result: ToolResult,
    ) -> ToolResult {
        let post = PostExecute {
            call: call.clone(),
            scope,
            result,
        };
        match self.inner.ctx.waterfall::<ToolsPostExecute>(post).await {
            Ok(post) => post.result,
            Err(e) => ToolResult::error(&call, codes::INTERNAL, e.to_string()),
        }
    }

    /// `tools/pre-execute`: the call as listeners left it, or the denial.
    async fn pre_execute(
        &self,
        call: ToolCall,
        scope: Option<ScopeKey>,
    ) -> Result<ToolCall, ToolResult> {
        let pre = PreExecute {
            call: call.clone(),
            scope,
            decision: Decision::Allow,
        };
        let pre = self
            .inner
            .ctx
            .waterfall::<ToolsPreExecute>(pre)
            .await
            .map_err(|e| ToolResult::error(&call, codes::INTERNAL, e.to_string()))?;
        match pre.decision {
            Decision::Allow => Ok(pre.call),
            Decision::Deny(reason) => Err(ToolResult::error(&pre.call, codes::DENIED, reason)),
        }
    }

    /// Resolves the tool, checks the arguments, then asks the guards.
    fn admit(
        &self,
        call: &ToolCall,
        scope: Option<ScopeKey>,
    ) -> Result<Arc<Registered>, ToolResult> {
        let Some(tool) = self.inner.visible_tool(scope, &call.name) else {
            return Err(ToolResult::error(
                call,
                codes::UNKNOWN_TOOL,
                self.unknown_message(&call.name, scope),
            ));
        };
        tool.arguments
            .check(&call.name, &call.arguments)
            .map_err(|message| ToolResult::error(call, codes::INVALID_ARGUMENTS, message))?;
        for guard in self.inner.guards(scope) {
            // A panicking guard fails closed: a broken policy must not become an allow.
            let denial = catch_unwind(AssertUnwindSafe(|| guard(call, scope)))
                .unwrap_or_else(|p| Some(format!("tool guard panicked: {}", panic_text(&*p))));
            if let Some(reason) = denial {
                return Err(ToolResult::error(call, codes::DENIED, reason));
            }
        }
        Ok(tool)
    }
}

impl ToolRegistry {
    /// Why `name` is not a tool `scope` can call: a name two entries contest is named as such
    /// (with the entries), so neither the model nor a person takes it for a missing tool.
    fn unknown_message(&self, name: &str, scope: Option<ScopeKey>) -> String {
        let spaces = std::iter::once(None).chain(
            scope
                .map(|s| self.chain(s))
                .unwrap_or_default()
                .into_iter()
                .map(|k| Some(k.0)),
        );
        for space in spaces {
            let holders = self
                .inner
                .ctx
                .claim_holders(&cordis_runtime::Claim::tool(name).in_space(space));
            if holders.len() > 1 {
                return format!(
                    "tool \"{name}\" is contested: entries {} each register it, so neither is offered until one of them leaves (cordis check names them)",
                    holders.join(" and ")
                );
            }
        }
        format!("unknown tool \"{name}\"")
    }

    /// The approval stage's verdict on an admitted call (a panicking stage fails closed).
    async fn approve(
        &self,
        call: &ToolCall,
        scope: Option<ScopeKey>,
        tool: &Registered,
    ) -> Result<Clearance, ToolResult> {
        let Some(stage) = self.inner.approval() else {
            return Ok(Clearance::Full);
        };
        let verdict = catch_unwind(AssertUnwindSafe(|| stage.approve(call, scope, &tool.def)));
        let verdict = match verdict {
            Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
            Err(payload) => Err(payload),
        };
        match verdict {
            Ok(Ok(clearance)) => Ok(clearance),
            Ok(Err(reason)) => Err(ToolResult::error(call, codes::DENIED, reason)),
            Err(payload) => Err(ToolResult::error(
                call,
                codes::DENIED,
                format!("the approval stage panicked: {}", panic_text(&*payload)),
            )),
        }
    }
}

/// Runs the handler with its timeout, containing panics.
async fn run(
    tool: &Registered,
    call: &ToolCall,
    scope: Option<ScopeKey>,
    clearance: Clearance,
) -> ToolResult {
    let cx = ToolCallContext {
        call_id: call.call_id.clone(),
        scope,
        clearance,
    };
    let handler = tool.def.handler.clone();
    let args = call.arguments.clone();
    let timeout = tool.def.timeout;
    // Both the synchronous call and the future are inside catch_unwind: a handler may panic
    // before returning its future, while polling it, or (no time driver) in the timer.
    let run = async move {
        let fut = handler(args, cx);
        match timeout {
            Some(limit) => tokio::time::timeout(limit, fut).await.ok(),
            None => Some(fut.await),
        }
    };
    match AssertUnwindSafe(run).catch_unwind().await {
        Ok(Some(Ok(output))) => ToolResult::ok(call, output.content),
        Ok(Some(Err(message))) => ToolResult::error(call, codes::TOOL_ERROR, message),
        Ok(None) => ToolResult::error(
            call,
            codes::TOOL_TIMEOUT,
            format!(
                "tool \"{}\" did not finish within {} ms (timeout)",
                call.name,
                timeout.unwrap_or_default().as_millis()
            ),
        ),
        Err(payload) => ToolResult::error(
            call,
            codes::TOOL_PANICKED,
            format!("tool \"{}\" panicked: {}", call.name, panic_text(&*payload)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cordis_runtime::{Context, Position};
    use cordis_schema::ToolSchema;

    use super::*;
    use crate::definition::{ToolDefinition, ToolOutput};
    use crate::registry::Restriction;
    use crate::test_support::tool;

    fn call(name: &str) -> ToolCall {
        ToolCall {
            call_id: "c1".into(),
            name: name.into(),
            arguments: serde_json::json!({}),
        }
    }

    fn schema(name: &str) -> ToolSchema {
        tool(name).schema
    }

    #[tokio::test]
    async fn a_known_tool_runs_and_returns_its_output() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.register(&root, tool("echo")).unwrap();
        let result = reg.execute(call("echo"), None).await;
        assert_eq!(result, ToolResult::ok(&call("echo"), "echo".into()));
        root.dispose();
    }

    #[tokio::test]
    async fn an_unknown_or_restricted_tool_is_an_unknown_tool_result() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let result = reg.execute(call("ghost"), None).await;
        assert!(result.is_error);
        assert_eq!(result.code.as_deref(), Some(codes::UNKNOWN_TOOL));
        assert_eq!(result.content, "unknown tool \"ghost\"");
        let _ = reg.register(&root, tool("bash")).unwrap();
        let s = ScopeKey(1);
        let _ = reg
            .restrict(
                &root,
                s,
                Restriction {
                    allow: None,
                    deny: Some(vec!["bash".into()]),
                },
            )
            .unwrap();
        let result = reg.execute(call("bash"), Some(s)).await;
        assert_eq!(result.code.as_deref(), Some(codes::UNKNOWN_TOOL));
        assert!(!reg.execute(call("bash"), None).await.is_error);
        root.dispose();
    }

    #[tokio::test]
    async fn a_handler_error_panic_or_timeout_becomes_an_error_result() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let failing = ToolDefinition::new(schema("fails"), |_, _| async {
            Err::<ToolOutput, _>("disk full".to_owned())
        });
        let panicking = ToolDefinition::new(schema("panics"), |_, _| async {
            panic!("handler exploded")
        });
        let eager = ToolDefinition {
            schema: schema("eager"),
            handler: std::sync::Arc::new(|_, _| panic!("before the future")),
            timeout: None,
            concurrency: crate::Concurrency::Mutating,
            output_schema: None,
            effect: crate::Effect::Unknown,
            confined: false,
        };
        let slow = ToolDefinition::new(schema("slow"), |_, _| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(ToolOutput::new("late"))
        })
        .with_timeout(Duration::from_millis(20));
        for def in [failing, panicking, eager, slow] {
            let _ = reg.register(&root, def).unwrap();
        }
        let r = reg.execute(call("fails"), None).await;
        assert_eq!(
            (r.code.as_deref(), r.content.as_str()),
            (Some(codes::TOOL_ERROR), Some("disk full"))
        );
        let r = reg.execute(call("panics"), None).await;
        assert_eq!(r.code.as_deref(), Some(codes::TOOL_PANICKED));
        assert_eq!(r.content, "tool \"panics\" panicked: handler exploded");
        let r = reg.execute(call("eager"), None).await;
        assert_eq!(r.code.as_deref(), Some(codes::TOOL_PANICKED));
        let r = reg.execute(call("slow"), None).await;
        assert_eq!(r.code.as_deref(), Some(codes::TOOL_TIMEOUT));
        assert_eq!(
            r.content,
            "tool \"slow\" did not finish within 20 ms (timeout)"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn a_guard_denies_and_a_panicking_guard_fails_closed() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.register(&root, tool("bash")).unwrap();
        let _ = reg.register(&root, tool("read")).unwrap();
        let s = ScopeKey(1);
        let _ = reg
            .guard(&root, Some(s), |c, _| {
                (c.name == "bash").then(|| "no shell here".to_owned())
            })
            .unwrap();
        let r = reg.execute(call("bash"), Some(s)).await;
        assert_eq!(
            (r.code.as_deref(), r.content.as_str()),
            (Some(codes::DENIED), Some("no shell here"))
        );
        assert!(
            !reg.execute(call("bash"), None).await.is_error,
            "the guard is scoped"
        );
        assert!(!reg.execute(call("read"), Some(s)).await.is_error);
        let g = reg
            .guard(&root, None, |_, _| panic!("guard broke"))
            .unwrap();
        let r = reg.execute(call("read"), None).await;
        assert_eq!(r.code.as_deref(), Some(codes::DENIED));
        g.dispose();
        assert!(!reg.execute(call("read"), None).await.is_error);
        root.dispose();
    }

    #[tokio::test]
    async fn pre_execute_can_deny_and_post_execute_sees_the_result() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.register(&root, tool("bash")).unwrap();
        let _ = reg.register(&root, tool("read")).unwrap();
        let _ = root.on_waterfall::<ToolsPreExecute, _, _>(Position::Back, |mut v, next| {
            if v.call.name == "bash" {
                v.decision = Decision::Deny("tool \"bash\" requires approval".into());
            }
            next.run(v)
        });
        let _ = root.on_waterfall::<ToolsPostExecute, _, _>(Position::Back, |mut v, next| {
            v.result.content = serde_json::json!({"wrapped": v.result.content.clone()});
            next.run(v)
        });
        let r = reg.execute(call("bash"), None).await;
        assert_eq!(r.code.as_deref(), Some(codes::DENIED));
        let r = reg.execute(call("read"), None).await;
        assert_eq!(r.content, serde_json::json!({"wrapped": "read"}));
        let _ = root.on_waterfall::<ToolsPreExecute, _, _>(Position::Front, |_v, _next| async {
            panic!("listener broke")
        });
        let r = reg.execute(call("read"), None).await;
        assert_eq!(r.code.as_deref(), Some(codes::INTERNAL));
        root.dispose();
    }

    fn todo_tool() -> ToolDefinition {
        let mut def = tool("todo_write");
        def.schema.parameters = serde_json::json!({
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
                        "required": ["content", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["todos"],
            "additionalProperties": false
        }).into();
        def
    }

    async fn todo_call(arguments: serde_json::Value) -> ToolResult {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.register(&root, todo_tool()).unwrap();
        let result = reg
            .execute(
                ToolCall {
                    call_id: "c1".into(),
                    name: "todo_write".into(),
                    arguments,
                },
                None,
            )
            .await;
        root.dispose();
        result
    }

    async fn invalid(arguments: serde_json::Value) -> String {
        let r = todo_call(arguments).await;
        assert_eq!(r.code.as_deref(), Some(codes::INVALID_ARGUMENTS), "{r:?}");
        r.content.as_str().unwrap().to_owned()
    }

    #[tokio::test]
    async fn arguments_matching_the_schema_reach_the_handler() {
        let ok = serde_json::json!({"todos": [{"content": "x", "status": "pending"}]});
        assert!(!todo_call(ok).await.is_error);
    }

    #[tokio::test]
    async fn a_missing_required_field_is_refused_before_the_handler() {
        assert_eq!(
            invalid(serde_json::json!({"todos": [{"content": "x"}]})).await,
            "arguments of \"todo_write\" are invalid: /todos/0/status: is required"
        );
        assert_eq!(
            invalid(serde_json::json!({})).await,
            "arguments of \"todo_write\" are invalid: /todos: is required"
        );
    }

    #[tokio::test]
    async fn a_wrong_type_or_value_names_the_path_and_the_rule() {
        assert_eq!(
            invalid(serde_json::json!({"todos": "none"})).await,
            "arguments of \"todo_write\" are invalid: /todos: expected array, got string"
        );
        assert_eq!(
            invalid(serde_json::json!({"todos": [{"content": "x", "status": "x"}]})).await,
            "arguments of \"todo_write\" are invalid: /todos/0/status: \"x\" is not one of [\"pending\",\"in_progress\",\"completed\"]"
        );
    }

    #[tokio::test]
    async fn additional_properties_false_refuses_unknown_keys_and_lists_every_violation_sorted() {
        assert_eq!(
            invalid(serde_json::json!({"todos": [], "extra": 1})).await,
            "arguments of \"todo_write\" are invalid: /extra: is not allowed (additionalProperties is false)"
        );
        assert_eq!(
            invalid(serde_json::json!({
                "todos": [{"content": 1, "status": "pending", "z": 0, "a": 0}]
            }))
            .await,
            "arguments of \"todo_write\" are invalid: /todos/0/a: is not allowed (additionalProperties is false); \
             /todos/0/content: expected string, got number; \
             /todos/0/z: is not allowed (additionalProperties is false)"
        );
    }

    #[tokio::test]
    async fn argument_text_that_is_not_json_is_refused() {
        assert_eq!(
            invalid(serde_json::Value::String("{\"todos\": [".into())).await,
            "arguments of \"todo_write\" are not valid JSON: EOF while parsing a list at line 1 column 11"
        );
        assert_eq!(
            invalid(serde_json::json!("\"quoted\"")).await,
            "arguments of \"todo_write\" must be a JSON object, got a string"
        );
    }

    #[tokio::test]
    async fn a_json_array_or_scalar_is_not_an_arguments_object() {
        assert_eq!(
            invalid(serde_json::json!([{"todos": []}])).await,
            "arguments of \"todo_write\" must be a JSON object, got an array"
        );
        // The schema's own `type` is not what catches these: even `{"type": "object"}`
        // (accept any object) refuses them.
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.register(&root, tool("any")).unwrap();
        let mut c = call("any");
        c.arguments = serde_json::json!(null);
        let r = reg.execute(c, None).await;
        assert_eq!(r.code.as_deref(), Some(codes::INVALID_ARGUMENTS));
        assert_eq!(
            r.content,
            "arguments of \"any\" must be a JSON object, got null"
        );
        root.dispose();
    }

    #[tokio::test]
    async fn a_denying_guard_never_sees_invalid_arguments() {
        let root = Context::root();
        let reg = ToolRegistry::new(root.clone());
        let _ = reg.register(&root, todo_tool()).unwrap();
        let _ = reg
            .guard(&root, None, |_, _| Some("ask first".into()))
            .unwrap();
        let mut c = call("todo_write");
        c.arguments = serde_json::json!([]);
        let r = reg.execute(c, None).await;
        assert_eq!(r.code.as_deref(), Some(codes::INVALID_ARGUMENTS));
        root.dispose();
    }
}
