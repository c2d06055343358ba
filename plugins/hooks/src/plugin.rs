//! The plugin: listeners on the tool pipeline (`tools/pre-execute`, `tools/post-execute`) and
//! the agent loop's moments (`agent/hook`), each running the entry's hooks of its event in the
//! file's order and keeping what they decided for the loop to log.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use cordis_agent_loop::{AgentHook, HookPoint, Moment};
use cordis_runtime::{BoxError, Context, Inject, Plugin, Position, Service};
use cordis_session::HookRunData;
use cordis_tools::{
    Decision, PostExecute, PreExecute, ScopeKey, ToolsPostExecute, ToolsPreExecute,
};
use cordis_workspace::Workspace;
use serde_json::{Value, json};

use crate::config::{HookEvent, HooksConfig};
use crate::decide::{Verdict, verdict};
use crate::run::run_hook;
use crate::trust::{self, Trust};

/// Tool calls whose hook runs are kept until the loop logs them; older ones are dropped first
/// (calls no agent loop logs: `cordis call`, a reload mid-call).
const KEPT_CALLS: usize = 1024;

/// The `hooks` plugin.
///
/// Where its entry's file lives decides whether its hooks need trust (see [`crate::trust`]);
/// [`HooksPlugin::with_origin`] tells it (a host that knows the file), else they run.
#[derive(Debug, Clone, Default)]
pub struct HooksPlugin {
    config_dir: Option<PathBuf>,
    trust_store: Option<PathBuf>,
}

impl HooksPlugin {
    /// The plugin for entries of the file in `config_dir`, remembering trust in `trust_store`.
    #[must_use]
    pub fn with_origin(mut self, config_dir: PathBuf, trust_store: Option<PathBuf>) -> Self {
        self.config_dir = Some(config_dir);
        self.trust_store = trust_store;
        self
    }
}

const INJECT: &[Inject] = &[
    Inject::optional(cordis_tools::ToolRegistry::NAME),
    Inject::optional(Workspace::NAME),
];

type CallKey = (Option<ScopeKey>, String);

#[derive(Default)]
struct State {
    /// Session ids by agent scope, learned from the loop's moments.
    sessions: BTreeMap<ScopeKey, String>,
    /// Each call's hook runs, in the order they ran.
    runs: BTreeMap<CallKey, Vec<HookRunData>>,
    /// Context `PreToolUse` hooks added, for the call's result.
    context: BTreeMap<CallKey, Vec<String>>,
    order: VecDeque<CallKey>,
}

/// One entry's hooks and what they left.
struct Hooks {
    config: HooksConfig,
    /// The entry id (`hooks`), naming each run in the log (`hooks#0.1`).
    entry: String,
    /// Where the entry's file is and where trust is remembered (see [`crate::trust`]).
    origin: (Option<PathBuf>, Option<PathBuf>),
    /// The entry's scope, for the workspace (looked up when a hook runs: the workspace entry
    /// may load after this one).
    ctx: Context,
    /// The workspace root and its trust, decided when the first hook runs.
    place: Mutex<Option<(PathBuf, Trust)>>,
    state: Mutex<State>,
}

/// What a tool or loop event hands its hooks.
struct Fired<'a> {
    event: HookEvent,
    /// What matchers match against (a tool name, a source, a trigger), if the event has one.
    subject: Option<&'a str>,
    input: Value,
    call_id: Option<&'a str>,
    tool: Option<&'a str>,
    turn: u64,
}

impl Hooks {
    fn state(&self) -> MutexGuard<'_, State> {
        cordis_runtime::lock(&self.state)
    }

    /// The workspace root hooks run in and whether this entry's hooks may run there.
    async fn place(&self) -> (PathBuf, Trust) {
        let root = match self.ctx.get::<Workspace>() {
            Some(ws) => ws.root().to_path_buf(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        };
        if let Some((known, trust)) = &*cordis_runtime::lock(&self.place)
            && *known == root
        {
            return (root, trust.clone());
        }
        let (dir, store, at) = (self.origin.0.clone(), self.origin.1.clone(), root.clone());
        // Reads the trust store: off the async threads.
        let trust = tokio::task::spawn_blocking(move || {
            trust::decide(dir.as_deref(), Path::new(&at), store.as_deref())
        })
        .await
        .unwrap_or(Trust::Untrusted { dir: root.clone() });
        if let Some(refusal) = trust.refusal() {
            tracing::warn!("hooks: {refusal}");
        }
        *cordis_runtime::lock(&self.place) = Some((root.clone(), trust.clone()));
        (root, trust)
    }

    fn session_of(&self, scope: Option<ScopeKey>) -> String {
        scope
            .and_then(|s| self.state().sessions.get(&s).cloned())
            .unwrap_or_default()
    }

    fn has(&self, event: HookEvent) -> bool {
        !self.config.hooks.groups(event).is_empty()
    }

    /// Runs the hooks of `fired.event` whose matcher matches, in the file's order, until one
    /// blocks; returns each run's record and verdict.
    async fn fire(&self, fired: Fired<'_>) -> Vec<(HookRunData, Verdict)> {
        let mut out = Vec::new();
        let (root, trust) = self.place().await;
        let mut input = fired.input.clone();
        input["cwd"] = json!(root.display().to_string());
        input["hook_event_name"] = json!(fired.event.as_str());
        for (g, group) in self.config.hooks.groups(fired.event).iter().enumerate() {
            if !fired.subject.is_none_or(|s| group.matcher.matches(s)) {
                continue;
            }
            for (h, hook) in group.hooks.iter().enumerate() {
                let v = match trust.refusal() {
                    Some(refusal) => Verdict {
                        decision: "untrusted",
                        reason: Some(refusal),
                        ..Verdict::default()
                    },
                    None => {
                        let timeout = self.config.timeout_of(hook);
                        let bytes = serde_json::to_vec(&input).unwrap_or_default();
                        let ran =
                            run_hook(&self.config, &root, &hook.command, bytes, timeout).await;
                        let v = verdict(fired.event, &ran, timeout.as_secs());
                        let record_exit = ran.exit_code;
                        if matches!(v.decision, "error" | "timeout") {
                            tracing::warn!(
                                "{} hook `{}`: {}",
                                fired.event.as_str(),
                                hook.command,
                                v.reason.as_deref().unwrap_or_default()
                            );
                        }
                        out.push((
                            self.record(&fired, (g, h), &hook.command, record_exit, &v),
                            v.clone(),
                        ));
                        if let (Some(new), Some(_)) = (&v.updated_input, input.get("tool_input")) {
                            input["tool_input"] = new.clone();
                        }
                        if v.blocks() {
                            return out;
                        }
                        continue;
                    }
                };
                out.push((self.record(&fired, (g, h), &hook.command, None, &v), v));
            }
        }
        out
    }

    fn record(
        &self,
        fired: &Fired<'_>,
        (g, h): (usize, usize),
        command: &str,
        exit_code: Option<i32>,
        v: &Verdict,
    ) -> HookRunData {
        HookRunData {
            turn: fired.turn,
            event: fired.event.as_str().to_owned(),
            hook: format!("{}#{g}.{h}", self.entry),
            command: command.to_owned(),
            call_id: fired.call_id.map(str::to_owned),
            tool: fired.tool.map(str::to_owned),
            exit_code,
            decision: v.decision.to_owned(),
            reason: v.reason.clone(),
            updated_input: v.updated_input.clone(),
            context: v.context.clone(),
        }
    }

    /// Keeps `runs` (and `context`) of call `key` for the loop.
    fn keep(&self, key: CallKey, runs: Vec<HookRunData>, context: Vec<String>) {
        let mut state = self.state();
        if !state.runs.contains_key(&key) && !state.context.contains_key(&key) {
            state.order.push_back(key.clone());
        }
        state.runs.entry(key.clone()).or_default().extend(runs);
        if !context.is_empty() {
            state.context.entry(key).or_default().extend(context);
        }
        while state.order.len() > KEPT_CALLS {
            if let Some(old) = state.order.pop_front() {
                let _ = state.runs.remove(&old);
                let _ = state.context.remove(&old);
            }
        }
    }

    /// `PreToolUse`: may deny the call, rewrite its input, or add context for its result.
    async fn pre(&self, mut pre: PreExecute) -> PreExecute {
        if pre.decision != Decision::Allow || !self.has(HookEvent::PreToolUse) {
            return pre;
        }
        let input = json!({
            "session_id": self.session_of(pre.scope),
            "tool_name": pre.call.name,
            "tool_input": pre.call.arguments,
            "tool_use_id": pre.call.call_id,
        });
        let fired = Fired {
            event: HookEvent::PreToolUse,
            subject: Some(&pre.call.name),
            input,
            call_id: Some(&pre.call.call_id),
            tool: Some(&pre.call.name),
            turn: 0,
        };
        let ran = self.fire(fired).await;
        let mut context = Vec::new();
        for (_, v) in &ran {
            if let Some(new) = &v.updated_input {
                pre.call.arguments = new.clone();
            }
            context.extend(v.context.clone());
            if v.blocks() {
                let reason = v.reason.clone().unwrap_or_default();
                pre.decision =
                    Decision::Deny(format!("a PreToolUse hook blocked this call: {reason}"));
            }
        }
        let key = (pre.scope, pre.call.call_id.clone());
        self.keep(key, ran.into_iter().map(|(r, _)| r).collect(), context);
        pre
    }

    /// `PostToolUse` (on calls that succeeded): what a hook tells the model, and the context
    /// hooks added, join the result's content.
    async fn post(&self, mut post: PostExecute) -> PostExecute {
        let key = (post.scope, post.call.call_id.clone());
        let mut notes: Vec<String> = self
            .state()
            .context
            .remove(&key)
            .unwrap_or_default()
            .into_iter()
            .map(|c| format!("[PreToolUse hook context] {c}"))
            .collect();
        if !post.result.is_error && self.has(HookEvent::PostToolUse) {
            let input = json!({
                "session_id": self.session_of(post.scope),
                "tool_name": post.call.name,
                "tool_input": post.call.arguments,
                "tool_response": post.result.content,
                "tool_use_id": post.call.call_id,
            });
            let fired = Fired {
                event: HookEvent::PostToolUse,
                subject: Some(&post.call.name),
                input,
                call_id: Some(&post.call.call_id),
                tool: Some(&post.call.name),
                turn: 0,
            };
            let ran = self.fire(fired).await;
            for (_, v) in &ran {
                if v.blocks() {
                    notes.push(format!(
                        "[PostToolUse hook] {}",
                        v.reason.as_deref().unwrap_or_default()
                    ));
                }
                if let Some(c) = &v.context {
                    notes.push(format!("[PostToolUse hook context] {c}"));
                }
            }
            self.keep(key, ran.into_iter().map(|(r, _)| r).collect(), Vec::new());
        }
        if !notes.is_empty() {
            append(&mut post.result.content, &notes.join("\n"));
        }
        post
    }

    /// One of the loop's moments.
    async fn moment(&self, mut point: HookPoint) -> HookPoint {
        let _ = self
            .state()
            .sessions
            .insert(point.scope, point.session_id.clone());
        let base = json!({"session_id": point.session_id});
        let (event, subject, input) = match &point.moment {
            Moment::ToolResult { call_id } => {
                let key = (Some(point.scope), call_id.clone());
                let mut state = self.state();
                let mut runs = state.runs.remove(&key).unwrap_or_default();
                let _ = state.context.remove(&key);
                // A run_code call's sub-calls ran inside it.
                let prefix = format!("{call_id}:code:");
                let subs: Vec<CallKey> = state
                    .runs
                    .keys()
                    .filter(|(s, id)| *s == Some(point.scope) && id.starts_with(&prefix))
                    .cloned()
                    .collect();
                for sub in subs {
                    runs.extend(state.runs.remove(&sub).unwrap_or_default());
                }
                let State {
                    runs: kept,
                    context,
                    order,
                    ..
                } = &mut *state;
                order.retain(|k| kept.contains_key(k) || context.contains_key(k));
                drop(state);
                for mut run in runs {
                    run.turn = point.turn;
                    point.runs.push(run);
                }
                return point;
            }
            Moment::SessionStart { source } => (
                HookEvent::SessionStart,
                Some(source.clone()),
                with(base, json!({"source": source})),
            ),
            Moment::UserPromptSubmit { prompt } => (
                HookEvent::UserPromptSubmit,
                None,
                with(base, json!({"prompt": prompt})),
            ),
            Moment::Stop {
                stop_hook_active,
                last_message,
            } => (
                HookEvent::Stop,
                None,
                with(
                    base,
                    json!({"stop_hook_active": stop_hook_active, "last_assistant_message": last_message}),
                ),
            ),
            Moment::PreCompact { trigger, focus } => (
                HookEvent::PreCompact,
                Some(trigger.clone()),
                with(
                    base,
                    json!({"trigger": trigger, "custom_instructions": focus.clone().unwrap_or_default()}),
                ),
            ),
            Moment::SessionEnd { reason } => (
                HookEvent::SessionEnd,
                None,
                with(base, json!({"reason": reason})),
            ),
        };
        if !self.has(event) || point.block.is_some() {
            return point;
        }
        let fired = Fired {
            event,
            subject: subject.as_deref(),
            input,
            call_id: None,
            tool: None,
            turn: point.turn,
        };
        for (record, v) in self.fire(fired).await {
            if v.blocks() && point.block.is_none() {
                point.block = v.reason.clone();
            }
            point.context.extend(v.context.clone());
            point.runs.push(record);
        }
        point
    }
}

fn with(mut base: Value, more: Value) -> Value {
    if let (Some(b), Value::Object(m)) = (base.as_object_mut(), more) {
        b.extend(m);
    }
    base
}

/// Appends `note` to a tool result's content (text; other content as its JSON text).
fn append(content: &mut Value, note: &str) {
    let text = match &mut *content {
        Value::String(s) => std::mem::take(s),
        other => other.to_string(),
    };
    *content = Value::String(if text.is_empty() {
        note.to_owned()
    } else {
        format!("{text}\n\n{note}")
    });
}

impl Plugin for HooksPlugin {
    type Config = HooksConfig;

    fn name(&self) -> &str {
        "hooks"
    }

    fn open_claims(&self, _config: &Self::Config) -> Option<Vec<&'static str>> {
        Some(Vec::new())
    }

    fn inject(&self) -> &[Inject] {
        INJECT
    }

    fn widens(&self, old: Option<&HooksConfig>, new: Option<&HooksConfig>) -> Vec<String> {
        let commands = |c: Option<&HooksConfig>| -> Vec<(HookEvent, String)> {
            c.map(|c| {
                crate::config::HookTable::EVENTS
                    .iter()
                    .flat_map(|e| {
                        c.hooks
                            .groups(*e)
                            .iter()
                            .flat_map(move |g| g.hooks.iter().map(move |h| (*e, h.command.clone())))
                    })
                    .collect()
            })
            .unwrap_or_default()
        };
        let before = commands(old);
        let mut out: Vec<String> = commands(new)
            .into_iter()
            .filter(|c| !before.contains(c))
            .map(|(e, c)| format!("a {} hook runs `{c}`", e.as_str()))
            .collect();
        if let (Some(old), Some(new)) = (old, new) {
            if new.sandbox != old.sandbox {
                out.push(format!("hooks' sandbox {} → {}", old.sandbox, new.sandbox));
            }
            if new.network && !old.network {
                out.push("hooks reach the network".to_owned());
            }
        }
        out
    }

    async fn apply(&self, ctx: Context, config: &HooksConfig) -> Result<(), BoxError> {
        let hooks = Arc::new(Hooks {
            config: config.clone(),
            entry: ctx.label().unwrap_or("hooks").to_owned(),
            origin: (self.config_dir.clone(), self.trust_store.clone()),
            ctx: ctx.clone(),
            place: Mutex::default(),
            state: Mutex::default(),
        });
        let h = hooks.clone();
        let _ = ctx.on_waterfall::<ToolsPreExecute, _, _>(Position::Back, move |pre, next| {
            let h = h.clone();
            async move {
                let pre = h.pre(pre).await;
                next.run(pre).await
            }
        });
        let h = hooks.clone();
        let _ = ctx.on_waterfall::<ToolsPostExecute, _, _>(Position::Back, move |post, next| {
            let h = h.clone();
            async move {
                let post = h.post(post).await;
                next.run(post).await
            }
        });
        let _ = ctx.on_waterfall::<AgentHook, _, _>(Position::Back, move |point, next| {
            let h = hooks.clone();
            async move {
                let point = h.moment(point).await;
                next.run(point).await
            }
        });
        Ok(())
    }
}
